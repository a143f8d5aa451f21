"""JupyterLab in a real browser: a reader's `make lab`, run by a machine.

Starts JupyterLab from this interpreter (the project's venv) headless on 127.0.0.1, on a free port, with a random
token and a bounded lifetime, on a temporary folder that holds copies of the notebooks (the committed notebooks are
never opened here) laid out like the repository (``notebooks/``, ``data/``), so that the kernel runs with
``cwd=notebooks`` as in the book. Debian's Chromium, driven by Playwright's Python API (which never downloads a
browser here), opens a notebook, sets ``quick = True`` (in the copy, before opening), runs all cells, and checks:
no error output, the kernel is the venv's interpreter with this repository's ``helpers``, the live widget
(``plotting.live_controls`` → ``ipywidgets.interactive``) renders, and changing a control makes the kernel
recompute its output.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
LIFETIME_S = 420  # the server is killed after this, whatever happens to the test process
RUN_TIMEOUT_S = 150  # one notebook in quick mode, Run All to the last cell (2 loaded cores)
# the chapter with a heavier live control (three sliders, closed-form recomputation), fast in quick mode
CHAPTER = "18_transfer_regression"

pytestmark = pytest.mark.browser

# JavaScript run in the page: the state of the notebook in the main area (JupyterLab's own model, exposed by
# --LabApp.expose_app_in_browser).
NOTEBOOK_STATE = """(path) => {
  const app = window.jupyterapp;
  if (!app) return {ready: false, why: 'no app'};
  const panel = app.shell.currentWidget;
  if (!panel || !panel.context || panel.context.path !== path || !panel.sessionContext) {
    return {ready: false, why: 'notebook not open'};
  }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.filter((c) => c.model.type === 'code');
  const errors = [], stderr = [];
  let done = 0;
  for (const c of cells) {
    if (c.model.executionCount !== null) done += 1;
    for (const o of c.model.outputs.toJSON()) {
      if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue);
      if (o.output_type === 'stream' && o.name === 'stderr') stderr.push(String(o.text));
    }
  }
  return {ready: panel.sessionContext.isReady && !!kernel, status: kernel ? kernel.status : null,
          n: cells.length, done: done, errors: errors, stderr: stderr};
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_notebook(slug: str, dest: Path, extra_code: str) -> Path:
    """Copy ``notebooks/<slug>.ipynb`` to ``dest`` with ``quick = True`` and one extra code cell at the end."""
    nb = json.loads((NOTEBOOKS / f"{slug}.ipynb").read_text())
    params = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{slug}: expected one cell tagged parameters"
    src = "".join(params[0]["source"])
    assert "quick = False" in src, f"{slug}: the parameters cell does not set quick = False"
    params[0]["source"] = src.replace("quick = False", "quick = True", 1)
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "lab-test-probe", "metadata": {},
                        "outputs": [], "source": extra_code})
    path = dest / f"{slug}.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a temporary copy of the repository's layout; yields (base URL, token, folder)."""
    if CHROMIUM is None:
        pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium); .ci/run installs it")
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (it is pinned in requirements.txt)")
    pytest.importorskip("playwright.sync_api")
    tmp = tmp_path_factory.mktemp("lab")
    (tmp / "notebooks").mkdir()
    (tmp / "data").symlink_to(ROOT / "data", target_is_directory=True)
    # settings: render every cell (no windowing), so that the widget is in the page wherever it is
    settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), secrets.token_hex(24)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HELPERS_NO_FRONTEND", "MPLBACKEND", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH")}
    env.update(HELPERS_RESULTS_DIR=str(tmp / "results"), JUPYTER_CONFIG_DIR=str(tmp / "config"),
               JUPYTER_DATA_DIR=str(tmp / "share"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               IPYTHONDIR=str(tmp / "ipython"), HELPERS_THREADS=env.get("HELPERS_THREADS", "1"))
    # coreutils' timeout bounds the server's life even if this process is killed (the finally below cannot run)
    bound = ["timeout", "-k", "10", str(LIFETIME_S)] if shutil.which("timeout") else []
    cmd = [*bound, sys.executable, "-m", "jupyterlab", "--no-browser",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
           f"--ServerApp.root_dir={tmp}", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", f"--LabApp.user_settings_dir={tmp / 'settings'}",
           f"--LabApp.workspaces_dir={tmp / 'workspaces'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        cmd.append("--allow-root")
    log = open(tmp / "server.log", "w")  # noqa: SIM115 (closed in the finally)
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited ({proc.returncode}):\n{(tmp / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start in 60 s:\n{(tmp / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield base, token, tmp
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server stops its kernels on SIGTERM
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield b
        b.close()


def _run_all(browser, lab, slug: str):
    """Open the copy of ``slug`` in JupyterLab, Run All; return (page, final state, outputs of the probe cell)."""
    base, token, tmp = lab
    probe = ("import sys, helpers\n"
             "print('PROBE', sys.executable, '|', helpers.__file__)")
    _copy_notebook(slug, tmp / "notebooks", probe)
    rel = f"notebooks/{slug}.ipynb"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page_errors: list[str] = []
    external: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))

    def route(r):  # JupyterLab must not need the network: refuse anything not on this server
        if r.request.url.startswith(base) or r.request.url.startswith(("data:", "blob:")):
            return r.continue_()
        external.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    page.goto(f"{base}/lab/tree/{rel}?token={token}", wait_until="domcontentloaded")

    def state():
        return page.evaluate(NOTEBOOK_STATE, rel)

    deadline = time.monotonic() + 90
    while not ((s := state())["ready"] and s["status"] == "idle"):
        assert time.monotonic() < deadline, f"{slug}: the notebook or its kernel did not come up: {s}"
        page.wait_for_timeout(250)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        page.wait_for_timeout(500)
        s = state()
        assert s["errors"] == [], f"{slug}: error output in JupyterLab: {s['errors']}"
        if s["done"] == s["n"] and s["status"] == "idle":
            break
        assert time.monotonic() < deadline, f"{slug}: Run All did not finish in {RUN_TIMEOUT_S} s: {s}"
    tracebacks = [t for t in s["stderr"] if "Traceback" in t]
    assert tracebacks == [], f"{slug}: tracebacks on stderr: {tracebacks}"
    assert page_errors == [], f"{slug}: JavaScript errors in JupyterLab: {page_errors}"
    assert external == [], f"{slug}: JupyterLab reached for the network: {external}"
    probe_out = page.locator(".jp-CodeCell").last.locator(".jp-OutputArea-output").inner_text()
    return page, probe_out


def _check_kernel(probe_out: str) -> None:
    """The kernel is this interpreter (the venv's) and ``helpers`` is this repository's."""
    assert "PROBE" in probe_out, probe_out
    exe, mod = (x.strip() for x in probe_out.split("PROBE", 1)[1].split("|"))
    assert Path(exe).resolve() == Path(sys.executable).resolve(), (exe, sys.executable)
    assert Path(mod).resolve().is_relative_to(ROOT / "helpers"), mod


def _interact(page):
    """The one ``ipywidgets.interactive`` on the page (asserted unique and visible) and its output area."""
    widget = page.locator(".jp-OutputArea-output .widget-interact")
    assert widget.count() == 1, f"expected one live widget, found {widget.count()}"
    widget.scroll_into_view_if_needed()
    assert widget.is_visible()
    out = widget.locator(".widget-output, .jupyter-widgets-output-area").first
    return widget, out


def _wait_for_output(page, out, done, what: str) -> str:
    """Wait (20 s at most) until ``done(text of the widget's output)``; return that text."""
    deadline = time.monotonic() + 20
    while not done(text := out.inner_text()):
        assert time.monotonic() < deadline, f"{what} did not change the widget's output as expected: {text!r}"
        page.wait_for_timeout(200)
    return text


def test_reading_guide_runs_in_jupyterlab_and_its_live_widget_recomputes(lab, browser):
    page, probe = _run_all(browser, lab, "00_reading_guide")
    _check_kernel(probe)
    widget, out = _interact(page)
    box = widget.locator(".widget-text input").first
    assert box.is_visible(), "the digits text box is not shown"
    before = out.inner_text()
    assert "reversed" in before, f"the widget did not run its function: {before!r}"
    box.fill("")
    box.type("97531", delay=20)
    box.press("Enter")
    # the function prints the digits it was given: the kernel recomputed for the new text
    _wait_for_output(page, out, lambda t: "input    [9, 7, 5, 3, 1]" in t, "typing in the text box")
    page.close()


def test_chapter_with_sliders_runs_in_jupyterlab_and_its_sliders_recompute(lab, browser):
    page, probe = _run_all(browser, lab, CHAPTER)
    _check_kernel(probe)
    widget, out = _interact(page)
    sliders = widget.locator(".widget-slider")
    assert sliders.count() >= 2, f"expected the chapter's sliders, found {sliders.count()}"
    before = out.inner_text()
    assert "test error" in before, f"the widget did not run its function: {before!r}"
    # move the last slider (m, the number of models) with the keyboard, as a reader would
    handle = sliders.last.locator(".noUi-handle").first
    readout = sliders.last.locator(".widget-readout").first
    value = readout.inner_text()
    handle.focus()
    for _ in range(5):
        handle.press("ArrowRight")
    deadline = time.monotonic() + 10
    while readout.inner_text() == value:
        assert time.monotonic() < deadline, "the slider did not move"
        page.wait_for_timeout(100)
    _wait_for_output(page, out, lambda t: t != before and "test error" in t, "moving the slider")
    page.close()
