"""``glue`` for a chapter run outside the book build (Colab, Jupyter): myst_nb's call, no Sphinx.

In the book, ``from myst_nb import glue`` records a value for the page's text
(``{glue:text}`name```). A chapter's Colab copy already has those values written into its
text (``qkv_course.generate.colab``), so its code imports this instead, and a reader needs neither
myst-nb nor Sphinx: ``glue`` shows the value when asked to and otherwise does nothing.
"""

from __future__ import annotations

from typing import Any


def glue(name: str, variable: Any, display: bool = True) -> None:
    """Show ``variable`` when ``display`` is true, as ``myst_nb.glue`` does; record nothing.

    Args:
        name: the name the book's text refers to (unused here).
        variable: the value.
        display: show the value as the cell's output.
    """
    if display:
        from IPython.display import display as show

        show(variable)
