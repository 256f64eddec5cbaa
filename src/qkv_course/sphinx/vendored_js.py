"""Serve the book's JavaScript dependencies (MathJax, ...) from the book itself, not a CDN.

``package.json`` (with its committed ``package-lock.json``) lists them; ``npm ci`` installs
them into ``node_modules/`` (``make book`` and ``make test`` do). After an HTML build this
extension copies each dependency's package folder to ``_static/vendor/<name>/``, so a page
refers to, for example, ``_static/vendor/mathjax/es5/tex-mml-chtml.js`` (see ``mathjax_path``
in ``_config.yml``). The published book then works with no request outside its own site.

It also drops scripts that a page would include twice: Jupyter Book 1.0.4 adds sphinx-thebe's
inline configuration twice, and the second copy throws "Identifier 'THEBE_JS_URL' has already
been declared" in the browser console of every page.

Why an extension and not ``html_static_path``: Jupyter Book adds every ``.js``/``.css`` file
under ``html_static_path`` to every page as soon as a ``_static/`` folder exists at the root,
which would load hundreds of MathJax components on each page.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError


def _dependencies(root: Path) -> list[str]:
    manifest = root / "package.json"
    if not manifest.is_file():
        return []
    return sorted(json.loads(manifest.read_text()).get("dependencies", {}))


def _check_installed(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    root = Path(app.confdir)
    missing = [name for name in _dependencies(root) if not (root / "node_modules" / name / "package.json").is_file()]
    if missing:
        raise ExtensionError(
            f"node_modules/ lacks {', '.join(missing)} (listed in package.json): run `npm ci` "
            "in the repository root (`make book` and `make test` do it)"
        )


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.confdir)
    target = Path(app.outdir) / "_static" / "vendor"
    for name in _dependencies(root):
        shutil.copytree(root / "node_modules" / name, target / name, dirs_exist_ok=True)


def _drop_duplicate_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # The same script registered twice may differ in priority, or have filename None in one
        # copy and "" in the other: compare what is written into the page.
        attributes = getattr(js, "attributes", {}) or {}
        key = (getattr(js, "filename", str(js)) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _check_installed)
    app.connect("html-page-context", _drop_duplicate_scripts)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
