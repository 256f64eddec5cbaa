"""``qkv report``'s similarity.html: near-identical answers are flagged, in pairs and against the
public model solution, whatever the names and the layout; different answers are not."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from qkv_course.cli import main
from qkv_course.config import ROOT
from qkv_course.report import similarity

ASSIGNMENT = "06-masking"
RELEASED = ROOT / "exercises" / ASSIGNMENT / "masking.ipynb"
SOLUTION = ROOT / "solutions" / ASSIGNMENT / "masking.ipynb"

ORIGINAL = '''
def padded_causal_attention(query, key, value, lengths):
    """Query i of sequence b sees keys j <= i with j < lengths[b]; shapes (B, H, L, E)."""
    n_queries, n_keys = query.shape[-2], key.shape[-2]
    lower = torch.ones(n_queries, n_keys, dtype=torch.bool, device=query.device).tril()
    positions = torch.arange(n_keys, device=query.device)
    is_real = positions.unsqueeze(0) < lengths.unsqueeze(1)
    keep = lower.unsqueeze(0).unsqueeze(0) & is_real.unsqueeze(1).unsqueeze(2)
    logits = torch.matmul(query, key.transpose(-1, -2)) * query.shape[-1] ** -0.5
    logits = torch.where(keep, logits, torch.full_like(logits, float("-inf")))
    probabilities = torch.softmax(logits, dim=-1)
    return torch.matmul(probabilities, value)
'''

# The same answer, every name changed, comments added and the layout redone.
RENAMED = '''
def padded_causal_attention(query, key, value, lengths):
    """Query i of sequence b sees keys j <= i with j < lengths[b]; shapes (B, H, L, E)."""
    # sizes
    a, b = query.shape[-2], key.shape[-2]
    tri = torch.ones(a, b, dtype=torch.bool,
                     device=query.device).tril()
    pos = torch.arange(b, device=query.device)
    ok = pos.unsqueeze(0) < lengths.unsqueeze(1)   # real tokens
    m = tri.unsqueeze(0).unsqueeze(0) & ok.unsqueeze(1).unsqueeze(2)
    s = torch.matmul(query, key.transpose(-1, -2)) * query.shape[-1] ** -0.5
    s = torch.where(m, s, torch.full_like(s, float("-inf")))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, value)
'''

# A different answer to the same exercise.
OTHER = '''
def padded_causal_attention(query, key, value, lengths):
    """Query i of sequence b sees keys j <= i with j < lengths[b]; shapes (B, H, L, E)."""
    out = torch.empty(query.shape[:-1] + value.shape[-1:], dtype=query.dtype, device=query.device)
    for b in range(query.shape[0]):
        for i in range(query.shape[-2]):
            last = min(i + 1, int(lengths[b]))
            scores = (key[b, :, :last] @ query[b, :, i, :, None])[..., 0] / math.sqrt(query.shape[-1])
            weights = scores.exp() / scores.exp().sum(-1, keepdim=True)
            out[b, :, i] = (weights[..., None] * value[b, :, :last]).sum(-2)
    return out
'''


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _submission(answer: str) -> nbformat.NotebookNode:
    """The released notebook with one answer filled in (the others left as given)."""
    nb = nbformat.read(str(RELEASED), as_version=4)
    for cell in nb.cells:
        if _grade_id(cell) == "padded_causal_attention":
            cell.source = answer.strip()
    return nb


def _class(tmp_path: Path) -> Path:
    solution = nbformat.read(str(SOLUTION), as_version=4)
    students = {"ada": _submission(ORIGINAL), "bob": _submission(RENAMED),
                "cy": _submission(OTHER), "dee": copy.deepcopy(solution)}
    course = tmp_path / "course"
    for student, nb in students.items():
        folder = course / "autograded" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / "masking.ipynb"))
    return course


def test_renamed_copies_and_the_model_solution_are_flagged_and_others_are_not(tmp_path):
    matches = similarity.find(similarity.codes_in(_class(tmp_path) / "autograded"))
    pairs = {(m.left, m.right) for m in matches}
    assert ("ada", "bob") in pairs
    assert ("dee", f"reference: solutions/{ASSIGNMENT}/masking.ipynb") in pairs
    assert not any("cy" in pair for pair in pairs), pairs
    ada_bob = next(m for m in matches if (m.left, m.right) == ("ada", "bob"))
    assert ada_bob.similarity >= similarity.THRESHOLD
    assert "<mark>" in ada_bob.left_html and "<mark>" in ada_bob.right_html
    assert "tri = torch.ones" in ada_bob.right_html  # the student's own code, as written


def test_the_given_lines_alone_are_never_a_match(tmp_path):
    course = tmp_path / "course"
    for student in ("eve", "fay"):
        folder = course / "autograded" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nbformat.read(str(RELEASED), as_version=4), str(folder / "masking.ipynb"))
    assert similarity.find(similarity.codes_in(course / "autograded")) == []


def test_qkv_report_writes_the_pairs_side_by_side(tmp_path, capsys):
    course = _class(tmp_path)
    assert main(["report", str(course), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "similarity.html").read_text()
    assert "ada and bob" in page and page.count("<pre>") >= 4
    assert "similarity.html" in capsys.readouterr().out


def test_one_answer_copied_by_many_is_one_group_not_every_pair():
    """A class of 1,000 where 200 hand in one source would list 19,900 pairs: the page lists one
    group of 200, with its most similar pair side by side."""
    copies = [similarity.Match(ASSIGNMENT, f"s{i:03d}", f"s{j:03d}", 0.9 + (i == 0) * 0.05,
                               "<a>", "<b>")
              for i in range(30) for j in range(i + 1, 30)]
    other = similarity.Match(ASSIGNMENT, "x", "y", 0.85, "<c>", "<d>")
    ref = similarity.Match(ASSIGNMENT, "z", "reference: solutions/x.ipynb", 0.99, "<e>", "<f>")
    found = similarity.groups(copies + [other, ref])
    assert [len(members) for members, _ in found] == [2, 30, 2]  # most similar first
    members, best = found[1]
    assert members == [f"s{i:03d}" for i in range(30)] and best.left == "s000"


def test_a_folder_of_gradescope_results_is_compared_from_the_records(tmp_path, capsys):
    """A Gradescope export has no autograded notebooks: each results.json keeps the answers in
    its record, and the copies among them are found as in a course folder."""
    import json

    answers = {"ada": ORIGINAL, "bob": RENAMED, "cy": OTHER}
    export = tmp_path / "export"
    for i, (student, code) in enumerate(answers.items()):
        record = {"student": student, "assignment": ASSIGNMENT, "graded_at": "2026-01-01",
                  "tests": [], "answers": {"padded_causal_attention": code.strip(),
                                           "masking_q1": "masking_q1 = 'a'"}}
        (export / f"submission_{i}").mkdir(parents=True)
        (export / f"submission_{i}" / "results.json").write_text(
            json.dumps({"score": 0, "tests": [], "extra_data": {"qkv": record}}))
    assert main(["report", str(export), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "similarity.html").read_text()
    assert "ada and bob" in page and "cy" not in page.split("ada and bob")[0]
