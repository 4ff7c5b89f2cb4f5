"""Notebook 09's SLO slider: pick a latency objective, see which arrival rates meet it and what they sustain.

The runs are measured once (``serve.compare.load_sweep``); moving the slider only redraws
``viz.serve.load_curve`` and the sentence under it (no model call in the callback).

    >>> slo_picker(points)      # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as w

from ..i18n import tr
from ..viz.serve import load_curve
from . import show_figure, titled


def best_within(points: Sequence, slo_s: float):
    """The sustained ``LoadPoint`` (its queue did not grow: ``LoadPoint.steady``) with the most sustained throughput
    whose TTFT p99 is within ``slo_s`` (None: none is). A rate whose queue was still growing met its SLO only because
    its requests stopped arriving: goodput is what a server sustains."""
    ok = [p for p in points if p.summary.ttft.p99 <= slo_s and p.steady.sustained]
    return max(ok, key=lambda p: p.steady.tokens_per_s) if ok else None


def slo_picker(points: Sequence) -> w.VBox:
    """A slider over TTFT p99 objectives (ms) above the latency-throughput curve of ``points`` (``LoadPoint``s)."""
    if not points or not all(hasattr(p, "summary") and hasattr(p, "rate") for p in points):
        raise ValueError(tr("points must be LoadPoints, e.g. inferlab.serve.compare.load_sweep(model, rates, sizes); "
                            "got {got!r}", got=type(points).__name__))
    p99 = sorted(p.summary.ttft.p99 * 1e3 for p in points)  # ms
    low, high = math.log10(max(p99[0] / 2, 0.1)), math.log10(p99[-1] * 2)
    slider = w.FloatLogSlider(value=p99[len(p99) // 2], base=10, min=low, max=high, step=(high - low) / 100,
                              description=tr("SLO (ms)"), readout_format=".0f", continuous_update=True)
    out, note = w.Output(), w.HTML()

    def redraw(_=None) -> None:
        slo_s = slider.value / 1e3
        show_figure(out, load_curve(points, slo_s), tr("latency against throughput, SLO {ms:,.0f} ms", ms=slider.value))
        best = best_within(points, slo_s)
        note.value = (tr("Within TTFT p99 {ms:,.0f} ms, sustained: at most <b>{tps:.1f} tokens/s</b> (at {rate:.2f} "
                         "requests/s).", ms=slider.value, tps=best.steady.tokens_per_s, rate=best.rate) if best else
                      tr("No rate tried meets TTFT p99 within {ms:,.0f} ms with its queue steady.", ms=slider.value))

    slider.observe(redraw, names="value")
    redraw()
    note.add_class("inferlab-slo-note")
    view = w.VBox([slider, note, out]).add_class("inferlab-slo")
    return titled(view, tr("SLO slider ({n} arrival rates): run the cell to move it", n=len(points)))
