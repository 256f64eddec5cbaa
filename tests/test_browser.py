"""The built book in a real browser: headless Chromium, served from localhost, offline.

Every page in _toc.yml is opened with every request outside the local server blocked (and
counted). Each must load with no console error and no failed local request, typeset its maths,
load its images and, for notebooks, carry Colab and download buttons that point at the right
files. The search page must find "softmax". Every chapter fits: no code, listing or output wider
than the column at 1280 px; no page (chapter or assignment) and no display equation is wider than
a 360 px phone screen (the narrowest common one), and code that scrolls there is shaded on the
side with more to see; the sidebar buttons open on a phone; and every figure has alt text that
is not a file name. A full-page screenshot of each page is written to _build/screenshots/ for a
person to look at.

Needs Debian's `chromium` (/usr/bin/chromium, or $QKV_CHROMIUM) and playwright-python;
`make test` installs both. Without chromium these tests skip on a workstation and fail in CI.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from book_pages import colab_url
from qkv_course.config import ROOT, toc_pages

CHROMIUM = Path(os.environ.get("QKV_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "_build" / "screenshots"
MAX_SCREENSHOT_HEIGHT = 16000  # px; longer pages are cut (Chromium's limit is near 16384)

PAGES = toc_pages()
PHONE = 360  # px: the narrowest phone screen in common use
pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    """Fail in CI (the browser checks must run there), skip on a workstation."""
    message = (
        f"{reason}. Install it with `make test` (runs `apt-get install -y chromium` as root on "
        "Debian/Ubuntu) or `sudo apt-get install -y chromium`; set QKV_CHROMIUM to use another "
        "Chromium binary"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@pytest.fixture(scope="module")
def site(built_book: Path):
    """The built book served over HTTP on 127.0.0.1, on a free port."""
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        _unavailable(f"Chromium is not installed at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright-python is not installed (it is in requirements.txt)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Visit:
    """One page opened in a fresh browser context, with everything that went wrong recorded."""

    def __init__(self, browser, site: str, path: str, width: int = 1280):
        self.site = site
        self.console_errors: list[str] = []
        self.failed: list[str] = []
        self.blocked: list[str] = []
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))
        self.page.on("requestfailed", self._request_failed)
        self.page.on("response", self._response)
        self.response = self.page.goto(urljoin(site, path), wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def _local(self, url: str) -> bool:
        return url.startswith(self.site) or urlparse(url).scheme in ("data", "blob", "about")

    def _route(self, route):
        if self._local(route.request.url):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def _request_failed(self, request):
        if self._local(request.url):
            self.failed.append(f"{request.url} ({request.failure})")

    def _response(self, response):
        if self._local(response.url) and response.status >= 400:
            self.failed.append(f"{response.url} (HTTP {response.status})")

    def assert_clean(self, name: str) -> None:
        assert self.response is not None and self.response.ok, f"{name}: HTTP {self.response and self.response.status}"
        assert not self.blocked, f"{name} asked for {len(self.blocked)} resource(s) outside the book: {self.blocked}"
        assert not self.failed, f"{name}: local requests failed: {self.failed}"
        assert not self.console_errors, f"{name}: console errors: {self.console_errors}"

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser, site):
    opened: list[Visit] = []

    def open_(path: str) -> Visit:
        opened.append(Visit(browser, site, path))
        return opened[-1]

    yield open_
    for v in opened:
        v.close()


def _check_maths(v: Visit, name: str) -> None:
    maths = v.page.locator(".math").count()
    if maths == 0:
        return
    v.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000)
    v.page.evaluate("() => MathJax.startup.promise")
    result = v.page.evaluate(
        """() => {
            const all = [...document.querySelectorAll('.math')];
            return {
              raw: all.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
              errors: [...document.querySelectorAll('mjx-merror, [data-mjx-error]')]
                        .map(e => e.getAttribute('data-mjx-error') || e.textContent),
            };
        }"""
    )
    assert not result["raw"], f"{name}: maths not typeset by MathJax: {result['raw'][:5]}"
    assert not result["errors"], f"{name}: MathJax could not typeset: {result['errors'][:5]}"


def _check_images(v: Visit, name: str) -> None:
    broken = v.page.evaluate(
        """async () => {
            const imgs = [...document.images];
            for (const img of imgs) {
              img.loading = 'eager';
              try { await img.decode(); } catch (e) {}
            }
            return imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src);
        }"""
    )
    assert not broken, f"{name}: images that did not load: {broken}"


def _check_bertviz(v: Visit, name: str) -> list[dict]:
    """bertviz views (chapter 5) must be drawn: their container holds an SVG with content."""
    views = v.page.evaluate(
        """() => [...document.querySelectorAll('[id^="bertviz"]')]
                 .map(e => ({id: e.id, shapes: e.querySelectorAll('svg *').length}))"""
    )
    empty = [view["id"] for view in views if view["shapes"] == 0]
    assert not empty, f"{name}: bertviz views not drawn: {empty}"
    return views


def _check_buttons(v: Visit, page, site: str) -> None:
    colab = colab_url(page.name)
    links = v.page.locator(f'a[href="{colab}"]')
    assert links.count() >= 1, f"{page.name}: no Colab button pointing at {colab}"
    assert (ROOT / page.colab_target).is_file(), f"{page.name}: Colab target {page.colab_target} is not in the repository"
    hrefs = v.page.eval_on_selector_all(
        "a.dropdown-item[href$='.ipynb']", "els => els.map(e => e.href)"
    )
    downloads = [h for h in hrefs if h.startswith(site) and "/_sources/" in h]
    assert downloads == [urljoin(site, f"_sources/{page.name}.ipynb")], (
        f"{page.name}: the download button should offer _sources/{page.name}.ipynb, found {downloads}"
    )
    response = v.page.request.get(downloads[0])
    assert response.ok, f"{page.name}: the .ipynb download answers HTTP {response.status}"
    nb = json.loads(response.body())
    assert nb.get("nbformat") == 4 and nb.get("cells"), f"{page.name}: the download is not a notebook"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_in_the_browser(visit, site, page):
    v = visit(page.html)
    _check_maths(v, page.name)
    _check_images(v, page.name)
    _check_bertviz(v, page.name)
    if page.is_notebook:
        _check_buttons(v, page, site)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = v.page.evaluate("() => document.documentElement.scrollHeight")
    v.page.screenshot(
        path=str(SCREENSHOTS / (page.name.replace("/", "__") + ".png")),
        full_page=True,
        clip={"x": 0, "y": 0, "width": 1280, "height": min(height, MAX_SCREENSHOT_HEIGHT)},
    )
    v.assert_clean(page.name)


CHAPTERS = [p for p in PAGES if p.is_chapter]

# Elements that are wider than their box at a width: code, listings and text outputs (a <pre>
# scrolls inside itself) and other outputs (bertviz, wide HTML); and what sticks out of the
# article's column. The page's own width against the window's.
_WIDTHS_JS = """() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('article');
  const right = article.getBoundingClientRect().right;
  const what = e => (e.closest('.cell_output') ? 'output ' : e.closest('.cell_input') ? 'code ' : '')
                  + e.tagName.toLowerCase() + ': ' + (e.textContent || e.getAttribute('src') || '')
                    .trim().split('\\n')[0].slice(0, 60);
  const scrolling = [...article.querySelectorAll('pre, div.cell_output')]
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => `${what(e)} (${e.scrollWidth} px in ${e.clientWidth} px)`);
  const sticking = [...article.querySelectorAll('img, svg, iframe, table, mjx-container, .math, p, li')]
    .filter(e => !e.closest('pre, div.cell_output, .MathJax, mjx-container mjx-container'))
    .filter(e => e.getBoundingClientRect().right > right + 1)
    .map(e => `${what(e)} (right edge ${Math.round(e.getBoundingClientRect().right)} px, column ${Math.round(right)} px)`);
  const doc = document.documentElement;
  return {scrolling, sticking, page: doc.scrollWidth, window: doc.clientWidth};
}"""


def _widths(v: Visit) -> dict:
    v.page.wait_for_function("() => !window.MathJax || !MathJax.startup || MathJax.startup.promise")
    v.page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    return v.page.evaluate(_WIDTHS_JS)


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_listing_and_output_fits_the_column_on_a_laptop(browser, site, page):
    """At 1280 px nothing in the column scrolls sideways or sticks out of it."""
    v = Visit(browser, site, page.html)
    try:
        found = _widths(v)
    finally:
        v.close()
    assert not found["scrolling"], f"{page.name} at 1280 px: wider than the column: {found['scrolling']}"
    assert not found["sticking"], f"{page.name} at 1280 px: out of the column: {found['sticking']}"
    assert found["page"] <= found["window"], f"{page.name} at 1280 px is {found['page']} px wide"


# Display equations wider than their box: on a phone their end sits in a sideways scroll that
# shows no scrollbar, so a reader sees a formula cut off.
_WIDE_MATHS_JS = """() => [...document.querySelectorAll('article mjx-container[display="true"]')]
  .filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => `${e.textContent.trim().slice(0, 60)} (${e.scrollWidth} px in ${e.clientWidth} px)`)"""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_is_wider_than_a_phone(browser, site, page):
    """At a phone's width (PHONE) the page never scrolls sideways: wide code scrolls inside its
    own box. Every display equation fits the column (qkv.css sets them at the text's size on a phone)."""
    v = Visit(browser, site, page.html, width=PHONE)
    try:
        found = _widths(v)
        wide_maths = v.page.evaluate(_WIDE_MATHS_JS)
    finally:
        v.close()
    assert found["page"] <= found["window"], (
        f"{page.name} at {PHONE} px is {found['page']} px wide; out of the column: {found['sticking']}"
    )
    assert not wide_maths, (
        f"{page.name} at {PHONE} px: equations wider than the column (break them over lines with "
        f"aligned): {wide_maths}"
    )


def _edges(png: bytes) -> tuple[float, float, float]:
    """The grey level of a code block's screenshot at its left edge, middle and right edge, in
    the rows of its top padding (no text there: only the background and any shadow)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    width = image.size[0]

    def column(x: int) -> float:
        return sum(image.getpixel((x, y)) for y in range(2, 8)) / 6

    return column(2), column(width // 2), column(width - 3)


def test_code_that_scrolls_shows_a_shadow_on_a_phone(browser, site):
    """At a phone's width (PHONE) a code block wider than the column is shaded on the side that
    has more code to scroll to (a touch screen shows no scrollbar), and not on a side whose end is reached."""
    page = CHAPTERS[3]
    v = Visit(browser, site, page.html, width=PHONE)
    try:
        block = v.page.evaluate_handle(
            "() => [...document.querySelectorAll('.bd-article div.highlight pre')]"
            ".find(e => e.scrollWidth > e.clientWidth + 1)"
        ).as_element()
        assert block is not None, f"{page.name} at {PHONE} px has no code wider than the column"
        block.scroll_into_view_if_needed()
        left, middle, right = _edges(block.screenshot())
        assert right < middle - 20 and abs(left - middle) < 4, (
            f"{page.name} at {PHONE} px: before scrolling, the right edge of wide code should be "
            f"shaded and the left not (grey left {left}, middle {middle}, right {right})"
        )
        v.page.evaluate("e => { e.scrollLeft = e.scrollWidth; }", block)
        left, middle, right = _edges(block.screenshot())
        assert left < middle - 20 and abs(right - middle) < 4, (
            f"{page.name} at {PHONE} px: scrolled to its end, the left edge of wide code should be "
            f"shaded and the right not (grey left {left}, middle {middle}, right {right})"
        )
    finally:
        v.close()


def test_a_printed_line_of_45_characters_fits_a_phone(browser, site):
    """reader13: at 13 px most printed results (tables of numbers the prose talks about) ran
    past a phone's column, 16 of 17 outputs in chapter 8. Printed output is set smaller on a
    phone: a line of 45 characters fits the box at PHONE px (code cells keep their size)."""
    page = next(p for p in CHAPTERS if p.name.endswith("08-efficient"))
    v = Visit(browser, site, page.html, width=PHONE)
    try:
        fits = v.page.evaluate(
            "() => { const pre = document.querySelector('.bd-article div.cell_output "
            "div.highlight pre'); const old = pre.textContent; pre.textContent = "
            "'x'.repeat(45); const ok = pre.scrollWidth <= pre.clientWidth; "
            "pre.textContent = old; return ok; }")
        assert fits, f"{page.name} at {PHONE} px: a printed line of 45 characters scrolls"
    finally:
        v.close()


def test_a_figure_opens_at_full_size_when_tapped(browser, site):
    """reader13: chapter 5's grids of heads show at under half their size on a phone, their
    labels unreadable. Each figure of a page is a link to its own image file, which a phone
    zooms; the theme's images (the Colab logo) are not."""
    page = next(p for p in CHAPTERS if p.name.endswith("05-multi-head"))
    v = Visit(browser, site, page.html, width=PHONE)
    try:
        links = v.page.evaluate(
            "() => [...document.querySelectorAll('.bd-article figure img')].map(i => "
            "[i.closest('a') && i.closest('a').href, i.currentSrc || i.src])")
        assert links and all(href == src for href, src in links), links
        assert v.page.evaluate("() => !document.querySelector('img[alt=\"Colab logo\"]')"
                               ".closest('a.qkv-figure-link')")
    finally:
        v.close()


@pytest.mark.parametrize("kind, dialog", [("primary", "pst-primary-sidebar-modal"),
                                          ("secondary", "pst-secondary-sidebar-modal")])
def test_the_sidebar_buttons_open_on_a_phone(browser, site, kind, dialog):
    """At a phone's width (PHONE) the buttons a reader sees open the chapter list and the page's
    contents (qkv.js: the themes wire a hidden copy of each button, pydata-sphinx-theme#2451)."""
    page = CHAPTERS[0]
    v = Visit(browser, site, page.html, width=PHONE)
    try:
        v.page.locator(f".{kind}-toggle:visible").first.click()
        v.page.wait_for_function(f"() => document.getElementById('{dialog}')?.open", timeout=5000)
        v.assert_clean(page.name)
    finally:
        v.close()


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_has_alt_text_that_says_what_it_shows(browser, site, page):
    v = Visit(browser, site, page.html)
    try:
        images = v.page.eval_on_selector_all(
            "article img", "els => els.map(e => ({src: e.getAttribute('src'), alt: e.getAttribute('alt') || ''}))"
        )
    finally:
        v.close()
    bad = [img for img in images
           if len(img["alt"].strip()) < 10 or re.search(r"\.(png|jpe?g|svg|gif)\b|_images/", img["alt"])]
    assert not bad, f"{page.name}: figures whose alt text is missing or a file name: {bad}"


def test_search_finds_softmax(visit, site):
    v = visit("search.html?q=softmax")
    v.page.wait_for_selector("#search-results .search-summary", timeout=20000)
    v.page.wait_for_function(
        "() => document.querySelector('#search-results .search-summary').textContent.includes('found')"
    )
    hits = v.page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
    pages = {urljoin(site, p.html) for p in PAGES}
    found = {h.split("?")[0].split("#")[0] for h in hits}
    assert found & pages, f"searching 'softmax' found no page of the book (hits: {hits})"
    v.assert_clean("search.html?q=softmax")


def test_chapter_5_draws_both_bertviz_views(visit):
    """head_view and model_view of the real model, drawn with every non-local request blocked."""
    name = "book/05-multi-head"
    v = visit(f"{name}.html")
    views = _check_bertviz(v, name)
    assert len(views) >= 2, f"{name}: expected the head_view and model_view, found {views}"
    v.assert_clean(name)
