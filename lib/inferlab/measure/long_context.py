"""Long context: decode steps over context x batch against the floor the KV cache sets, and attention's memory.

A decode step reads every weight once and every cached key and value of every sequence once. The roofline's
floor is (weight bytes + batch x (context + 1) x KV bytes per token) / bandwidth, so the KV cache outweighs the
weights from ``context x batch x KV bytes per token = weight bytes`` on (``predicted_crossover``). The sweep is
``sweeps.decode_sweep`` once per batch (one timing implementation); bandwidth is ``machine_profile``'s.

    >>> grid = decode_grid(g, [64, 256, 1000], [1, 8, 32], machine=machine_profile(g.device))   # doctest: +SKIP
    >>> grid.crossovers                                                                           # doctest: +SKIP
    >>> attention_memory(4096)        # peak bytes of eager, SDPA and tiled: one layer's 12 heads  # doctest: +SKIP
    >>> attention_runs([256, 4096])   # the same with each one's time and counted bytes             # doctest: +SKIP
    >>> kv_heads_reads(shape, 1000, 8)   # one decode step's attention read with 12, 4 and 1 KV heads  # doctest: +SKIP

Over 300 lines on purpose, one piece: every measurement notebook 11 makes of long contexts, each beside the count it
is judged against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..cost import MachineProfile, Shape, decode_cost, kv_bytes_per_token
from ..errors import check_number
from ..fast import FastDecoder
from ..flash import (
    KvHeads,
    Traffic,
    decode_attention,
    eager_attention,
    eager_traffic,
    kv_heads_table,
    tiled_attention,
    tiled_traffic,
)
from ..i18n import tr
from ..models import Model
from ..timing import interleave, summarize, time_call
from ..units import format_bytes
from .machine import machine_profile
from .profiling import StepProfile, peak_bytes, profile_step
from .sweeps import Sweep, check_sizes, decode_call, decode_sweep, out_of_memory_note


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
    sets the floors (default: ``machine_profile(model.device)``, measured once per machine). ``path="fast",
    fill="random"`` (``options``, for ``decode_sweep``) times the fast path on a cache of random keys and values:
    no prefill of batch x context tokens before each point.
    """
    check_number("repeats", repeats, low=1, integer=True)
    check_number("warmup", warmup, low=0, integer=True)
    contexts = check_sizes("contexts", contexts, 1, model.info.n_ctx - warmup - repeats)
    batches = check_sizes("batches", batches, 1, 1 << 20)
    machine = machine or machine_profile(model.device)
    sweeps, note = [], ""
    for b in batches:
        try:
            if path == "fast" and options.get("weights", "auto") == "auto":
                FastDecoder(model, 64, batch=b)  # the layout chosen on a small cache (remembered), not on full ones
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


@dataclass(frozen=True)
class AttentionRun:
    """One causal attention at length ``T``, three ways: peak bytes, median seconds, and the bytes counted."""

    memory: AttentionMemory
    seconds: dict[str, float]  # "eager", "sdpa", "tiled" -> median seconds of one call
    eager_traffic: Traffic  # slow-memory bytes of the textbook version (flash.eager_traffic)
    tiled_traffic: Traffic  # ... of the tiled one with the same block (flash.tiled_traffic)

    @property
    def T(self) -> int:
        return self.memory.T

    def __repr__(self) -> str:
        return tr("AttentionRun(T={T}: eager {eager}, SDPA {sdpa}, tiled {tiled}; counted {eb} eager, {tb} tiled)",
                  T=self.T, eager=f"{self.seconds['eager'] * 1e3:.1f} ms", sdpa=f"{self.seconds['sdpa'] * 1e3:.1f} ms",
                  tiled=f"{self.seconds['tiled'] * 1e3:.1f} ms", eb=format_bytes(self.eager_traffic.bytes),
                  tb=format_bytes(self.tiled_traffic.bytes))


def _attention_calls(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int) -> dict:
    return {"eager": lambda: eager_attention(q, k, v),
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "tiled": lambda: tiled_attention(q, k, v, block_q=block, block_k=block)}


def attention_runs(lengths: Sequence[int], *, heads: int = 12, head_dim: int = 64, block: int = 64, repeats: int = 3,
                   device: torch.device | str = "cpu") -> list[AttentionRun]:
    """``attention_memory`` at each T in ``lengths``, with each version's time (the three take turns,
    ``timing.interleave``) and the slow-memory bytes ``flash`` counts for eager and tiled attention."""
    lengths = check_sizes("lengths", lengths, 1, 1 << 16)
    check_number("repeats", repeats, low=1, integer=True)
    out = []
    for T in lengths:
        mem = attention_memory(T, heads=heads, head_dim=head_dim, block=block, device=device)
        g = torch.Generator().manual_seed(0)
        calls = _attention_calls(*(torch.randn(1, heads, T, head_dim, generator=g).to(device) for _ in "qkv"), block)
        with torch.inference_mode():
            timed = interleave({name: (lambda f=f: time_call(f, repeats=1, warmup=0, device=device)[0])
                                for name, f in calls.items()}, repeats, warmup=0)  # attention_memory ran each
        out.append(AttentionRun(mem, {name: summarize(ts).median for name, ts in timed.items()},
                                eager_traffic(T, head_dim, heads=heads),
                                tiled_traffic(T, head_dim, heads=heads, block_q=block, block_k=block)))
    return out


# --------------------------------------------------------------------- fewer KV heads, measured
@dataclass(frozen=True)
class KvRead:
    """One decode step's attention over every layer's cache with ``kv_heads`` KV heads: bytes and time."""

    heads: KvHeads  # flash.kv_heads_table's row: bytes per token, MHA / GQA / MQA
    batch: int
    context: int
    cache_bytes: int  # every layer's K and V as allocated: batch x context x bytes per token
    seconds: float  # median of decode_attention over every layer
    max_diff: float  # largest |difference| from SDPA on K/V repeated for each query head (one layer)
    crossover: float  # predicted_crossover with this many KV heads, at this batch

    def __repr__(self) -> str:
        return tr("KvRead({kind}, {kv_heads} KV heads, batch {batch} x context {context}: {cache} read in {ms:.2f} ms, "
                  "{gbs:.1f} GB/s; crossover at context {cross:,.0f})", kind=self.heads.kind,
                  kv_heads=self.heads.kv_heads, batch=self.batch, context=self.context,
                  cache=format_bytes(self.cache_bytes), ms=self.seconds * 1e3,
                  gbs=self.cache_bytes / self.seconds / 1e9, cross=self.crossover)


def kv_heads_reads(shape: Shape, context: int, batch: int, kv_heads: Sequence[int] = (12, 4, 1), *, repeats: int = 5,
                   device: torch.device | str = "cpu") -> list[KvRead]:
    """Time ``flash.decode_attention`` over every layer of a random cache with each count of KV heads.

    A real step reads every layer's cache once; so does this (one tensor pair per layer: no cache of the CPU holds
    them all). The counts take turns (``timing.interleave``).
    """
    check_number("context", context, low=1, integer=True, fix="context counts cached tokens: use at least 1")
    check_number("batch", batch, low=1, integer=True, fix="batch counts sequences: use at least 1")
    check_number("repeats", repeats, low=1, integer=True)
    rows = kv_heads_table(shape, kv_heads)
    g = torch.Generator().manual_seed(0)
    D, L = shape.head_dim, shape.n_layer
    q = torch.randn(batch, shape.n_head, 1, D, generator=g).to(device)
    caches = {r.kv_heads: [tuple(torch.randn(batch, r.kv_heads, context, D, generator=g).to(device) for _ in "kv")
                           for _ in range(L)] for r in rows}

    def read(h: int) -> None:
        for k, v in caches[h]:
            decode_attention(q, k, v)

    with torch.inference_mode():
        timed = interleave({h: (lambda h=h: time_call(lambda: read(h), repeats=1, warmup=0, device=device)[0])
                            for h in caches}, repeats)
        diffs = {}
        for h, layers in caches.items():
            k, v = layers[0]
            rep = shape.n_head // h
            ref = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1))
            diffs[h] = float((decode_attention(q, k, v) - ref).abs().max())
    out = []
    for r in rows:
        nbytes = sum(t.numel() * t.element_size() for pair in caches[r.kv_heads] for t in pair)
        out.append(KvRead(r, batch, context, nbytes, summarize(timed[r.kv_heads]).median, diffs[r.kv_heads],
                          shape.weight_bytes / (batch * r.bytes_per_token)))
    return out


# --------------------------------------------------------------------- where a step's time goes, either side
def profile_sides(model: Model, batch: int, contexts: Sequence[int], *, repeats: int = 5, warmup: int = 2,
                  **options) -> dict[int, StepProfile]:
    """``profiling.profile_step`` of one fast decode step at ``batch`` and each context (a cache of random keys and
    values, as ``decode_grid(path="fast", fill="random")`` times): the share attention takes on each side of the
    crossover. ``options`` go to ``FastDecoder``."""
    check_number("batch", batch, low=1, integer=True, fix="batch counts sequences: use at least 1")
    check_number("repeats", repeats, low=1, integer=True)
    steps = warmup + 2 * repeats  # profile_step times, then profiles: each call appends a position
    contexts = check_sizes("contexts", contexts, 1, model.info.n_ctx - steps)
    out = {}
    for c in contexts:
        step = decode_call(model, c, batch, steps, path="fast", fill="random", **options)
        out[c] = profile_step(step, label=tr("batch {batch}, context {context}", batch=batch, context=c),
                              repeats=repeats, warmup=warmup, device=model.device)
    return out
