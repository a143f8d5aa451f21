"""Browser test of the built site (run by `make test` after the quick book is built).

Opens the site in headless Chromium (Debian's package, driven by Playwright's Python API, which never downloads
a browser here), served over HTTP on localhost so that RequireJS and the widgets load as they would on the web.

* Every page of ``_toc.yml`` is crawled at a 1280 px wide window: no failed request (``requestfailed``, file
  URLs included), no response >= 400 (the browser's own favicon request aside), no console error, no uncaught
  page error, nothing fetched from outside the site; no code cell's input scrolls sideways; on a chapter the
  Colab bootstrap and setup cells render collapsed.
* The reading guide: a figure, the claims table, the static slider changes the frame, the widgets render.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
from _loader import load_module

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("BOOK_SITE", ROOT / "_build" / "quick" / "html"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 900  # the window the book is read in; code cells must fit its text column

build = load_module(ROOT / "book" / "build.py", "book_build_site", register=True)  # dataclasses look it up
TOC_PAGES = build.toc_entries()

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server():
    if not (SITE / "notebooks" / "00_reading_guide.html").exists():
        pytest.skip(f"no built site at {SITE}: run `make book` or `make test` first")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test output readable
            pass

    handler = functools.partial(Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium found (apt-get install chromium); .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield b
        b.close()


def test_every_toc_page_exists_and_the_index_links_the_guide():
    if not SITE.exists():
        pytest.skip(f"no built site at {SITE}")
    index = (SITE / "index.html").read_text()
    assert "00_reading_guide" in index or "book/intro" in index
    assert (SITE / "book" / "scoreboard.html").exists()


def test_reading_guide_page_works_in_a_browser(server, browser):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    watch = PageWatch(page, server)
    page.goto(f"{server}/notebooks/00_reading_guide.html", wait_until="load")
    page.wait_for_timeout(1500)
    assert watch.all() == [], watch.all()
    # a figure
    assert page.locator("img").count() >= 2
    # the claims table
    table = page.locator(".claims-record table").first
    assert table.is_visible() and "rope_learns_reversal" in page.locator(".claims-record").inner_text()
    # the static slider changes the frame
    slider = page.locator("input.anim-slider").first
    img = page.locator(".animation img").first
    slider.scroll_into_view_if_needed()
    before = img.get_attribute("src")
    n = int(slider.get_attribute("max"))
    assert n >= 1
    slider.evaluate("(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", n)
    page.wait_for_timeout(200)
    after = img.get_attribute("src")
    assert before and after and before != after, "moving the slider did not change the frame"
    # the widgets (progress bars) were rendered by the vendored widget manager, not left as raw JSON
    assert page.locator(".widget-progress, .jupyter-widgets").count() >= 1
    page.close()
    assert watch.all() == [], watch.all()


class PageWatch:
    """Everything that went wrong while a page loaded: failed requests, HTTP errors, console and page errors."""

    def __init__(self, page, server: str):
        self.problems: list[str] = []
        self.external: list[str] = []
        self.server = server
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("console", lambda m: self.problems.append(f"console error: {m.text} @ {m.location.get('url')}")
                if m.type == "error" else None)
        page.on("requestfailed", self._failed)
        page.on("response", lambda r: self.problems.append(f"HTTP {r.status}: {r.url}")
                if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)
        page.route("**/*", self._route)

    def _route(self, r) -> None:  # the site must not need the network: refuse anything not on localhost
        url = r.request.url
        if url.startswith(self.server) or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            self.external.append(url)
            r.abort()

    def _failed(self, req) -> None:
        if req.url in self.external:  # refused by _route, reported as external
            return
        self.problems.append(f"request failed ({req.failure}): {req.url}")

    def all(self) -> list[str]:
        return self.problems + [f"external request: {u}" for u in self.external]


# Measured in the page: code-cell inputs that scroll sideways, and how many columns a code cell shows.
MEASURE_JS = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });  // measure collapsed cells too
  const pres = [...document.querySelectorAll('div.cell_input pre, div.cell div.input pre')];
  const wide = pres.filter(p => p.scrollWidth > p.clientWidth + 1).map(p => ({
    scroll: p.scrollWidth, client: p.clientWidth,
    line: p.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '')}));
  let columns = null;
  if (pres.length) {
    const p = pres[0], s = document.createElement('span');
    s.textContent = '0'.repeat(200);
    p.appendChild(s);
    const cw = s.getBoundingClientRect().width / 200;
    s.remove();
    const cs = getComputedStyle(p);
    const inner = p.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    columns = Math.floor(inner / cw + 1e-6);
  }
  return {n: pres.length, wide: wide, columns: columns};
}"""

COLLAPSED_JS = """() => {
  const cells = [...document.querySelectorAll('div.cell')].filter(c => c.querySelector('div.cell_input'));
  return cells.slice(0, 6).map(c => ({
    tags: c.className,
    collapsed: !!c.querySelector('details.hide:not([open]) div.cell_input'),
    text: c.querySelector('div.cell_input').textContent.trim().slice(0, 60)}));
}"""


def test_every_page_loads_cleanly_and_code_fits(server, browser):
    """Every toc page: no failed load of any kind, no error; no code cell scrolls sideways at 1280 px."""
    assert TOC_PAGES and len([e for e in TOC_PAGES if e.startswith("notebooks/")]) >= 1
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    problems: dict[str, list[str]] = {}
    wide: dict[str, list] = {}
    columns: dict[str, int] = {}
    for entry in TOC_PAGES:
        page = ctx.new_page()
        watch = PageWatch(page, server)
        resp = page.goto(f"{server}/{entry}.html", wait_until="load")
        if resp is None or resp.status >= 400:
            watch.problems.append(f"the page itself: {resp and resp.status}")
        page.wait_for_timeout(1200)  # widgets, MathJax and fonts load after `load`
        m = page.evaluate(MEASURE_JS)
        if m["wide"]:
            wide[entry] = [(w["scroll"], w["client"], w["line"][:100]) for w in m["wide"]]
        if m["columns"]:
            columns[entry] = m["columns"]
        if watch.all():
            problems[entry] = watch.all()[:6]
        page.close()
    ctx.close()
    print(f"code cell width at {WIDTH} px: {min(columns.values(), default=None)} columns "
          f"(per page: {sorted(set(columns.values()))})")
    assert problems == {}, problems
    assert wide == {}, f"code cells that scroll sideways at {WIDTH} px: {wide}"
    assert columns and min(columns.values()) >= 88, f"code cells show fewer than 88 columns: {columns}"


def test_chapter_pages_show_bootstrap_and_setup_collapsed(server, browser):
    """The Colab bootstrap and setup cells are on the page, collapsed (the parameters cell stays open)."""
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    bad = {}
    for entry in [e for e in TOC_PAGES if e.startswith("notebooks/")]:
        page = ctx.new_page()
        page.goto(f"{server}/{entry}.html", wait_until="domcontentloaded")
        cells = page.evaluate(COLLAPSED_JS)
        boot = [c for c in cells if "google.colab" in c["text"] or "Colab bootstrap" in c["text"]]
        params = [c for c in cells if "tag_parameters" in c["tags"]]
        hidden = [c for c in cells if c["collapsed"]]
        if not boot or not all(c["collapsed"] for c in boot) or not params or params[0]["collapsed"]:
            bad[entry] = cells
        elif len(hidden) < 2:  # the bootstrap and the setup cell after the parameters
            bad[entry] = cells
        page.close()
    ctx.close()
    assert bad == {}, bad
