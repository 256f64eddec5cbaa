"""The built chapter 5 page draws its bertviz views with no network.

Opens ``_build/html/book/05-multi-head.html`` in headless Chromium, served from
``127.0.0.1``, with every other request blocked, and checks that both bertviz
views (``head_view`` and ``model_view``) have drawn their SVG, that nothing they
need was asked of the network, and that they add no console error.

"Add": the book's theme logs a few errors of its own on every page (and Sphinx
loads MathJax from a CDN); those belong to the book-wide browser checks of
another issue. The intro page, which has no bertviz view, is loaded the same way
as a baseline, and chapter 5 may show only errors and blocked requests that the
baseline shows too (so once those are fixed, this test is strict by itself).

It builds nothing: it skips when the page has not been built (``make book``) or
when Chromium or playwright is missing.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
PAGE = SITE / "book" / "05-multi-head.html"
BASELINE = SITE / "book" / "intro.html"

#: What bertviz loads (see qkv.bertviz_views): none of it may come from the network.
BERTVIZ_LIBS = ("require", "d3", "jquery")

_DRAWN = """() => {
  const roots = Array.from(document.querySelectorAll('div[id^="bertviz-"]'));
  return roots.map(r => ({svg: r.querySelectorAll('svg').length,
                          shapes: r.querySelectorAll('svg rect, svg line, svg text').length}));
}"""


def _chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


@pytest.fixture(scope="module")
def site_url():
    """Serve _build/html on a free local port for the duration of the module."""
    if not PAGE.is_file():
        pytest.skip(f"{PAGE.relative_to(ROOT)} is missing: build the book first (make book)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _visit(browser, site_url: str, path: str, wait_for_views: int) -> Tuple[List[str], List[str], list]:
    """Open one page offline; return (errors, blocked URLs, drawn bertviz views)."""
    page = browser.new_page()
    errors, blocked = [], []

    def route(r):
        if r.request.url.startswith(site_url + "/"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    # the port changes from run to run: keep paths only, so pages can be compared
    page.on("console", lambda m: errors.append(
        f"console: {m.text} ({m.location.get('url', '').replace(site_url, '').split('?')[0]})"
    ) if m.type == "error" else None)
    page.goto(f"{site_url}/{path}", wait_until="load")
    if wait_for_views:
        try:
            page.wait_for_function(
                f"() => {{ const v = ({_DRAWN})(); return v.length === {wait_for_views}"
                " && v.every(x => x.shapes > 0); }",
                timeout=30_000,
            )
        except Exception:  # a timeout: the assertions in the test say what is missing
            pass
    page.wait_for_timeout(1000)  # let late errors surface
    views = page.evaluate(_DRAWN)
    page.close()
    return errors, blocked, views


def test_bertviz_views_draw_offline(site_url):
    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright-python is not installed")

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable,
            args=["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            errors, blocked, views = _visit(browser, site_url, "book/05-multi-head.html", 2)
            base_errors, base_blocked, base_views = _visit(
                browser, site_url, BASELINE.relative_to(SITE).as_posix(), 0
            )
        finally:
            browser.close()

    assert base_views == [], "the baseline page must have no bertviz view"
    assert len(views) == 2, f"expected head_view and model_view on the page, found {views}"
    for v in views:
        assert v["svg"] >= 1 and v["shapes"] > 0, f"a bertviz view was not drawn: {views}"
    needed = [u for u in blocked if any(lib in u.rsplit("/", 1)[-1] for lib in BERTVIZ_LIBS)]
    assert not needed, f"the page asked the network for bertviz's libraries: {needed}"
    extra_blocked = sorted(set(blocked) - set(base_blocked))
    assert not extra_blocked, f"chapter 5 made non-local requests the baseline does not: {extra_blocked}"
    extra_errors = [e for e in errors if e not in base_errors]
    assert not extra_errors, "errors on chapter 5 that the baseline page does not have:\n" + "\n".join(
        extra_errors
    )
