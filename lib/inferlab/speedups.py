"""Each speed-up technique of notebook 08, measured side by side on this machine.

- ``prefill_sweep``: eager vs SDPA attention as the prompt grows (time and peak memory).
- ``quant_rows``: weight formats (bytes, speed, perplexity on held-out text).
- ``decode_paths``: every way to decode, interleaved (engine, static cache, the fast paths, compiled).
- ``batch_sweep``: throughput for all users vs each user's TPOT.
- ``scoreboard_rows``: each technique against its baseline, as text for ``viz.speed.scoreboard``.

Every path must produce the same greedy tokens; the rows carry them so notebooks can check.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from . import _hf
from .engine import decode_step, generate, prefill
from .fast import FastDecoder, onednn_packing
from .models import Model
from .profiling import peak_bytes
from .quantize import heldout_text
from .timing import clock, interleave, summarize


def bench_prompt(model: Model, tokens: int) -> str:
    """The first ``tokens`` tokens of the held-out passage, as text."""
    ids = model.encode(heldout_text())[:tokens]
    return model.decode(ids)



@dataclass(frozen=True)
class PrefillRow:
    """One prefill of ``tokens`` with one attention kernel."""

    kernel: str
    tokens: int
    seconds: float  # median
    peak_bytes: int
    max_abs_diff: float  # largest logit difference against the first kernel's run of the same prompt


def prefill_sweep(model: Model, lengths, kernels=("eager", "sdpa"), *, repeats: int = 3) -> list[PrefillRow]:
    """Time and peak memory of prefill for each prompt length and attention kernel (same random ids).

    ``max_abs_diff`` compares each kernel's logits with the first kernel's on the same prompt.
    """
    rows = []
    gen = torch.Generator().manual_seed(0)
    for n in lengths:
        ids = torch.randint(0, model.info.vocab_size, (1, n), generator=gen)
        ref = None
        for kernel in kernels:
            with _hf.attention_implementation(model.hf, kernel):
                logits = prefill(model, ids)[0]  # warm-up, and the output to compare
                times = []
                for _ in range(repeats):
                    t0 = clock(model.device)
                    prefill(model, ids)
                    times.append(clock(model.device) - t0)
                peak = peak_bytes(lambda ids=ids: prefill(model, ids), model.device)
            ref = logits if ref is None else ref
            rows.append(PrefillRow(kernel, n, summarize(times).median, peak,
                                   float((logits.float() - ref.float()).abs().max())))
    return rows


@dataclass(frozen=True)
class BatchRow:
    """Decode with ``batch`` sequences at once: one step's time serves every sequence."""

    batch: int
    step_s: float  # median time of one decode step = each user's TPOT

    @property
    def tokens_per_s(self) -> float:
        """Tokens made per second, all users together."""
        return self.batch / self.step_s


def batch_sweep(model: Model, batches, *, context: int = 32, steps: int = 8, **fast_kwargs) -> list[BatchRow]:
    """Median decode-step time at each batch size (``FastDecoder``, a ``context``-token prompt)."""
    rows = []
    for b in batches:
        fast = FastDecoder(model, context + steps + 2, batch=b, **fast_kwargs)
        ids = torch.randint(0, model.info.vocab_size, (b, context), generator=torch.Generator().manual_seed(0))
        tokens = fast.prefill(ids).argmax(-1)
        fast.step(tokens)  # warm-up
        times = []
        for _ in range(steps):
            t0 = clock(model.device)
            tokens = fast.step(tokens).argmax(-1)
            times.append(clock(model.device) - t0)
        rows.append(BatchRow(b, summarize(times).median))
    return rows


@dataclass(frozen=True)
class PathRow:
    """Median TTFT and TPOT of one decode path (seconds)."""

    label: str
    ttft_s: float
    tpot_s: float
    tokens: tuple[int, ...]  # the greedy ids it produced (all paths must agree)
    extra_bytes: int | None = None  # memory a fast path adds (its cache and weight copies)


def _static_cache_run(model: Model, prompt: str, n: int) -> tuple[float, float, list[int]]:
    """The engine's own functions with a pre-allocated ``StaticCache`` (greedy), timed like ``generate``."""
    t0 = clock(model.device)
    ids = model.encode(prompt)
    logits, cache = prefill(model, [ids], static_tokens=len(ids) + n)
    out, times = [], []
    for i in range(n):
        out.append(int(logits[0].argmax()))
        times.append(clock(model.device) - t0)
        if i + 1 < n:
            logits, cache = decode_step(model, out[-1], cache)
    return times[0], (times[-1] - times[0]) / (n - 1), out


def compiled_decoder(model: Model, slots: int, prompt: str, **kwargs) -> tuple[FastDecoder | None, str | None]:
    """A ``FastDecoder(compile=True)`` compiled now (by a 2-token answer), or ``None`` and why compiling failed.

    ``torch.compile`` needs a C++ compiler on CPUs (and Triton on GPUs); where it cannot compile, the
    callers here leave the compiled path out and say so instead of stopping.
    """
    try:
        dec = FastDecoder(model, slots, compile=True, **kwargs)
        dec.generate(prompt, 2, stop_at_eos=False)
        return dec, None
    except Exception as e:  # torch.compile raises many kinds (no compiler, unsupported op ...)
        return None, f"torch.compile failed: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"


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
        if dec is None:
            warnings.warn(f"decode_paths: left out fast + torch.compile ({why})", stacklevel=2)
        else:
            decoders["fast + torch.compile"] = dec
    if model.device.type == "cuda":
        decoders["fast + CUDA graph"] = FastDecoder(model, n, cuda_graph=True)

    def engine():
        t = generate(model, prompt, new_tokens, stop_at_eos=False)
        return t.latency.ttft, t.latency.tpot, t.generated_ids

    def run_fast(dec):
        t = dec.generate(prompt, new_tokens, stop_at_eos=False)
        return t.latency.ttft, t.latency.tpot, t.generated_ids

    runs = {"engine (DynamicCache)": engine,
            "engine + StaticCache": lambda: _static_cache_run(model, prompt, new_tokens),
            **{k: (lambda d=d: run_fast(d)) for k, d in decoders.items()}}
    results = interleave(runs, repeats)
    return [PathRow(k, summarize([v[0] for v in vals]).median, summarize([v[1] for v in vals]).median,
                    tuple(vals[0][2]), decoders[k].extra_bytes if k in decoders else None)
            for k, vals in results.items()]


def quant_rows(quantized: dict, prompt: str, new_tokens: int = 16, *, repeats: int = 3) -> list[dict]:
    """Per ``inferlab.quantize.Quantized``: bytes, engine TTFT/TPOT (interleaved), held-out perplexity.

    With an ``fp32`` entry, also ``predicted_speedup`` (its bytes per step / these) and
    ``measured_speedup`` (its TPOT / this TPOT).
    """
    from .quantize import perplexity

    lat = interleave({k: (lambda v=v: generate(v.model, prompt, new_tokens, stop_at_eos=False).latency)
                      for k, v in quantized.items()}, repeats)
    rows = [{"kind": k, "method": v.method, "weight_bytes": v.weight_bytes, "step_bytes": v.step_bytes,
             "ttft_s": summarize([x.ttft for x in lat[k]]).median, "tpot_s": summarize([x.tpot for x in lat[k]]).median,
             "perplexity": perplexity(v.model).perplexity} for k, v in quantized.items()]
    if "fp32" in quantized:
        ref = next(r for r in rows if r["kind"] == "fp32")
        for row in rows:
            row["predicted_speedup"] = ref["step_bytes"] / row["step_bytes"]
            row["measured_speedup"] = ref["tpot_s"] / row["tpot_s"]
    return rows


def scoreboard_rows(prefill_rows, qrows, paths: dict, batch_rows) -> list[dict]:
    """One row per technique, as text relative to the default: for ``viz.speed.scoreboard``.

    Args:
        prefill_rows: ``prefill_sweep`` rows (eager vs SDPA at the longest prompt).
        qrows: ``quant_rows`` (each format against fp32).
        paths: ``{name: (decode_paths rows, floor seconds)}`` (each path against the first).
        batch_rows: ``batch_sweep`` rows (the largest batch against the first).
    """
    n = max(r.tokens for r in prefill_rows)
    e, s = ({r.kernel: r for r in prefill_rows if r.tokens == n}[k] for k in ("eager", "sdpa"))
    board = [{"technique": "SDPA vs eager attention (prefill)", "TTFT": f"x{s.seconds / e.seconds:.2f} at T={n}",
              "TPOT": "-", "memory": f"x{s.peak_bytes / max(e.peak_bytes, 1):.2f} peak",
              "quality": f"same (max logit diff {max(r.max_abs_diff for r in prefill_rows):.1e})"}]
    ref = next(r for r in qrows if r["kind"] == "fp32")
    board += [{"technique": f"{r['kind']} weights", "TTFT": f"x{r['ttft_s'] / ref['ttft_s']:.2f}",
               "TPOT": f"x{r['tpot_s'] / ref['tpot_s']:.2f}", "memory": f"{r['step_bytes'] / 1e6:.1f} MB read/step",
               "quality": f"perplexity {r['perplexity']:.2f} ({r['perplexity'] / ref['perplexity'] - 1:+.2%})"}
              for r in qrows if r["kind"] != "fp32"]
    for name, (rows, floor_s) in paths.items():
        base = rows[0]
        board += [{"technique": f"{r.label} ({name})", "TTFT": f"x{r.ttft_s / base.ttft_s:.2f}",
                   "TPOT": f"x{r.tpot_s / base.tpot_s:.2f} ({r.tpot_s / floor_s:.2f}x floor)",
                   "memory": "-" if r.extra_bytes is None else f"+{r.extra_bytes / 1e6:.0f} MB",
                   "quality": "same tokens" if r.tokens == base.tokens else "different tokens"} for r in rows[1:]]
    b0, b1 = batch_rows[0], batch_rows[-1]
    board.append({"technique": f"batch {b1.batch} vs {b0.batch}", "TTFT": "-",
                  "TPOT": f"x{b1.step_s / b0.step_s:.2f} per user", "memory": f"x{b1.batch // b0.batch} KV cache",
                  "quality": f"x{b1.tokens_per_s / b0.tokens_per_s:.1f} tokens/s"})
    return board
