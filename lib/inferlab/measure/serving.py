"""The forward ``serve.run`` serves with, timed: ``forward_times`` (one paged forward of a batch), and one decode
step at several batch sizes (notebook 09 §1: why servers batch), as a ``Sweep`` the gate judges like every batch
sweep. The runs built on it (each serving idea with and without) are ``measure.serve_runs``.

    >>> serve_step_sweep(g, [1, 4, 16]).medians      # seconds per step                  # doctest: +SKIP
"""

from __future__ import annotations

import statistics

from .. import gate
from ..errors import check_number
from ..i18n import tr
from ..models import Model
from ..serve.paged import PagedKV, Segment
from ..timing import summarize, time_call
from .sweeps import Sweep, check_sizes, meta


def forward_times(model: Model, batch: int, tokens: int, context: int = 0, *, repeats: int = 3) -> tuple[float, ...]:
    """Seconds of each repeat of one paged forward (``serve.run``'s, weights ``"auto"``): ``batch`` requests each
    running ``tokens`` new tokens after ``context`` positions already in their blocks (``tokens=1``: a decode step
    of the whole batch)."""
    bs = 16
    per = -(-(context + tokens) // bs)
    kv = PagedKV(model, batch * per, bs)
    ids = tuple(100 + i % 1000 for i in range(tokens))
    segments = [Segment(ids, context, tuple(range(i * per, (i + 1) * per)), True) for i in range(batch)]
    return tuple(time_call(lambda: kv.forward(segments), repeats=repeats, device=model.device))


def forward_s(model: Model, batch: int, tokens: int, context: int = 0, *, repeats: int = 3) -> float:
    """Median seconds of one paged forward (``forward_times``)."""
    return statistics.median(forward_times(model, batch, tokens, context, repeats=repeats))


def serve_step_sweep(model: Model, batches, *, context: int = 32, repeats: int = 3) -> Sweep:
    """One decode step of the paged forward ``serve.run`` serves with, at each batch size: a ``Sweep``
    (``job="decode-batch"``, as ``measure.batch_sweep``'s, so ``viz.latency.batch`` draws it).

    ``measure.batch_sweep`` times the engine's step, a different forward from the one sections 2-7 of notebook 09
    run. Leaves the gate's ``batch`` record (``path="serve"``); a point the next batch size beat by more than
    ``gate.BATCH_DROP`` is timed once more after the sweep, as ``batch_sweep`` does (its kernels, or a disturbance).

    >>> serve_step_sweep(g, [1, 4, 16]).medians      # seconds per step, one per batch size  # doctest: +SKIP
    """
    batches = check_sizes("batches", batches, 1, 4096)
    check_number("repeats", repeats, low=1, integer=True)
    check_number("context", context, low=1, high=model.info.n_ctx - 1, integer=True)
    times = tuple(forward_times(model, b, 1, context, repeats=repeats) for b in batches)
    sweep = Sweep("decode-batch", tr("batch size (sequences)"), batches, times, batches, batch=1, context=context,
                  **meta(model), note=tr("serve's paged forward"))
    med = sweep.medians
    again = [summarize(forward_times(model, b, 1, context, repeats=repeats)).median
             if k + 1 < len(med) and med[k + 1] < (1 - gate.BATCH_DROP) * med[k] else None
             for k, b in enumerate(batches)]
    gate.batch(model.info, batches, med, via="serve_step_sweep", job="decode", path="serve",
               fastest=[min(t) for t in times], slowest=[max(t) for t in times], again=again)
    return sweep
