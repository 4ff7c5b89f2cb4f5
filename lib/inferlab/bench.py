"""Side-by-side speed measurements, and the benchmark: ``python -m inferlab.bench``.

The benchmark runs, interleaved in one process (variant order rotates every repeat, after a warm-up
of each): the engine untraced (``inferlab.generate``), the engine recording everything
(``record="all"``), Hugging Face's ``model.generate()`` (``inferlab.reference_generate``) and the
fast path (``inferlab.fast.FastDecoder``), eager and compiled (``fast+compile``: ``torch.compile``
of the decode step; tens of seconds of compiling first, and left out with its reason where this
PyTorch cannot compile, e.g. no C++ compiler). It prints one table of median TTFT and TPOT with each
number's ratio to its roofline floor (measured in the same run) and writes a JSON file.

``generate()`` reports no per-token times, so its TTFT is the end-to-end time of a 1-token request
and its TPOT is ``(E2E(N) - E2E(1)) / (N - 1)`` from back-to-back requests in the same repeat.

Also here, for notebook 08: ``prefill_sweep`` (eager vs SDPA attention as the prompt grows: time and
peak memory), ``quant_rows`` (weight formats: bytes, speed, perplexity), ``decode_paths`` (each way
to decode, side by side) and ``batch_sweep`` (throughput vs per-user TPOT).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from . import _hf
from .cost import MachineProfile, Shape, decode_cost, measure_machine, prefill_cost
from .engine import decode_step, generate, prefill, reference_generate
from .fast import FastDecoder, onednn_packing
from .models import Model, load
from .profiling import peak_bytes, profile_step
from .quantize import heldout_text
from .timing import clock, summarize

VARIANTS = ("engine", "engine+record", "generate()", "fast", "fast+compile")


def interleave(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, list]:
    """Call each function once untimed (warm-up), then ``repeats`` rounds, rotating the order each round.

    A busy machine then slows every variant alike. Returns each name's results, in round order.
    """
    for fn in runs.values():
        fn()
    names, out = list(runs), {k: [] for k in runs}
    for r in range(repeats):
        for k in names[r % len(names):] + names[: r % len(names)]:
            out[k].append(runs[k]())
    return out


# ------------------------------------------------------------------------------------- sweeps
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


# ---------------------------------------------------------------------------------- the benchmark
def bench_prompt(model: Model, tokens: int) -> str:
    """The first ``tokens`` tokens of the held-out passage, as text."""
    ids = model.encode(heldout_text())[:tokens]
    return model.decode(ids)


def _runners(model: Model, prompt: str, n: int, decoders: dict[str, FastDecoder]) -> dict[str, Callable]:
    """Each variant as a function returning (TTFT, TPOT) in seconds for one request."""
    def engine(record=None):
        lat = generate(model, prompt, n, stop_at_eos=False, record=record).latency
        return lat.ttft, lat.tpot

    def hf():
        t0 = clock(model.device)
        reference_generate(model, prompt, 1, stop_at_eos=False)
        t1 = clock(model.device)
        reference_generate(model, prompt, n, stop_at_eos=False)
        t2 = clock(model.device)
        return t1 - t0, ((t2 - t1) - (t1 - t0)) / (n - 1)

    def run_fast(dec):
        lat = dec.generate(prompt, n, stop_at_eos=False).latency
        return lat.ttft, lat.tpot

    runs = {"engine": engine, "engine+record": lambda: engine("all"), "generate()": hf}
    return {**runs, **{k: (lambda d=d: run_fast(d)) for k, d in decoders.items()}}


def measure_read_bandwidth(device="cpu", dtype=torch.float32, mb: int = 256, repeats: int = 5) -> float:
    """Bytes per second of a pure read (a sum over a large tensor), best of ``repeats``.

    A decode step only *reads* its weights. ``cost.measure_bandwidth`` times a copy (read + write);
    on some CPUs a core streams less in pure reads than a copy's read + write total.
    """
    x = torch.ones(mb * 2**20 // torch.empty((), dtype=dtype).element_size(), dtype=dtype, device=device)
    x.sum()
    best = float("inf")
    for _ in range(repeats):
        t0 = clock(device)
        x.sum()
        best = min(best, clock(device) - t0)
    return x.numel() * x.element_size() / best


def apply_floors(result: dict, machine: MachineProfile, read_bytes_per_s: float | None = None) -> dict:
    """(Re)compute a result's floors and each variant's ratio to them for ``machine``'s ceilings.

    With ``read_bytes_per_s``, also ``tpot_x_read_floor``: TPOT against bytes / read bandwidth.
    """
    shape = Shape(result["model"], *result["shape"])
    result["machine"] = machine.to_dict()
    result["ttft_floor_s"] = prefill_cost(shape, result["prompt_tokens"], machine=machine).floor_s
    step = decode_cost(shape, result["prompt_tokens"] + result["new_tokens"] // 2, machine=machine)
    result["tpot_floor_s"] = step.floor_s
    if read_bytes_per_s:
        result["read_bytes_per_s"] = read_bytes_per_s
        result["tpot_read_floor_s"] = max(step.bytes / read_bytes_per_s, step.floor_compute_s)
    for v in result["variants"].values():
        v["ttft_x_floor"] = v["ttft_s"] / result["ttft_floor_s"]
        v["tpot_x_floor"] = v["tpot_s"] / result["tpot_floor_s"]
        if read_bytes_per_s:
            v["tpot_x_read_floor"] = v["tpot_s"] / result["tpot_read_floor_s"]
    return result


def bench_model(model: Model, *, prompt_tokens: int = 64, new_tokens: int = 32, repeats: int = 5,
                variants=VARIANTS, machine: MachineProfile | None = None, profile: bool = False,
                log=print) -> dict:
    """Interleaved TTFT/TPOT of each variant on one model, with the roofline floors (and step profiles)."""
    prompt = bench_prompt(model, prompt_tokens)
    n_prompt = len(model.encode(prompt))
    slots = n_prompt + max(new_tokens, 32) + 1  # room for the profiled steps too (a new size would recompile)
    decoders = {"fast": FastDecoder(model, slots)}
    skipped = {}
    if "fast+compile" in variants:  # compiles here: tens of seconds the first time
        dec, why = compiled_decoder(model, slots, prompt)
        if dec is None:
            skipped["fast+compile"] = why
            log(f"  {model.info.name}: left out fast+compile ({why})")
        else:
            decoders["fast+compile"] = dec
    run = {k: v for k, v in _runners(model, prompt, new_tokens, decoders).items() if k in variants}
    machine = machine or measure_machine(model.device, model.info.dtype)
    log(f"  {model.info.name}: {len(run)} variants, warm-up + {repeats} interleaved repeats ...")
    results = interleave(run, repeats)
    rows = {}
    for k, pairs in results.items():
        ttft, tpot = summarize([p[0] for p in pairs]), summarize([p[1] for p in pairs])
        rows[k] = {"ttft_s": ttft.median, "tpot_s": tpot.median, "ttft_min_s": ttft.min, "ttft_max_s": ttft.max,
                   "tpot_min_s": tpot.min, "tpot_max_s": tpot.max}
    info = model.info
    result = {"model": info.name, "source": info.source, "n_params": info.n_params,
              "weight_bytes": info.weight_bytes, "dtype": str(info.dtype), "device": str(model.device),
              "shape": [info.n_layer, info.n_head, info.d_model, info.vocab_size, info.n_ctx, info.bytes_per_element],
              "prompt_tokens": n_prompt, "new_tokens": new_tokens, "repeats": repeats, "variants": rows,
              "skipped": skipped}
    if profile:
        ids = model.encode(prompt)
        _, cache = prefill(model, [ids])
        profs = [profile_step(lambda: decode_step(model, 0, cache), label="engine step", device=model.device)]
        for name, dec in decoders.items():
            dec.prefill([ids])
            profs.append(profile_step(lambda d=dec: d.step(0), label=f"{name} step", device=model.device))
        result["profiles"] = {p.label: {"step_s": p.step_s, "groups": p.groups,
                                        "top_ops": [list(t) for t in p.top_ops]} for p in profs}
    return apply_floors(result, machine)


def table(results: list[dict]) -> str:
    """All results as one fixed-width text table (medians in ms, ratios to the floor and to generate())."""
    head = (f"{'model':<22}{'variant':<15}{'TTFT ms':>10}{'x floor':>9}{'TPOT ms':>10}{'x floor':>9}"
            f"{'x read floor':>14}{'TPOT min-max ms':>18}{'TPOT x generate()':>19}")
    lines, notes = [head, "-" * len(head)], []
    for r in results:
        name = r["model"][:21]
        read_floor = r.get("tpot_read_floor_s")
        lines.append(f"{name:<22}{'(floor)':<15}{r['ttft_floor_s'] * 1e3:>10.2f}{1:>9.2f}"
                     f"{r['tpot_floor_s'] * 1e3:>10.2f}{1:>9.2f}"
                     + (f"{r['tpot_floor_s'] / read_floor:>14.2f}" if read_floor else ""))
        hf = r["variants"].get("generate()", {}).get("tpot_s")
        for k, v in r["variants"].items():
            rel = f"{v['tpot_s'] / hf:.3f}" if hf else "-"
            spread = f"{v['tpot_min_s'] * 1e3:.2f}-{v['tpot_max_s'] * 1e3:.2f}"
            xr = f"{v['tpot_x_read_floor']:.2f}" if "tpot_x_read_floor" in v else "-"
            lines.append(f"{name:<22}{k:<15}{v['ttft_s'] * 1e3:>10.2f}{v['ttft_x_floor']:>9.2f}"
                         f"{v['tpot_s'] * 1e3:>10.2f}{v['tpot_x_floor']:>9.2f}{xr:>14}{spread:>18}{rel:>19}")
        notes.append(f"{name}: {r['source']}, {r['n_params'] / 1e6:.1f}M params, {r['weight_bytes'] / 1e6:.0f} MB "
                     f"{r['dtype'].removeprefix('torch.')} on {r['device']}, prompt {r['prompt_tokens']} + "
                     f"{r['new_tokens']} new tokens, {r['repeats']} interleaved repeats")
        for k, why in r.get("skipped", {}).items():
            notes.append(f"  {k} left out: {why}")
        for label, p in r.get("profiles", {}).items():
            parts = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in p["groups"].items())
            notes.append(f"  profile of one {label}: {p['step_s'] * 1e3:.2f} ms = {parts} ms")
    legend = ("floors: TTFT = prefill roofline (max of FLOPs / matmul rate, bytes / copy bandwidth); "
              "TPOT = (weights + KV cache bytes) / copy bandwidth; 'x read floor' uses the read-only bandwidth")
    return "\n".join([*lines, "", legend, *notes])


def main(argv=None) -> dict:
    """Command line: ``python -m inferlab.bench --models bundled random:gpt2 --new-tokens 32``."""
    p = argparse.ArgumentParser(prog="python -m inferlab.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["bundled", "random:gpt2"], help="names for inferlab.load()")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--profile", action="store_true", help="also profile one decode step of each path")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's choice)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default=None, help="float32 / float16 / bfloat16 (default: the device's)")
    p.add_argument("--out", default="bench_results.json", help="JSON file to write")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    dtype = args.dtype or ("float32" if args.device == "cpu" else "float16")
    before = measure_machine(args.device, getattr(torch, dtype))
    results = []
    for name in args.models:
        model = load(name, device=args.device, dtype=dtype, verbose=False)
        results.append(bench_model(model, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                                   repeats=args.repeats, variants=args.variants, machine=before,
                                   profile=args.profile))
        del model
    after = measure_machine(args.device, getattr(torch, dtype))
    best = max((before, after), key=lambda mp: mp.bytes_per_s)  # the higher ceiling: the stricter floor
    read = measure_read_bandwidth(args.device, getattr(torch, dtype))
    for r in results:
        apply_floors(r, best, read)
    command = "python -m inferlab.bench " + " ".join(sys.argv[1:] if argv is None else argv)
    out = {"started": started, "command": command,
           "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": platform.processor(),
           "machine_before": before.to_dict(), "machine_after": after.to_dict(), "read_bytes_per_s": read,
           "results": results}
    print(f"machine: {before!r}\n   after: {after!r}\n  floors use the higher copy bandwidth of the two; "
          f"read-only bandwidth (a sum): {read / 1e9:.1f} GB/s")
    print(table(results))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o))
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
