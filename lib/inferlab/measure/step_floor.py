"""A decode step against the read of its own weights, at batch 1 and beside small batches, measured in one run.

A batch-1 decode step is bound by reading the weights: its floor is the weight bytes over the rate this machine
streams them. That rate drifts on a shared machine (on the course's 2-core VM a 256 MB read ran at 27 GB/s one
minute and 50 GB/s the next), so a floor measured once and a step timed minutes later can disagree by 2x either
way. ``step_floor`` therefore pairs them: each round reads every matrix the step reads (``W.sum()`` over the same
tensors: the same bytes, no arithmetic to speak of) and then runs the steps of every batch size, the order rotating
round to round (``timing.interleave``); each step is divided by the read of its own round, and the median over
rounds is the step's ``x floor``. Notebook 08 and ``python -m inferlab.tools.bench`` print it.

    >>> step_floor(m, batches=(1, 2, 4))       # doctest: +SKIP
    StepFloor(batch 1: 14.9 ms, 1.41x its read floor; batch 2: 15.2 ms ...)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import _hf
from ..errors import check_number
from ..fast import FastDecoder
from ..i18n import tr
from ..models import Model
from ..timing import interleave, summarize, time_call
from .sweeps import random_fill


@dataclass(frozen=True)
class StepFloor:
    """Decode steps of the fast path at several batch sizes, each against the read of the weights in its round."""

    batches: tuple[int, ...]
    step_s: dict[int, float]  # batch -> median seconds per step (over rounds, each the median of its steps)
    x_floor: dict[int, float]  # batch -> median over rounds of step / that round's read of the weights
    read_s: float  # median seconds to read the step's weights once
    weight_bytes: int  # the bytes a step reads: every block matrix and the LM head
    layouts: dict[int, str]  # batch -> the decoder's layout ("packed; padded: qkv 1 -> 4 rows" ...)
    rounds: int
    compiled_s: float | None = None  # batch 1, ``compile=True`` (None: not asked, or it could not compile)
    compiled_x_floor: float | None = None
    compiled_layout: str = ""  # what the compiled candidate's choice took, or why it is missing

    @property
    def read_bytes_per_s(self) -> float:
        return self.weight_bytes / self.read_s

    def batch_one_against(self, batch: int) -> float:
        """Batch 1's step time over ``batch``'s (1.0: as fast; above 1: batch 1 is slower)."""
        return self.step_s[1] / self.step_s[batch]

    def __repr__(self) -> str:
        parts = "; ".join(tr("batch {b}: {ms:.1f} ms, {x:.2f}x its read floor", b=b, ms=self.step_s[b] * 1e3,
                             x=self.x_floor[b]) for b in self.batches)
        return f"StepFloor({parts}; {tr('weights read at {gbs:.1f} GB/s', gbs=self.read_bytes_per_s / 1e9)})"


def step_matrices(model: Model) -> list[torch.Tensor]:
    """The matrices a decode step reads: every block's four and the LM head (the model's own tensors)."""
    mats = [p.weight for t in _hf.block_tensors(model) for p in (t.qkv, t.attn_out, t.fc, t.mlp_out)]
    return [*mats, _hf.head_weight(model)]


def step_floor(model: Model, batches: Sequence[int] = (1, 2, 4), *, context: int = 64, rounds: int = 7,
               steps: int = 3, compile: bool = False) -> StepFloor:
    """Time the fast path's decode step (``FastDecoder``, ``weights="auto"``) at each batch size, ``steps`` steps
    at the same position per round, interleaved with a read of the step's weights; see the module doc.

    Args:
        batches: batch sizes (1 among them for ``batch_one_against``).
        context: cached positions the steps attend over (random keys and values: ``sweeps.random_fill``).
        compile: also a batch-1 ``FastDecoder(..., compile=True)`` (tens of seconds of compiling first; where the
            compiled candidate lost to an eager layout, that layout is what its row measures, and says so).
    """
    check_number("context", context, low=1, high=model.info.n_ctx - 1, integer=True, fix="e.g. context=64")
    check_number("rounds", rounds, low=1, integer=True, fix="e.g. rounds=7")
    check_number("steps", steps, low=1, integer=True, fix="e.g. steps=3")
    for b in batches:
        check_number("batches", b, low=1, high=256, integer=True, fix="e.g. batches=(1, 2, 4)")
    batches = tuple(sorted({int(b) for b in batches}))
    decoders = {b: FastDecoder(model, context + 1, batch=b) for b in batches}
    compiled = FastDecoder(model, context + 1, compile=True) if compile else None
    for dec in [*decoders.values(), *([compiled] if compiled else [])]:
        random_fill(dec, context)
    mats = step_matrices(model)

    def step(dec: FastDecoder) -> float:  # every timed step decodes at the same position
        return summarize(time_call(lambda: dec.step_again(context), repeats=steps, warmup=0,
                                   device=model.device)).median

    def read() -> float:
        return summarize(time_call(lambda: [w.sum() for w in mats], repeats=steps, warmup=0,
                                   device=model.device)).median

    # one round: the read, then every batch's steps, the order rotating between rounds
    runs = {"read": read, **{f"batch {b}": (lambda d=dec: step(d)) for b, dec in decoders.items()}}
    if compiled is not None:
        runs["compiled"] = lambda: step(compiled)
    with torch.inference_mode():
        timed = interleave(runs, rounds)
    reads = timed["read"]
    step_s = {b: statistics.median(timed[f"batch {b}"]) for b in batches}
    x_floor = {b: statistics.median(s / r for s, r in zip(timed[f"batch {b}"], reads, strict=True)) for b in batches}
    layouts = {b: (dec.weights + (f"; {dec.rows_plan.summary(b)}" if dec.rows_plan is not None else ""))
               for b, dec in decoders.items()}
    extra = {}
    if compiled is not None:
        extra = {"compiled_s": statistics.median(timed["compiled"]),
                 "compiled_x_floor": statistics.median(s / r for s, r in zip(timed["compiled"], reads, strict=True)),
                 "compiled_layout": ("compiled " if compiled.compiled else "eager ") + compiled.weights}
    return StepFloor(batches, step_s, x_floor, statistics.median(reads),
                     sum(w.numel() * w.element_size() for w in mats), layouts, rounds, **extra)


def decode_targets(floor: StepFloor, bench: dict | None = None) -> list:
    """Issue 47's targets as ``measure.targets.TargetRow``s: the batch-1 step against its read floor (eager, and
    compiled where measured), against batch 2 and 4, and, from a benchmark result (``tools.bench``'s ``bench_model``),
    the fast path's and the engine's TPOT against Hugging Face's ``generate()``."""
    from .targets import ratio_row

    def row(measure: str, value: float, at_most: float, detail: str):
        return ratio_row(measure, value, at_most=at_most, detail=detail)  # the benchmarks' one kind of row

    ms = {b: f"{s * 1e3:.1f} ms" for b, s in floor.step_s.items()}
    read = tr("the weights ({mb:.0f} MB) read in {ms:.1f} ms ({gbs:.1f} GB/s), median of {n} rounds",
              mb=floor.weight_bytes / 1e6, ms=floor.read_s * 1e3, gbs=floor.read_bytes_per_s / 1e9, n=floor.rounds)
    rows = [row(tr("fast path, batch-1 decode step / read floor (read in the same round)"), floor.x_floor[1], 1.5,
                tr("step {ms} ({layout}); {read}", ms=ms[1], layout=floor.layouts[1], read=read))]
    if floor.compiled_x_floor is not None:
        rows.append(row(tr("fast path compiled, batch-1 decode step / read floor"), floor.compiled_x_floor, 1.3,
                        tr("step {ms:.1f} ms ({layout})", ms=floor.compiled_s * 1e3, layout=floor.compiled_layout)))
    for b in (b for b in floor.batches if b > 1):
        rows.append(row(tr("batch-1 step / batch-{b} step (no slower, within 5%)", b=b), floor.batch_one_against(b),
                        1.05, tr("{one} against {other} ({layout})", one=ms[1], other=ms[b], layout=floor.layouts[b])))
    variants = (bench or {}).get("variants", {})
    hf = variants.get("generate()", {}).get("tpot_s")
    for name, at_most in (("fast", 0.5), ("engine", 1.05)):
        if hf and name in variants:
            tpot = variants[name]["tpot_s"]
            rows.append(row(tr("{name} TPOT / generate() TPOT", name=name), tpot / hf, at_most,
                            tr("{a:.1f} ms against {b:.1f} ms, interleaved", a=tpot * 1e3, b=hf * 1e3)))
    return rows
