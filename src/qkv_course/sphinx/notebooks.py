"""What the book build gives the chapters' Colab copies, and the notebook a reader downloads.

After an HTML build, for every chapter in ``_toc.yml``:

- the numbers it glued into its text (myst-nb's ``_build/jupyter_execute/<page>.glue.json``)
  go into its record ``book/_glue/<chapter>.json`` (:mod:`qkv_course.render.glued`), which the
  Colab copy writes into its Markdown. The record is rewritten only when the chapter's code or
  glued names changed since it was made, so an unchanged chapter leaves no diff behind;
- the page's ``.ipynb`` download (sphinx-book-theme copies the executed notebook to
  ``_sources/<page>.ipynb``, with no set-up cell and raw MyST) is replaced by the chapter's
  Colab copy, rendered from the same sources: the notebook a reader downloads runs anywhere.

A record written here is reported in the build log: run ``python -m qkv_course generate`` then
and commit the record with the regenerated Colab copy.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

from qkv_course.config import chapters, is_myst_notebook, repository_url
from qkv_course.generate import colab
from qkv_course.render import glued

logger = logging.getLogger(__name__)


def _glued_names(app: Sphinx, docname: str) -> list:
    return list(getattr(app.env, "nb_metadata", {}).get(docname, {}).get("glue", []))


def _after_build(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.confdir)
    executed = Path(app.outdir).parent / "jupyter_execute"
    for page in chapters(root):
        md = page.source
        if not is_myst_notebook(md):
            continue
        glue_json = executed / f"{page.name}.glue.json"
        if _glued_names(app, page.name) and glue_json.is_file():
            if glued.update_record(md, glued.values_from_build(glue_json)):
                # Information, not a warning: the build (-W) must not fail for it.
                logger.info(f"{glued.record_path(md).relative_to(root)} recorded this build's glued "
                            "numbers: run `python -m qkv_course generate` and commit both")
        download = Path(app.outdir) / "_sources" / f"{page.name}.ipynb"
        if download.parent.is_dir():
            download.write_text(colab.render(md, repository_url(root), root))


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", _after_build)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
