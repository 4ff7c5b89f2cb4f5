"""A real JupyterLab in a real (headless) Chromium, and the offline HTML edition with the network off.

JupyterLab: notebook 00 runs and its slider works; a self-check is answered. The HTML edition: figures are
drawn, formulas are rendered (MathML, no raw ``$...$``), every internal link resolves to a page (and anchor)
in ``site/``, progress bars are gone and interactive views show their stored figure with a note.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` package (in requirements.txt;
it drives that Chromium, it downloads no browser). ``.ci/run`` installs Chromium and sets
``INFERLAB_REQUIRE_BROWSER=1``, which turns a missing browser into a failure instead of a skip.
Screenshots go to ``artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
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


@contextlib.contextmanager
def _failure_shot(page, name: str):
    """On a failure inside, a full-page screenshot ``<name>-failure.png`` for CI's artifacts; the error goes on."""
    try:
        yield
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"{name}-failure.png"), full_page=True)
        raise


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


def readme_command(readme: str = "README.md") -> list[str]:
    """The arguments of ``jupyter lab`` in the README's command: how a learner starts the course."""
    line = next(x for x in (ROOT / readme).read_text(encoding="utf-8").splitlines() if "jupyter lab " in x)
    return shlex.split(line.split("jupyter lab ", 1)[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on localhost, started the README's way in a scratch copy of the course (running the notebooks
    must not edit ours): ``jupyter lab notebooks/00_start_here.ipynb`` serves ``notebooks/`` only, so every link
    and glossary must live there. Yields the URL, the token and the folder it serves."""
    _browser_or_skip()
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    port, token = _free_port(), "inferlab-test"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "INFERLAB_MODEL": "bundled", "JUPYTER_CONFIG_DIR": str(root / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    log = open(root / "lab.log", "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", *readme_command(), "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", f"--ServerApp.token={token}", "--ServerApp.password=",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.allow_root=True"],
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


def _run_all(page, name: str, timeout_s: float = 240) -> None:
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


def _relative_links(notebook: Path) -> list[str]:
    """The relative link targets (anchors dropped) in the Markdown cells of ``notebook``."""
    import nbformat

    cells = [c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "markdown"]
    hrefs = [m.group(1) for text in cells for m in re.finditer(r"\]\(([^)\s#]+)[^)]*\)", text)]
    return sorted({h for h in hrefs if not re.match(r"^[a-z][a-z0-9+.-]*:", h)})


def _served(base: str, token: str, path: str) -> bool:
    """True if the running server has ``path`` (relative to the folder it serves)."""
    if path.startswith("../"):
        return False
    try:
        with urllib.request.urlopen(f"{base}/api/contents/{urllib.parse.quote(path)}?content=0&token={token}"):
            return True
    except OSError:
        return False


def _cut(page, selector: str) -> list[str]:
    """Elements matching ``selector`` whose content is wider than their box and hidden or scrolled, not shown."""
    return page.evaluate(
        "(sel) => [...document.querySelectorAll(sel)]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')"
        ".map(e => e.className + ': ' + (e.textContent || '').slice(0, 40))", selector)


# Draws a CJK character and a private-use code point (no font has it: it is drawn as the missing-glyph box)
# on a canvas in the page's UI font; equal pixels mean Chinese text would show as boxes too.
GLYPH_JS = """(text) => {
  const draw = (s) => { const c = document.createElement('canvas'); c.width = 64; c.height = 64;
    const g = c.getContext('2d'); g.font = '40px ' + getComputedStyle(document.body).fontFamily + ', sans-serif';
    g.fillText(s, 4, 48); return Array.from(g.getImageData(0, 0, 64, 64).data).join(','); };
  const boxes = [draw('\\uE000'), draw('\\uE001')];
  return [...text].every(ch => !boxes.includes(draw(ch)));
}"""
CJK = re.compile(r"[\u4e00-\u9fff]")
# Figures whose title shares pixels with plotly's toolbar (the modebar, shown on hover at the top right).
TITLE_UNDER_TOOLBAR_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => {
  const m = p.querySelector('.modebar'), t = p.querySelector('.gtitle');
  if (!m || !t) return false;
  const a = m.getBoundingClientRect(), b = t.getBoundingClientRect();
  return a.width > 0 && b.width > 0 && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}).map(p => p.querySelector('.gtitle').textContent)"""


@pytest.mark.parametrize("name", ["00_start_here.ipynb", "zh/00_start_here.ipynb"], ids=["en", "zh"])
def test_jupyterlab_runs_the_start_notebook(browser, lab, name):
    base, token, _ = lab
    shot = name.replace("/", "-").removesuffix(".ipynb")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})  # a laptop's width
    page = context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(str(e)))
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")  # reset: no other tabs
    try:
        # Every relative link of this notebook opens from the folder the README's command serves.
        dead = [href for href in _relative_links(lab[2] / name)
                if not _served(base, token, posixpath.normpath(posixpath.join(posixpath.dirname(name), href)))]
        assert not dead, f"links that are a 404 when started the README's way: {dead}"
        _run_all(page, name)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        n_figures = page.locator(".js-plotly-plot").count()
        assert n_figures >= 2, f"only {n_figures} plotly figures rendered"
        page.wait_for_timeout(500)
        covered = page.evaluate(TITLE_UNDER_TOOLBAR_JS)
        assert not covered, f"plotly's toolbar covers these titles: {covered}"
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
        # Nothing is cut at a laptop's width: no widget label ends in "…", nothing in the peek view scrolls sideways.
        cut = _cut(page, ".widget-label, .inferlab-peek-box, .inferlab-peek-box *")
        assert not cut, f"cut at 1280 px: {cut}"
        page.locator(".inferlab-peek-box").first.screenshot(path=str(ARTIFACTS / f"{shot}-peek.png"))
        if name.startswith("zh/"):  # the Chinese edition: Chinese labels, drawn as characters, not boxes
            texts = "(sel) => [...document.querySelectorAll(sel)].map(e => e.textContent || '').join(' ')"
            titles = page.evaluate(texts, ".js-plotly-plot .gtitle, .js-plotly-plot .xtitle")  # SVG text: no innerText
            labels = page.evaluate(texts, ".widget-label, .widget-button, .jp-RenderedHTMLCommon h1")
            assert CJK.search(titles), f"figure titles are not Chinese: {titles[:200]}"
            assert CJK.search(labels), f"widget labels and headings are not Chinese: {labels[:200]}"
            assert page.evaluate(GLYPH_JS, "首字延迟"), "Chinese text renders as boxes: install a CJK font"
        page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"{shot}-failure.png"), full_page=True)
        raise
    finally:
        context.close()
    noise = ("favicon", "/api/ai", "jupyterlab-plotly")  # no such thing seen so far; keep the list short
    real = [e for e in console_errors if not any(n in e for n in noise)]
    assert not real, f"browser console errors: {real}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The offline HTML edition of every notebook (and the glossary), exported once for these tests."""
    from inferlab.tools.export_html import export
    from inferlab.tools.notebook_tools import notebooks_in

    _browser_or_skip()
    out = tmp_path_factory.mktemp("html") / "site"
    notebooks = notebooks_in(ROOT)  # both editions: notebooks/*.ipynb and notebooks/zh/*.ipynb
    pages = export(out, notebooks)
    assert len(pages) == len(notebooks) and any(p.startswith("zh/") for p, _ in pages)
    for page in ("index.html", "glossary.html", "zh/index.html", "zh/glossary.html"):
        assert (out / page).exists(), page
    return out, dict(pages)


def _offline_page(browser, path: Path, blocked: list[str], errors: list[str]):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)

    def block(route):
        blocked.append(route.request.url)
        route.abort()

    context.route(re.compile(r"^(https?|wss?)://"), block)  # the network is off: only file:// may load
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return context, page


def test_offline_html_edition_renders_figures(browser, site):
    out, pages = site
    # the page with the most figures, and notebook 09's (Gantt charts, a block map: the serving figures)
    for stem in sorted({max(pages, key=pages.get), "09_serving"}):
        n_figs = pages[stem]
        assert n_figs > 0, stem
        blocked, errors = [], []
        context, page = _offline_page(browser, out / f"{stem}.html", blocked, errors)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        drawn = page.locator(".js-plotly-plot").count()
        page.screenshot(path=str(ARTIFACTS / f"html-{stem}.png"))
        context.close()
        assert drawn == n_figs, f"{drawn} of {n_figs} figures drawn in {stem}.html"
        assert not errors, errors
        assert not blocked, f"the page asked the network for {blocked}"


RAW_MATH = re.compile(r"\$[^$\s][^$\n]*\$")
LINKS_JS = """() => [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))
                 .filter(h => !/^(https?:|mailto:|#)/.test(h))"""


def test_offline_html_math_links_and_widgets(browser, site, tmp_path):
    # Figures are tested above; here a stub Plotly keeps 11 pages quick to load (the DOM is the same).
    out = tmp_path / "site"
    shutil.copytree(site[0], out)
    (out / "plotly.min.js").write_text("window.Plotly = {newPlot: function () {}};")
    blocked, errors, broken, raw, notes = [], [], [], [], {}
    ids: dict[str, set[str]] = {}
    links: list[tuple[str, str]] = []
    for path in sorted(out.rglob("*.html")):
        name = path.relative_to(out).as_posix()  # e.g. "zh/01_tokens.html"
        context, page = _offline_page(browser, path, blocked, errors)
        page.wait_for_load_state("load")
        prose = page.evaluate("() => [...document.querySelectorAll('.jp-MarkdownOutput, .jp-RenderedMarkdown')]"
                              ".map(e => e.innerText).join('\\n')")
        raw += [f"{name}: {m.group(0)}" for m in RAW_MATH.finditer(prose)]
        ids[name] = set(page.evaluate("() => [...document.querySelectorAll('[id],[name]')]"
                                      ".map(e => e.id || e.getAttribute('name'))"))
        links += [(name, h) for h in page.evaluate(LINKS_JS)]
        math = page.locator("math")
        if path.stem in ("06_sampling", "glossary"):  # both hold formulas: drawn as MathML, with a size
            assert math.count() > 0, f"no formula rendered in {name}"
            box = math.first.bounding_box()
            assert box and box["width"] > 0 and box["height"] > 0, f"formula in {name} has no size"
        notes[name.removesuffix(".html")] = page.evaluate(
            "() => [...document.querySelectorAll('.inferlab-widget-note')].map(n => ["
            " n.innerText, n.parentElement.querySelectorAll('.plotly-graph-div').length])")
        body = page.inner_text("body")
        assert "IntProgress(" not in body and "FloatProgress(" not in body, name
        if name == "06_sampling.html":
            math.first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "html-06_sampling-math.png"))
        if name == "zh/index.html":  # the language switch, both ways
            assert page.locator("a[href='../index.html']").count() == 1
        if name == "index.html":
            assert page.locator("a[href='zh/index.html']").count() == 1
        context.close()
    for page_name, href in links:
        target, _, anchor = href.partition("#")
        target_file = (out / page_name).parent / target if target else out / page_name
        target_name = target_file.resolve().relative_to(out.resolve()).as_posix() if target_file.exists() else None
        if not target_file.is_file():
            broken.append(f"{page_name}: {href} (no such file in site/)")
        elif anchor and target_file.suffix == ".html" and anchor not in ids.get(target_name, set()):
            broken.append(f"{page_name}: {href} (no such anchor)")
    assert not raw, f"raw TeX left on the pages: {raw[:5]}"
    assert not broken, broken
    for lang in ("", "zh/"):
        assert notes[f"{lang}04_prefill_and_decode"] == [], "04 has only progress bars: they must disappear"
        with_figure = [n for n in notes[f"{lang}03_attention"] if ("Below:" in n[0] or "下面是" in n[0])]
        assert with_figure and all(n[1] > 0 for n in with_figure), f"{lang}03's explorer note without its figure"
    assert not errors, errors
    assert not blocked, f"the pages asked the network for {blocked}"


SELF_CHECK_CELL = "from inferlab.widgets.selfcheck import self_check\nself_check(\"00\")"


def _self_check_notebook(folder: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Self-check"),
                                         nbformat.v4.new_code_cell(SELF_CHECK_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "zz_self_check.ipynb"
    nbformat.write(nb, path)
    return path


VIEWS_03_CELL = """import inferlab as il
from inferlab import attention as A, heads
from inferlab.widgets import attention as wa
m = il.load("bundled", verbose=False)
ids = m.encode("ROMEO. My lord, my lord, what say you?")
pat = A.record_patterns(m, ids)
display(wa.lines_view(pat))
display(wa.ablation_view(lambda hs: heads.ablate(m, ids, hs), lambda i: m.decode([i]), m.info.n_layer,
                         m.info.n_head, start=(1, 0)))"""


# A figure whose two-line title runs to the right edge, where plotly's toolbar appears on hover (a title of two
# lines reaches up into the toolbar's band unless it starts below it).
LONG_TITLE = "A long title that runs to the right edge of its figure, where plotly's toolbar appears"
TITLE_CELL = f"""import plotly.graph_objects as go
from inferlab import viz
viz.setup_notebook()
fig = viz.base_layout(go.Figure(go.Bar(x=["a", "b"], y=[1, 2])), {LONG_TITLE!r} + "<br><sub>and a second line</sub>")
fig.update_layout(width=600)"""
# More new tokens than the stream box shows at once: the box must scroll, not cover its own buttons.
STREAM_CELL = """from inferlab.widgets.streaming import streaming_view
streaming_view(m, "To be, or not to be,", max_new_tokens=480, stop_at_eos=False)"""


@pytest.fixture(scope="module")
def views_page(browser, lab):
    """One scratch notebook, run once in JupyterLab for the tests below (one kernel, not one each): notebook
    03's lines view and ablation view, notebook 00's self-check, and 00's streaming view with a long answer."""
    import nbformat

    base, token, served = lab
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(VIEWS_03_CELL),
                                         nbformat.v4.new_code_cell(SELF_CHECK_CELL),
                                         nbformat.v4.new_code_cell(STREAM_CELL),
                                         nbformat.v4.new_code_cell(TITLE_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, served / "zz_views.ipynb")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.goto(f"{base}/lab/tree/zz_views.ipynb?reset&token={token}")  # reset: no other tabs
    try:
        _run_all(page, "zz_views.ipynb", timeout_s=120)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "views-failure.png"), full_page=True)
        context.close()
        raise
    yield page
    context.close()


def test_self_check_answered_in_jupyterlab(views_page):
    """Answer notebook 00's first question wrongly, then rightly; each choice's explanation appears."""
    from inferlab.widgets.selfcheck import load_questions

    page = views_page
    first = load_questions("00")[0]
    wrong = next(c for c in first.choices if not c.correct)
    right = next(c for c in first.choices if c.correct)
    with _failure_shot(page, "self_check"):
        question = page.locator(".inferlab-selfcheck-question").first
        question.wait_for(timeout=60_000)
        for choice, says in ((wrong, "Not this one."), (right, "Right.")):
            question.locator("label", has_text=choice.text).first.click()
            question.locator("button", has_text="Check").click()
            page.wait_for_function("([s]) => document.querySelector('.inferlab-selfcheck-question')"
                                   ".innerText.includes(s)", arg=[says], timeout=30_000)
            assert choice.why[:40] in question.inner_text()
        cut = _cut(page, ".inferlab-selfcheck-question, .inferlab-selfcheck-question *")
        assert not cut, f"cut at 1280 px: {cut}"
        question.screenshot(path=str(ARTIFACTS / "self_check.png"))


def test_self_check_shows_its_answers_in_the_html_edition(browser, tmp_path):
    import nbformat
    from IPython.core.formatters import DisplayFormatter

    from inferlab.tools.export_html import export
    from inferlab.widgets.selfcheck import load_questions, self_check

    _browser_or_skip()
    path = _self_check_notebook(tmp_path)  # stored as if executed: the cell's display output, made here
    nb = nbformat.read(path, as_version=4)
    data, _ = DisplayFormatter().format(self_check("00"))
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data=data)]
    nbformat.write(nb, path)
    export(tmp_path / "site", [path])
    blocked, errors = [], []
    context, page = _offline_page(browser, tmp_path / "site" / f"{path.stem}.html", blocked, errors)
    details = page.locator(".inferlab-selfcheck details")
    assert details.count() == len(load_questions("00"))
    assert not page.get_by_text("open this notebook in JupyterLab").count()  # the questions, not a placeholder
    details.first.locator("summary").click()
    answer = next(c for c in load_questions("00")[0].choices if c.correct)
    assert answer.why[:40] in details.first.inner_text()
    context.close()
    assert not errors and not blocked, (errors, blocked)


def test_lines_view_and_ablation_in_jupyterlab(views_page):
    """Notebook 03's two new views, live: the lines view redraws for another head, the ablation readout changes
    when another head is switched off. (A scratch notebook with just those cells keeps the suite short.)"""
    page = views_page
    with _failure_shot(page, "views_03"):
        lines = page.locator(".inferlab-lines-view").first
        lines.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=60_000)

        def drawn() -> str:  # the lines figure's SVG paths: widths and positions
            return lines.locator(".js-plotly-plot").first.inner_html()

        # at 1280 px the lines and the heatmap sit side by side
        svg_box = lines.locator(".inferlab-lines-svg svg").first.bounding_box()
        map_box = lines.locator(".js-plotly-plot").first.bounding_box()
        assert svg_box["x"] + svg_box["width"] <= map_box["x"] + 1 and abs(svg_box["y"] - map_box["y"]) < 120, (
            f"not side by side at 1280 px: lines {svg_box}, heatmap {map_box}")
        # BertViz's hover: pointing at a token keeps its own lines lit and dims the others
        token = lines.locator(".inferlab-lines-svg text[class^='lq']").last
        n = token.get_attribute("class").removeprefix("lq")
        token.hover()
        opacity = ("(sel) => [...document.querySelectorAll(sel)].map(e => getComputedStyle(e).strokeOpacity)")
        own = page.evaluate(opacity, f".inferlab-lines-svg line.q{n}")
        others = page.evaluate(opacity, f".inferlab-lines-svg line:not(.q{n})")
        assert own and others and set(own) == {"0.75"} and set(others) == {"0.06"}, (own[:3], others[:3])
        page.mouse.move(0, 0)
        before = drawn()
        lines.locator(".inferlab-lines-head select").select_option(index=2)  # "head 1" instead of head 0
        page.wait_for_function("([sel, old]) => { const f = document.querySelector(sel);"
                               " return f && f.innerHTML !== old; }",
                               arg=[".inferlab-lines-view .js-plotly-plot", before], timeout=30_000)
        ablation = page.locator(".inferlab-ablation").first
        result = ablation.locator(".inferlab-ablation-result").first
        result.wait_for(timeout=60_000)
        page.wait_for_function("() => /nats\\/token/.test(document.querySelector('.inferlab-ablation-result')"
                               ".innerText)", timeout=60_000)
        first = result.inner_text()
        ablation.locator(".inferlab-ablation-head select").select_option(index=0)  # every head of the layer
        page.wait_for_function("([old]) => document.querySelector('.inferlab-ablation-result').innerText !== old",
                               arg=[first], timeout=60_000)
        assert "nats/token" in result.inner_text() and "KL" in result.inner_text()
        cut = _cut(page, ".widget-label, .inferlab-lines-view *, .inferlab-ablation *")
        assert not cut, f"cut at 1280 px: {cut}"
        page.screenshot(path=str(ARTIFACTS / "views_03.png"), full_page=True)


def test_long_stream_leaves_its_buttons_clickable(views_page):
    """480 new tokens overflow the stream box: it scrolls, and Run again and Replay stay on top and clickable."""
    page = views_page
    with _failure_shot(page, "stream_long"):
        readout = page.locator(".inferlab-stream-readout").first
        readout.wait_for(timeout=60_000)
        done = "() => /done/.test(document.querySelector('.inferlab-stream-readout').innerText)"
        page.wait_for_function(done, timeout=120_000)
        for button in (".inferlab-stream-run", ".inferlab-stream-replay"):
            hit = page.locator(button).first.evaluate(
                "(b) => { b.scrollIntoView({block: 'center'}); const r = b.getBoundingClientRect();"
                " const e = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);"
                " return b.contains(e); }")
            assert hit, f"{button} is covered by something else"
        box = page.locator(".inferlab-stream-text").first
        sizes = box.evaluate("(e) => [e.scrollHeight, e.clientHeight, getComputedStyle(e).overflowY]")
        assert sizes[0] > sizes[1] and sizes[2] == "auto", f"the long answer does not scroll in its box: {sizes}"
        before = readout.inner_text()
        page.locator(".inferlab-stream-run").first.click(timeout=10_000)  # fails if another element takes the click
        page.wait_for_function("(old) => { const t = document.querySelector('.inferlab-stream-readout').innerText;"
                               " return t !== old && /done/.test(t); }", arg=before, timeout=120_000)
        page.screenshot(path=str(ARTIFACTS / "stream_long.png"), full_page=True)


def test_a_long_title_stays_clear_of_plotlys_toolbar(views_page):
    page = views_page
    plot = page.locator(".js-plotly-plot").filter(has=page.locator(".gtitle", has_text=LONG_TITLE[:30])).first
    plot.wait_for(timeout=60_000)
    plot.scroll_into_view_if_needed()
    plot.hover()  # the toolbar shows on hover
    page.wait_for_timeout(500)
    covered = page.evaluate(TITLE_UNDER_TOOLBAR_JS)
    assert not covered, f"plotly's toolbar covers these titles: {covered}"


# ----------------------------------------------------------------------------- opening and saving changes nothing
# Opening and saving a notebook in JupyterLab changes no byte of it (issue 29, item 3). JupyterLab rewrites a
# notebook it opens when the stored kernelspec is not the kernel it starts, and saves numbers through JavaScript
# (``1.0`` comes back as ``1``); either marks a tracked notebook modified and stops ``git pull``.
# ``notebook_tools tidy`` (and ``execute``) store notebooks as JupyterLab saves them. Here the same JupyterLab opens
# notebook 00 as tidied (it stays clean, and a save leaves it byte for byte the same) and with an older kernel name.
# the lab fixture exposes the app (LabApp.expose_app_in_browser): the open notebook's kernel, connected and idle
KERNEL_READY = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }"""


def _open_and_save(browser, lab, name: str, wait_for_edit: bool = False) -> bool:
    """Open ``name`` (in the served notebooks/) in JupyterLab, wait for its kernel; True if JupyterLab marked it edited.
    Then save."""
    base, token, _ = lab
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{base}/lab/tree/{name}?token={token}")
        page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=120_000)
        page.wait_for_function(KERNEL_READY, timeout=120_000)
        page.wait_for_timeout(1500)  # the kernel's spec and info have reached the notebook's metadata
        dirty = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"
        if wait_for_edit:  # on a busy machine the kernel's name can reach the metadata seconds later
            try:
                page.wait_for_function(dirty, timeout=20_000)
            except Exception:
                pass
        edited = page.evaluate(dirty)
        page.keyboard.press("Control+s")
        page.wait_for_timeout(2000)
        return edited
    finally:
        page.close()


def test_a_tidied_notebook_survives_opening_and_saving_unchanged(browser, lab):
    from inferlab.tools import notebook_tools

    _, _, folder = lab  # the folder JupyterLab serves (notebooks/, started the README's way)
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", folder / "tidied.ipynb")
    assert notebook_tools.tidy(folder / "tidied.ipynb") in (True, False)
    assert notebook_tools.tidy(folder / "tidied.ipynb") is False  # tidy is stable
    assert notebook_tools.problems(folder / "tidied.ipynb", working_tree=True) == []  # still executed and fresh
    before = (folder / "tidied.ipynb").read_bytes()
    assert _open_and_save(browser, lab, "tidied.ipynb") is False
    assert (folder / "tidied.ipynb").read_bytes() == before
    # the same notebook stored as JupyterLab 4 does not write it ("Python 3", an older name): seen as edited
    nb = json.loads(before)
    nb["metadata"]["kernelspec"]["display_name"] = "Python 3"
    (folder / "old_kernelspec.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _open_and_save(browser, lab, "old_kernelspec.ipynb", wait_for_edit=True) is True
