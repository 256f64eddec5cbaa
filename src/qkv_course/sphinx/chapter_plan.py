"""The ``{chapter-plan}`` directive: a table of the chapters in ``_toc.yml`` and their study time.

The landing page lists only chapters that exist: the rows come from ``_toc.yml`` (every
``book/NN-name`` page, in reading order), each with the ``plan: learn:`` of its own front matter
(what the chapter teaches). The times are computed, never typed:

- **reading**: the page's words, prose and code alike, at :data:`WORDS_PER_MINUTE`;
- **running**: how long the page's code took when this build executed it (myst-nb's execution
  record; filled in once every page has been read, see :func:`_fill_run_times`);
- **exercise**: the estimate its assignment states (``**Time:** about N minutes`` in
  ``solutions/NN-name/*.md``, the instructor's source of the exercise page).

A new chapter appears on the landing page with no further edit; a chapter without ``learn:``, or
an exercise without a stated time, is a build warning. The directive also writes the sentence
that says how the times were estimated.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from qkv_course.config import Page, front_matter, toc_pages

logger = logging.getLogger(__name__)

# A pace for technical text with formulas and code, slower than the 200 to 250 words a minute
# often quoted for plain prose.
WORDS_PER_MINUTE = 150

_EXERCISE_TIME = re.compile(r"\*\*Time:\*\*\s+about\s+(\d+)\s+minutes")


def _body(path: Path) -> str:
    """A Markdown source without its YAML front matter (whose comments start with "# " too)."""
    text = path.read_text()
    if text.startswith("---"):
        end = text.find("\n---", 3)
        text = text[end + 4:] if end != -1 else text
    return text


def _title(path: Path) -> str:
    for line in _body(path).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def page_words(path: Path) -> int:
    """Words of a chapter's Markdown source, prose and code, without its front matter.

    Directive options (``:tags:``, ``mystnb:`` blocks' YAML) and fences are not read by a
    reader, so they are left out.
    """
    text = _body(path)
    # a cell's option block: from a line of --- right after a fence to the next ---
    text = re.sub(r"^(```\{code-cell\}[^\n]*\n)---\n.*?\n---\n", r"\1", text, flags=re.M | re.S)
    words = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", ":::")) or re.match(r":[\w-]+:|\([\w-]+\)=$", stripped):
            continue
        words += len(stripped.split())
    return words


def exercise_minutes(page: Page) -> Optional[int]:
    """The time that an exercise's source states, ``None`` when it states none."""
    source = page.root / "solutions" / Path(page.name).relative_to("exercises").with_suffix(".md")
    if not source.is_file():
        return None
    found = _EXERCISE_TIME.search(source.read_text())
    return int(found.group(1)) if found else None


class run_time(nodes.Inline, nodes.TextElement):
    """A placeholder for the measured run time of the pages in ``docnames``."""


def _doc_link(target: str, text: str) -> addnodes.pending_xref:
    ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/" + target,
                                refexplicit=True, refwarn=True)
    ref += nodes.inline(text, text)
    return ref


def _minutes(minutes: float) -> str:
    hours, rest = divmod(round(minutes), 60)
    return f"{hours} h {rest:02d} min" if hours else f"{rest} min"


class ChapterPlan(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        root = Path(self.env.app.confdir)
        self.env.note_dependency(str(root / "_toc.yml"))
        toc = toc_pages(root)
        chapters = [page for page in toc if page.is_chapter]
        if not chapters:
            return [nodes.paragraph("", "The chapters are being written; they appear here as they are published.")]
        table = nodes.table(classes=["chapter-plan"])
        group = nodes.tgroup(cols=5)
        table += group
        for width in (26, 38, 10, 10, 16):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        body = nodes.tbody()
        group += head
        group += body
        head += self._row(["Chapter", "You will learn", "Reading", "Code runs", "Exercise"])
        reading_total = exercise_total = 0.0
        for chapter in chapters:
            self.env.note_dependency(str(chapter.source))
            entry = front_matter(chapter.source).get("plan")
            if not isinstance(entry, dict) or "learn" not in entry:
                logger.warning(f"{chapter.source.name} has no `plan: learn:` in its front matter",
                               location=self.get_location())
                continue
            reading = page_words(chapter.source) / WORDS_PER_MINUTE
            reading_total += reading
            exercises = [page for page in toc if page.parent == chapter.name and page.is_exercise]
            minutes = []
            for page in exercises:
                found = exercise_minutes(page)
                if found is None:
                    logger.warning(f"{page.name}: its source states no `**Time:** about N minutes`",
                                   location=self.get_location())
                else:
                    self.env.note_dependency(str(page.root / "solutions" / Path(page.name).relative_to("exercises")
                                                 .with_suffix(".md")))
                    minutes.append(found)
            exercise_total += sum(minutes)
            body += self._row([
                _doc_link(chapter.name, _title(chapter.source)),
                entry["learn"],
                _minutes(reading),
                run_time("", "", docnames=[chapter.name]),
                self._exercise_cell(exercises, sum(minutes) if minutes else None),
            ])
        body += self._row([nodes.strong("", "Total"), "", _minutes(reading_total),
                           run_time("", "", docnames=[c.name for c in chapters]),
                           _minutes(exercise_total)])
        how = nodes.paragraph("", (
            f"How the times are estimated: reading is the page's words, prose and code, at "
            f"{WORDS_PER_MINUTE} words a minute; code runs is how long the page's code took when "
            "this book was built (on the build machine; yours may be faster or slower); the "
            "exercise time is the estimate its assignment states. Altogether about "
            f"{_minutes(reading_total + exercise_total)}, plus the running time."))
        return [table, how]

    @staticmethod
    def _exercise_cell(exercises: list[Page], minutes: Optional[int]) -> nodes.paragraph:
        para = nodes.paragraph()
        for i, page in enumerate(exercises):
            if i:
                para += nodes.Text(", ")
            para += _doc_link(page.name, Path(page.name).name.replace("_", " "))
        if minutes is not None:
            para += nodes.Text(f" ({_minutes(minutes)})")
        return para

    @staticmethod
    def _row(cells) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            if isinstance(cell, str):
                entry += nodes.paragraph("", cell)
            elif isinstance(cell, nodes.paragraph):
                entry += cell
            else:
                para = nodes.paragraph()
                para += cell
                entry += para
            row += entry
        return row


def _runtime(env, docname: str) -> Optional[float]:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector
    except ImportError:  # pragma: no cover - myst-nb is how the book is built
        return None
    data = NbMetadataCollector.get_exec_data(env, docname)
    return None if not data or data.get("runtime") is None else float(data["runtime"])


def _fill_run_times(app, doctree: nodes.document, docname: str) -> None:
    """Every page has been read (and executed) by now: write the measured run times in."""
    for node in list(doctree.findall(run_time)):
        seconds = [_runtime(app.env, name) for name in node["docnames"]]
        if any(s is None for s in seconds):
            text = "not run in this build"
        else:
            total = sum(seconds)
            text = f"{total:.0f} s" if total < 90 else _minutes(total / 60)
        node.replace_self(nodes.Text(text))


def setup(app):
    app.add_directive("chapter-plan", ChapterPlan)
    app.connect("doctree-resolved", _fill_run_times)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
