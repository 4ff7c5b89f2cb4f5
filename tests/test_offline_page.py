"""The offline HTML edition's page fixes, without a browser: math as MathML, links to pages, widgets as static views.

The browser tests (tests/test_browser_views.py) check the same on the real pages in Chromium with the network off.
"""

from __future__ import annotations

import nbformat

from inferlab.tools import export_html
from inferlab.tools.offline_page import (
    WIDGET_STATE_MIME,
    is_progress_bar,
    math_to_mathml,
    rewrite_links,
    static_view,
    strip_cdn_scripts,
)

WIDGET = "application/vnd.jupyter.widget-view+json"
PLOTLY = "application/vnd.plotly.v1+json"


def test_math_becomes_mathml_outside_code_only():
    out = math_to_mathml("Divide: $p_i \\propto e^{z_i / T}$, then $$\\sum_i p_i = 1$$ but `echo $HOME` stays.")
    assert out.count("<math") == 2 and 'display="block"' in out and 'display="inline"' in out
    assert "<msub><mi>p</mi><mi>i</mi></msub>" in out  # p_i as a subscript, not the text "p_i"
    assert "`echo $HOME`" in out and "$p_i" not in out


def test_prices_and_code_fences_are_not_math():
    text = "It costs $5 and $10 per hour.\n```\nx = '$a$'\n```\n"
    assert math_to_mathml(text) == text


def test_links_point_to_the_pages_and_keep_anchors():
    page = ('<a href="01_tokens.ipynb">next</a> <a href="./03_attention.ipynb#Induction-heads">x</a> '
            '<a href="GLOSSARY.md#kv-cache">KV cache</a> <a href="https://example.org/a.ipynb">ext</a>')
    assert rewrite_links(page) == (
        '<a href="01_tokens.html">next</a> <a href="03_attention.html#Induction-heads">x</a> '
        '<a href="glossary.html#kv-cache">KV cache</a> <a href="https://example.org/a.ipynb">ext</a>')


def test_cdn_scripts_are_removed_and_local_ones_kept():
    page = ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>\n'
            '<script type="text/x-mathjax-config">init_mathjax = 1;</script>\n'
            '<script type="module">const m = await import("https://cdnjs.cloudflare.com/mermaid.mjs");</script>\n'
            '<script src="plotly.min.js"></script><script>Plotly.newPlot("a", [], {});</script>')
    local = '<script src="plotly.min.js"></script><script>Plotly.newPlot("a", [], {});</script>'
    assert strip_cdn_scripts(page) == local


def _model(name, children=(), outputs=None):
    state = {"children": [f"IPY_MODEL_{c}" for c in children]}
    if outputs is not None:
        state["outputs"] = outputs
    return {"model_name": name, "state": state}


STATE = {
    "bar": _model("IntProgressModel"),
    "tqdm": _model("HBoxModel", ["label", "fbar"]), "label": _model("HTMLModel"), "fbar": _model("FloatProgressModel"),
    "view": _model("VBoxModel", ["slider", "out"]), "slider": _model("IntSliderModel"),
    "out": _model("OutputModel", outputs=[{"output_type": "display_data", "data": {PLOTLY: {"data": [], "n": 1}}}]),
    "labels": _model("HBoxModel", ["label"]),  # HTML only: a message box, not a progress bar
}


def test_progress_bars_are_recognised_and_views_are_not():
    assert is_progress_bar(STATE, "bar") and is_progress_bar(STATE, "tqdm")
    assert not is_progress_bar(STATE, "view") and not is_progress_bar(STATE, "labels")


def test_a_view_shows_the_note_and_its_stored_figure_a_progress_bar_nothing():
    drawn = []
    view = static_view({WIDGET: {"model_id": "view"}}, STATE, lambda spec: drawn.append(spec) or "<div>FIG</div>")
    assert view.startswith('<div class="inferlab-widget-note"') and view.endswith("<div>FIG</div>")
    assert drawn == [{"data": [], "n": 1}]
    assert static_view({WIDGET: {"model_id": "tqdm"}}, STATE, lambda spec: "") is None
    own = '<details class="inferlab-static">Q1 ... answer</details>'
    assert static_view({WIDGET: {"model_id": "labels"}, "text/html": own}, STATE, lambda spec: "") == own


def test_prepare_drops_progress_outputs_and_converts_markdown_outputs():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Temperature $T$."),
        nbformat.v4.new_code_cell("run()", outputs=[
            nbformat.v4.new_output("display_data", data={WIDGET: {"model_id": "bar"}, "text/plain": "IntProgress()"}),
            nbformat.v4.new_output("display_data", data={"text/markdown": "so $x^2$ grows"}),
            nbformat.v4.new_output("display_data", data={WIDGET: {"model_id": "view"}, "text/plain": "VBox()"})])])
    nb.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": STATE}}
    nb, n_figs = export_html.prepare(nb, "01_x")
    outs = nb.cells[1].outputs
    assert n_figs == 1 and len(outs) == 2
    assert "<math" in nb.cells[0].source and "<msup>" in outs[0]["data"]["text/markdown"]
    assert 'id="01_x-fig-1"' in outs[1]["data"]["text/html"]


def test_collapsed_narration_cells_show_their_output_not_their_template():
    from nbconvert import HTMLExporter

    narration = nbformat.v4.new_code_cell("Markdown(narrate.finding(TEMPLATE_SOURCE))", metadata={
        "jupyter": {"source_hidden": True}}, outputs=[nbformat.v4.new_output("display_data", data={
            "text/markdown": "Decode sat at 1.2x its floor."})])
    shown = nbformat.v4.new_code_cell("VISIBLE_CODE = 1")
    nb, _ = export_html.prepare(nbformat.v4.new_notebook(cells=[narration, shown]), "00_x")
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    assert "TEMPLATE_SOURCE" not in body and "Decode sat at 1.2x its floor." in body and "VISIBLE_CODE" in body


def test_links_resolve_from_the_chinese_edition_and_the_glossaries():
    zh = ('<a href="../00_start_here.ipynb#the-two-source-articles">English</a> <a href="05_kv_cache.ipynb">next</a> '
          '<a href="GLOSSARY.md#kv-cache">KV Cache</a> <a href="../../README.zh.md">readme</a>')
    assert rewrite_links(zh, "notebooks/zh/04_prefill_and_decode.ipynb") == (
        '<a href="../00_start_here.html#the-two-source-articles">English</a> <a href="05_kv_cache.html">next</a> '
        '<a href="glossary.html#kv-cache">KV Cache</a> <a href="../../README.zh.md">readme</a>')
    assert rewrite_links('<a href="zh/01_tokens.ipynb">中文版</a>', "notebooks/01_tokens.ipynb") == (
        '<a href="zh/01_tokens.html">中文版</a>')
    # The Chinese glossary (site: zh/glossary.html) links notebooks of its own edition and the English glossary.
    glossary_zh = rewrite_links('<a href="05_kv_cache.ipynb#a">x</a> <a href="../GLOSSARY.md#b">en</a>',
                                "notebooks/zh/GLOSSARY.md")
    assert glossary_zh == '<a href="05_kv_cache.html#a">x</a> <a href="../glossary.html#b">en</a>'


def test_the_chinese_edition_gets_its_own_folder_index_and_notes(tmp_path):
    course = tmp_path / "course"
    (course / "notebooks" / "zh").mkdir(parents=True)
    (course / "notebooks" / "GLOSSARY.md").write_text("# Glossary\n", encoding="utf-8")
    (course / "notebooks" / "zh" / "GLOSSARY.md").write_text("# 术语表\n", encoding="utf-8")
    view = nbformat.v4.new_output("display_data", data={WIDGET: {"model_id": "view"}, "text/plain": "VBox()"})
    paths = []
    for folder, title in ((course / "notebooks", "# 01 · Tokens"), (course / "notebooks" / "zh", "# 01 · Token")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(title),
                                             nbformat.v4.new_code_cell("view", outputs=[view])])
        nb.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": STATE}}
        nbformat.write(nb, folder / "01_tokens.ipynb")
        paths.append(folder / "01_tokens.ipynb")
    pages = export_html.export(tmp_path / "site", paths)
    site = tmp_path / "site"
    assert pages == [("01_tokens", 1), ("zh/01_tokens", 1)]
    zh_page = (site / "zh" / "01_tokens.html").read_text(encoding="utf-8")
    assert '<script src="../plotly.min.js">' in zh_page and "请在 JupyterLab 中打开" in zh_page
    assert "open this notebook in JupyterLab" in (site / "01_tokens.html").read_text(encoding="utf-8")
    zh_index = (site / "zh" / "index.html").read_text(encoding="utf-8")
    assert 'href="../index.html"' in zh_index and "01 · Token" in zh_index and 'href="glossary.html"' in zh_index
    assert 'href="zh/index.html"' in (site / "index.html").read_text(encoding="utf-8")
    assert "术语表" in (site / "zh" / "glossary.html").read_text(encoding="utf-8")
