"""qkv.bertviz_views: bertviz's HTML made to load its libraries from a local folder."""

import json
import re

from functools import partial

import pytest
import torch

from qkv import bertviz_views as bv

bertviz = pytest.importorskip("bertviz")

TOKENS = ["[CLS]", "a", "b", "[SEP]"]


def weights(layers=2, heads=3, T=4):
    return torch.softmax(torch.randn(layers, heads, T, T, generator=torch.Generator().manual_seed(1)), -1)


def test_as_bertviz_attention_layouts():
    w = weights()
    out = bv.as_bertviz_attention(w)
    assert len(out) == 2 and out[0].shape == (1, 3, 4, 4)
    assert out[0].dtype == torch.float64
    torch.testing.assert_close(out[1][0], w[1].double(), atol=5e-5, rtol=0)
    from_hf = bv.as_bertviz_attention([w[0][None], w[1][None]])
    torch.testing.assert_close(from_hf[1], out[1])
    assert len(bv.as_bertviz_attention(w[0])) == 1
    with pytest.raises(ValueError):
        bv.as_bertviz_attention(torch.rand(4, 4))
    with pytest.raises(ValueError):
        bv.as_bertviz_attention([])


@pytest.mark.parametrize("render", [partial(bv.view_html, "head_view"), partial(bv.view_html, "model_view")],
                         ids=["head_view", "model_view"])
def test_views_point_at_local_libraries_first(render):
    html = render(weights(), TOKENS, lib_url="../_static/vendor/")
    # no <script src> to the CDN is left; the CDN appears only as the second choice
    assert not re.search(r"<script[^>]+src=", html)
    assert json.dumps(["../_static/vendor/requirejs/require.js", bv.CDN["require"]]) in html
    for name in ("d3", "jquery"):
        local = "../_static/vendor/" + bv.LOCAL_FILES[name][:-3]
        assert json.dumps([local, bv.CDN[name]]) in html
        assert f"'{bv.CDN[name]}'" not in html  # the bare CDN path is gone
    assert html.count("<script") == 1 and html.rstrip().endswith("</script>")
    # the data made it through, rounded
    assert '"[CLS]"' in html


@pytest.mark.parametrize("lib_url", [None, "../_static/vendor"])
def test_views_sit_in_a_box_that_scrolls_inside_the_column(lib_url):
    html = bv.view_html("model_view", weights(), TOKENS, lib_url=lib_url)
    assert html.startswith(bv.BOX)
    # the view's own elements are inside the box, the drawing script after it
    box_end = html.index("</div>\n<script")
    assert 'id="bertviz' in html[:box_end] and "max-width: 100%" in bv.BOX
    assert "overflow-x: auto" in bv.BOX


def test_without_lib_url_bertviz_html_is_unchanged_in_substance():
    html = bv.view_html("head_view", weights(), TOKENS)
    assert f'<script src="{bv.CDN["require"]}"></script>' in html


def test_localize_refuses_unknown_layout():
    with pytest.raises(RuntimeError, match="bertviz"):
        bv.localize("<div>not bertviz</div>", "_static")


def test_token_count_must_match():
    with pytest.raises(ValueError, match="tokens must hold .*, got 3"):
        bv.view_html("head_view", weights(), TOKENS[:3])


def test_display_objects():
    from IPython.display import HTML

    assert isinstance(bv.model_view(weights(), TOKENS, lib_url="_static"), HTML)
    assert isinstance(bv.head_view(weights(), TOKENS, lib_url="_static"), HTML)


def test_local_files_are_what_npm_installs_and_the_book_vendors():
    """Each local path names a package of package.json (the book copies those to _static/vendor/)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    dependencies = json.loads((root / "package.json").read_text())["dependencies"]
    for name, path in bv.LOCAL_FILES.items():
        assert path.split("/")[0] in dependencies, f"{name}: {path} is not from a package in package.json"
    if not (root / "node_modules").is_dir():
        pytest.skip("node_modules/ is missing: run `npm ci` (make book does)")
    for name, path in bv.LOCAL_FILES.items():
        assert (root / "node_modules" / path).is_file(), f"npm ci did not install {path}"
