"""The start notebook's teaser: the next-token distribution under a temperature slider.

The widget takes the logits (the notebook runs the model once, before); moving the slider only redoes
the arithmetic of ``inferlab.sampling.filter_stages`` and redraws ``viz.sampling.candidate_bars``.

>>> logits, _ = il.prefill(m, m.encode("To be, or not to be,"))      # doctest: +SKIP
>>> next_token_peek(logits[0], m.decode, prompt="To be, or not to be,")   # doctest: +SKIP
"""

from __future__ import annotations

import html

import ipywidgets as w
import torch

from ..sampling import SamplingConfig, filter_stages
from ..viz import show_token
from ..viz.sampling import Decode, candidate_bars, piece
from . import message, show_figure


def next_token_peek(logits: torch.Tensor, decode: Decode, *, prompt: str | None = None, n: int = 8) -> w.VBox:
    """A temperature slider over one next-token distribution: a ranked list and a bar chart of the top ``n``.

    Args:
        logits: ``[vocab]`` next-token logits, e.g. ``il.prefill(m, ids)[0][0]`` (logits are ``[batch, vocab]``).
        decode: ``m.decode`` or a list/dict id -> text.
        prompt: the text the logits continue (only for the titles).
        n: how many candidates to show.

    The text view has the CSS class ``inferlab-peek`` (a stable handle for the browser test).
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a 1-D [vocab] tensor, got {shape}. "
                         "Fix: pass logits[0] from il.prefill(m, ids) (logits are [batch, vocab]).")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r} must be an integer >= 1. Fix: pass n=8.")
    row = logits.detach().float().cpu()
    pieces: dict[int, str] = {}

    def text_of(i: int) -> str:  # decoding is slow next to the arithmetic: remember each piece
        if i not in pieces:
            pieces[i] = piece(decode, i)
        return pieces[i]

    def text_of_ids(ids: list[int]) -> str:  # the decode signature the figure expects
        return "".join(text_of(int(i)) for i in ids)

    slider = w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description="temperature",
                           continuous_update=True, readout_format=".2f")
    text = w.HTML()
    out = w.Output()
    after = f" after {prompt!r}" if prompt else ""

    def draw(_=None) -> None:
        try:
            cfg = SamplingConfig(temperature=float(slider.value))
            probs = filter_stages(row, cfg).final
        except (TypeError, ValueError) as exc:
            text.value = message(str(exc))
            return
        top = torch.topk(probs, min(n, probs.numel()))
        items = "".join(f"<li><code>{html.escape(repr(show_token(text_of(int(i)))))}</code> (id {int(i)}): "
                        f"{float(p):.1%}</li>" for p, i in zip(top.values, top.indices))
        label = "greedy: always the top token" if cfg.greedy else f"temperature {cfg.temperature:.2f}"
        text.value = f'<div class="inferlab-peek"><b>{html.escape(label)}</b><ol>{items}</ol></div>'
        fig = candidate_bars(probs, text_of_ids, k=n, title=f"Next token{after} ({label})", x_max=1.0)
        show_figure(out, fig, "figure: the next-token candidates")

    slider.observe(draw, names="value")
    draw()
    box = w.VBox([slider, w.HBox([text, out])])
    box.add_class("inferlab-peek-box")  # a stable handle for the browser test
    return box
