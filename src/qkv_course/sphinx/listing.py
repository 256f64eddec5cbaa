"""The ``{listing}`` directive: the part of a ``qkv`` function that teaches, and a link to all of it.

Written like ``literalinclude`` with ``:pyobject:``::

    ```{listing} ../src/qkv/efficient.py
    :pyobject: chunked_attention
    ```

It shows :func:`qkv_course.render.listing.teaching_source` (no docstring, no input validation, lines
fitted to the column) and, under it, a link to the whole object in the repository. The Colab
copy of the chapter shows the same text (``qkv_course.generate.colab``).

The extension also adds ``qkv.css``: the code font and padding that make a listing of
:data:`qkv_course.render.listing.WIDTH` characters fit the column at 1280 px, and the rules that keep
a page from being wider than a phone's screen (wide code and outputs scroll in their own box);
and ``qkv.js``, which makes the sidebar buttons of the article header open the chapter list and
the page's contents (the themes wire a hidden copy of each button instead).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from qkv_course.render.listing import source_link, teaching_source

CSS = Path(__file__).parent / "static" / "qkv.css"
JS = Path(__file__).parent / "static" / "qkv.js"


class ListingDirective(SphinxDirective):
    required_arguments = 1
    # start-at / end-at select lines as literalinclude's do; the text is always dedented, so
    # dedent is accepted and needs no value.
    option_spec = {"pyobject": directives.unchanged_required, "start-at": directives.unchanged,
                   "end-at": directives.unchanged, "dedent": directives.unchanged}

    def run(self) -> list:
        rel, path = self.env.relfn2path(self.arguments[0])
        self.env.note_dependency(rel)
        root = Path(self.env.srcdir)
        try:
            listing = teaching_source(Path(path), self.options["pyobject"],
                                      start_at=self.options.get("start-at"), end_at=self.options.get("end-at"))
        except (OSError, LookupError, SyntaxError) as error:
            raise self.error(f"listing {self.arguments[0]} :pyobject: {self.options['pyobject']}: {error}")
        code = nodes.literal_block(listing.text, listing.text, language="python")
        code["classes"].append("qkv-listing")
        self.set_source_info(code)
        text, url = source_link(Path(path).resolve().relative_to(root.resolve()).as_posix(), listing, root)
        link = nodes.paragraph(classes=["qkv-listing-source"])
        link += nodes.reference(text, text, refuri=url)
        return [code, link]


def _copy_static(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static"
        target.mkdir(parents=True, exist_ok=True)
        for path in (CSS, JS):
            shutil.copy2(path, target / path.name)


def setup(app: Sphinx) -> dict:
    app.add_directive("listing", ListingDirective)
    app.add_css_file(CSS.name)
    app.add_js_file(JS.name)
    app.connect("build-finished", _copy_static)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
