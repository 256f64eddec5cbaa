"""The points rules of the assignments (qkv_course.generate.points): enough experiments and written
reasoning, few question points, no function graded twice, and a page that says so."""

import re

import jupytext
import pytest

from qkv_course.config import ROOT
from qkv_course.generate import points
from qkv_course.generate.assignments import SOURCES

ROWS = points.rows()


@pytest.mark.parametrize("name,by_kind,copied", ROWS, ids=[r[0] for r in ROWS])
def test_experiments_and_writing_weigh_enough_and_questions_little(name, by_kind, copied):
    total = sum(by_kind.values())
    assert by_kind["experiment"] + by_kind["written"] >= points.EXPERIMENT_OR_WRITTEN_MIN * total
    assert by_kind["question"] <= points.QUESTIONS_MAX * total
    assert copied < total  # copying the pages never earns everything


def test_no_function_is_graded_in_two_assignments():
    graded = {}
    for path in sorted(ROOT.glob(SOURCES)):
        for cell in jupytext.read(path, fmt="md:myst").cells:
            test = cell.metadata.get("tests")
            if test and not re.search(r"_q\d+$", test):
                graded.setdefault(test, []).append(path.parent.name)
    # Assignment 6 grades the masking step (masked_scores), not assignment 4's attention again;
    # assignment 4 gives assignment 2's softmax instead of asking for it again.
    twice = {t: a for t, a in graded.items() if len(a) > 1}
    assert twice == {}
    assert graded["test_scaled_dot_product_attention"] == ["04-scaling"]
    assert graded["test_masked_scores"] == ["06-masking"]
    answers = {}
    for path in sorted(ROOT.glob(SOURCES)):
        for cell in jupytext.read(path, fmt="md:myst").cells:
            if cell.metadata.get("answer"):
                answers.setdefault(cell.metadata["answer"], []).append(path.parent.name)
    assert answers["softmax"] == ["02-lookup"]


def test_the_page_is_generated_from_the_sources():
    assert (ROOT / "solutions" / "POINTS.md").read_text() == points.table()


def test_copying_counts_what_the_pages_print(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "01-x.md").write_text("```{listing} a.py\n:pyobject: shown\n```\n"
                                               "def typed(x):\n    pass\n")
    (tmp_path / "solutions" / "01-x").mkdir(parents=True)
    cells = "".join(f"```{{code-cell}} python\n:answer: {n}\n\nx = 1\n```\n\n"
                    f"```{{code-cell}} python\n:tests: test_{n}\n:points: 2\n\nx\n```\n\n"
                    for n in ("shown", "typed", "hidden"))
    (tmp_path / "solutions" / "01-x" / "x.md").write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "---\n\n# T\n\n" + cells + '+++ {"written": "w", "points": 1}\n\nAnswer.\n')
    by_kind, copied = points.assignment_points(tmp_path / "solutions" / "01-x" / "x.md", tmp_path)
    assert by_kind["function"] == 6 and by_kind["written"] == 1 and copied == 4
