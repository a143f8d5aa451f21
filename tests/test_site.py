"""Browser test of the built site (run by `make test` after the quick book is built).

Opens the page of ``00_reading_guide`` in headless Chromium (Debian's package, driven by Playwright's Python API,
which never downloads a browser here): no JavaScript errors, a figure, the claims table, and the static slider
changes the frame shown. Serves the site over HTTP on localhost so that RequireJS and the widgets load as they
would on the web.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("BOOK_SITE", ROOT / "_build" / "quick" / "html"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

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
    page = browser.new_page()
    errors: list[str] = []
    external: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # resource failures are checked by URL below (the browser's own favicon request is the one allowed 404)
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url)
            if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)

    def route(r):  # the site must not need the network: refuse anything not on localhost
        if r.request.url.startswith(server) or r.request.url.startswith("data:"):
            return r.continue_()
        external.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    page.goto(f"{server}/notebooks/00_reading_guide.html", wait_until="load")
    page.wait_for_timeout(1500)
    assert errors == [], f"JavaScript errors: {errors}; external requests: {external}"
    assert missing == [], f"files the page asked for and the site lacks: {missing}"
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
    assert external == [], f"the page reached for the network: {external}"


def test_every_chapter_page_loads_without_javascript_errors(server, browser):
    """Widgets, maths and sliders together on every chapter page: no uncaught error, nothing fetched from outside."""
    pages = sorted((SITE / "notebooks").glob("*.html"))
    assert pages
    problems = {}
    for path in pages:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.route("**/*", lambda r, errors=errors: r.continue_() if r.request.url.startswith(server)
                   or r.request.url.startswith("data:") else (errors.append(f"network: {r.request.url}"), r.abort()))
        page.goto(f"{server}/notebooks/{path.name}", wait_until="load")
        page.wait_for_timeout(1500)
        if errors:
            problems[path.stem] = errors[:3]
        page.close()
    assert problems == {}, problems
