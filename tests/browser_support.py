"""What the browser tests share: Chromium (driven by playwright), a JupyterLab started the README's way, helpers.

The fixtures ``browser`` and ``lab`` are module-scoped and registered in ``conftest.py``: each browser test file gets
its own Chromium and its own JupyterLab, so the two files can run on two workers at once (about two and a half
minutes of browser work split in two halves instead of one tail at the end of the suite).

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` package (in requirements.txt;
it drives that Chromium, it downloads no browser). ``.ci/run`` installs Chromium and sets
``INFERLAB_REQUIRE_BROWSER=1``, which turns a missing browser into a failure instead of a skip.
Screenshots go to ``artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
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
       "then run `pytest tests/test_browser_lab.py tests/test_browser_views.py`.")


@contextlib.contextmanager
def failure_shot(page, name: str):
    """On a failure inside, a full-page screenshot ``<name>-failure.png`` for CI's artifacts; the error goes on."""
    try:
        yield
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"{name}-failure.png"), full_page=True)
        raise


def browser_or_skip():
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def readme_command(readme: str = "README.md") -> list[str]:
    """The arguments of ``jupyter lab`` in the README's command: how a learner starts the course."""
    line = next(x for x in (ROOT / readme).read_text(encoding="utf-8").splitlines() if "jupyter lab " in x)
    return shlex.split(line.split("jupyter lab ", 1)[1])


def install_module():
    """The course's install.py as a module (it is a script at the top of the course, not part of the library)."""
    import importlib.util

    if "course_install" not in sys.modules:
        spec = importlib.util.spec_from_file_location("course_install", ROOT / "install.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["course_install"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on localhost, started the README's way in a scratch copy of the course (running the notebooks
    must not edit ours): ``jupyter lab notebooks/00_start_here.ipynb`` serves ``notebooks/`` only, so every link
    and glossary must live there. Yields the URL, the token and the folder it serves."""
    browser_or_skip()
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    port, token = free_port(), "inferlab-test"
    # No "get Jupyter news?" toast over the screenshots, and no request for news or updates from the test's JupyterLab
    settings = root / "cfg" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    # install.py's Jupyter settings (views saved as text without their state, kernels shut down), written as it writes
    # them into the .venv, here into a scratch prefix this JupyterLab reads: tested even where install.py did not run
    prefix = root / "prefix"
    assert install_module().write_jupyter_settings(prefix)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "INFERLAB_MODEL": "bundled", "JUPYTER_CONFIG_DIR": str(root / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "JUPYTER_CONFIG_PATH": str(prefix / "etc" / "jupyter")}
    log = open(root / "lab.log", "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", *readme_command(), "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", f"--ServerApp.token={token}", "--ServerApp.password=",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.allow_root=True",
         f"--LabApp.app_settings_dir={prefix / 'share' / 'jupyter' / 'lab' / 'settings'}"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
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
        yield base, token, root / "notebooks"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_all(page, name: str, timeout_s: float = 240) -> None:
    """Run every cell of the open notebook ``name`` and wait until each code cell has an execution count.

    Counts are read from JupyterLab's cell models, not the prompts: a cell whose source is hidden shows none.
    """
    page.wait_for_function("() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60_000)
    # the notebook we opened is the current widget, and its kernel is ready
    page.wait_for_function(
        "(name) => { const w = window.jupyterapp.shell.currentWidget;"
        " return w && w.context && w.context.path.endsWith(name) && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel && w.sessionContext.session.kernel.status === 'idle'; }",
        arg=name, timeout=120_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_timeout(1000)
    page.wait_for_function(
        "() => { const cells = window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code' && c.model.sharedModel.getSource().trim());"
        " return cells.length > 0 && cells.every(c => c.model.executionCount != null); }",
        timeout=int(timeout_s * 1000))


def cut_off(page, selector: str) -> list[str]:
    """Elements matching ``selector`` whose content is wider than their box and hidden or scrolled, not shown."""
    return page.evaluate(
        "(sel) => [...document.querySelectorAll(sel)]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')"
        ".map(e => e.className + ': ' + (e.textContent || '').slice(0, 40))", selector)


# Figures whose title shares pixels with plotly's toolbar (the modebar, shown on hover at the top right).
TITLE_UNDER_TOOLBAR_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => {
  const m = p.querySelector('.modebar'), t = p.querySelector('.gtitle');
  if (!m || !t) return false;
  const a = m.getBoundingClientRect(), b = t.getBoundingClientRect();
  return a.width > 0 && b.width > 0 && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}).map(p => p.querySelector('.gtitle').textContent)"""


def offline_page(browser, path: Path, blocked: list[str], errors: list[str]):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)

    def block(route):
        blocked.append(route.request.url)
        route.abort()

    context.route(re.compile(r"^(https?|wss?)://"), block)  # the network is off: only file:// may load
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return context, page
