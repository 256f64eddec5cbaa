"""The ``{chapter-plan}`` directive: a table of the chapters in ``_toc.yml`` and their plan.

The landing page lists only chapters that exist: the rows come from ``_toc.yml`` (every
``book/NN-name`` page, in reading order) joined with ``book/plan.yml`` (what the chapter
teaches and its intended study time, keyed by NN). A chapter merged into the toc appears on the
landing page with no further edit; a chapter with no entry in plan.yml is a build warning.
Exercises listed under a chapter in the toc get a link in the last column.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)


def _entries(entries, parent, out):
    for entry in entries or []:
        if "file" in entry:
            name = re.sub(r"\.(md|ipynb)$", "", entry["file"])
            out.append((name, parent))
            _entries(entry.get("sections"), name, out)
        elif "glob" in entry:
            out.append(("glob:" + entry["glob"], parent))


def _toc(root: Path) -> list[tuple[str, str | None]]:
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    out: list[tuple[str, str | None]] = []
    _entries(toc.get("chapters"), None, out)
    for part in toc.get("parts") or []:
        _entries(part.get("chapters"), None, out)
    return out


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
        plan = yaml.safe_load((root / "book" / "plan.yml").read_text())["chapters"]
        self.env.note_dependency(str(root / "_toc.yml"))
        self.env.note_dependency(str(root / "book" / "plan.yml"))
        toc = _toc(root)
        chapters = [n for n, _ in toc if re.fullmatch(r"book/\d\d-[\w-]+", n)]
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
        for name in chapters:
            number = Path(name).name[:2]
            entry = plan.get(number)
            if entry is None:
                logger.warning(f"{name} is in _toc.yml but has no entry {number!r} in book/plan.yml",
                               location=self.get_location())
                continue
            total += int(entry["minutes"])
            exercises = [n for n, parent in toc if parent == name and ("exercises/" in n)]
            cells = [
                _doc_link(name, _title(root / f"{name}.md")),
                entry["learn"],
                f"{entry['minutes']} min",
                self._exercise_cell(root, exercises),
            ]
            body += self._row(cells)
        if chapters:
            hours, minutes = divmod(total, 60)
            body += self._row([nodes.strong("", "Total"), "", f"{hours} h {minutes:02d} min", ""])
        else:
            return [nodes.paragraph("", "The chapters are being written; they appear here as they are published.")]
        return [table]

    def _exercise_cell(self, root: Path, exercises: list[str]) -> nodes.Node:
        para = nodes.paragraph()
        names = []
        for entry in exercises:
            if entry.startswith("glob:"):
                names += sorted(p.relative_to(root).with_suffix("").as_posix()
                                for p in root.glob(entry[5:] + ".ipynb"))
            else:
                names.append(entry)
        for i, name in enumerate(names):
            if i:
                para += nodes.Text(", ")
            para += _doc_link(name, Path(name).name.replace("_", " "))
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
