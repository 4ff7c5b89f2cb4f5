"""The rows each packed product runs with on this machine (``RowPlan``), measured where it runs, then remembered.

oneDNN's kernels for a few rows do not all stream the weights equally fast: on some CPUs a product padded from one
row to four reads its matrix faster than the one-row product does. Which count wins differs by product (the small
attention output, the wide MLP, the LM head) and by CPU, so ``measure_rows`` times each kind of product at each
candidate count (``row_candidates``), and ``packed_rows`` keeps the plan beside the layout choices
(``fast.choice``'s file, key ``what="packed rows"``). The ``"packed"`` layout of ``FastDecoder`` and ``serve``'s
packed forward pad a product's fewer rows to its count (``layouts.linear_packed``), on weights packed once.

A product timed alone is not a step: the products of a step run one after another, each after a different matrix,
and a few percent between two counts is within one product's noise. So where a decoder can run whole steps
(``FastDecoder`` passes ``step``), the per-product plan is one candidate beside every *uniform* plan (each product
at the same count: the kernels a batch of that many runs), all timed as whole decode steps, in interleaved rounds
(``choose_by_steps``); the fastest is kept, and padding only where it beat the unpadded step by ``PAD_MARGIN``. A
batch-1 step padded to four then runs the kernels of a batch-4 step, on one sequence's attention.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from .. import _hf
from . import choice
from .layouts import PRODUCTS, ROW_COUNTS, RowPlan, linear_packed, pack


def row_candidates(batch: int) -> tuple[int, ...]:
    """The row counts a packed product of ``batch`` rows is timed at: its own, then the larger ``ROW_COUNTS``."""
    return (batch, *(r for r in ROW_COUNTS if r > batch))


ROUNDS = 7  # interleaved rounds per row count: a product takes milliseconds, and neighbouring counts differ by 5-15%
PAD_MARGIN = 0.97  # padding is kept only where it ran at most this fraction of the unpadded time (noise: not a win)


STEP_ROUNDS = 7  # interleaved rounds of whole steps per candidate plan (``choose_by_steps``)


def packed_rows(model, *, batch: int, step: Callable[[RowPlan], object] | None = None) -> RowPlan:
    """The rows each packed product runs fastest with here, for ``batch`` rows (a ``RowPlan``): remembered if it
    was measured before (the cache file, key ``what="packed rows"``), else measured now by ``measure_rows``. Given
    ``step`` (one decode step run with a plan), that plan is then checked against the uniform ones on whole steps by
    ``choose_by_steps`` (remembered too, key ``what="packed rows by step"``)."""
    plan = _remembered(model, batch, "packed rows")
    if plan is None:
        plan, times = measure_rows(model, batch=batch)
        _remember(model, batch, "packed rows", plan,
                  step_s={p: {str(r): t for r, t in ts.items()} for p, ts in times.items()})
    if step is None:
        return plan
    by_step = _remembered(model, batch, "packed rows by step")
    if by_step is None:
        by_step, whole = choose_by_steps(plan, batch, step)
        _remember(model, batch, "packed rows by step", by_step, whole_step_s=whole)
    return by_step


def _remembered(model, batch: int, what: str) -> RowPlan | None:
    """The plan kept under ``what`` for ``batch`` rows, or ``None`` (none, or one this version cannot read)."""
    key = choice.cache_key(model, batch=batch, compile=False, what=what)
    entry = choice._MEMORY.get(key) or choice._read_file().get(key)
    try:
        rows = {p: int(entry["rows"][p]) for p in PRODUCTS}
    except (TypeError, KeyError, ValueError):
        return None
    if not all(r in row_candidates(batch) for r in rows.values()):
        return None  # measured among other counts (an older version): measure again
    choice._MEMORY[key] = entry
    return RowPlan(rows)


def _remember(model, batch: int, what: str, plan: RowPlan, **times) -> None:
    choice.remember(choice.cache_key(model, batch=batch, compile=False, what=what),
                    {"rows": plan.rows, **times, "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})


def step_candidates(plan: RowPlan, batch: int) -> dict[str, RowPlan]:
    """The plans ``choose_by_steps`` times: unpadded first, each uniform count above ``batch``, then ``plan`` (the
    per-product one) where it is none of those."""
    out = {f"all {r}": RowPlan.uniform(r) for r in row_candidates(batch)}
    if plan not in out.values():
        out["per product"] = plan
    return out


def choose_by_steps(plan: RowPlan, batch: int, step: Callable[[RowPlan], object]) -> tuple[RowPlan, dict[str, float]]:
    """Time a whole decode step with each of ``step_candidates(plan, batch)`` (``STEP_ROUNDS`` interleaved rounds)
    and keep the fastest, padded only where it ran at most ``PAD_MARGIN`` of the unpadded step.
    Returns the plan and the seconds per step of every candidate (by name)."""
    plans = step_candidates(plan, batch)
    timed = choice.time_candidates({name: (lambda p=p: step(p)) for name, p in plans.items()}, rounds=STEP_ROUNDS)
    measured = {k: v for k, v in timed.items() if isinstance(v, float)}
    unpadded = measured.get(f"all {batch}", float("inf"))
    fastest = min(measured, key=measured.get)
    keep = fastest if measured[fastest] <= PAD_MARGIN * unpadded else f"all {batch}"
    return plans[keep], measured


def measure_rows(model, *, batch: int) -> tuple[RowPlan, dict[str, dict[int, float]]]:
    """Time each kind of packed product (every layer's, so the weights stream from memory as in a step) for
    ``batch`` rows padded to each of ``row_candidates(batch)``, in interleaved rounds (``time_candidates``).
    A product is padded only where that ran at most ``PAD_MARGIN`` of its unpadded time.
    Returns the plan and the seconds of every product at every count."""
    tensors = _hf.block_tensors(model)
    mats = {"qkv": [(t.qkv.weight.t(), t.qkv.bias) for t in tensors],
            "attn_out": [(t.attn_out.weight.t(), t.attn_out.bias) for t in tensors],
            "fc": [(t.fc.weight.t(), t.fc.bias) for t in tensors],
            "mlp_out": [(t.mlp_out.weight.t(), t.mlp_out.bias) for t in tensors],
            "head": [(_hf.head_weight(model), None)]}
    plan, times = {}, {}
    with torch.inference_mode():
        for product, ws in mats.items():
            x = torch.randn(batch, ws[0][0].shape[1], dtype=ws[0][0].dtype, device=ws[0][0].device)
            gelu = product == "fc"
            runs = {}
            for r in row_candidates(batch):
                packed = [(pack(w, r), b) for w, b in ws]
                runs[str(r)] = lambda packed=packed, r=r, x=x, gelu=gelu: [linear_packed(x, p, b, gelu, r)
                                                                          for p, b in packed]
            timed = choice.time_candidates(runs, rounds=ROUNDS)
            measured = {int(k): v for k, v in timed.items() if isinstance(v, float)}
            del runs
            fastest = min(measured, key=measured.get)
            keep_pad = fastest != batch and measured[fastest] <= PAD_MARGIN * measured.get(batch, float("inf"))
            plan[product] = fastest if keep_pad or batch not in measured else batch
            times[product] = measured
    return RowPlan(plan), times
