"""Every assignment's intro says what its checks try and refuse, and says it truly.

The block is made by :mod:`qkv_course.generate.checks_intro` from the checks' own data; these tests
check that every solution notebook and every released exercise carries the block made from the
current checks, and, by running each check on a spy, that what the block says (the dtypes,
the number of calls, the calls noted rather than refused) is what the checks do.
"""

import re

import jupytext
import nbformat
import pytest
import torch

from qkv.checks import grading
from qkv.checks.harness import check_now
from qkv_course.generate import checks_intro
from qkv_course.config import ROOT

SOURCES = sorted(ROOT.glob("solutions/*/*.md"))
ROW = re.compile(r"^\| `(check_\w+)\((\w+)((?:, \w+=[^,)]+)*)\)` \| (.*?) \| (.*?) \| (.*?) \|$",
                 re.M)


def _intro(nb) -> str:
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    at = ids.index("setup")
    assert at > 0 and nb.cells[at - 1].cell_type == "markdown"
    return nb.cells[at - 1].source


def _tests(source) -> list:
    return [c.source for c in jupytext.read(source, fmt="md:myst").cells if "tests" in c.metadata]


@pytest.fixture(scope="module")
def blocks():
    """Each assignment's block, made afresh from its source's test cells (hidden tests too)."""
    return {s: checks_intro.block(_tests(s)) for s in SOURCES}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.parent.name)
def test_the_intro_of_each_notebook_ends_with_the_block_of_its_checks(source, blocks):
    block = blocks[source]
    assert block.startswith(checks_intro.BEGIN) and "float32" in block
    released = ROOT / "exercises" / source.parent.name / source.with_suffix(".ipynb").name
    for path in (source.with_suffix(".ipynb"), released):
        intro = _intro(nbformat.read(str(path), as_version=4))
        rest, found = checks_intro.split(intro)
        assert found == block, f"{path}: stale; run python -m qkv_course generate"
        assert intro.rstrip().endswith(checks_intro.END) and rest.startswith("<!-- Generated")
    # Every check a released test cell calls is in the table.
    tests = [c for c in nbformat.read(str(released), as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    visible = {m.group(1) for c in tests for m in re.finditer(r"\b(check_\w+)\(", c.source)}
    assert visible
    assert visible - {"check_question"} <= {m.group(1) for m in ROW.finditer(block)}


def test_the_half_precision_dtypes_are_said_where_a_check_tries_them(blocks):
    said = {d for b in blocks.values() for d in ("float16", "bfloat16") if f"**{d}**" in b}
    assert said == {"float16", "bfloat16"}
    assert all("dtype" in b and "refuses" in b and "does **not** refuse" in b
               for b in blocks.values())


def _options(text: str) -> dict:
    return {k: eval(v) for k, v in re.findall(r", (\w+)=([^,]+)", text)}  # literals the block wrote


def _rows(blocks):
    seen = {}
    for block in blocks.values():
        for m in ROW.finditer(block):
            seen.setdefault((m.group(1), m.group(3)), m)
    return list(seen.values())


def _seen_by_spy(check, options):
    """Run the check on a spy that records what it is given; returns (calls, dtypes, asked)."""
    calls, dtypes, asked = [], set(), set()

    def walk(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            dtypes.add(str(x.dtype).replace("torch.", ""))
        elif isinstance(x, (tuple, list)):
            for v in x:
                walk(v)
        elif isinstance(x, torch.dtype):
            asked.add(str(x).replace("torch.", ""))

    def spy(*args, **kwargs):
        calls.append(1)
        walk(args)
        walk([v for k, v in kwargs.items() if k != "dtype"])
        if isinstance(kwargs.get("dtype"), torch.dtype):
            asked.add(str(kwargs["dtype"]).replace("torch.", ""))
        return None

    result = check_now(check, spy, 0, **options)
    assert not result.passed  # a spy returns nothing: refused
    # The check stops at the first exception: a spy's None that the exercise's own call
    # could not use (a mask_mod it calls, say) is seen after one input only.
    return len(calls), dtypes, asked, result.kind != "raised"


def test_each_row_says_the_dtypes_and_calls_the_check_makes(blocks):
    rows, spied = _rows(blocks), 0
    assert len(rows) >= 40
    for m in rows:
        name, answer, options, inputs, where = m.group(1, 2, 3, 4, 5)
        check = grading.CHECKS[name]
        assert ("CUDA too" in where) == check.every_device, m.group(0)
        if answer[:1].isupper():  # a module: built by the check, not a spy's business
            continue
        n, dtypes, asked, every = _seen_by_spy(check, _options(options))
        said = set(re.findall(r"\b((?:b?float)\d+)\b(?!`)", inputs.split("sizes, some with")[0]))
        if not every:
            assert n == 1 and dtypes <= said, (m.group(0), dtypes)
            continue
        spied += 1
        assert inputs.startswith(f"{n}"), (m.group(0), n)
        if "measurement" in inputs:
            assert not dtypes, m.group(0)
            continue
        assert said == dtypes, (m.group(0), dtypes)
        assert set(re.findall(r"dtype=torch\.(\w+)", inputs)) <= asked, (m.group(0), asked)
    assert spied >= 30  # most checks seen through every input


@pytest.mark.parametrize("check, call, name", [
    ("check_softmax", lambda: torch.softmax(torch.zeros(2), -1), "torch.softmax"),
    ("check_attention_scores", lambda: torch.nn.functional.scaled_dot_product_attention(
        *(torch.zeros(1, 1, 1, 2),) * 3), "torch.nn.functional.scaled_dot_product_attention"),
])
def test_a_noted_call_is_noted_and_not_refused(blocks, check, call, name):
    assert any(f"`{check}`" in line and f"`{name}`" in line
               for b in blocks.values() for line in b.split("\n- ")), "the block lists it"
    exercise = grading.CHECKS[check].exercises()[0]

    def answer(*args, **kwargs):
        call()
        return exercise.reference(*args, **kwargs)

    result = check_now(grading.CHECKS[check], answer, 0)
    assert result.passed and name in result.notice, result
