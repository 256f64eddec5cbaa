"""The page of ``qkv report``: per assignment, a chart of the class's mistakes and pass rates.

One self-contained HTML file: the charts are PNG images embedded as base64, so the page
opens offline, from an e-mail or a shared drive, with nothing beside it.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from pathlib import Path
from typing import List

from ..nbgrader.graded import ERROR, NOT_WRITTEN, TIMEOUT, UNNAMED
from .mistakes import Assignment

# Failures no check named are drawn in grey; the named mistakes, which say what to teach
# again, in colour.
_GREY = "#9e9e9e"
_COLOUR = "#c0504d"
_UNNAMED = (UNNAMED, NOT_WRITTEN, TIMEOUT, ERROR)

_STYLE = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 1em 0 2em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.8em; text-align: left; }
td.n { text-align: right; }
img { max-width: 100%; }
"""


def chart_png(a: Assignment) -> bytes:
    """A horizontal bar chart of how many students made each mistake, as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global state, any backend

    rows = a.mistakes
    fig = Figure(figsize=(9, 1.2 + 0.45 * max(len(rows), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if rows:
        labels = [textwrap.fill(f"{test}: {mistake}", 60) for test, mistake, _ in rows]
        colours = [_GREY if mistake in _UNNAMED else _COLOUR for _, mistake, _ in rows]
        y = list(range(len(rows)))[::-1]  # the CSV's first row at the top
        ax.barh(y, [n for _, _, n in rows], color=colours)
        ax.set_yticks(y, labels, fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel(f"students (of {len(a.students)})")
    else:
        ax.text(0.5, 0.5, "every test passed for every student", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title(f"{a.name}: failures by mistake")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _rates_table(a: Assignment) -> str:
    rows = []
    for test in a.tests:
        passed, total = a.passed[test], len(a.students)
        rows.append(f"<tr><td>{html.escape(test)}</td><td class='n'>{passed} / {total}</td>"
                    f"<td class='n'>{100 * passed / total:.0f}%</td></tr>")
    return ("<table><tr><th>test</th><th>students passing / submitted</th><th>pass rate</th></tr>"
            + "".join(rows) + "</table>")


def _section(a: Assignment) -> str:
    png = base64.b64encode(chart_png(a)).decode("ascii")
    name = html.escape(a.name)
    return (f"<h2>{name}</h2>\n<p>{len(a.students)} students submitted.</p>\n"
            f"<img src='data:image/png;base64,{png}' alt='failures by mistake in {name}'>\n"
            f"{_rates_table(a)}\n")


def write_html(path: Path, assignments: List[Assignment]) -> None:
    """Write the report page: a chart and a pass-rate table per assignment.

    Args:
        path: the file to write (``report.html``).
        assignments: as :func:`qkv_course.report.mistakes.summarise` returns them.
    """
    body = "".join(_section(a) for a in assignments)
    page = (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>qkv: mistakes by assignment</title><style>{_STYLE}</style></head>\n"
            f"<body><h1>Mistakes by assignment</h1>\n<p>Counted from the autograded notebooks: "
            f"each bar is how many students a test failed with that mistake (in grey, failures "
            f"no check named). The same counts are in mistakes.csv.</p>\n{body}</body></html>\n")
    path.write_text(page, encoding="utf-8")
