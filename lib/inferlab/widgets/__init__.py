"""Interactive views (ipywidgets + plotly). Each returns a widget; bad input shows a message in it.

Widgets take data (logits, tokens, cache tensors) and re-draw from it: a callback never runs the model
when only a display setting changes. Where a new input needs the model (a new prompt), the caller passes
a function that runs it (``logits_for``), or the widget is a live run by design (``widgets.streaming``).
A static export (HTML, nbviewer) shows no live widget: every notebook also displays the default state as
a plain figure next to the widget.

Submodules by topic: ``widgets.start``, ``widgets.tokens``, ``widgets.embeddings``, ``widgets.attention``,
``widgets.kvcache``, ``widgets.sampling``, ``widgets.streaming``.
"""

from __future__ import annotations

import html

import ipywidgets as w
import plotly.graph_objects as go
import plotly.io as pio


def message(text: str, kind: str = "error") -> str:
    """HTML for a readable message inside a widget (instead of a traceback)."""
    color = {"error": "#b00020", "info": "#555", "ok": "#1b5e20"}.get(kind, "#555")
    return f'<div style="color:{color};font-family:sans-serif;padding:4px">{html.escape(text)}</div>'


def error_box() -> w.HTML:
    """An empty HTML widget to show messages in."""
    return w.HTML(value="")


def show_figure(out: w.Output, fig: go.Figure, label: str = "figure") -> None:
    """Show ``fig`` in ``out``, replacing what it showed before.

    The plotly mimetype is always included (JupyterLab, nbviewer and the HTML export draw it), plus what
    the current renderer adds (Colab's HTML after ``viz.setup_notebook()``). The Output's state is set
    directly instead of ``with out: display(fig)``: nbclient (which stores executed notebooks) hangs
    when captured output over 64 kB is synced back to the kernel.
    """
    bundle = {"text/plain": f"<{label}>", **pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())}
    bundle.update(fig._repr_mimebundle_())
    out.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)
