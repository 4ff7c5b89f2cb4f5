"""The benchmark: ``python -m inferlab.tools.bench`` (one command-line tool, under 400 lines on purpose: one entry
per table).

The benchmark runs, interleaved in one process (variant order rotates every repeat, after a warm-up
of each): the engine untraced (``inferlab.generate``), the engine recording everything
(``record="all"``), Hugging Face's ``model.generate()`` (``inferlab.reference_generate``) and the
fast path (``inferlab.fast.FastDecoder``), eager and compiled (``fast+compile``: ``torch.compile``
of the decode step; tens of seconds of compiling first, and left out with its reason where this
PyTorch cannot compile, e.g. no C++ compiler). Both fast paths take ``weights="auto"``: the layout
measured fastest here (``inferlab.fast.choice``), named in the table's notes with its margin. It
prints one table of median TTFT and TPOT with each number's ratio to its roofline floor (measured in
the same run: each request follows a short matmul-rate measurement, and its TTFT is judged against the
floor at that rate, since a shared machine's speed drifts from second to second), headed by the
machine (CPU model, threads, torch, MKL and oneDNN versions, so two machines' tables can be compared),
and writes the same as JSON.

``generate()`` reports no per-token times, so its TTFT is the end-to-end time of a 1-token request
and its TPOT is ``(E2E(N) - E2E(1)) / (N - 1)`` from back-to-back requests in the same repeat. Below the table, each
model's decode steps at batch 1, 2 and 4 (and compiled) against a read of their weights in the same round
(``measure.step_floor``), with issue 47's targets.

Notebook 08's measurements of each technique (attention kernels, weight formats, decode paths,
batching) live in ``inferlab.measure``; this tool only combines them into one table.

``python -m inferlab.tools.bench serve`` prints issue 31's serving targets instead (notebook 09): continuous
against static batching, ``inferlab.serve`` against transformers' ``generate_batch``, paged against
contiguous KV memory, chunked prefill, prefix caching and token equality, each with PASS or FAIL. The
measuring lives in ``inferlab.measure.serving_targets``. ``python -m inferlab.tools.bench speculative`` prints
issue 45's speculative-decoding targets (notebook 10); the measuring lives in ``inferlab.speculative.targets``.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..cost import MachineProfile, Shape, decode_cost, prefill_floor_at
from . import Parser

if TYPE_CHECKING:
    from ..models import Model

# torch, the engine and the measurements are imported where they are used: `--help` answers at once

VARIANTS = ("engine", "engine+record", "generate()", "fast", "fast+compile")


def _reference_run(model: Model, prompt: str, n: int) -> Callable[[], tuple[float, float]]:
    """Hugging Face's ``model.generate()`` as a timed run: TTFT of a 1-token request, TPOT from back-to-back
    requests of 1 and ``n`` tokens (it reports no per-token times)."""
    from ..engine import reference_generate
    from ..timing import time_call

    def request_s(tokens: int) -> float:  # one timed model.generate() (interleave has warmed it up)
        return time_call(lambda: reference_generate(model, prompt, tokens, stop_at_eos=False), repeats=1,
                         warmup=0, device=model.device)[0]

    def run():
        one, all_n = request_s(1), request_s(n)
        return one, (all_n - one) / (n - 1)

    return run


def apply_floors(result: dict, machine: MachineProfile, read_bytes_per_s: float | None = None) -> dict:
    """(Re)compute a result's floors and each variant's ratio to them for ``machine``'s ceilings.

    Where the variants' runs carry the matmul rate measured just before each (``bench_model``'s do), the
    TTFT floor is at the median of those rates and each ``ttft_x_floor`` is the median over runs of the run
    against the floor at its own rate (``measure.machine.x_floor_paired``); otherwise ``machine``'s rate.

    With ``read_bytes_per_s``, also ``tpot_x_read_floor``: TPOT against bytes / read bandwidth.
    """
    from ..measure.machine import x_floor_paired

    shape = Shape(result["model"], *result["shape"])
    result["machine"] = machine.to_dict()

    floor_at = functools.partial(prefill_floor_at, shape, result["prompt_tokens"], machine)  # FLOP/s -> floor s

    rates = [r for v in result["variants"].values() for r in v.get("flops_per_s_runs", [])]
    result["ttft_floor_flops_per_s"] = statistics.median(rates) if rates else machine.flops_per_s
    result["ttft_floor_s"] = floor_at(result["ttft_floor_flops_per_s"])
    step = decode_cost(shape, result["prompt_tokens"] + result["new_tokens"] // 2, machine=machine)
    result["tpot_floor_s"] = step.floor_s
    if read_bytes_per_s:
        result["read_bytes_per_s"] = read_bytes_per_s
        result["tpot_read_floor_s"] = max(step.bytes / read_bytes_per_s, step.floor_compute_s)
    for v in result["variants"].values():
        v["ttft_x_floor"] = (x_floor_paired(v["ttft_runs_s"], v["flops_per_s_runs"], floor_at)
                             if v.get("flops_per_s_runs") else v["ttft_s"] / result["ttft_floor_s"])
        v["tpot_x_floor"] = v["tpot_s"] / result["tpot_floor_s"]
        if read_bytes_per_s:
            v["tpot_x_read_floor"] = v["tpot_s"] / result["tpot_read_floor_s"]
    return result


def bench_model(model: Model, *, prompt_tokens: int = 64, new_tokens: int = 32, repeats: int = 5,
                variants=VARIANTS, machine: MachineProfile | None = None, profile: bool = False,
                log=print) -> dict:
    """Interleaved TTFT/TPOT of each variant on one model, with the roofline floors (and step profiles)."""
    from ..measure.machine import measure_machine, rate_then
    from ..measure.profiling import product_rates, profile_paths
    from ..measure.speedups import bench_prompt, fast_decoders, path_runs
    from ..timing import interleave, summarize

    prompt = bench_prompt(model, prompt_tokens)
    n_prompt = len(model.encode(prompt))
    slots = n_prompt + max(new_tokens, 32) + 1  # room for the profiled steps too (a new size would recompile)
    # "fast+compile" compiles here: tens of seconds the first time
    decoders, skipped = fast_decoders(model, slots, prompt, compile="fast+compile" in variants)
    for k, why in skipped.items():
        log(f"  {model.info.name}: left out {k} ({why})")
    paths = path_runs(model, prompt, new_tokens, engine={"engine": {}, "engine+record": {"record": "all"}},
                      decoders=decoders)
    paths["generate()"] = _reference_run(model, prompt, new_tokens)
    run = {k: paths[k] for k in VARIANTS if k in variants and k in paths}
    machine = machine or measure_machine(model.device, model.info.dtype)
    log(f"  {model.info.name}: {len(run)} variants, warm-up + {repeats} interleaved repeats ...")
    # each request follows a short matmul-rate measurement: its TTFT is judged against the floor at the
    # speed of that moment, as notebook 08's prefill_paths does (a shared machine's speed drifts)
    results = interleave({k: rate_then(fn, model.device, model.info.dtype) for k, fn in run.items()}, repeats)
    rows = {}
    for k, runs in results.items():
        rates, pairs = [r for r, _ in runs], [p for _, p in runs]
        ttft, tpot = summarize([p[0] for p in pairs]), summarize([p[1] for p in pairs])
        rows[k] = {"ttft_s": ttft.median, "tpot_s": tpot.median, "ttft_min_s": ttft.min, "ttft_max_s": ttft.max,
                   "tpot_min_s": tpot.min, "tpot_max_s": tpot.max,
                   "ttft_runs_s": [p[0] for p in pairs], "flops_per_s_runs": rates}
    info = model.info
    result = {"model": info.name, "source": info.source, "n_params": info.n_params,
              "weight_bytes": info.weight_bytes, "dtype": str(info.dtype), "device": str(model.device),
              "shape": [info.n_layer, info.n_head, info.d_model, info.vocab_size, info.n_ctx, info.bytes_per_element],
              "prompt_tokens": n_prompt, "new_tokens": new_tokens, "repeats": repeats, "variants": rows,
              "skipped": skipped, "choices": {k: {"weights": d.weights, "compiled": d.compiled,
                                                  "summary": d.choice.summary() if d.choice else "given"}
                                              for k, d in decoders.items()}}
    if profile:
        profs = profile_paths(model, model.encode(prompt), decoders)
        result["profiles"] = {k: {"label": p.label, "step_s": p.step_s, "groups": p.groups,
                                  "top_ops": [list(t) for t in p.top_ops]} for k, p in profs.items()}
        result["product_rates"] = {name: [{"name": r.name, "shape": list(r.shape), "per_step": r.per_step,
                                           "product_s": r.product_s, "read_s": r.read_s, "nbytes": r.nbytes}
                                          for r in product_rates(dec)] for name, dec in decoders.items()}
    return apply_floors(result, machine)


def machine_header(info: dict) -> str:
    """The machine a table was measured on, as one line: CPU, threads, torch, MKL, oneDNN."""
    return (f"machine: {info.get('cpu', '?')}, {info.get('threads', '?')} threads, torch {info.get('torch', '?')}, "
            f"MKL: {info.get('mkl', '?')}, oneDNN: {info.get('onednn', '?')}")


def table(results: list[dict], machine_info: dict | None = None) -> str:
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
                     f"{r['new_tokens']} new tokens, {r['repeats']} interleaved repeats"
                     + f"; TTFT floor at {r['ttft_floor_flops_per_s'] / 1e9:.0f} GFLOP/s")
        for k, why in r.get("skipped", {}).items():
            notes.append(f"  {k} left out: {why}")
        for k, c in r.get("choices", {}).items():
            notes.append(f"  {k} weights chosen by measuring: {c['summary']}")
        for k, p in r.get("profiles", {}).items():
            parts = ", ".join(f"{g} {v * 1e3:.2f}" for g, v in p["groups"].items())
            notes.append(f"  profile of one {p.get('label', k)}: {p['step_s'] * 1e3:.2f} ms = {parts} ms")
        for k, rates in r.get("product_rates", {}).items():
            parts = ", ".join(f"{x['name']} {x['nbytes'] / x['product_s'] / 1e9:.1f} "
                              f"({x['read_s'] / x['product_s']:.0%})" for x in rates)
            total = sum(x["product_s"] for x in rates)
            notes.append(f"  {k} products, GB/s (share of a plain read of the same bytes): {parts}; "
                         f"all products {total * 1e3:.2f} ms per step")
    legend = ("floors: TTFT = prefill roofline (max of FLOPs / matmul rate, bytes / copy bandwidth): each request "
              "follows a matmul-rate measurement, and its 'x floor' is the median over requests of each against the "
              "floor at the rate measured just before it (the floor row: at the median rate); "
              "TPOT = (weights + KV cache bytes) / copy bandwidth; 'x read floor' uses the read-only bandwidth")
    top = [machine_header(machine_info)] if machine_info else []
    return "\n".join([*top, *lines, "", legend, *notes])


DTYPES = ("float32", "float16", "bfloat16")
MAX_CONTEXT = 1024  # the GPT-2 family's longest context (each model's own is checked when it runs)


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line, in one sentence with its fix (None: nothing), found before any run.

    Checks the numbers, the device and dtype this PyTorch can use, and that ``--out`` can be written, so a
    run of minutes is never lost at the end.
    """
    for name, value, low in (("--prompt-tokens", args.prompt_tokens, 1), ("--new-tokens", args.new_tokens, 2),
                             ("--repeats", args.repeats, 1)):
        if value < low:
            why = " (TPOT needs a second token)" if name == "--new-tokens" else ""
            return f"{name} {value}: must be at least {low}{why}. Fix: e.g. {name} {max(low, 8)}."
    if args.prompt_tokens + args.new_tokens > MAX_CONTEXT:
        return (f"--prompt-tokens {args.prompt_tokens} + --new-tokens {args.new_tokens} = "
                f"{args.prompt_tokens + args.new_tokens}: more than {MAX_CONTEXT} positions, the longest GPT-2 "
                "context. Fix: ask for fewer tokens.")
    if args.threads is not None and args.threads < 1:
        return f"--threads {args.threads}: must be at least 1. Fix: leave it out for PyTorch's choice."
    if args.dtype is not None and args.dtype not in DTYPES:
        return f"--dtype {args.dtype}: not one of {', '.join(DTYPES)}. Fix: e.g. --dtype float32."
    if not all(isinstance(m, str) and m.strip() for m in args.models):
        return "--models: an empty name. Fix: e.g. --models bundled random:gpt2."
    import torch

    try:
        device = torch.device(args.device)
    except RuntimeError:
        return f"--device {args.device}: not a device name. Fix: --device cpu, or cuda / cuda:0 on an NVIDIA GPU."
    if device.type == "cuda" and not (torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()):
        return (f"--device {args.device}: no such CUDA device here ({torch.cuda.device_count()} found). "
                "Fix: --device cpu.")
    if device.type == "mps" and not torch.backends.mps.is_available():
        return f"--device {args.device}: Apple's MPS is not available here. Fix: --device cpu."
    if device.type not in ("cpu", "cuda", "mps"):
        return f"--device {args.device}: the benchmark runs on cpu, cuda or mps. Fix: --device cpu."
    out = Path(args.out)
    if out.is_dir():
        return f"--out {out}: is a folder. Fix: name a JSON file, e.g. --out {out / 'bench_results.json'}."
    existed = out.exists()
    try:
        with open(out, "a"):
            pass
    except OSError as e:
        return f"--out {out}: cannot be written ({e.strerror or e}). Fix: name a file in a folder you can write to."
    if not existed:
        out.unlink()
    return None


SERVE_ROWS = ("throughput", "generate_batch", "paged", "chunked", "prefix")  # inferlab.measure.serving_targets.ROWS


def serve_main(argv) -> dict:
    """``python -m inferlab.tools.bench serve [--small] [--threads 1] [--out serve.json]``: the serving targets."""
    p = Parser(prog="python -m inferlab.tools.bench serve",
                                description="issue 31's serving targets on GPT-2's shape, measured side by side")
    p.add_argument("--model", default="random:gpt2", help="the timed model (at INFERLAB_SCALE=test: its first blocks)")
    p.add_argument("--reference", default="bundled", help="the model whose tokens are compared with il.generate's")
    p.add_argument("--rows", nargs="+", default=list(SERVE_ROWS), choices=SERVE_ROWS, help="which timed rows")
    p.add_argument("--small", action="store_true", help="seconds, not minutes (numbers mean little)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (a busy machine: try 1)")
    p.add_argument("--out", default=None, help="also write the rows as JSON to this file")
    args = p.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads {args.threads}: must be at least 1. Fix: leave it out for PyTorch's choice.")
    import torch

    from .. import scale
    from ..measure.serving_targets import BenchSizes, serve_bench
    from ..models import load

    if args.threads:
        torch.set_num_threads(args.threads)
    blocks = {"n_layer": scale.pick(full=None, test=scale.TEST_BLOCKS)} if args.model.startswith("random:") else {}
    try:
        model, reference = load(args.model, verbose=False, **blocks), load(args.reference, verbose=False)
    except (ValueError, TypeError, FileNotFoundError, ConnectionError, OSError) as exc:
        p.error(f"--model {args.model} / --reference {args.reference}: {exc}")
    result = serve_bench(model, reference, BenchSizes.small() if args.small else BenchSizes(), rows=args.rows)
    return _report(result, args.out)


def _report(result, out_path: str | None) -> dict:
    """Print a targets table (with the threads and torch it ran on); write its rows as JSON to ``out_path``."""
    import torch

    print(f"threads: {torch.get_num_threads()}, torch {torch.__version__}")
    print(result.table())
    out = result.to_dict()
    if out_path:
        Path(out_path).write_text(json.dumps(out, indent=1))
        print(f"wrote {out_path}")
    return out


def speculative_main(argv) -> dict:
    """``python -m inferlab.tools.bench speculative [--repeats 3] [--out spec.json]``: issue 45's targets."""
    p = Parser(prog="python -m inferlab.tools.bench speculative",
                                description="speculative decoding's targets (notebook 10), measured side by side")
    p.add_argument("--model", default="bundled", help="the model whose answers, copying and drafts are measured")
    p.add_argument("--shape", default="random:gpt2", help="the model whose verify cost is timed (GPT-2's shape)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of each variant (interleaved)")
    p.add_argument("--out", default=None, help="also write the rows as JSON to this file")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: must be at least 1 (e.g. 3)")
    from .. import scale
    from ..models import load
    from ..speculative.targets import speculative_targets

    blocks = {"n_layer": scale.pick(full=None, test=scale.TEST_BLOCKS)} if args.shape.startswith("random:") else {}
    try:
        model, shape = load(args.model, verbose=False), load(args.shape, verbose=False, **blocks)
    except (ValueError, TypeError, FileNotFoundError, ConnectionError, OSError) as exc:
        p.error(f"--model {args.model} / --shape {args.shape}: {exc}")
    result = speculative_targets(model, shape, repeats=args.repeats)
    return _report(result, args.out)


def main(argv=None) -> dict:
    """Command line: ``python -m inferlab.tools.bench --models bundled random:gpt2 --new-tokens 32``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:
        return serve_main(argv[1:])
    if argv[:1] == ["speculative"]:
        return speculative_main(argv[1:])
    p = Parser(prog="python -m inferlab.tools.bench", description=__doc__.split("\n\n")[0])
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
    problem = argument_problem(args)
    if problem:
        p.error(problem)  # usage and the problem on stderr, exit status 2, before any measurement
    import torch

    from ..fast.choice import library_versions
    from ..kept import cpu_name
    from ..measure.machine import measure_bandwidth, measure_machine
    from ..measure.step_floor import decode_targets, step_floor
    from ..measure.targets import target_table
    from ..models import load

    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    dtype = args.dtype or ("float32" if args.device == "cpu" else "float16")
    models = {}
    for name in args.models:  # every model loads before anything is measured: a misspelt name costs no run
        try:
            models[name] = load(name, device=args.device, dtype=dtype, verbose=False)
        except (ValueError, TypeError, FileNotFoundError, ConnectionError, OSError) as exc:
            p.error(f"--models {name}: {exc}")
    before = measure_machine(args.device, getattr(torch, dtype))
    results, floors = [], []
    for name in args.models:  # then each model's steps against their read floor (issue 47's targets)
        model = models.pop(name)
        results.append(bench_model(model, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                                   repeats=args.repeats, variants=args.variants, machine=before,
                                   profile=args.profile))
        floors.append(step_floor(model, compile="fast+compile" in args.variants))
    after = measure_machine(args.device, getattr(torch, dtype))
    best = max((before, after), key=lambda mp: mp.bytes_per_s)  # the higher ceiling: the stricter floor
    read = measure_bandwidth(args.device, getattr(torch, dtype), kind="read")
    for r in results:
        apply_floors(r, best, read)
    command = "python -m inferlab.tools.bench " + " ".join(argv)
    versions = library_versions()
    out = {"started": started, "command": command, "cpu": cpu_name(), **versions,
           "machine_before": before.to_dict(), "machine_after": after.to_dict(), "read_bytes_per_s": read,
           "results": results}
    print(f"machine: {before!r}\n   after: {after!r}\n  floors use the higher copy bandwidth of the two; "
          f"read-only bandwidth (a sum): {read / 1e9:.1f} GB/s")
    print(table(results, out))
    for r, floor in zip(results, floors, strict=True):
        r["step_floor"] = asdict(floor)
        print("\n" + target_table(f"{r['model']}: decode steps against their read floor", decode_targets(floor, r)))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o))
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
