"""bertviz's ``head_view`` and ``model_view`` for ``qkv`` tensors, servable offline.

bertviz writes HTML that loads require.js, d3 and jQuery from a CDN. A page that
must work without the network (the built book) serves those libraries itself;
:func:`localize` rewrites bertviz's HTML so that it asks for them under
``lib_url`` first and only falls back to the CDN when they are not there (as in
Colab, where the notebook has no static folder). bertviz itself is not patched
and is imported only when a view is drawn.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import _drawing as d
from . import _validate as v

#: The CDN addresses bertviz 1.4 writes into its HTML (require.js takes the full
#: file name; the two require.js module paths leave out ``.js``).
CDN: Dict[str, str] = {
    "require": "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js",
    "d3": "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min",
    "jquery": "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min",
}

#: Where the local copies lie under ``lib_url``: the npm packages' own layout, as
#: ``npm ci`` installs them into ``node_modules/`` (the book copies each package
#: folder to ``_static/vendor/``, see ``qkv_course.sphinx.vendored_js``).
LOCAL_FILES: Dict[str, str] = {
    "require": "requirejs/require.js",
    "d3": "d3/dist/d3.min.js",
    "jquery": "jquery/dist/jquery.min.js",
}

_SCRIPT = re.compile(r'<script type="text/javascript">\n(?P<js>.*)\n</script>\s*$', re.DOTALL)


def as_bertviz_attention(attention: Union[Tensor, Sequence[Tensor]], decimals: int = 4) -> Tuple[Tensor, ...]:
    """Put attention weights in the form bertviz takes: one ``(1, H, T, T)`` tensor per layer.

    Weights are rounded to ``decimals`` places (the page stores them as JSON text,
    and four places are more than a screen can show) and moved to the CPU as float64.

    Args:
        attention: ``(layers, H, T, T)`` (e.g. from :func:`qkv.heads.stack_layers`),
            ``(H, T, T)`` for a single layer, or a sequence of per-layer
            ``(1, H, T, T)`` or ``(H, T, T)`` tensors (as Hugging Face returns them).
        decimals: rounding of the stored weights.

    Returns:
        A tuple with one tensor per layer.

    Shape:
        - output[i]: ``(1, H, T, T)``
    """
    v.require_int("decimals", decimals, minimum=0)
    if isinstance(attention, Tensor):
        if attention.dim() == 3:
            attention = attention[None]
        if attention.dim() != 4:
            raise ValueError(
                f"attention must have shape (layers, H, T, T) or (H, T, T), got "
                f"{v.shape_str(attention)}"
            )
        layers = list(attention.unbind(0))
    elif isinstance(attention, (list, tuple)):
        layers = list(attention)
    else:
        raise TypeError(f"attention must be a tensor or a list of per-layer tensors, got "
                        f"{type(attention).__name__}")
    if not layers:
        raise ValueError("attention must hold at least one layer")
    out = []
    for i, a in enumerate(layers):
        d.require_drawable(f"attention[{i}]", a)
        if a.dim() == 4 and a.shape[0] == 1:
            a = a[0]
        if a.dim() != 3 or a.shape[-1] != a.shape[-2]:
            raise ValueError(
                f"attention[{i}] must have shape (1, H, T, T) or (H, T, T), got {v.shape_str(a)}"
            )
        if out and a.shape != out[0].shape[1:]:  # bertviz stacks the layers into one tensor
            raise ValueError(f"every layer of attention must have the shape of attention[0], "
                             f"{v.shape_str(out[0][0])}; got attention[{i}] {v.shape_str(a)}")
        # float64 so that the JSON holds 0.0447, not float32's 0.04470000043511391
        out.append(a.detach().double().cpu().round(decimals=decimals)[None])
    return tuple(out)


def localize(html: str, lib_url: str) -> str:
    """Rewrite bertviz's HTML to load its JavaScript libraries from ``lib_url``.

    The ``<script src=...require.min.js>`` tag is replaced by a loader that
    draws the view once ``requirejs`` is there: already on the page, else loaded
    from ``lib_url``, else from the CDN. d3 and jQuery are given to require.js as
    ``[local, CDN]`` paths, which it tries in that order.

    Args:
        html: what ``bertviz.head_view`` or ``bertviz.model_view`` returns with
            ``html_action='return'`` (its ``.data``).
        lib_url: URL of the folder holding :data:`LOCAL_FILES`, relative to the page
            (``"../_static/vendor"`` for a book page one folder below the root).

    Returns:
        The HTML, with no CDN address except as a fallback.
    """
    base = lib_url.rstrip("/")
    tag = f'<script src="{CDN["require"]}"></script>'
    match = _SCRIPT.search(html)
    if tag not in html or match is None or any(f"'{CDN[k]}'" not in html for k in ("d3", "jquery")):
        raise RuntimeError(
            "bertviz's HTML is not laid out as qkv.bertviz_views expects (bertviz 1.4.x): "
            "cannot point its libraries at local copies"
        )
    js = match.group("js")
    for name in ("d3", "jquery"):
        local = f"{base}/{LOCAL_FILES[name][: -len('.js')]}"
        js = js.replace(f"'{CDN[name]}'", json.dumps([local, CDN[name]]))
    sources = json.dumps([f"{base}/{LOCAL_FILES['require']}", CDN["require"]])
    loader = (
        "(function () {\n"
        "  function draw() {\n" + js + "\n  }\n"
        "  if (window.requirejs) { draw(); return; }\n"
        f"  var sources = {sources};\n"
        "  (function load(i) {\n"
        "    var s = document.createElement('script');\n"
        "    s.src = sources[i];\n"
        "    s.onload = draw;\n"
        "    s.onerror = function () { if (i + 1 < sources.length) load(i + 1); };\n"
        "    document.head.appendChild(s);\n"
        "  })(0);\n"
        "})();"
    )
    body = html[: match.start()].replace(tag, "")
    return body + '<script type="text/javascript">\n' + loader + "\n</script>\n"


_VIEWS = ("head_view", "model_view")

#: The box a view is drawn in: as wide as the column at most, and scrolling inside itself
#: when the view is wider (the model view of 12 heads is, and any view is on a phone), so
#: that the page never scrolls sideways. Inline, so that it works in Colab too.
BOX = '<div class="qkv-bertviz" style="max-width: 100%; overflow-x: auto;">'


def _boxed(html: str) -> str:
    """``html`` with its content in :data:`BOX`; a closing ``<script>`` stays last, outside."""
    match = _SCRIPT.search(html)
    end = match.start() if match else len(html)
    return BOX + html[:end] + "</div>\n" + html[end:]


def view_html(
    kind: str,
    attention: Union[Tensor, Sequence[Tensor]],
    tokens: Sequence[str],
    lib_url: Optional[str] = None,
    **kwargs: Any,
) -> str:
    """HTML of one of bertviz's views: ``"head_view"`` (one layer at a time, lines from token to
    token) or ``"model_view"`` (a thumbnail for every layer and head).

    Args:
        kind: ``"head_view"`` or ``"model_view"``.
        attention: weights as :func:`as_bertviz_attention` accepts them.
        tokens: the ``T`` tokens.
        lib_url: folder of the local libraries (see :func:`localize`); ``None``
            keeps bertviz's CDN addresses.
        **kwargs: passed to bertviz's view (e.g. ``layer=``, ``heads=``, ``include_layers=``).

    Returns:
        A self-contained HTML fragment, the view in a box (:data:`BOX`) that scrolls
        sideways inside itself where the view is wider than the page's column.
    """
    v.require_choice("kind", kind, _VIEWS)
    try:
        import bertviz
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the bertviz views need bertviz: pip install bertviz") from e
    layers = as_bertviz_attention(attention)
    T = layers[0].shape[-1]
    tokens = [str(t) for t in d.require_sequence("tokens", tokens, T, "position the attention covers")]
    if lib_url is not None:
        v.require_instance("lib_url", lib_url, str, "a URL (a str) or None")
    view = getattr(bertviz, kind)
    html = view(layers, list(tokens), html_action="return", **kwargs).data
    return _boxed(html if lib_url is None else localize(html, lib_url))


def head_view(attention: Any, tokens: Sequence[str], lib_url: Optional[str] = None, **kwargs: Any) -> Any:
    """:func:`view_html` of the head view, for display in a notebook (an ``IPython.display.HTML``)."""
    from IPython.display import HTML

    return HTML(view_html("head_view", attention, tokens, lib_url, **kwargs))


def model_view(attention: Any, tokens: Sequence[str], lib_url: Optional[str] = None, **kwargs: Any) -> Any:
    """:func:`view_html` of the model view, for display in a notebook (an ``IPython.display.HTML``)."""
    from IPython.display import HTML

    return HTML(view_html("model_view", attention, tokens, lib_url, **kwargs))
