"""What makes an exported notebook page work offline: math as MathML, links to pages, widgets as static views.

Used by ``export_html``; each function takes plain text or a notebook's JSON parts, so it is testable alone.

- Math: ``$...$`` and ``$$...$$`` in Markdown become MathML at export time (``latex2mathml``), which the
  browser draws itself: no MathJax, no script, no network when the page is viewed.
- Links: ``01_tokens.ipynb#a-heading`` becomes ``01_tokens.html#a-heading``; ``GLOSSARY.md#kv-cache``
  becomes ``glossary.html#kv-cache``. The Chinese edition lives in ``zh/`` (``notebooks/zh/*.ipynb`` ->
  ``zh/*.html``, ``zh/GLOSSARY.md`` -> ``zh/glossary.html``); links are resolved from the page's own
  place, so ``../00_start_here.ipynb`` in a Chinese notebook reaches the English page.
- Widgets: a progress bar is dropped (it teaches nothing once the cell has run); an interactive view
  becomes a note plus the figures it showed when the notebook was stored; a view that carries its own
  static HTML (``class="inferlab-static"``, e.g. a self-check's questions with their answers) shows that.
- Scripts: the CDN ``<script>`` tags nbconvert's template adds (require.js, MathJax, mermaid) are removed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator

WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
PROGRESS_MODELS = {"IntProgressModel", "FloatProgressModel"}
# tqdm's notebook bar is an HBox of HTML labels around a progress model: all of these count as "just progress"
PROGRESS_PARTS = PROGRESS_MODELS | {"HBoxModel", "HTMLModel", "LabelModel"}
STATIC_MARK = 'class="inferlab-static'
WIDGET_NOTE = ('<div class="inferlab-widget-note" style="border:1px dashed #bbb;padding:6px;color:#555">'
               "{note}{more}</div>")
# The note in the page's language (the Chinese edition's pages are Chinese throughout).
NOTE_TEXT = {"en": ("Interactive widget: open this notebook in JupyterLab to use it.",
                    " Below: what it showed when the notebook was stored."),
             "zh": ("交互控件：请在 JupyterLab 中打开这个 notebook 来使用它。", "下面是保存 notebook 时它显示的内容。")}

_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$(?![\w$])", re.S)
_HREF = re.compile(r'href="(?![a-z][a-z0-9+.-]*:|#|/)([^"#]+)(#[^"]*)?"')
# Where each course file lands in the site (repository path -> site path); notebooks by pattern.
SITE_FILES = {"notebooks/GLOSSARY.md": "glossary.html", "notebooks/zh/GLOSSARY.md": "zh/glossary.html"}
_NOTEBOOK_PATH = re.compile(r"notebooks/((?:zh/)?[^/]+)\.ipynb")
_CDN_SCRIPT = re.compile(r"<script\b[^>]*>(?:(?!</script>).)*?(?:cdnjs|mathjax|MathJax)(?:(?!</script>).)*</script>\s*",
                         re.S)
_CDN_SRC = re.compile(r'<script\b[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>\s*')


def math_to_mathml(markdown: str) -> str:
    """``markdown`` with every ``$tex$`` / ``$$tex$$`` outside code replaced by MathML (inline / display).

    A formula latex2mathml cannot read is left as written (the browser test then finds the raw ``$``).
    """
    from latex2mathml.converter import convert

    def one(m: re.Match) -> str:
        display, tex = (m.group(1) is not None), (m.group(1) or m.group(2))
        try:
            return convert(tex.strip(), display="block" if display else "inline")
        except Exception:  # latex2mathml raises many types for unsupported TeX; keep the source then
            return m.group(0)

    out, last = [], 0
    for code in _CODE.finditer(markdown):  # code spans and fences keep their dollar signs
        out += [_MATH.sub(one, markdown[last:code.start()]), code.group(0)]
        last = code.end()
    out.append(_MATH.sub(one, markdown[last:]))
    return "".join(out)


def site_path(repo_path: str) -> str | None:
    """Where the course file ``repo_path`` (e.g. ``notebooks/zh/01_tokens.ipynb``) lands in the site, or None."""
    if repo_path in SITE_FILES:
        return SITE_FILES[repo_path]
    m = _NOTEBOOK_PATH.fullmatch(repo_path)
    return f"{m.group(1)}.html" if m else None


def rewrite_links(page_html: str, source: str = "notebooks/page.ipynb") -> str:
    """Links to notebooks and to the glossary, pointed at the exported pages (anchors kept).

    ``source`` is the repository path of the page's own file: relative links are resolved from there.
    Links to anything that is not a page of the site (and absolute URLs) are left alone.
    """
    here = posixpath.dirname(source)
    page_dir = posixpath.dirname(site_path(source) or "x.html")

    def one(m: re.Match) -> str:
        target = site_path(posixpath.normpath(posixpath.join(here, m.group(1))))
        if target is None:
            return m.group(0)
        return f'href="{posixpath.relpath(target, page_dir or ".")}{m.group(2) or ""}"'

    return _HREF.sub(one, page_html)


def strip_cdn_scripts(page_html: str) -> str:
    """``page_html`` without the script tags that would fetch from a CDN (none of them is needed offline)."""
    return _CDN_SRC.sub("", _CDN_SCRIPT.sub("", page_html))


def widget_state(metadata: dict) -> dict:
    """model id -> {"model_name", "state"} as stored in a notebook's metadata (empty when none was stored)."""
    widgets = metadata.get("widgets")
    stored = widgets.get(WIDGET_STATE_MIME) if isinstance(widgets, dict) else None
    state = stored.get("state") if isinstance(stored, dict) else None
    return state if isinstance(state, dict) else {}


def _models(state: dict, model_id: str) -> Iterator[dict]:
    """The model ``model_id`` and every model below it, depth first in display order."""
    model = state.get(model_id)
    if model is None:
        return
    yield model
    for child in model.get("state", {}).get("children", []):
        yield from _models(state, str(child).removeprefix("IPY_MODEL_"))


def is_progress_bar(state: dict, model_id: str) -> bool:
    """True for a progress bar (ipywidgets' own or tqdm's HBox of labels around one)."""
    names = [m.get("model_name") for m in _models(state, model_id)]
    return bool(PROGRESS_MODELS & set(names)) and set(names) <= PROGRESS_PARTS


def stored_figures(state: dict, model_id: str) -> list[dict]:
    """The plotly specs the view's Output widgets held when the notebook was stored, in display order."""
    return [out["data"]["application/vnd.plotly.v1+json"]
            for m in _models(state, model_id) if m.get("model_name") == "OutputModel"
            for out in m["state"].get("outputs", []) if "application/vnd.plotly.v1+json" in out.get("data", {})]


def static_view(data: dict, state: dict, figure_html: Callable[[dict], str], lang: str = "en") -> str | None:
    """HTML standing in for one widget output in the page, or None to drop the output (a progress bar).

    ``lang`` ("en" or "zh") is the language of the page's note.
    """
    model_id = data["application/vnd.jupyter.widget-view+json"].get("model_id", "")
    if is_progress_bar(state, model_id):
        return None
    own = "".join(data.get("text/html", ""))
    if STATIC_MARK in own:
        return own
    figures = [figure_html(spec) for spec in stored_figures(state, model_id)]
    note, below = NOTE_TEXT[lang]
    return WIDGET_NOTE.format(note=note, more=below if figures else "") + "".join(figures)
