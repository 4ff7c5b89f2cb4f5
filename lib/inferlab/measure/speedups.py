"""Each speed-up technique of notebook 08, measured side by side on this machine.

- ``quant_rows``: weight formats (bytes, speed, perplexity on held-out text), one ``QuantRow`` each.
- ``prefill_paths``: a long prompt read by the engine and by a fast decoder, each run after a matmul-rate
  measurement and judged against the floor at that rate (``PrefillTimes``).
- ``decode_paths``: every way to decode, interleaved (engine, static cache, the fast paths, compiled),
  one ``PathRow`` each. ``answer`` runs one request on a path and ``path_runs`` makes each path a timed
  run (the benchmark times the same); ``compiled_decoder`` builds the compiled one (or says why it
  cannot) and ``fast_decoders`` the fast paths a profile or the benchmark compares.
- ``scoreboard_rows``: each technique against its baseline, as text for ``viz.speed.scoreboard``.

Attention kernels are ``measure.kernels.kernel_sweep``; batching is ``measure.sweeps.batch_sweep``. One piece: the
techniques are timed by one set of interleaved runs and share their rows, so they are read side by side here.
Every path must produce the same greedy tokens; the rows carry them so notebooks can check.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from .. import gate
from ..cost import MachineProfile, Shape, prefill_floor_at
from ..engine import generate, prefill
from ..errors import one_line
from ..fast import FastDecoder, onednn_packing
from ..i18n import tr
from ..models import Model
from ..paths import heldout_text
from ..quantize import perplexity
from ..timing import interleave, summarize, time_call
from .kernels import KernelComparison
from .machine import machine_profile, rate_then, x_floor_paired
from .sweeps import Sweep


def bench_prompt(model: Model, tokens: int) -> str:
    """The first ``tokens`` tokens of the held-out passage, as text."""
    ids = model.encode(heldout_text())[:tokens]
    return model.decode(ids)


# ----------------------------------------------------------------------------- weight formats
@dataclass(frozen=True)
class QuantRow:
    """One weight format: its bytes, the engine's median TTFT/TPOT with it, and held-out perplexity."""

    kind: str  # "fp32", "bf16", "int8" ...
    method: str
    weight_bytes: int  # all stored weights
    step_bytes: int  # what one decode step reads
    ttft_s: float
    tpot_s: float
    perplexity: float
    predicted_speedup: float | None = None  # fp32's step bytes / these (None without an fp32 row)
    measured_speedup: float | None = None  # fp32's TPOT / this TPOT

    def __repr__(self) -> str:
        return tr("QuantRow({kind}: {mb:.1f} MB per step, TPOT {tpot:.2f} ms, perplexity {perplexity:.2f})",
                  kind=self.kind, mb=self.step_bytes / 1e6, tpot=self.tpot_s * 1e3, perplexity=self.perplexity)


def quant_rows(quantized: Mapping, prompt: str, new_tokens: int = 16, *, repeats: int = 3,
               text: str | None = None, quality: bool = True) -> list[QuantRow]:
    """Per ``inferlab.quantize.Quantized``: bytes, engine TTFT/TPOT (interleaved), perplexity on ``text``
    (default: the held-out text, ``paths.heldout_text()``). ``quality=False`` leaves perplexity out (``nan``):
    for random weights (GPT-2's shape, timed only), whose perplexity means nothing.

    With an ``fp32`` entry, also ``predicted_speedup`` (its bytes per step / these) and
    ``measured_speedup`` (its TPOT / this TPOT).
    """
    lat = interleave({k: (lambda v=v: generate(v.model, prompt, new_tokens, stop_at_eos=False).latency)
                      for k, v in quantized.items()}, repeats)
    rows = [QuantRow(k, v.method, v.weight_bytes, v.step_bytes, summarize([x.ttft for x in lat[k]]).median,
                     summarize([x.tpot for x in lat[k]]).median,
                     perplexity(v.model, text).perplexity if quality else math.nan)
            for k, v in quantized.items()]
    ref = next((r for r in rows if r.kind == "fp32"), None)
    if ref is None:
        return rows
    return [QuantRow(**{**r.__dict__, "predicted_speedup": ref.step_bytes / r.step_bytes,
                        "measured_speedup": ref.tpot_s / r.tpot_s}) for r in rows]


# ----------------------------------------------------------------------------- decode paths
@dataclass(frozen=True)
class PathRow:
    """Median TTFT and TPOT of one decode path (seconds)."""

    label: str  # which path: the same names in every run (notebooks check them)
    ttft_s: float
    tpot_s: float
    tokens: tuple[int, ...]  # the greedy ids it produced (all paths must agree)
    extra_bytes: int | None = None  # memory a fast path adds (its cache and weight copies)
    note: str = ""  # what this run measured that the label cannot say, e.g. "lost to packed"

    @property
    def shown(self) -> str:
        """The label for a chart or table: with the note, when there is one."""
        return f"{self.label} ({self.note})" if self.note else self.label


def answer(path: Model | FastDecoder, prompt: str, new_tokens: int, **settings) -> tuple[float, float, tuple[int, ...]]:
    """One greedy answer on one decode path: TTFT and TPOT (seconds) and the ids it produced.

    ``path``: a ``Model`` (the engine, ``inferlab.generate``, with ``settings`` such as
    ``cache_implementation="static"`` or ``record="all"``) or a ``FastDecoder`` (its own ``generate``).
    """
    run = partial(generate, path) if isinstance(path, Model) else path.generate
    trace = run(prompt, new_tokens, stop_at_eos=False, **settings)
    return trace.latency.ttft, trace.latency.tpot, tuple(trace.generated_ids)


def path_runs(model: Model, prompt: str, new_tokens: int, *, engine: Mapping[str, dict],
              decoders: Mapping[str, FastDecoder]) -> dict[str, Callable[[], tuple[float, float, tuple[int, ...]]]]:
    """Each decode path as a function of no arguments answering ``prompt`` once (``answer``), for ``timing.interleave``.

    ``engine``: name -> ``inferlab.generate`` settings of each engine path; ``decoders``: name -> fast decoder.
    ``decode_paths`` and ``python -m inferlab.tools.bench`` both time these.
    """
    return {**{k: partial(answer, model, prompt, new_tokens, **kw) for k, kw in engine.items()},
            **{k: partial(answer, d, prompt, new_tokens) for k, d in decoders.items()}}


def compiled_decoder(model: Model, slots: int, prompt: str, **kwargs) -> tuple[FastDecoder | None, str | None]:
    """A ``FastDecoder(compile=True)`` compiled now (by a 2-token answer), or ``None`` and why compiling failed.

    With ``weights="auto"`` (the default) the compiled step is one candidate of the measured choice:
    where an eager layout steps faster here, the decoder returned is that one (``dec.compiled`` False).

    ``torch.compile`` needs a C++ compiler on CPUs (and Triton on GPUs); where it cannot compile, the
    callers here leave the compiled path out and say so instead of stopping.
    """
    try:
        dec = FastDecoder(model, slots, compile=True, **kwargs)
        failed = dec.choice.left_out if dec.choice is not None else {}
        if failed:  # weights="auto" measured the compiled candidate and it could not run
            return None, f"torch.compile failed: {next(iter(failed.values()))}"
        dec.generate(prompt, 2, stop_at_eos=False)
        return dec, None
    except Exception as e:  # torch.compile raises many kinds (no compiler, unsupported op ...)
        return None, f"torch.compile failed: {one_line(e)}"


def fast_decoders(model: Model, slots: int, prompt: str, *,
                  compile: bool) -> tuple[dict[str, FastDecoder], dict[str, str]]:
    """The fast paths a profile or the benchmark compares, and what was left out (name -> why).

    ``"fast"``: ``FastDecoder(model, slots)`` (``weights="auto"``, eager); with ``compile``, ``"fast+compile"``
    (``compiled_decoder``: compiles now, seconds to a minute) unless this PyTorch cannot compile.
    """
    decoders, left_out = {"fast": FastDecoder(model, slots)}, {}
    if compile:
        dec, why = compiled_decoder(model, slots, prompt)
        if dec is None:
            left_out["fast+compile"] = why
        elif not dec.compiled and dec.weights == decoders["fast"].weights:  # the same code path as "fast": one bar
            left_out["fast+compile"] = tr("the compiled step lost to the eager {weights} layout, which is the fast "
                                          "step already measured", weights=dec.weights)
        else:
            decoders["fast+compile"] = dec
    return decoders, left_out


def decode_paths(model: Model, prompt: str, new_tokens: int = 16, *, repeats: int = 3,
                 compile: bool = False, slots: int | None = None) -> list[PathRow]:
    """TTFT/TPOT of each way to decode (greedy), interleaved, after one warm-up run each.

    Paths: the engine (``DynamicCache``), the engine with a pre-allocated ``StaticCache``, the fast
    path with the tied LM head, with the transposed head, with oneDNN-packed weights (CPU), and
    (``compile=True``) compiled (on a CPU: ``"rows"`` weights, see ``inferlab.fast``); on CUDA also with
    a CUDA graph. A compiled path that cannot be built is left out with a warning that says why.
    ``slots``: the fast decoders' cache size (at least prompt + new tokens + 1, the default); pass the
    size of another compiled decoder of the same model to reuse its compiled code.
    """
    n = max(len(model.encode(prompt)) + new_tokens + 1, slots or 0)
    decoders = {"fast (tied head)": FastDecoder(model, n, weights="tied", cuda_graph=False),
                "fast (transposed head)": FastDecoder(model, n, weights="transposed", cuda_graph=False)}
    if model.device.type == "cpu" and onednn_packing(model.info.dtype):
        decoders["fast (oneDNN packed)"] = FastDecoder(model, n, weights="packed")
    if compile:
        dec, why = compiled_decoder(model, n, prompt, cuda_graph=False)
        same = next((k for k, d in decoders.items() if dec is not None and not dec.compiled
                     and d.weights == dec.weights), None)  # weights="auto" kept an eager layout timed already
        if dec is None:
            warnings.warn(tr("decode_paths: left out fast + torch.compile ({why})", why=why), stacklevel=2)
        elif same is not None:  # never the same code path as two rows (two bars of one path)
            warnings.warn(tr("decode_paths: left out fast + torch.compile (the compiled step lost to the eager "
                             "{weights} layout, already timed as '{same}')", weights=dec.weights, same=same),
                          stacklevel=2)
        else:  # an eager layout not timed above keeps the row, its note says so; a compiled one names its layout
            decoders["fast + torch.compile"] = dec
    if model.device.type == "cuda":
        decoders["fast + CUDA graph"] = FastDecoder(model, n, cuda_graph=True)

    runs = path_runs(model, prompt, new_tokens, decoders=decoders,
                     engine={"engine (DynamicCache)": {}, "engine + StaticCache": {"cache_implementation": "static"}})
    results = interleave(runs, repeats)

    def note(k: str) -> str:
        dec = decoders.get(k)
        if dec is None or not k.endswith("compile"):
            return ""
        return tr("lost to {weights}", weights=dec.weights) if not dec.compiled else dec.weights  # the winning layout

    rows = [PathRow(k, summarize([v[0] for v in vals]).median, summarize([v[1] for v in vals]).median, vals[0][2],
                    decoders[k].extra_bytes if k in decoders else None, note(k))
            for k, vals in results.items()]
    context = len(model.encode(prompt))
    for r in rows:  # the engine's step, and a fast path in the layout this machine chose (inferlab.gate)
        chosen = r.label in decoders and decoders[r.label].choice is not None
        if r.label == "engine (DynamicCache)" or chosen:
            gate.step(model.info, r.tpot_s, via=f"decode_paths ({r.label})", path="fast" if chosen else "engine",
                      context=context)
    return rows


@dataclass(frozen=True)
class PrefillTimes:
    """A long prompt read by the engine and by a fast decoder, against its roofline floor at the speed of the moment.

    Each run is timed right after a short matmul-rate measurement (``machine.rate_then``), and each path's
    ``*_x_floor`` is the median over its runs of the run against the floor at that run's rate: on a
    machine whose speed drifts, a ratio of a typical time to a rate from another minute says more about
    the drift than about the path.
    """

    tokens: int
    engine_s: float  # median seconds to read the prompt into a cache
    fast_s: float
    engine_x_floor: float  # median over runs of (run / floor at the rate measured just before it)
    fast_x_floor: float
    flops_per_s: float  # the median of the matmul rates measured before the runs
    floor_s: float  # the prefill roofline floor at that rate

    def __repr__(self) -> str:
        return tr("PrefillTimes({tokens} tokens: engine {engine:.0f} ms ({engine_x:.2f}x floor), fast {fast:.0f} ms "
                  "({fast_x:.2f}x), floor {floor:.0f} ms at {gflops:.0f} GFLOP/s, each run against the rate "
                  "measured just before it)", tokens=self.tokens, engine=self.engine_s * 1e3,
                  engine_x=self.engine_x_floor, fast=self.fast_s * 1e3, fast_x=self.fast_x_floor,
                  floor=self.floor_s * 1e3, gflops=self.flops_per_s / 1e9)


def prefill_paths(model: Model, decoder: FastDecoder, ids: list[int], *, repeats: int = 3,
                  machine: MachineProfile | None = None) -> PrefillTimes:
    """Seconds to read the prompt ``ids`` (one sequence) into a cache: engine and fast path, interleaved.

    TTFT without tokenizing and sampling: what the roofline's prefill floor bounds. Each run follows
    a matmul-rate measurement and is judged against the floor at that rate (``PrefillTimes``).
    ``machine`` supplies the bandwidth side of the floor (default: ``machine_profile``).
    """
    device, dtype = model.device, model.info.dtype
    base, shape = machine or machine_profile(device, dtype), Shape.from_info(model.info)

    floor_at = partial(prefill_floor_at, shape, len(ids), base)  # FLOP/s -> floor seconds

    def timed(fn):
        return rate_then(lambda: time_call(fn, repeats=1, warmup=0, device=device)[0], device, dtype)

    runs = interleave({"engine": timed(lambda: prefill(model, [ids])), "fast": timed(lambda: decoder.prefill([ids]))},
                      repeats)
    (eng_rates, eng_s), (fast_rates, fast_s) = (list(zip(*runs[k])) for k in ("engine", "fast"))
    rate = statistics.median(eng_rates + fast_rates)
    return PrefillTimes(len(ids), summarize(eng_s).median, summarize(fast_s).median,
                        x_floor_paired(eng_s, eng_rates, floor_at), x_floor_paired(fast_s, fast_rates, floor_at),
                        rate, floor_at(rate))


# ----------------------------------------------------------------------------- the scoreboard
@dataclass(frozen=True)
class ScoreRow:
    """One technique on the scoreboard: its effect on TTFT, TPOT, memory and quality, as text against its baseline."""

    technique: str
    ttft: str
    tpot: str
    memory: str
    quality: str


def scoreboard_rows(kernels: KernelComparison, qrows: list[QuantRow], paths: dict, batch: Sweep) -> list[ScoreRow]:
    """One row per technique, as text relative to the default: for ``viz.speed.scoreboard``.

    Args:
        kernels: ``kernel_sweep`` with ``"eager"`` and ``"sdpa"`` (compared at the longest prompt).
        qrows: ``quant_rows`` (each format against fp32).
        paths: ``{name: (decode_paths rows, floor seconds)}`` (each path against the first).
        batch: a decode ``batch_sweep`` (the largest batch against the first).
    """
    n, e, s = kernels.lengths[-1], kernels.sweeps["eager"], kernels.sweeps["sdpa"]
    pe, ps = kernels.peak_bytes["eager"][-1], kernels.peak_bytes["sdpa"][-1]
    board = [ScoreRow(tr("SDPA vs eager attention (prefill)"),
                      tr("x{ratio:.2f} at T={n}", ratio=s.medians[-1] / e.medians[-1], n=n), "-",
                      tr("x{ratio:.2f} peak", ratio=ps / max(pe, 1)),
                      tr("same (max logit diff {diff:.1e})", diff=kernels.agree))]
    ref = next(r for r in qrows if r.kind == "fp32")
    board += [ScoreRow(tr("{kind} weights", kind=r.kind), f"x{r.ttft_s / ref.ttft_s:.2f}",
                       f"x{r.tpot_s / ref.tpot_s:.2f}", tr("{mb:.1f} MB read/step", mb=r.step_bytes / 1e6),
                       tr("perplexity {perplexity:.2f} ({change:+.2%})", perplexity=r.perplexity,
                          change=r.perplexity / ref.perplexity - 1))
              for r in qrows if r.kind != "fp32"]
    for name, (rows, floor_s) in paths.items():
        base = rows[0]
        board += [ScoreRow(tr("{path} ({model})", path=r.shown, model=name), f"x{r.ttft_s / base.ttft_s:.2f}",
                           tr("x{ratio:.2f} ({floor:.2f}x floor)", ratio=r.tpot_s / base.tpot_s,
                              floor=r.tpot_s / floor_s),
                           "-" if r.extra_bytes is None else f"+{r.extra_bytes / 1e6:.0f} MB",
                           tr("same tokens") if r.tokens == base.tokens else tr("different tokens"))
                  for r in rows[1:]]
    b0, b1 = batch.xs[0], batch.xs[-1]
    step0, step1 = batch.medians[0], batch.medians[-1]
    board.append(ScoreRow(tr("batch {big} vs {small}", big=b1, small=b0), "-",
                          tr("x{ratio:.2f} per user", ratio=step1 / step0), tr("x{times} KV cache", times=b1 // b0),
                          tr("x{ratio:.1f} tokens/s", ratio=batch.tokens_per_s[-1] / batch.tokens_per_s[0])))
    return board
