"""Long context: decode steps over context x batch against the floor the KV cache sets, and attention's memory.

A decode step reads every weight once and every cached key and value of every sequence once. The roofline's
floor is (weight bytes + batch x (context + 1) x KV bytes per token) / bandwidth, so the KV cache outweighs the
weights from ``context x batch x KV bytes per token = weight bytes`` on (``predicted_crossover``). The sweep is
``sweeps.decode_sweep`` once per batch (one timing implementation); bandwidth is ``machine_profile``'s.

    >>> grid = decode_grid(g, [64, 256, 1000], [1, 8, 32], machine=machine_profile(g.device))   # doctest: +SKIP
    >>> grid.crossovers                                                                           # doctest: +SKIP
    >>> attention_memory(4096)        # peak bytes of eager, SDPA and tiled: one layer's 12 heads  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..cost import MachineProfile, Shape, decode_cost, kv_bytes_per_token
from ..errors import check_number
from ..flash import eager_attention, tiled_attention
from ..i18n import tr
from ..models import Model
from ..units import format_bytes
from .machine import machine_profile
from .profiling import peak_bytes
from .sweeps import Sweep, check_sizes, decode_sweep, out_of_memory_note


# --------------------------------------------------------------------- the crossover, predicted and measured
def predicted_crossover(shape: Shape, batch: int) -> float:
    """Context (tokens per sequence) at which ``batch`` sequences' KV cache weighs as much as the weights.

    >>> round(predicted_crossover(Shape("gpt2", 12, 12, 768, 50257, 1024), 8))   # 494,128,128 B / (8 x 73,728 B)
    838
    """
    check_number("batch", batch, low=1, integer=True, fix="batch counts sequences: use at least 1")
    return shape.weight_bytes / (batch * kv_bytes_per_token(shape))


def line_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)`` of ``ys`` against ``xs`` (at least two different xs)."""
    n = len(xs)
    if n != len(ys) or n < 2 or len(set(xs)) < 2:
        raise ValueError(f"a line needs two or more points at different x, got xs={list(xs)}, ys={list(ys)}. "
                         "Fix: sweep at least two contexts.")
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def measured_crossover(contexts: Sequence[int], seconds: Sequence[float]) -> float | None:
    """The context at which the measured step's context-dependent time equals its context-free time.

    A line ``a + b x context`` through the step times: the crossover is ``a / b``, where reading the cache
    costs as much as everything else the step does (the weights, and the fixed costs a roofline ignores).
    None when the step did not grow with context (slope <= 0); 0.0 when the line starts at or below zero.
    """
    a, b = line_fit(contexts, seconds)
    if b <= 0:
        return None
    return max(a, 0.0) / b


@dataclass(frozen=True)
class Crossover:
    """Where the KV cache takes over a decode step at one batch size: predicted by bytes, and measured."""

    batch: int
    predicted_context: float  # weight bytes / (batch x KV bytes per token)
    measured_context: float | None  # intercept / slope of the measured step times; None: they did not grow

    @property
    def measured_over_predicted(self) -> float | None:
        """Measured / predicted crossover context (None when nothing was measured to cross)."""
        return None if self.measured_context is None else self.measured_context / self.predicted_context

    def __repr__(self) -> str:
        if self.measured_context is None:
            return tr("Crossover(batch {batch}: predicted at context {predicted:,.0f}; measured: the step did not "
                      "grow with context)", batch=self.batch, predicted=self.predicted_context)
        return tr("Crossover(batch {batch}: predicted at context {predicted:,.0f}, measured at {measured:,.0f})",
                  batch=self.batch, predicted=self.predicted_context, measured=self.measured_context)


# --------------------------------------------------------------------- the decode grid
@dataclass(frozen=True)
class GridPoint:
    """One measured decode step at (context, batch), with the bytes the roofline counts for it."""

    context: int
    batch: int
    median_s: float
    floor_s: float  # (weight bytes + KV bytes) / bandwidth: the floor this lesson is about
    weight_bytes: int
    kv_bytes: int  # batch x (context + 1) x KV bytes per token
    compute_floor_s: float = 0.0  # FLOPs / the matmul rate: a big batch on few cores can sit above floor_s

    @property
    def times_floor(self) -> float:
        """Measured / the bandwidth floor."""
        return self.median_s / self.floor_s

    @property
    def bound(self) -> str:
        """"memory" or "compute": which floor the roofline puts higher at this point."""
        return "compute" if self.compute_floor_s > self.floor_s else "memory"

    def __repr__(self) -> str:
        return tr("GridPoint(context {context}, batch {batch}: {ms:.2f} ms, floor {floor:.2f} ms, KV {kv} / weights "
                  "{weights})", context=self.context, batch=self.batch, ms=self.median_s * 1e3,
                  floor=self.floor_s * 1e3, kv=format_bytes(self.kv_bytes), weights=format_bytes(self.weight_bytes))


@dataclass(frozen=True)
class DecodeGrid:
    """Decode steps over contexts (``sweeps[i].xs``) and batches (one ``Sweep`` per batch), with their floors."""

    sweeps: tuple[Sweep, ...]
    shape: Shape
    bytes_per_s: float  # the machine profile's bandwidth behind every floor
    note: str = ""  # e.g. the batch at which memory ran out
    flops_per_s: float = 0.0  # the machine profile's matmul rate (0: compute floors unknown)

    @property
    def points(self) -> tuple[GridPoint, ...]:
        """Every (context, batch) measured, batch by batch."""
        out = []
        for s in self.sweeps:
            for c, t in zip(s.xs, s.medians):
                work = decode_cost(self.shape, c, s.batch)
                out.append(GridPoint(c, s.batch, t, work.bytes / self.bytes_per_s, self.shape.weight_bytes,
                                     s.batch * (c + 1) * kv_bytes_per_token(self.shape),
                                     work.flops / self.flops_per_s if self.flops_per_s else 0.0))
        return tuple(out)

    @property
    def crossovers(self) -> tuple[Crossover, ...]:
        """Predicted and measured crossover context at each batch (measured needs two contexts or more)."""
        return tuple(Crossover(s.batch, predicted_crossover(self.shape, s.batch),
                               measured_crossover(s.xs, s.medians) if len(set(s.xs)) > 1 else None)
                     for s in self.sweeps)

    def __repr__(self) -> str:
        facts = {"model": self.shape.name, "contexts": list(self.sweeps[0].xs),
                 "batches": [s.batch for s in self.sweeps], "gbs": self.bytes_per_s / 1e9}
        if self.note:
            return tr("DecodeGrid({model}: contexts {contexts} x batches {batches}, bandwidth {gbs:.1f} GB/s; {note})",
                      note=self.note, **facts)
        return tr("DecodeGrid({model}: contexts {contexts} x batches {batches}, bandwidth {gbs:.1f} GB/s)", **facts)


def decode_grid(model: Model, contexts: Sequence[int], batches: Sequence[int], *, repeats: int = 3, warmup: int = 1,
                machine: MachineProfile | None = None, path: str = "engine", **options) -> DecodeGrid:
    """Time one decode step at every context in ``contexts`` for every batch in ``batches`` (``decode_sweep``).

    Stops at the first batch that runs out of memory, with a ``note``. ``machine``: the profile whose bandwidth
    sets the floors (default: ``machine_profile(model.device)``, measured once per machine).
    """
    check_number("repeats", repeats, low=1, integer=True)
    check_number("warmup", warmup, low=0, integer=True)
    contexts = check_sizes("contexts", contexts, 1, model.info.n_ctx - warmup - repeats)
    batches = check_sizes("batches", batches, 1, 1 << 20)
    machine = machine or machine_profile(model.device)
    sweeps, note = [], ""
    for b in batches:
        try:
            sweeps.append(decode_sweep(model, contexts, repeats=repeats, warmup=warmup, batch=b, path=path, **options))
        except RuntimeError as exc:
            note = out_of_memory_note(exc, model, b)
            break
    if not sweeps:
        raise RuntimeError(f"decode_grid: even batch {batches[0]} ran out of memory. Fix: use shorter contexts.")
    return DecodeGrid(tuple(sweeps), Shape.from_info(model.info), machine.bytes_per_s, note, machine.flops_per_s)


# --------------------------------------------------------------------- attention's peak memory
@dataclass(frozen=True)
class AttentionMemory:
    """Peak bytes allocated by one causal attention over ``[batch, heads, T, head_dim]``, three ways."""

    T: int
    heads: int
    head_dim: int
    block: int  # tiled_attention's block_q = block_k
    device: str
    eager_bytes: int  # the [T, T] scores, masked and softmaxed (flash.eager_attention)
    sdpa_bytes: int  # F.scaled_dot_product_attention(is_causal=True), whichever kernel PyTorch picks
    tiled_bytes: int  # flash.tiled_attention

    @property
    def tiled_over_eager(self) -> float:
        """Tiled peak / eager peak."""
        return self.tiled_bytes / self.eager_bytes

    def __repr__(self) -> str:
        return tr("AttentionMemory(T={T}, {heads} heads x {head_dim}: eager {eager}, SDPA {sdpa}, tiled {tiled} "
                  "(block {block}), on {device})", T=self.T, heads=self.heads, head_dim=self.head_dim,
                  eager=format_bytes(self.eager_bytes), sdpa=format_bytes(self.sdpa_bytes),
                  tiled=format_bytes(self.tiled_bytes), block=self.block, device=self.device)


def attention_memory(T: int, *, heads: int = 12, head_dim: int = 64, batch: int = 1, block: int = 64,
                     device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> AttentionMemory:
    """Peak memory (``profiling.peak_bytes``, as notebook 08 measures prefill) of eager, SDPA and tiled attention.

    Random q, k, v are made first, so each peak is what the attention itself allocates (its output included).
    """
    for name, value in (("T", T), ("heads", heads), ("head_dim", head_dim), ("batch", batch), ("block", block)):
        check_number(name, value, low=1, integer=True, fix=f"{name} counts something: use at least 1")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, heads, T, head_dim, generator=g, dtype=dtype).to(device) for _ in range(3))
    with torch.inference_mode():
        eager = peak_bytes(lambda: eager_attention(q, k, v), device)
        sdpa = peak_bytes(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), device)
        tiled = peak_bytes(lambda: tiled_attention(q, k, v, block_q=block, block_k=block), device)
    return AttentionMemory(T, heads, head_dim, block, str(torch.device(device)), eager, sdpa, tiled)
