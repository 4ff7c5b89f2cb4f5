"""Notebook 09's SLO slider: pick a latency objective, see which arrival rates meet it and what they sustain.

The runs are measured once (``measure.serve_runs.load_sweep``); moving the slider only redraws
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
    """A slider over TTFT p99 objectives (ms) above the latency-throughput curve of ``points`` (``LoadPoint``s).

    The number box beside the slider takes any objective, also one past the slider's ends (half the fastest
    p99 measured to twice the slowest): the view uses the typed value and says where the slider stopped,
    instead of clamping it silently. ``view.controls`` holds the slider and the box.
    """
    if not points or not all(hasattr(p, "summary") and hasattr(p, "rate") for p in points):
        raise ValueError(tr("points must be LoadPoints, e.g. inferlab.measure.serve_runs.load_sweep(model, rates, "
                            "sizes); got {got!r}", got=type(points).__name__))
    p99 = sorted(p.summary.ttft.p99 * 1e3 for p in points)  # ms
    low, high = math.log10(max(p99[0] / 2, 0.1)), math.log10(p99[-1] * 2)
    start = p99[len(p99) // 2]
    slider = w.FloatLogSlider(value=start, base=10, min=low, max=high, step=(high - low) / 100,
                              description=tr("SLO (ms)"), readout=False, continuous_update=True)
    box = w.FloatText(value=_ms(start), layout=w.Layout(width="90px"))  # the value the view uses
    out, note = w.Output(), w.HTML()
    busy = [False]  # one side is writing the other: don't echo it back

    def redraw(ms) -> None:
        if not (isinstance(ms, (int, float)) and math.isfinite(ms) and ms > 0):
            note.value = tr("An SLO is a time: type a number of milliseconds above 0.")
            return
        slo_s = ms / 1e3
        show_figure(out, load_curve(points, slo_s), tr("latency against throughput, SLO {ms:,g} ms", ms=ms))
        best = best_within(points, slo_s)
        note.value = (tr("Within TTFT p99 {ms:,g} ms, sustained: at most <b>{tps:.1f} tokens/s</b> (at {rate:.2f} "
                         "requests/s).", ms=ms, tps=best.steady.tokens_per_s, rate=best.rate) if best else
                      tr("No rate tried meets TTFT p99 within {ms:,g} ms with its queue steady.", ms=ms))
        ends = 10**slider.min, 10**slider.max
        if not ends[0] <= ms <= ends[1]:
            note.value += " " + tr("(The slider spans {lo:,g}-{hi:,g} ms, half the fastest to twice the slowest "
                                   "p99 measured; the view uses the typed {ms:,g} ms.)",
                                   lo=_ms(ends[0]), hi=_ms(ends[1]), ms=ms)

    def from_slider(change) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            box.value = _ms(change["new"])
        finally:
            busy[0] = False
        redraw(box.value)

    def from_box(change) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            if isinstance(change["new"], (int, float)) and math.isfinite(change["new"]):
                slider.value = min(max(change["new"], 10**slider.min), 10**slider.max)
        finally:
            busy[0] = False
        redraw(change["new"])

    slider.observe(from_slider, names="value")
    box.observe(from_box, names="value")
    redraw(box.value)
    note.add_class("inferlab-slo-note")
    view = w.VBox([w.HBox([slider, box]), note, out]).add_class("inferlab-slo")
    view.controls = {"slider": slider, "box": box}  # type: ignore[attr-defined]
    return titled(view, tr("SLO slider ({n} arrival rates): run the cell to move it", n=len(points)))


def _ms(value: float) -> float:
    """A slider position as the box shows it: whole milliseconds (tenths below 10 ms)."""
    return round(value) if value >= 10 else round(value, 1)
