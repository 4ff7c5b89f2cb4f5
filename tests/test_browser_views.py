"""The interactive views, live in JupyterLab and stored in the offline HTML edition, in a real (headless) Chromium.

JupyterLab: notebook 03's lines and ablation views react, a self-check is answered, a long stream keeps its buttons
clickable, a long title stays clear of plotly's toolbar. The HTML edition (network off): figures are drawn, formulas
are rendered (MathML, no raw ``$...$``), every internal link resolves to a page (and anchor) in ``site/``, progress
bars are gone and interactive views show their stored figure with a note. Shared fixtures: ``browser_support.py``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from browser_support import (
    ARTIFACTS,
    ROOT,
    TITLE_UNDER_TOOLBAR_JS,
    browser_or_skip,
    cut_off,
    failure_shot,
    offline_page,
    run_all,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The offline HTML edition of every notebook (and the glossary), exported once for these tests."""
    from inferlab.tools.export_html import export
    from inferlab.tools.notebook_files import notebooks_in

    browser_or_skip()
    out = tmp_path_factory.mktemp("html") / "site"
    notebooks = notebooks_in(ROOT)  # both editions: notebooks/*.ipynb and notebooks/zh/*.ipynb
    pages = export(out, notebooks)
    assert len(pages) == len(notebooks) and any(p.startswith("zh/") for p, _ in pages)
    for page in ("index.html", "glossary.html", "zh/index.html", "zh/glossary.html"):
        assert (out / page).exists(), page
    return out, dict(pages)



def test_offline_html_edition_renders_figures(browser, site):
    out, pages = site
    # the page with the most figures, and notebook 09's (Gantt charts, a block map: the serving figures)
    for stem in sorted({max(pages, key=pages.get), "09_serving"}):
        n_figs = pages[stem]
        assert n_figs > 0, stem
        blocked, errors = [], []
        context, page = offline_page(browser, out / f"{stem}.html", blocked, errors)
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
    pages = sorted(out.rglob("*.html"))
    context, page = offline_page(browser, pages[0], blocked, errors)  # one tab, offline, visits every page
    for path in pages:
        name = path.relative_to(out).as_posix()  # e.g. "zh/01_tokens.html"
        page.goto(path.as_uri())
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
display(wa.ablation_view(lambda hs: heads.ablate(m, ids, hs), m.decode, m.info.n_layer, m.info.n_head,
                         start=(1, 0)))"""


# A figure whose two-line title runs to the right edge, where plotly's toolbar appears on hover (a title of two
# lines reaches up into the toolbar's band unless it starts below it).
LONG_TITLE = "A long title that runs to the right edge of its figure, where plotly's toolbar appears"
TITLE_CELL = f"""import plotly.graph_objects as go
from inferlab import viz
viz.setup_notebook()
fig = viz.base_layout(go.Figure(go.Bar(x=["a", "b"], y=[1, 2])), {LONG_TITLE!r} + "<br><sub>and a second line</sub>")
fig.update_layout(width=600)"""
# Notebook 09's SLO slider over a latency-throughput curve measured here, small (three arrival rates).
SLO_CELL = """from inferlab.measure import serve_runs as compare
from inferlab.widgets import serve as ws
sizes = compare.BenchSizes(max_batch=2, requests=4, prompt_tokens=(4, 8), new_tokens=(2, 6), load_seconds=0.5,
                           load_requests=(4, 6))
ws.slo_picker(compare.load_sweep(m, [2.0, 20.0, 200.0], sizes))"""
# More new tokens than the stream box shows at once: the box must scroll, not cover its own buttons.
STREAM_CELL = """from inferlab.widgets.streaming import streaming_view
streaming_view(m, "To be, or not to be,", max_new_tokens=480, stop_at_eos=False)"""


@pytest.fixture(scope="module")
def views_page(browser, lab):
    """One scratch notebook, run once in JupyterLab for the tests below (one kernel, not one each): notebook
    03's lines view and ablation view, notebook 00's self-check, 00's streaming view with a long answer, 09's SLO
    slider."""
    import nbformat

    base, token, served = lab
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(VIEWS_03_CELL),
                                         nbformat.v4.new_code_cell(SELF_CHECK_CELL),
                                         nbformat.v4.new_code_cell(STREAM_CELL),
                                         nbformat.v4.new_code_cell(TITLE_CELL),
                                         nbformat.v4.new_code_cell(SLO_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, served / "zz_views.ipynb")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.goto(f"{base}/lab/tree/zz_views.ipynb?reset&token={token}")  # reset: no other tabs
    try:
        run_all(page, "zz_views.ipynb", timeout_s=120)
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
    with failure_shot(page, "self_check"):
        question = page.locator(".inferlab-selfcheck-question").first
        question.wait_for(timeout=60_000)
        for choice, says in ((wrong, "Not this one."), (right, "Right.")):
            question.locator("label", has_text=choice.text).first.click()
            question.locator("button", has_text="Check").click()
            page.wait_for_function("([s]) => document.querySelector('.inferlab-selfcheck-question')"
                                   ".innerText.includes(s)", arg=[says], timeout=30_000)
            assert choice.why[:40] in question.inner_text()
        cut = cut_off(page, ".inferlab-selfcheck-question, .inferlab-selfcheck-question *")
        assert not cut, f"cut at 1280 px: {cut}"
        question.screenshot(path=str(ARTIFACTS / "self_check.png"))


def test_self_check_shows_its_answers_in_the_html_edition(browser, tmp_path):
    import nbformat
    from IPython.core.formatters import DisplayFormatter

    from inferlab.tools.export_html import export
    from inferlab.widgets.selfcheck import load_questions, self_check

    browser_or_skip()
    path = _self_check_notebook(tmp_path)  # stored as if executed: the cell's display output, made here
    nb = nbformat.read(path, as_version=4)
    data, _ = DisplayFormatter().format(self_check("00"))
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data=data)]
    nbformat.write(nb, path)
    export(tmp_path / "site", [path])
    blocked, errors = [], []
    context, page = offline_page(browser, tmp_path / "site" / f"{path.stem}.html", blocked, errors)
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
    with failure_shot(page, "views_03"):
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
        # every head: its long caption once made the view wider than the output (a horizontal scrollbar) and pushed
        # the heatmap below the lines (newcomer review, round three, defect 10)
        lines.locator(".inferlab-lines-head select").select_option(index=0)
        page.wait_for_function("() => /only weights/.test(document.querySelector('.inferlab-lines-svg').innerText)",
                               timeout=30_000)
        page.wait_for_timeout(500)  # the heatmap redraws after the lines
        widths = lines.evaluate("(e) => { const o = e.closest('.jp-OutputArea-output');"
                                " return [o.scrollWidth, o.clientWidth, e.scrollWidth, e.clientWidth]; }")
        assert widths[0] <= widths[1] + 1 and widths[2] <= widths[3] + 1, f"every head overflows: {widths}"
        svg_box = lines.locator(".inferlab-lines-svg svg").first.bounding_box()
        map_box = lines.locator(".js-plotly-plot").first.bounding_box()
        assert svg_box["x"] + svg_box["width"] <= map_box["x"] + 1 and abs(svg_box["y"] - map_box["y"]) < 160, (
            f"every head: the heatmap left the lines' side at 1280 px: lines {svg_box}, heatmap {map_box}")
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
        cut = cut_off(page, ".widget-label, .inferlab-lines-view *, .inferlab-ablation *")
        assert not cut, f"cut at 1280 px: {cut}"
        page.screenshot(path=str(ARTIFACTS / "views_03.png"), full_page=True)


def test_long_stream_leaves_its_buttons_clickable(views_page):
    """480 new tokens overflow the stream box: it scrolls, and Run again and Replay stay on top and clickable."""
    page = views_page
    with failure_shot(page, "stream_long"):
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


def test_the_slo_slider_answers_in_jupyterlab(views_page):
    """Notebook 09's SLO slider, live: moving it rewrites the sentence under it (which rate the SLO allows)."""
    page = views_page
    with failure_shot(page, "slo_slider"):
        slider = page.locator(".inferlab-slo .noUi-handle").first
        slider.wait_for(timeout=60_000)
        before = page.locator(".inferlab-slo-note").first.inner_text()
        slider.scroll_into_view_if_needed()
        slider.focus()
        for _ in range(40):  # a hundred steps span the slider's range
            page.keyboard.press("ArrowLeft")
        page.wait_for_function("(b) => document.querySelector('.inferlab-slo-note').innerText !== b", arg=before,
                               timeout=30_000)
        assert "ms" in page.locator(".inferlab-slo-note").first.inner_text()
        page.locator(".inferlab-slo").first.screenshot(path=str(ARTIFACTS / "slo_slider.png"))
