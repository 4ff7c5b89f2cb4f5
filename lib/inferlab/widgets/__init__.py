"""Interactive views (ipywidgets + plotly). Each returns a widget; bad input shows a message in it.

Callbacks re-draw from data already computed where they can (no model call when only a display
setting changes). A static export (HTML, nbviewer) shows no live widget: every notebook also displays
the default state as a plain figure next to the widget.

Submodules by topic: ``widgets.tokens``, ``widgets.embeddings``, ``widgets.attention``,
``widgets.kvcache``, ``widgets.sampling``, ``widgets.streaming``.
"""

from __future__ import annotations

import html

import ipywidgets as w


def message(text: str, kind: str = "error") -> str:
    """HTML for a readable message inside a widget (instead of a traceback)."""
    color = {"error": "#b00020", "info": "#555", "ok": "#1b5e20"}.get(kind, "#555")
    return f'<div style="color:{color};font-family:sans-serif;padding:4px">{html.escape(text)}</div>'


def error_box() -> w.HTML:
    """An empty HTML widget to show messages in."""
    return w.HTML(value="")
