"""Pages at the addresses chapters used to have, sending readers on to where the chapter is now.

A renamed chapter keeps its old address alive: links from elsewhere and bookmarks still work.
The mapping is set once, in ``_config.yml``, from old to new page paths inside the built site::

    sphinx:
      config:
        qkv_redirects:
          book/02-soft-lookup.html: book/02-lookup.html

After an HTML build each old path gets a small page with a meta refresh, a canonical link (so
search engines index the new page only) and a plain link for readers whose browser does not
follow the refresh. A target that the build did not produce fails the build, naming it: a
redirect to nowhere would be a broken link nobody sees.
"""

from __future__ import annotations

import html
import posixpath
from pathlib import Path
from typing import Dict, Set

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError, ExtensionError

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Moved to {new}</title>
<meta http-equiv="refresh" content="0; url={href}">
<link rel="canonical" href="{canonical}">
<meta name="robots" content="noindex">
</head>
<body>
<p>This page has moved to <a href="{href}">{new}</a>.</p>
</body>
</html>
"""


def _check_mapping(app: Sphinx, config: Config) -> None:
    """Refuse a mapping that is not ``{old.html: new.html}`` before anything is built."""
    mapping = config.qkv_redirects
    if not isinstance(mapping, dict):
        raise ConfigError(f"qkv_redirects must map old page paths to new ones, got {mapping!r}")
    for old, new in mapping.items():
        for path in (old, new):
            if not isinstance(path, str) or not path.endswith(".html") or path.startswith(("/", ".")):
                raise ConfigError(f"qkv_redirects: {path!r} is not a page path such as book/01-bottleneck.html")


def page(old: str, new: str, baseurl: str = "") -> str:
    """The HTML written at ``old``, sending the reader to ``new``.

    Args:
        old: path of the old page inside the site, e.g. ``book/02-soft-lookup.html``.
        new: path of the page it moved to, e.g. ``book/02-lookup.html``.
        baseurl: the site's address (Sphinx's ``html_baseurl``); when set, the canonical link is
            absolute, otherwise relative like the others.

    Returns:
        The page's text.
    """
    href = posixpath.relpath(new, posixpath.dirname(old) or ".")
    canonical = baseurl.rstrip("/") + "/" + new if baseurl else href
    return PAGE.format(new=html.escape(new), href=html.escape(href), canonical=html.escape(canonical))


def write_redirects(outdir: Path, mapping: Dict[str, str], pages: Set[str], baseurl: str = "") -> None:
    """Write a redirect page at every old path of ``mapping`` inside ``outdir``.

    Args:
        outdir: the HTML build folder.
        mapping: old page path -> new page path, both relative to ``outdir``.
        pages: the paths of this build's pages (a file left by an earlier build is not one).
        baseurl: as for :func:`page`.

    Raises:
        ExtensionError: when a new page is not a page of this build, or an old one still is.
    """
    missing = sorted({new for new in mapping.values() if new not in pages or not (outdir / new).is_file()})
    if missing:
        raise ExtensionError(
            f"qkv_redirects (in _config.yml) points at {', '.join(missing)}, which is not a page "
            "of the book: fix the target or drop the redirect"
        )
    for old, new in mapping.items():
        if old in pages:
            raise ExtensionError(f"qkv_redirects: {old} is a page of the book; a redirect would replace it")
        path = outdir / old
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page(old, new, baseurl))


def _build_finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.name != "html":
        return
    pages = {docname + ".html" for docname in app.env.found_docs}
    write_redirects(Path(app.outdir), app.config.qkv_redirects, pages, app.config.html_baseurl or "")


def setup(app: Sphinx) -> dict:
    app.add_config_value("qkv_redirects", {}, "html", types=[dict])
    app.connect("config-inited", _check_mapping)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
