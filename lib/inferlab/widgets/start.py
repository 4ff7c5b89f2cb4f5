"""The start notebook's teaser: the next-token distribution under a temperature slider (no model call per move)."""

from __future__ import annotations

import html

import ipywidgets as w
import plotly.graph_objects as go
import torch

from ..sampling import SamplingConfig, explain
from ..viz import base_layout, show_token
from . import message


def top_candidates(probs: torch.Tensor, decode, n: int = 8) -> list[tuple[str, int, float]]:
    """The ``n`` most likely tokens of ``probs`` ``[vocab]`` as ``(visible text, id, probability)``.

    ``decode`` maps one id to its text (e.g. ``lambda i: model.decode([i])``).
    """
    top = torch.topk(probs, n)
    return [(show_token(decode(int(i))), int(i), float(p)) for p, i in zip(top.values, top.indices)]


def candidates_figure(rows: list[tuple[str, int, float]], title: str) -> go.Figure:
    """Horizontal bars of candidate probabilities; hover shows the token id."""
    fig = go.Figure(go.Bar(
        x=[p for _, _, p in rows][::-1], y=[f"{t!r}" for t, _, _ in rows][::-1], orientation="h",
        customdata=[i for _, i, _ in rows][::-1],
        hovertemplate="token %{y}<br>id %{customdata}<br>p = %{x:.3f}<extra></extra>"))
    fig.update_xaxes(range=[0, 1])
    return base_layout(fig, title, x="probability of being the next token", y="candidate token", height=330)


def next_token_peek(model, prompt: str, n: int = 8) -> w.VBox:
    """A temperature slider over the real next-token distribution of ``prompt`` (computed once).

    The text view (CSS class ``inferlab-peek``) and the bar chart update on every move of the slider.
    """
    from ..engine import prefill

    ids = model.encode(prompt)
    logits, _ = prefill(model, ids)
    row = logits[0].float().cpu()
    pieces: dict[int, str] = {}

    def decode(i: int) -> str:
        if i not in pieces:
            pieces[i] = model.decode([i])
        return pieces[i]
    slider = w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description="temperature",
                           continuous_update=True, readout_format=".2f")
    text = w.HTML()
    out = w.Output()

    def draw(_=None) -> None:
        try:
            cfg = SamplingConfig(temperature=float(slider.value))
        except (TypeError, ValueError) as exc:
            text.value = message(str(exc))
            return
        rows = top_candidates(explain(row, cfg)["top_p"], decode, n)
        items = "".join(f"<li><code>{html.escape(repr(t))}</code> (id {i}): {p:.1%}</li>" for t, i, p in rows)
        label = "greedy: always the top token" if cfg.greedy else f"temperature {cfg.temperature:.2f}"
        text.value = f'<div class="inferlab-peek"><b>{html.escape(label)}</b><ol>{items}</ol></div>'
        out.clear_output(wait=True)
        with out:
            candidates_figure(rows, f"Next token after {prompt!r} ({label})").show()

    slider.observe(draw, names="value")
    draw()
    box = w.VBox([slider, w.HBox([text, out])])
    box.add_class("inferlab-peek-box")  # a stable handle for the browser test
    return box
