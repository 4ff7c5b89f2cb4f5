"""Figures: plain data in, a plotly ``Figure`` out. They never take a model and never display themselves.

The plotly renderer is chosen here, in one place (``setup_plotly``), when this package is imported:

- In Jupyter (Lab, Notebook, nbval, nbconvert): ``plotly_mimetype``. JupyterLab draws it with the
  ``jupyterlab-plotly`` extension that ships inside the ``plotly`` package, offline. The stored notebooks
  stay small (no 4.8 MB copy of plotly.js in every notebook); the offline HTML edition
  (``python -m inferlab.export_html``) embeds the local plotly.js once per page.
- In Google Colab: ``colab``.

Submodules by topic: ``viz.tokens``, ``viz.embeddings``, ``viz.attention``, ``viz.roofline``,
``viz.kvcache``, ``viz.sampling``, ``viz.latency``, ``viz.speed``.
"""

from __future__ import annotations

import os
import sys

import plotly.graph_objects as go
import plotly.io as pio

TEMPLATE = "plotly_white"
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC")


def setup_plotly() -> str:
    """Pick the renderer for this environment and return its name (``INFERLAB_PLOTLY_RENDERER`` overrides)."""
    if os.environ.get("INFERLAB_PLOTLY_RENDERER"):
        renderer = os.environ["INFERLAB_PLOTLY_RENDERER"]
    elif "google.colab" in sys.modules:
        renderer = "colab"
    else:
        renderer = "plotly_mimetype"
    pio.renderers.default = renderer
    pio.templates.default = TEMPLATE
    return renderer


RENDERER = setup_plotly()


def base_layout(fig: go.Figure, title: str, x: str | None = None, y: str | None = None,
                height: int | None = None) -> go.Figure:
    """Common styling: a title, axis titles (with units/shapes), and a compact margin."""
    fig.update_layout(title=title, margin={"l": 60, "r": 20, "t": 60, "b": 50})
    if x is not None:
        fig.update_xaxes(title_text=x)
    if y is not None:
        fig.update_yaxes(title_text=y)
    if height is not None:
        fig.update_layout(height=height)
    return fig


def require(condition: bool, message: str) -> None:
    """Check a figure's input early and say how to fix it."""
    if not condition:
        raise ValueError(message)


def show_token(piece: str) -> str:
    """A token's text made visible: spaces as '·', newlines as '⏎', tabs as '→'."""
    return piece.replace(" ", "·").replace("\n", "⏎").replace("\t", "→").replace("\r", "␍")
