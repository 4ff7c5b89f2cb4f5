"""A real JupyterLab in a real (headless) Chromium, and the offline HTML edition with the network off.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` package (in requirements.txt;
it drives that Chromium, it downloads no browser). ``.ci/run`` installs Chromium and sets
``INFERLAB_REQUIRE_BROWSER=1``, which turns a missing browser into a failure instead of a skip.
Screenshots go to ``artifacts/browser/``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
HOW = ("Install Debian's Chromium (`sudo apt-get install chromium`) and `pip install -r requirements.txt`, "
       "then run `pytest tests/test_browser.py`.")


def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError:
        missing = "the playwright package"
    else:
        missing = None if CHROMIUM else "a chromium executable"
    if missing:
        if os.environ.get("INFERLAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test is mandatory here but {missing} is missing. {HOW}")
        pytest.skip(f"browser test skipped: {missing} is missing. {HOW}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on localhost, serving a scratch copy of the notebooks (running them must not edit ours)."""
    _browser_or_skip()
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    port, token = _free_port(), "inferlab-test"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "INFERLAB_MODEL": "bundled", "JUPYTER_CONFIG_DIR": str(root / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    log = open(root / "lab.log", "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.allow_root=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError((root / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _run_all(page, timeout_s: float = 240) -> None:
    page.wait_for_function("() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60_000)
    page.wait_for_function(
        "() => { const s = document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-Toolbar-kernelStatus');"
        " return document.querySelectorAll('.jp-CodeCell').length > 0; }", timeout=60_000)
    # wait for the kernel to be ready, then run every cell
    page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
        " && w.sessionContext.session.kernel.status === 'idle'; }", timeout=120_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_timeout(1000)
    page.wait_for_function(
        "() => { const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];"
        " return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent)); }",
        timeout=int(timeout_s * 1000))


def test_jupyterlab_runs_the_start_notebook(browser, lab):
    base, token = lab
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(str(e)))
    page.goto(f"{base}/lab/tree/notebooks/00_start_here.ipynb?token={token}")
    try:
        _run_all(page)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        n_figures = page.locator(".js-plotly-plot").count()
        assert n_figures >= 2, f"only {n_figures} plotly figures rendered"
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        tracebacks = [t for t in errors.all_inner_texts() if re.search(r"Traceback|Error", t)]
        assert not tracebacks, tracebacks
        # A widget control that works: move the first slider, the view next to it must change.
        slider = page.locator(".inferlab-peek-box .widget-slider .noUi-handle").first
        slider.wait_for(timeout=30_000)
        view = page.locator(".inferlab-peek").first
        before = view.inner_text()
        slider.scroll_into_view_if_needed()
        slider.focus()
        for _ in range(5):
            page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "(b) => { const v = document.querySelector('.inferlab-peek'); return v && v.innerText !== b; }",
            arg=before, timeout=30_000)
        assert view.inner_text() != before
        page.screenshot(path=str(ARTIFACTS / "00_start_here.png"), full_page=True)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "00_start_here-failure.png"), full_page=True)
        raise
    finally:
        context.close()
    noise = ("favicon", "/api/ai", "jupyterlab-plotly")  # no such thing seen so far; keep the list short
    real = [e for e in console_errors if not any(n in e for n in noise)]
    assert not real, f"browser console errors: {real}"


def test_offline_html_edition_renders_figures(browser, tmp_path):
    from inferlab.tools.export_html import export

    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    pages = export(tmp_path / "site", notebooks)
    assert (tmp_path / "site" / "index.html").exists() and len(pages) == len(notebooks)
    stem, n_figs = max(pages, key=lambda p: p[1])
    assert n_figs > 0
    context = browser.new_context(viewport={"width": 1300, "height": 900}, offline=True)
    blocked: list[str] = []

    def block(route):
        blocked.append(route.request.url)
        route.abort()

    context.route(re.compile(r"^(https?|wss?)://"), block)  # the network is off: only file:// may load
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((tmp_path / "site" / f"{stem}.html").as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    drawn = page.locator(".js-plotly-plot").count()
    page.screenshot(path=str(ARTIFACTS / f"html-{stem}.png"))
    context.close()
    assert drawn == n_figs, f"{drawn} of {n_figs} figures drawn in {stem}.html"
    assert not errors, errors
