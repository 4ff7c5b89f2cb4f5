"""Interactive views (ipywidgets + plotly). Each returns a widget; bad input shows a message in it.

Widgets take data (logits, tokens, cache tensors) and re-draw from it: a callback never runs the model
when only a display setting changes. Where a new input needs the model (a new prompt), the caller passes
a function that runs it (``logits_for``), or the widget is a live run by design (``widgets.streaming``).
A static export (HTML, nbviewer) shows no live widget: every notebook also displays the default state as
a plain figure next to the widget.

Every view is wrapped in ``titled(view, "What it is: run the cell to use it")`` before it is returned, so a
stored notebook shows that sentence (not ``VBox(children=(HBox(...``) where no kernel draws the widget:
GitHub, nbviewer, a notebook opened before its cells run.

Every label, button, message and stored sentence is in the reader's language (``inferlab.set_language``):
the text goes through ``i18n.tr`` when the widget is built or redrawn, so choose the language first.

Submodules by topic: ``widgets.start``, ``widgets.tokens``, ``widgets.embeddings``, ``widgets.attention``,
``widgets.kvcache``, ``widgets.sampling``, ``widgets.streaming``, ``widgets.speed``, ``widgets.serve``,
``widgets.long_context``, ``widgets.selfcheck``.
"""

from __future__ import annotations

import html

import ipywidgets as w
import plotly.graph_objects as go
import plotly.io as pio

from ..i18n import tr


def message(text: str, kind: str = "error") -> str:
    """HTML for a readable message inside a widget (instead of a traceback)."""
    color = {"error": "#b00020", "info": "#555", "ok": "#1b5e20"}.get(kind, "#555")
    return f'<div style="color:{color};font-family:sans-serif;padding:4px">{html.escape(text)}</div>'


def titled(view: w.Widget, title: str, static_html: str | None = None) -> w.Widget:
    """``view`` itself, displayed with ``title`` as its text and HTML representation where no kernel draws it.

    ``static_html`` (optional) replaces the HTML representation with a full static version of the view
    (the offline HTML edition shows it instead of "open this notebook in JupyterLab"), e.g. a self-check's
    questions with their answers in ``<details>``. Example::

        return titled(w.VBox([slider, out]), "Attention explorer: run the cell to use the sliders")
    """
    text = " ".join(str(title).split())
    page = static_html if static_html is not None else (
        f'<div class="inferlab-view-title" style="color:#555;font-style:italic">{html.escape(text)}</div>')
    if static_html is not None and 'class="inferlab-static' not in static_html:
        page = f'<div class="inferlab-static">{static_html}</div>'
    base = type(view)._repr_mimebundle_

    def bundle(**kwargs):
        data = base(view, **kwargs) or {}
        return {**data, "text/plain": text, "text/html": page}

    # IPython looks the method up on the object, so an instance attribute is enough (no subclass per view).
    view._repr_mimebundle_ = bundle
    view.add_class("inferlab-titled")
    return view


def error_box() -> w.HTML:
    """An empty HTML widget to show messages in."""
    return w.HTML(value="")


def show_figure(out: w.Output, fig: go.Figure, label: str | None = None) -> None:
    """Show ``fig`` in ``out``, replacing what it showed before; ``label`` is its plain-text stand-in.

    The plotly mimetype is always included (JupyterLab, nbviewer and the HTML export draw it), plus what
    the current renderer adds (Colab's HTML after ``viz.setup_notebook()``). The Output's state is set
    directly instead of ``with out: display(fig)``: nbclient (which stores executed notebooks) hangs
    when captured output over 64 kB is synced back to the kernel.
    """
    label = tr("figure") if label is None else label
    bundle = {"text/plain": f"<{label}>", **pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())}
    bundle.update(fig._repr_mimebundle_())
    out.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)
