"""The HTML edition runs nothing a notebook holds and loads nothing from a network (issue 30, item 4).

One notebook carries every trick: ``<script>`` and ``onerror=`` in Markdown, ``javascript:`` links, a figure
label holding ``</script>``, script in HTML, JavaScript and SVG outputs and in a raw cell, and remote images,
frames, style sheets and CSS. It is exported once; each claim is then checked on the page itself, first in
its text, then in Chromium with the network off (each trick sets its own ``window`` flag if it ever runs).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import nbformat
import pytest
from browser_support import offline_page

from inferlab.tools import export_html
from inferlab.tools.safe_html import clean_html, script_json

EVIL_LABEL = "</script><script>window.__figure = 1</script>"
MARKDOWN = """# Tricks

<script>window.__markdown = 1</script>

<img id="broken" src="nope.png" onerror="window.__onerror = 1"> <b onmouseover="window.__hover = 1">hover</b>

[click me](javascript:window.__jslink=1) and <a id="jsa" href="JavaScript:window.__jsa=1">a link</a>
and <a id="entity" href="jav&#x09;ascript:window.__entity=1">an encoded one</a>

<img id="remote" src="https://example.com/pixel.png" alt="a remote pixel">
<iframe src="https://example.com/frame"></iframe>
<link rel="stylesheet" href="https://example.com/x.css">
<style>@import url(https://example.com/y.css);</style>
<span id="styled" style="color: red; background-image: url(https://example.com/bg.png)">styled</span>
<video src="https://example.com/v.mp4"></video> <object data="https://example.com/o.swf"></object>
<img src="//example.com/protocol-relative.png">

Kept: [the article](https://example.com/article), <details><summary>more</summary>inside</details>, and
<span id="red" style="color: red">red text</span>.
"""
HTML_OUTPUT = ('<b id="bold">bold</b><script>window.__html = 1</script>'
               '<img src="https://example.com/out.png"><div onclick="window.__click = 1">x</div>')
SVG_OUTPUT = ('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>window.__svg = 1</script>'
              '<image href="https://example.com/svg.png" width="10" height="10"/></svg>')
FIGURE = {"data": [{"type": "bar", "x": [EVIL_LABEL, "b"], "y": [1, 2]}],
          "layout": {"title": {"text": "</script><!--"}, "height": "300px;background:url(https://example.com/h)"}}
FLAGS = ["__markdown", "__onerror", "__hover", "__jslink", "__jsa", "__entity", "__html", "__click", "__js",
         "__svg", "__raw", "__title", "__figure"]


@pytest.fixture(scope="module")
def tricks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tricks")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(MARKDOWN),
        nbformat.v4.new_code_cell("show()", execution_count=1, outputs=[
            nbformat.v4.new_output("display_data", data={"text/html": HTML_OUTPUT, "text/plain": "x"}),
            nbformat.v4.new_output("display_data", data={"application/javascript": "window.__js = 1"}),
            nbformat.v4.new_output("display_data", data={"image/svg+xml": SVG_OUTPUT}),
            nbformat.v4.new_output("display_data", data={export_html.PLOTLY_MIME: FIGURE})]),
        nbformat.v4.new_raw_cell("<script>window.__raw = 1</script>", metadata={"raw_mimetype": "text/html"}),
    ], metadata={"title": "</title><script>window.__title = 1</script>"})
    path = folder / "notebooks" / "01_tricks.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    export_html.export(folder / "site", [path])
    return folder / "site" / "01_tricks.html"


# --- the page's text -------------------------------------------------------------------------------------------

class _Elements(HTMLParser):
    """Every element of a page with its attributes (as a browser reads them), and the text of scripts/styles."""

    def __init__(self, page: str):
        super().__init__()
        self.tags, self.inside, self.code = [], None, []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.inside = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag):
        self.inside = None

    def handle_data(self, data):
        if self.inside:
            self.code.append((self.inside, data))


def test_the_page_holds_no_handler_no_javascript_url_and_no_remote_resource(tricks):
    page = _Elements(tricks.read_text(encoding="utf-8"))
    handlers = [(t, a) for t, a in page.tags if any(k.startswith("on") for k in a)]
    assert not handlers, handlers
    urls = [(t, k, v) for t, a in page.tags for k, v in a.items() if k in ("src", "href", "data", "style") and v]
    assert not [u for u in urls if "javascript" in re.sub(r"\s", "", u[2]).lower()], urls
    remote = [u for u in urls if "example.com" in u[2]]
    assert remote == [("a", "href", "https://example.com/article")], remote  # a link the reader may follow stays
    code = [c for c in page.code if not c[1].startswith("Plotly.newPlot(")]  # the figure: its data is tested below
    assert not [c for c in code if "window.__" in c[1] or "example.com" in c[1]], code
    text = tricks.read_text(encoding="utf-8")
    assert "<details><summary>more</summary>inside</details>" in text
    assert '<span id="red" style="color: red">red text</span>' in text  # the course's inline styles stay


def test_the_figure_data_is_escaped_inside_its_script(tricks):
    page = tricks.read_text(encoding="utf-8")
    assert script_json(EVIL_LABEL) in page and "\\u003c/script\\u003e\\u003c!--" in page
    assert "height:450px;width:100%" in page  # a height that is not a number falls back to plotly's default


def test_clean_html_keeps_the_course_and_drops_the_rest():
    assert clean_html("<p>a <code>&lt;end_of_turn&gt;</code> <em>b</em></p>") == (
        "<p>a <code>&lt;end_of_turn&gt;</code> <em>b</em></p>")
    assert clean_html('<a href="javascript:alert(1)">x</a><a href="../02_x.html#y">y</a>') == (
        '<a>x</a><a href="../02_x.html#y">y</a>')
    assert clean_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"  # shown, not run
    image = '<img src="data:image/png;base64,AAAA" alt="a">'  # an image's own data loads nothing
    assert clean_html(image) == image
    for sneaky in ('<a href="da&#x09;ta:text/html,x">', '<a href="jav&#x09;ascript:x">', '<img src="/\\e.com/a.png">',
                   '<img src="&#x2F;&#x2F;e.com/a.png">', '<img src=" https://e.com/a.png">'):
        assert not re.search(r"\b(href|src)=", clean_html(sneaky)), sneaky  # the address is gone, the tag stays
    assert clean_html('<math display="block"><mi href="javascript:x">x</mi></math>') == (
        '<math display="block"><mi>x</mi></math>')


# --- the page in a browser, one claim each ---------------------------------------------------------------------
# One page load for all of them (each loads plotly.js, about 3 s on 2 busy cores): the claims that only read come
# first, then the ones that hover and click, which also find nothing run by what the others did before them.

@pytest.fixture(scope="module")
def opened(browser, tricks):
    blocked, errors = [], []
    context, page = offline_page(browser, tricks, blocked, errors)
    page.wait_for_load_state("load")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    page.wait_for_timeout(500)  # lazy images, frames and style sheets have had their chance
    yield page, blocked, errors
    context.close()


def _ran(page) -> list[str]:
    return page.evaluate(f"() => {FLAGS!r}.filter(f => window[f] !== undefined)")


def test_markdown_and_output_scripts_do_not_run(opened):
    page, _, errors = opened
    assert _ran(page) == [] and not errors
    assert "<script>window.__markdown = 1</script>" in page.inner_text("body")  # shown as text instead


def test_a_figure_label_cannot_end_the_figures_script(opened):
    page, _, errors = opened
    assert page.locator(".js-plotly-plot").count() == 1 and not errors
    labels = page.evaluate("() => [...document.querySelectorAll('.xtick text')].map(t => t.textContent)")
    assert labels[0].startswith("</script>") and _ran(page) == []  # drawn as a label, never run


def test_nothing_is_loaded_from_a_network(opened):
    page, blocked, _ = opened
    assert blocked == [], f"the page asked the network for {blocked}"
    assert page.evaluate("() => getComputedStyle(document.querySelector('#styled')).backgroundImage") == "none"


def test_event_handlers_do_not_run(opened):
    page, _, _ = opened
    page.hover("text=hover")
    page.click("#bold")
    page.click("text=x >> nth=-1")
    assert _ran(page) == []


def test_javascript_links_do_nothing(opened, tricks):
    page, blocked, _ = opened
    for link in ("text=click me", "#jsa", "#entity"):
        page.click(link)
    assert _ran(page) == [] and page.url == tricks.as_uri() and blocked == []
