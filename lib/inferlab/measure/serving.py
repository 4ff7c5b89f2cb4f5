"""One decode step of the forward ``serve.run`` serves with, at several batch sizes (notebook 09 §1: why servers
batch), as a ``Sweep`` the gate judges like every batch sweep.

    >>> serve_step_sweep(g, [1, 4, 16]).medians      # seconds per step                  # doctest: +SKIP
"""

from __future__ import annotations

from .. import gate
from ..errors import check_number
from ..i18n import tr
from ..models import Model
from ..serve.compare import forward_times
from ..timing import summarize
from .sweeps import Sweep, check_sizes, meta


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
