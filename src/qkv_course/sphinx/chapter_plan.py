"""The ``{chapter-plan}`` directive: a table of the chapters in ``_toc.yml`` and their plan.

The landing page lists only chapters that exist: the rows come from ``_toc.yml`` (every
``book/NN-name`` page, in reading order), each with the ``plan:`` of its own front matter
(``learn:``, what the chapter teaches, and ``minutes:``, its intended study time). A new chapter
appears on the landing page with no further edit; a chapter without a plan is a build warning.
Exercises listed under a chapter in the toc get a link in the last column.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from qkv_course.config import Page, front_matter, toc_pages

logger = logging.getLogger(__name__)


def _title(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def _doc_link(target: str, text: str) -> addnodes.pending_xref:
    ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/" + target,
                                refexplicit=True, refwarn=True)
    ref += nodes.inline(text, text)
    return ref


class ChapterPlan(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        root = Path(self.env.app.confdir)
        self.env.note_dependency(str(root / "_toc.yml"))
        toc = toc_pages(root)
        chapters = [page for page in toc if page.is_chapter]
        table = nodes.table(classes=["chapter-plan"])
        group = nodes.tgroup(cols=4)
        table += group
        for width in (30, 45, 10, 15):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        body = nodes.tbody()
        group += head
        group += body
        head += self._row(["Chapter", "You will learn", "Study time (planned)", "Exercise"])
        total = 0
        for chapter in chapters:
            self.env.note_dependency(str(chapter.source))
            entry = front_matter(chapter.source).get("plan")
            if not isinstance(entry, dict) or not {"minutes", "learn"} <= set(entry):
                logger.warning(f"{chapter.source.name} has no `plan:` (minutes:, learn:) in its front matter",
                               location=self.get_location())
                continue
            total += int(entry["minutes"])
            exercises = [page for page in toc if page.parent == chapter.name and page.is_exercise]
            cells = [
                _doc_link(chapter.name, _title(chapter.source)),
                entry["learn"],
                f"{entry['minutes']} min",
                self._exercise_cell(exercises),
            ]
            body += self._row(cells)
        if chapters:
            hours, minutes = divmod(total, 60)
            body += self._row([nodes.strong("", "Total"), "", f"{hours} h {minutes:02d} min", ""])
        else:
            return [nodes.paragraph("", "The chapters are being written; they appear here as they are published.")]
        return [table]

    @staticmethod
    def _exercise_cell(exercises: list[Page]) -> nodes.paragraph:
        para = nodes.paragraph()
        for i, page in enumerate(exercises):
            if i:
                para += nodes.Text(", ")
            para += _doc_link(page.name, Path(page.name).name.replace("_", " "))
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


def setup(app):
    app.add_directive("chapter-plan", ChapterPlan)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
