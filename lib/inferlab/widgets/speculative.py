"""Notebook 10's speed-up explorer: slide k and alpha over the predicted surface, the measured drafts on it.

The drafts are measured once (``speculative.bench.draft_gain``); moving a slider only redraws
``viz.speculative.speedup_surface`` and the sentence under it (no model call in the callback, so it is live).

    >>> speedup_explorer(gains)      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as w

from ..i18n import tr
from ..speculative.cost import expected_tokens_per_round, predicted_speedup
from ..viz.speculative import speedup_surface
from . import show_figure, titled


def speedup_explorer(gains: Sequence, k_max: int = 12) -> w.Widget:
    """Sliders for k and alpha and a choice of draft (its measured c and verify cost) over the predicted surface."""
    if not gains or not all(hasattr(g, "alpha") and hasattr(g, "c") for g in gains):
        raise ValueError(tr("gains must be DraftGains from speculative.bench.draft_gain(...); got {got!r}",
                            got=type(gains).__name__))
    by_name = {g.draft: g for g in gains}
    draft = w.Dropdown(options=list(by_name), description=tr("draft"))
    k = w.IntSlider(value=gains[0].k, min=1, max=k_max, description="k", continuous_update=True)
    alpha = w.FloatSlider(value=round(gains[0].alpha, 2), min=0.0, max=0.99, step=0.01, description="alpha",
                          continuous_update=True)
    out, note = w.Output(), w.HTML()

    def redraw(_=None) -> None:
        g = by_name[draft.value]
        measured = [(g.draft, g.k, g.alpha, g.speedup)]
        fig = speedup_surface(g.c, measured, k_max=k_max, verify=g.verify, marker=(k.value, alpha.value))
        show_figure(out, fig, tr("predicted speed-up for {name}", name=g.draft))
        note.value = tr("With c = {c:.2f} and a verify of {v:.2f} steps: k = {k} guesses at alpha = {a:.2f} give "
                        "<b>{e:.2f} tokens per round</b> and a predicted <b>{x:.2f}x</b> (measured for this draft: "
                        "{m:.2f}x at k = {mk}, alpha = {ma:.2f}).", c=g.c, v=g.verify, k=k.value, a=alpha.value,
                        e=expected_tokens_per_round(alpha.value, k.value),
                        x=predicted_speedup(alpha.value, k.value, g.c, g.verify), m=g.speedup, mk=g.k, ma=g.alpha)

    for control in (draft, k, alpha):
        control.observe(redraw, names="value")
    redraw()
    view = w.VBox([w.HBox([draft, k, alpha]), note, out]).add_class("inferlab-speedup")
    return titled(view, tr("Speed-up explorer ({n} drafts): run the cell to move the sliders", n=len(gains)))
