"""Every generated file fresh from its source; the assignments' source convention enforced.

``solutions/<a>/<name>.md`` -> ``solutions/<a>/<name>.ipynb`` (qkv_course.generate.assignments) ->
``exercises/<a>/<name>.ipynb`` (nbgrader, qkv_course.generate.exercises); the other generators (Colab
copies, ``_toc.yml``, the export lists, CONTRIBUTING's concept map) are checked here too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from qkv_course import outdir
from qkv_course.config import ROOT
from qkv_course.generate import assignments, exercises
from qkv_course.generate import command as generate
from qkv_course.generate.command import COMMAND, GENERATORS, RECORD, Generator, stale

# The Colab copies are made from book/_glue, which a background book build rewrites.
pytestmark = pytest.mark.usefixtures("book_build_finished")

ASSIGNMENT_GENERATORS = [g for g in GENERATORS if g.name in ("solutions", "exercises")]
SCALING = "solutions/04-scaling/scaling.md"
HEAD = "---\nkernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"


def test_two_generators_solutions_first():
    assert [g.module for g in ASSIGNMENT_GENERATORS] == ["qkv_course.generate.assignments",
                                                         "qkv_course.generate.exercises"]


# The exercises' generator runs nbgrader: slow, like every test that does.
@pytest.mark.parametrize("generator", [
    pytest.param(g, id=g.name, marks=[pytest.mark.slow] if g.name == "exercises" else [])
    for g in GENERATORS])
def test_generated_files_are_up_to_date(generator):
    problems = stale(ROOT, [generator])
    assert not problems, "\n".join(problems + [f"run `{COMMAND}` and commit the result"])


def _copy(tmp_path: Path, assignment: str) -> Path:
    """The files the two generators read, for one assignment (and those it takes answers
    `:from:`), in a fresh root. ``pyproject.toml`` names the release the setup cells install."""
    for name in ("_config.yml", "nbgrader_config.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    sources = "".join(p.read_text() for p in (ROOT / "solutions" / assignment).glob("*.md"))
    for name in {assignment, *re.findall(r"^:from: (\S+)", sources, re.MULTILINE)}:
        for folder in ("solutions", "exercises"):
            shutil.copytree(ROOT / folder / name, tmp_path / folder / name)
    # As in a checkout, where git holds them: the notebooks are generate's own.
    outdir.record(tmp_path, [p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*/*.ipynb")],
                  RECORD)
    return tmp_path


@pytest.mark.slow
def test_an_edited_source_makes_both_notebooks_stale(tmp_path):
    root = _copy(tmp_path, "04-scaling")
    assert stale(root, ASSIGNMENT_GENERATORS) == []
    source = root / SCALING
    text = source.read_text()
    assert "## What you built" in text
    source.write_text(text.replace("## What you built", "## What you have built"))
    assert stale(root, ASSIGNMENT_GENERATORS) == [
        "solutions/04-scaling/scaling.ipynb is stale (solutions)",
        "exercises/04-scaling/scaling.ipynb is stale (exercises)",
    ]


@pytest.mark.slow
def test_release_holds_only_the_notebook(tmp_path):
    # The whole solutions/<a>/ folder, its .md included, goes through generate_assignment; a
    # released .md would be a target here (and a "missing" file in the check).
    root = _copy(tmp_path, "04-scaling")
    # A scratch notebook kept next to the solution is not released (nor reported missing).
    shutil.copy(root / "solutions/04-scaling/scaling.ipynb", root / "solutions/04-scaling/mine.ipynb")
    released = list(exercises.targets(root))
    assert root / "exercises/04-scaling/scaling.ipynb" in released
    assert [p for p in released if "04-scaling" in p.parts] == [root / "exercises/04-scaling/scaling.ipynb"]
    assert all(p.suffix == ".ipynb" for p in released), released


@pytest.mark.slow
def test_a_notebook_without_a_source_is_reported(tmp_path):
    root = _copy(tmp_path, "04-scaling")
    (root / SCALING).unlink()
    problems = stale(root, ASSIGNMENT_GENERATORS)
    assert problems == [
        "solutions/04-scaling/scaling.ipynb has no source any more (solutions)",
        "exercises/04-scaling/scaling.ipynb has no source any more (exercises)",
    ]


def _meta(cell):
    return cell.metadata.get("nbgrader")


def test_rendered_cells_carry_nbgrader_metadata_by_kind():
    nb = assignments.notebook(ROOT / SCALING)
    by_id = {cell.id: cell for cell in nb.cells}
    base = {"schema_version": 3, "task": False}
    assert _meta(by_id["setup"]) == {**base, "grade": False, "grade_id": "setup", "locked": True,
                                     "solution": False}
    assert _meta(by_id["attention_scores"]) == {**base, "grade": False,
                                                "grade_id": "attention_scores",
                                                "locked": False, "solution": True}
    assert _meta(by_id["test_attention_scores"]) == {
        **base, "grade": True, "grade_id": "test_attention_scores", "locked": True,
        "solution": False, "points": 2}
    # Assignment 2's softmax is given by the set-up (graded there), not asked for again.
    assert "softmax" not in by_id and "test_softmax" not in by_id
    assert "from qkv import softmax" in by_id["setup"].source
    written = by_id["written_no_scale"]
    assert written.cell_type == "markdown"
    assert _meta(written) == {**base, "grade": True, "grade_id": "written_no_scale",
                              "locked": False, "solution": True, "points": 2}
    task = by_id["task_interpret_max_weight"]
    assert task.cell_type == "markdown" and "<!-- BEGIN MARK SCHEME -->" in task.source
    assert _meta(task) == {"schema_version": 3, "task": True, "grade": False, "solution": False,
                           "grade_id": "task_interpret_max_weight", "locked": True, "points": 3}
    plain = [c for c in nb.cells if _meta(c) is None]
    assert plain and all(c.id == f"cell-{nb.cells.index(c)}" and not c.metadata for c in plain)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert "### BEGIN HIDDEN TESTS" in by_id["test_attention_scores"].source


def test_setup_cell_is_the_standard_text_plus_the_assignments_lines():
    nb = assignments.notebook(ROOT / "solutions/05-multi-head/multi_head.md")
    setup = next(c for c in nb.cells if c.id == "setup")
    assert setup.source.startswith("# Set-up: run this cell first.")
    assert setup.source.endswith("warnings_to_stdout()  # nbgrader scores zero for a test "
                                 "cell that writes to stderr\nfrom torch import nn\n\n"
                                 "from qkv import combine_masks  # given: the masks of chapter 6, "
                                 "merged into one")


def test_generated_notebooks_are_stamped():
    for target, text in assignments.targets(ROOT).items():
        nb = nbformat.reads(text, as_version=4)
        source = target.relative_to(ROOT).with_suffix(".md").as_posix()
        assert nb.metadata["qkv"] == {"generated_from": source, "generated_by": COMMAND}
        first = next(c for c in nb.cells if c.cell_type == "markdown")
        assert first.source.startswith(f"<!-- Generated from {source} by `{COMMAND}`.")
    for path in ROOT.glob("exercises/*/*.ipynb"):  # nbgrader kept the stamp
        nb = nbformat.read(str(path), as_version=4)
        assert nb.metadata["qkv"]["generated_from"].startswith("solutions/")
        assert nb.cells[0].source.startswith("<!-- Generated from solutions/")


def _code(options: str, body: str = "x = 1") -> str:
    return f"```{{code-cell}} python\n{options}\n\n{body}\n```\n"


@pytest.mark.parametrize("cells, words", [
    (_code(":answers: softmax"), ["unknown option answers"]),
    ("+++ {\"hidden\": true}\n\nText\n", ["unknown option hidden"]),
    (_code(":answer:"), ["answer needs a grade id", "None"]),
    (_code(":answer: one") + "\n" + _code(":tests: one\n:points: 1"),
     ["grade id 'one' is already used by cell 2"]),
    (_code(":answer: softmax\n:points: 2"), ["points belong on a test cell", "an answer cell"]),
    (_code(":points: 2"), ["points belong on a test cell", "a plain cell"]),
    (_code(":tests: test_softmax"), ["tests 'test_softmax' needs points"]),
    ("+++ {\"written\": \"why\"}\n\nBecause.\n", ["written 'why' needs points"]),
    ("+++ {\"task\": \"why\", \"points\": 2}\n\nExplain.\n", ["task 'why' needs its rubric",
                                                         "<!-- BEGIN MARK SCHEME -->"]),
    (_code(":answer: softmax\n:tests: test_softmax\n:points: 1"), ["both answer and tests"]),
    (_code(":setup: mine"), ["`:setup:` takes no value"]),
    (_code(":tests: t\n:points: 1\n:kind: guesswork"), ["`:kind:` belongs on a test cell",
                                                         "guesswork"]),
    (_code(":answer: a\n:kind: debugging"), ["`:kind:` belongs on a test cell"]),
    (_code(":tests: t\n:points: 1\n:from: 02-lookup"), ["`:from:` belongs on an answer cell"]),
    (_code(":answer: softmax\n:from: 02-lookup"), ["empty body"]),
    (_code(":answer: softmax\n:from: 99-nowhere", ""), ["names no assignment", "99-nowhere"]),
])
def test_a_bad_source_names_the_file_and_the_cell(tmp_path, cells, words):
    path = tmp_path / "bad.md"
    path.write_text(HEAD + "# Title\n\n" + cells)
    with pytest.raises(assignments.SourceError) as err:
        assignments.notebook(path)
    message = str(err.value)
    assert message.startswith(f"{path}: cell "), message
    for word in words:
        assert word in message, message


def test_an_answer_taken_from_another_assignment_is_written_once(tmp_path):
    """An assignment that asks again for an earlier answer borrows its cell (no assignment
    does now: a later one gives the earlier function instead, so that none is graded twice)."""
    shutil.copytree(ROOT / "solutions" / "02-lookup", tmp_path / "solutions" / "02-lookup")
    later = tmp_path / "solutions" / "99-later" / "later.md"
    later.parent.mkdir(parents=True)
    later.write_text(HEAD + "# Later\n\n" + _code(":answer: softmax\n:from: 02-lookup", ""))
    cell = {c.id: c for c in assignments.notebook(later).cells}["softmax"]
    two = assignments.notebook(ROOT / "solutions" / "02-lookup" / "lookup.md")
    assert cell.source == {c.id: c for c in two.cells}["softmax"].source
    assert "### BEGIN SOLUTION" in cell.source


# Nothing a user made is lost: generate replaces or removes only its own files. A generator of
# one file per source (src/<x>.md -> out/<x>.txt) on a temporary root, so each case is fast.
def _demo_targets(root: Path) -> dict:
    return {root / "out" / f"{md.stem}.txt": md.read_text().upper()
            for md in sorted((root / "src").glob("*.md"))}


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """A root with one source, its output written by generate, and ``generate.main`` run on it."""
    module = types.ModuleType("qkv_demo_generator")
    module.targets = _demo_targets
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(generate, "GENERATORS", [Generator("demo", module.__name__, owns=["out/*.txt"])])
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.md").write_text("one\n")
    assert generate.main([]) == 0
    assert (tmp_path / "out" / "a.txt").read_text() == "ONE\n"
    return tmp_path


def _generate(capsys, *argv):
    """(exit status, stdout lines, stderr lines) of ``generate.main(argv)``."""
    capsys.readouterr()
    code = generate.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def test_a_file_generate_wrote_is_replaced_when_its_source_changes(demo, capsys):
    (demo / "src" / "a.md").write_text("two\n")
    assert _generate(capsys, "--check")[:2] == (1, ["out/a.txt is stale (demo)",
                                                     f"run `{COMMAND}` and commit the result"])
    assert _generate(capsys) == (0, ["wrote out/a.txt"], [])
    (demo / "src" / "a.md").write_text("three\n")  # and again: the record follows each write
    assert _generate(capsys) == (0, ["wrote out/a.txt"], [])
    assert (demo / "out" / "a.txt").read_text() == "THREE\n"
    assert _generate(capsys, "--check") == (0, [], [])


@pytest.mark.parametrize("argv", [[], ["--force"]])
def test_a_scratch_file_is_left_alone(demo, capsys, argv):
    (demo / "out" / "mine.txt").write_text("my notes")
    note = "out/mine.txt is not generated (no source makes it): generate leaves it alone"
    assert _generate(capsys, "--check") == (0, [note], [])
    assert _generate(capsys, *argv) == (0, [note], [])
    assert (demo / "out" / "mine.txt").read_text() == "my notes"


def test_a_generated_file_edited_by_hand_is_kept_until_forced(demo, capsys):
    (demo / "out" / "a.txt").write_text("my work\n")
    (demo / "src" / "a.md").write_text("two\n")
    (demo / "src" / "b.md").write_text("bee\n")
    code, out, err = _generate(capsys)
    assert (code, out) == (2, ["wrote out/b.txt"])  # the rest is written
    assert len(err) == 1 and err[0].startswith(f"{COMMAND}: kept out/a.txt: "), err
    assert "edited by hand" in err[0] and "--force to replace it" in err[0]
    assert (demo / "out" / "a.txt").read_text() == "my work\n"
    assert _generate(capsys, "--check")[:2] == (1, ["out/a.txt is stale (demo)",
                                                     f"run `{COMMAND}` and commit the result"])
    assert _generate(capsys, "--force") == (0, ["wrote out/a.txt"], [])
    assert (demo / "out" / "a.txt").read_text() == "TWO\n"


def test_an_orphan_generate_wrote_is_removed_and_an_edited_one_kept(demo, capsys):
    (demo / "src" / "b.md").write_text("bee\n")
    assert _generate(capsys)[0] == 0
    (demo / "out" / "b.txt").write_text("my work\n")
    (demo / "src" / "a.md").unlink()
    (demo / "src" / "b.md").unlink()
    assert _generate(capsys, "--check")[1][:2] == ["out/a.txt has no source any more (demo)",
                                                   "out/b.txt has no source any more (demo)"]
    code, out, err = _generate(capsys)
    assert (code, out) == (2, ["removed out/a.txt (no source any more)"])
    assert len(err) == 1 and "kept out/b.txt" in err[0] and "--force to remove it" in err[0], err
    assert (demo / "out" / "b.txt").read_text() == "my work\n"
    assert "out/a.txt" not in outdir.recorded(demo, RECORD)  # forgotten: a new file there is not ours
    (demo / "out" / "a.txt").write_text("ONE\n")
    assert _generate(capsys, "--force") == (0, [
        "out/a.txt is not generated (no source makes it): generate leaves it alone",
        "removed out/b.txt (no source any more)"], [])


@pytest.mark.parametrize("record", [None, "{broken", "[]"])
def test_without_the_record_a_changed_file_is_not_generates(demo, capsys, record):
    (demo / RECORD).unlink()
    if record is not None:
        (demo / RECORD).write_text(record)
    (demo / "src" / "a.md").write_text("two\n")
    assert _generate(capsys)[0] == 2
    assert (demo / "out" / "a.txt").read_text() == "ONE\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_file_as_git_holds_it_is_generates(demo, capsys):
    """A fresh clone has no record: what is committed (or staged) counts as generate's own."""
    (demo / RECORD).unlink()
    (demo / "out" / "mine.txt").write_text("my notes")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q"], cwd=demo, check=True)
    subprocess.run(git + ["add", "out/a.txt"], cwd=demo, check=True)
    subprocess.run(git + ["commit", "-qm", "generated"], cwd=demo, check=True)
    (demo / "src" / "a.md").write_text("two\n")
    (demo / "src" / "b.md").write_text("bee\n")
    assert _generate(capsys)[0] == 0
    subprocess.run(git + ["add", "out/b.txt"], cwd=demo, check=True)  # staged, not committed
    (demo / RECORD).unlink()
    (demo / "src" / "b.md").unlink()
    assert _generate(capsys)[:2] == (0, [
        "removed out/b.txt (no source any more)",
        "out/mine.txt is not generated (no source makes it): generate leaves it alone"])
    assert (demo / "out" / "a.txt").read_text() == "TWO\n"


@pytest.mark.parametrize("kind", ["chapter", "assignment"])
def test_a_set_up_cell_that_cannot_install_names_both_causes(tmp_path, monkeypatch, kind):
    """A release tag the repository lacks (the publishing workflow not run yet) made the cell
    blame the network alone; the cell runs here with qkv taken as missing and a local
    repository without the tag, so pip fails as it does on Colab."""
    import subprocess as sp
    import importlib.util
    from qkv_course.generate import setup_cell

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "qkv"\nversion = "0"\n')
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        sp.run(git + args, check=True)
    url, tag = f"file://{repo}", "v9.9.9"
    source = (setup_cell.chapter_setup("", url, tag, {}) if kind == "chapter"
              else setup_cell.assignment_setup(url, tag))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "qkv" else real(name, *a))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    with pytest.raises(RuntimeError) as said:
        exec(compile(source, "setup", "exec"), {})
    text = " ".join(str(said.value).split())
    assert f"release {tag}" in text and "not published yet" in text
    assert f"'{tag}' did not match any file known to git" in text
    assert f'pip install "qkv @ git+{url}"' in text and "cannot reach github.com" in text
