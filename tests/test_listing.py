"""The book's listings: the part of a function that teaches, fitted to the column.

``qkv_course.render.listing`` leaves out docstrings and input validation (read from the syntax tree,
the reference modules stay as they are) and fits wide lines to the column (ruff's formatter for
the code, a re-flow for the comments) without changing what the code means. The browser test
measures the result on the built pages.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from qkv_course.config import ROOT
from qkv_course.render.listing import WIDTH, fit_lines, object_source, teaching_source

SAMPLE = '''
from . import _validate as v


def _check_sizes(n):
    if n < 1:
        raise ValueError("n")


@decorated
def scaled(x, n, scale=None):
    """A docstring the page does not need.

    Args:
        x: ...
    """
    v.require_tensor("x", x)
    _check_sizes(n)
    # Explains the check below, so it goes with it.
    if x.dim() != 2:
        raise ValueError("x must be 2-d")
    for name in ("a", "b"):
        v.require_int(name, n)
    assert n > 0
    # Why the scale: kept.
    s = 1.0 / n if scale is None else scale
    return x * s


class Task:
    """Doc."""

    n: int = 3

    def __post_init__(self):
        v.require_int("n", self.n)

    def run(self):
        """Doc."""
        return self.n
'''


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "mod.py"
    path.write_text(SAMPLE)
    return path


def test_docstrings_and_validation_are_left_out(sample: Path):
    listing = teaching_source(sample, "scaled")
    assert listing.text == textwrap.dedent('''\
        @decorated
        def scaled(x, n, scale=None):
            # Why the scale: kept.
            s = 1.0 / n if scale is None else scale
            return x * s''')
    assert (listing.first_line, listing.last_line) == (10, 27)
    whole = object_source(sample, "scaled")
    assert "A docstring the page does not need" in whole.text and "v.require_tensor" in whole.text


def test_a_method_left_empty_goes_and_a_class_keeps_the_rest(sample: Path):
    text = teaching_source(sample, "Task").text
    assert text == "class Task:\n    n: int = 3\n\n    def run(self):\n        return self.n"
    assert teaching_source(sample, "Task.run").text == "def run(self):\n    return self.n"
    with pytest.raises(LookupError):
        teaching_source(sample, "Task.missing")


CODE = '''\
def f(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256, window=None):
    m = torch.full((*batch, i1 - i0, 1), float("-inf"), dtype=acc_dtype, device=query.device)  # running max
    a, b = torch.randn(2, 3, 32, generator=g), torch.randn(2, 5, 48, generator=generator)
    print(f"{name:10s} at n={n}: {rate / 1e9:6.1f} GFLOP/s, that is {100 * rate / ceiling:5.1f}% of it")
    w = {k: torch.randn(512, generator=g, dtype=torch.float64) for k in ["dog", "bites", "man"]}
    # A comment that runs on and on, well past the width of the column, and must be re-flowed.
    return m
'''


def test_wide_lines_are_broken_without_changing_the_code():
    fitted = fit_lines(CODE, 80)
    assert ast.dump(ast.parse(fitted)) == ast.dump(ast.parse(CODE))
    # The one line no formatter breaks: a string literal wider than the column, kept whole.
    wide = [line for line in fitted.splitlines() if len(line) > 80]
    assert [line.strip() for line in wide] == [CODE.splitlines()[3].strip()[len("print("):-1]], fitted
    assert "    # running max\n    m = torch.full(" in fitted
    assert "    a, b = (\n        torch.randn(2, 3, 32, generator=g),\n" in fitted
    assert "    # A comment that runs on and on, well past the width of the column, and must\n" in fitted


def test_code_that_fits_or_is_a_fragment_is_left_as_it_is():
    fits = "def f(x):\n    return {'a': x}  # quotes and spacing as written\n"
    assert fit_lines(fits, 80) == fits
    fragment = "    else:\n        y = " + " + ".join(f"term_{i}" for i in range(20))
    assert fit_lines(fragment, 80) == fragment


def _chapter_listings():
    for md in sorted((ROOT / "book").glob("[0-9][0-9]-*.md")):
        for m in re.finditer(r"^```\{listing\} (\S+)\n:pyobject: (\S+)", md.read_text(), re.M):
            yield pytest.param(md, m.group(1), m.group(2), id=f"{md.stem}:{m.group(2)}")


@pytest.mark.parametrize("md, path, pyobject", list(_chapter_listings()))
def test_every_listing_in_the_chapters_fits_the_column(md: Path, path: str, pyobject: str):
    text = teaching_source(md.parent / path, pyobject).text
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, f"{md.name}, {pyobject}: lines wider than {WIDTH} characters: {wide}"


def test_start_at_and_end_at_select_lines_as_literalinclude_does(sample: Path):
    text = teaching_source(sample, "scaled", start_at="s = 1.0", end_at="return").text
    assert text == "s = 1.0 / n if scale is None else scale\nreturn x * s"
    with pytest.raises(LookupError):
        teaching_source(sample, "scaled", start_at="not there")
