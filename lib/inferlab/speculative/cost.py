"""What a round costs and what it is predicted to gain.

``verify_cost`` times one forward of k new tokens against a cache of ``context`` positions, for each k, on the
path ``generate`` verifies with (or another), with the roofline's floor beside it: while the forward is bound by
reading the weights, k tokens cost about what one costs. ``expected_tokens_per_round`` and ``predicted_speedup``
are Leviathan et al.'s (2023) formulas: with each guess accepted with chance alpha (independently), a round of k
guesses emits (1 - alpha^(k+1)) / (1 - alpha) tokens, and costs k draft steps (c each, in target steps) plus one
verify (``verify`` target steps, 1 on the roofline's flat part).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import _hf, gate
from ..cost import Shape, flops_per_token, kv_bytes_per_token
from ..engine import prefill
from ..errors import bad_value, check_number
from ..fast import FastDecoder
from ..i18n import tr
from ..measure.machine import machine_profile
from ..measure.sweeps import Sweep, check_sizes, meta, sample_ids
from ..models import Model, check_model
from ..plain import plain
from ..progress import progress
from ..timing import time_call
from .drafts import MAX_K
from .runners import PATHS, fast_supported


def expected_tokens_per_round(alpha: float, k: int) -> float:
    """Tokens one round emits on average: the accepted guesses plus the target's own, (1 - a^(k+1)) / (1 - a)."""
    check_number("alpha", alpha, low=0, high=1, fix="an acceptance rate is between 0 and 1")
    check_number("k", k, low=0, high=MAX_K, integer=True, fix="guess 0 to 64 tokens a round")
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, k: int, c: float, verify: float = 1.0) -> float:
    """Speed-up over plain decoding: tokens per round over the round's cost in target steps, ``k c + verify``.

    ``c``: one draft step's time over one target step (0 for prompt lookup). ``verify``: the verify forward's
    time over one target step (1 where k + 1 tokens cost one step; ``verify_cost`` measures it).
    """
    check_number("c", c, low=0, fix="a draft's cost is a time ratio, at least 0")
    check_number("verify", verify, low=0, low_open=True, fix="the verify's cost in target steps, above 0")
    return expected_tokens_per_round(alpha, k) / (k * c + verify)


@dataclass(frozen=True)
class VerifyCost:
    """One forward of ``k`` new tokens timed for each k (``sweep.xs``), with the roofline's floor for each."""

    sweep: Sweep
    path: str
    context: int
    floor_s: tuple[float, ...]  # max(FLOPs / matmul rate, bytes / bandwidth) at each k
    memory_floor_s: tuple[float, ...]  # bytes / bandwidth at each k: what a memory-bound forward cannot beat

    @property
    def ratios(self) -> tuple[float, ...]:
        """Median time at each k over the median at the first k (the first k is 1 in the usual sweep)."""
        first = self.sweep.medians[0]
        return tuple(t / first for t in self.sweep.medians)

    @property
    def predicted_ratios(self) -> tuple[float, ...]:
        """The floor at each k over the floor at the first k: flat while reading the weights dominates."""
        return tuple(f / self.floor_s[0] for f in self.floor_s)

    @property
    def predicted_knee(self) -> int | None:
        """The first k whose compute floor passes the memory floor (where k tokens stop costing one); None: none."""
        return next((k for k, f, m in zip(self.sweep.xs, self.floor_s, self.memory_floor_s) if f > m * (1 + 1e-9)),
                    None)

    def __repr__(self) -> str:
        return tr("VerifyCost({path} path, context {context}: k {ks} -> median ms {ms}, x first {ratios})",
                  path=self.path, context=self.context, ks=list(self.sweep.xs),
                  ms=[f"{t * 1e3:.2f}" for t in self.sweep.medians], ratios=[f"{r:.2f}" for r in self.ratios])

    def to_dict(self) -> dict:
        return plain(self)


def _floor(shape: Shape, context: int, k: int, batch: int, flops_per_s: float, bytes_per_s: float):
    """(max of the two floors, the memory floor) for ``batch`` sequences each reading ``k`` new tokens."""
    flops = batch * k * flops_per_token(shape, context + (k + 1) / 2)
    nbytes = shape.weight_bytes + batch * (context + k) * kv_bytes_per_token(shape)
    return max(flops / flops_per_s, nbytes / bytes_per_s), nbytes / bytes_per_s


def _verify_call(model: Model, path: str, context: int, k: int, batch: int):
    """Prefill ``[batch, context]``; a function that runs one forward of ``k`` tokens each and rolls it back."""
    ids = sample_ids(model, context, batch)
    new = sample_ids(model, k, batch, seed=1)
    if path == "fast":
        dec = FastDecoder(model, context + k, batch=batch)
        dec.prefill(ids)

        def run() -> None:
            dec.extend(new)
            dec.crop(context)
        return run
    _, cache = prefill(model, ids)

    @torch.no_grad()
    def run() -> None:
        _hf.forward(model, new, cache)
        cache.crop(context)
    return run


def verify_cost(model: Model, ks: Sequence[int], context: int = 32, *, repeats: int = 5, warmup: int = 1,
                path: str = "auto", batch: int = 1) -> VerifyCost:
    """Time one forward of ``k`` new tokens against ``context`` cached positions, for each k in ``ks``.

    ``path``: ``"auto"`` (what ``generate`` verifies with: the fast path where it runs the model), ``"fast"`` or
    ``"engine"`` (Hugging Face's forward). ``batch``: sequences verified together (a server's step).
    """
    check_model(model)
    if path not in ("auto", *PATHS):
        raise bad_value("path", path, tr("'auto' or one of {paths}", paths=PATHS), tr("leave path='auto'"))
    path = ("fast" if fast_supported(model) else "engine") if path == "auto" else path
    check_number("repeats", repeats, low=1, integer=True)
    check_number("warmup", warmup, low=0, integer=True)
    check_number("batch", batch, low=1, high=1024, integer=True, fix="verify 1 to 1,024 sequences together")
    ks = check_sizes("ks", ks, 1, MAX_K + 1)
    check_number("context", context, low=1, high=model.info.n_ctx - max(ks), integer=True,
                 fix="leave room for the k new tokens in the model's context")
    machine = machine_profile(model.device)
    shape = Shape.from_info(model.info)
    times, floors = [], []
    for k in progress(ks, tr("verify")):
        times.append(tuple(time_call(_verify_call(model, path, context, k, batch), repeats=repeats, warmup=warmup,
                                     device=model.device)))
        floors.append(_floor(shape, context, k, batch, machine.flops_per_s, machine.bytes_per_s))
    sweep = Sweep("verify", tr("tokens verified in one forward (k)"), ks, tuple(times), tuple(batch * k for k in ks),
                  batch=batch, context=context, **meta(model))
    if len(ks) >= 3:
        gate.sweep(model.info, ks, sweep.medians, via=f"verify_cost({path})", job="verify")
    return VerifyCost(sweep, path, context, tuple(f for f, _ in floors), tuple(m for _, m in floors))

