"""The book builds from the repository root with warnings as errors, as `make book` does.

The `built_book` fixture (one build per session) lives in conftest.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qkv_course.config import ROOT, chapters, config, toc_pages
from qkv_course.sphinx.redirects import write_redirects

REDIRECTS: dict = config()["sphinx"]["config"]["qkv_redirects"]


def toc_files() -> list[str]:
    # Every page, nested sections and `glob:` entries (exercises) included.
    return [page.name for page in toc_pages()]


@pytest.mark.slow
def test_book_builds_every_page_in_the_toc(built_book: Path):
    assert (built_book / "index.html").is_file()
    for f in toc_files():
        page = built_book / (str(Path(f).with_suffix("")) + ".html")
        assert page.is_file(), f"{f} in _toc.yml produced no page"
        html = page.read_text()
        assert "Traceback (most recent call last)" not in html, f"{f} shows a traceback"


@pytest.mark.slow
def test_no_page_writes_to_stderr(built_book: Path):
    """A reader running a page in Jupyter or Colab sees stderr as an error (a tag that hides it
    in the HTML does nothing there): the executed pages write nothing to it."""
    import json

    written = []
    for page in sorted((built_book.parent / "jupyter_execute").rglob("*.ipynb")):
        for index, cell in enumerate(json.loads(page.read_text())["cells"]):
            for out in cell.get("outputs", []):
                if out.get("name") == "stderr":
                    text = "".join(out["text"]) if isinstance(out["text"], list) else out["text"]
                    written.append(f"{page.name} cell {index}: {text[:120]!r}")
    assert not written, "\n".join(written)


def test_repository_address_is_in_config_once():
    url = config()["repository"]["url"]
    assert url.startswith("https://github.com/")
    # Nothing else in the repository's own configuration spells the address out.
    for name in ("README.md", "pyproject.toml", "Makefile"):
        assert url not in (ROOT / name).read_text(), f"{name} repeats the repository address"


def _redirect_target(html: str) -> tuple[str, str, list[str]]:
    """The meta refresh's address, the canonical link and the plain links of a redirect page."""
    refresh = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', html)
    canonical = re.search(r'<link rel="canonical" href="([^"]+)">', html)
    assert refresh and canonical, f"not a redirect page:\n{html}"
    return refresh.group(1), canonical.group(1), re.findall(r'<a href="([^"]+)">', html)


@pytest.mark.slow
@pytest.mark.parametrize("old", sorted(REDIRECTS))
def test_old_chapter_address_sends_readers_to_the_new_one(built_book: Path, old: str):
    new = REDIRECTS[old]
    assert (built_book / new).is_file() and new[: -len(".html")] in {p.name for p in toc_pages()}
    page = built_book / old
    assert page.is_file(), f"no page at the old address {old}"
    refresh, canonical, links = _redirect_target(page.read_text())
    for href in (refresh, canonical, *links):
        assert (page.parent / href).resolve() == (built_book / new).resolve(), f"{old} -> {href}, not {new}"


def test_redirects_are_written_and_a_missing_target_fails(tmp_path: Path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "02-lookup.html").write_text("the chapter")
    pages = {"book/02-lookup.html"}
    mapping = {"book/02-soft-lookup.html": "book/02-lookup.html", "old.html": "book/02-lookup.html"}
    write_redirects(tmp_path, mapping, pages, baseurl="https://example.org/qkv/")
    refresh, canonical, links = _redirect_target((tmp_path / "book" / "02-soft-lookup.html").read_text())
    assert refresh == "02-lookup.html" and links == ["02-lookup.html"]
    assert canonical == "https://example.org/qkv/book/02-lookup.html"
    assert _redirect_target((tmp_path / "old.html").read_text())[0] == "book/02-lookup.html"
    with pytest.raises(Exception, match=r"points at book/08-efficient\.html, which is not a page"):
        write_redirects(tmp_path, {"book/07-complexity.html": "book/08-efficient.html"}, pages)
    with pytest.raises(Exception, match="is a page of the book"):
        write_redirects(tmp_path, {"book/02-lookup.html": "book/02-lookup.html"}, pages)


CHAPTERS = chapters()
# A cell that draws: pyplot, or one of qkv.viz's plotting helpers.
_DRAWS = re.compile(r"\bplt\.(show|subplots)\b|\bplot_\w+\(|\bviz\.attention_heatmap\(")


# An image call of matplotlib, and the arguments that fix its colour range.
_IMAGE_CALL = re.compile(r"\b(imshow|matshow|pcolormesh)\(")
_COLOUR_RANGE = re.compile(r"\b(vmin|vmax|norm)\s*=")


def _code_calls(page, pattern):
    """Each call that ``pattern`` finds in the page's code cells: ``(match, the call's text)``."""
    import jupytext

    nb = jupytext.read(page.source, fmt="md:myst")
    for cell in nb.cells:
        if cell.cell_type == "code":
            for m in pattern.finditer(cell.source):
                yield m, _call_text(cell.source, m.end() - 1)


def _call_text(source: str, start: int) -> str:
    """The text of the call whose "(" is at ``start``, to its matching ")"."""
    depth = 0
    for i in range(start, len(source)):
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        if depth == 0:
            return source[start:i + 1]
    return source[start:]


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_heat_map_fixes_its_colour_range(page):
    """Left to itself, imshow scales the colours to the data: a grid whose cells are all equal
    (chapter 9's multi-query panel, every query head reading the one key/value head) gets
    vmin == vmax and is drawn in a single flat colour, the opposite of what it shows. Every
    image call on a page sets vmin, vmax or norm."""
    loose = [m.group(1) + call.splitlines()[0] for m, call in _code_calls(page, _IMAGE_CALL)
             if not _COLOUR_RANGE.search(call)]
    assert not loose, f"{page.name}: image calls with no fixed colour range: {loose}"


def test_the_heat_map_check_catches_the_blank_grid():
    """The rule above, on the call that drew chapter 9's blank panel and on its fix."""
    def loose(src):
        m = _IMAGE_CALL.search(src)
        return not _COLOUR_RANGE.search(_call_text(src, m.end() - 1))

    assert loose('ax.imshow(uses, cmap="Blues", aspect="auto")\nax.set(vmin=0)')
    assert not loose('ax.imshow(uses, cmap="Blues", aspect="auto", vmin=0, vmax=1)')


# A grid of heads, and the heads it draws given as a range.
_HEAD_GRID_CALL = re.compile(r"\bplot_head_grid\(")
_HEADS_RANGE = re.compile(r"\bheads\s*=\s*range\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
MAX_GRID_HEADS = 3  # maps a row that a 390 px phone shows at a readable size (about 85 px each)


def _grid_heads(call: str) -> int | None:
    """How many heads a plot_head_grid call draws, when it says so with heads=range(...)."""
    m = _HEADS_RANGE.search(call)
    if not m:
        return None
    return int(m.group(1)) if m.group(2) is None else int(m.group(2)) - int(m.group(1))


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_head_grid_fits_a_phone(page):
    """A phone shrinks a figure to its column: six heads a row (chapter 5's old grids) left each
    map about 46 px wide at 390 px, its labels unreadable. Every plot_head_grid call on a page
    names its heads with heads=range(...), at most three of them."""
    wide = [" ".join(call.split()) for _, call in _code_calls(page, _HEAD_GRID_CALL)
            if (_grid_heads(call) or MAX_GRID_HEADS + 1) > MAX_GRID_HEADS]
    assert not wide, f"{page.name}: head grids wider than {MAX_GRID_HEADS} heads (or all heads): {wide}"


def test_the_head_grid_check_counts_heads():
    assert _grid_heads("(w, heads=range(6))") == 6
    assert _grid_heads("(w, labels=l, heads=range(6, 12))") == 6
    assert _grid_heads("(\n    w, heads=range(3, 6)\n)") == 3
    assert _grid_heads("(w)") is None


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_cell_gives_a_caption_and_alt_text(page):
    """Read by myst-nb (cell metadata mystnb.figure.caption and mystnb.image.alt): a screen
    reader announces what the figure shows, not its file name. The browser test checks the page."""
    import jupytext

    nb = jupytext.read(page.source, fmt="md:myst")
    missing = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not _DRAWS.search(cell.source):
            continue
        meta = cell.metadata.get("mystnb", {})
        caption = str(meta.get("figure", {}).get("caption", ""))
        alt = str(meta.get("image", {}).get("alt", ""))
        if len(caption) < 20 or len(alt) < 40:
            missing.append(cell.source.strip().splitlines()[0])
    assert not missing, f"{page.name}: figure cells without a caption or alt text: {missing}"


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_ends_with_a_summary_and_references(page):
    """A "Summary" section, and a "References" list as the last section (an exercise may sit
    between them), with full citations: every entry has a year."""
    text = page.source.read_text()
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert "Summary" in sections, f"{page.name} has no Summary section"
    assert sections[-1] == "References", f"{page.name} does not end with References: {sections[-3:]}"
    assert sections.index("Summary") >= len(sections) - 3, f"{page.name}: Summary is not near the end"
    entries = [line for line in text.split("\n## References", 1)[1].splitlines() if line.startswith("- ")]
    assert entries, f"{page.name}: the References section lists nothing"
    undated = [e for e in entries if not re.search(r"\b(19|20)\d\d[a-z]?\b", e)]
    assert not undated, f"{page.name}: references without a year: {undated}"


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_opens_with_its_learning_objectives(page):
    """The house style: each chapter says early what a reader will be able to do, in the same
    box, before its first heading."""
    text = page.source.read_text()
    box = text.find(":::{admonition} Learning objectives")
    first_section = re.search(r"^## ", text, flags=re.M)
    assert box != -1, f"{page.name} has no Learning objectives box"
    assert first_section is None or box < first_section.start(), f"{page.name}: the box is late"


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_chapters_do_not_call_the_course_sources_seeds(page):
    """Readers never saw the course's source documents; "seed" means a random seed only."""
    text = page.source.read_text()
    wrong = re.findall(r"[^\n]*\bthe seeds\b(?! each)[^\n]*", text, flags=re.I)
    assert not wrong, f"{page.name}: {wrong}"
