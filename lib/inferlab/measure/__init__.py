"""Measuring this machine: one result type per measurement, each timed once, on ``timing.time_call``.

    machine.py      the two ceilings: ``machine_profile`` (measured once per machine, kept on disk with its age,
                    reused by every notebook; ``refresh=True`` re-measures),
                    ``measure_bandwidth`` (copy or read), ``measure_matmul``, ``measure_machine``
    sweeps.py       ``Sweep`` (every repeat at every size) and ``prefill_sweep``, ``decode_sweep``,
                    ``batch_sweep`` (decode or prefill, engine or fast path), ``turn_batch``
    kernels.py      ``kernel_sweep``: prefill under each attention kernel (time, peak memory, agreement)
    latency.py      whole requests through ``generate``: ``measure`` -> ``Measurement``, ``ttft_sweep``,
                    ``tpot_sweep``, ``compare`` (dtypes, devices), ``thinking_sweep``,
                    ``timing_model`` (GPT-2's shape when the loaded model is small)
    cache_on_off.py ``compare_cache``: greedy decoding with and without the KV cache
    roofline.py     measured times against the cost model: ``sweep_costs``, ``roofline_points``,
                    ``myth_check``, ``count_ops``, ``predict_sizes``,
                    ``compute_bound_from`` (prefill's knee), ``TpotVerdict``
    serving.py      ``serve_step_sweep``: one decode step of ``serve.run``'s forward at several batch sizes
    serve_runs.py   notebook 09's runs, each serving idea with and without it (``batching_runs``, ``fit_runs``, ...)
    serving_targets.py  issue 31's serving targets, scored (``python -m inferlab.tools.bench serve``)
    targets.py      ``TargetRow``, ``ratio_row``, ``target_table``: a benchmark target as one row
    long_context.py ``decode_grid`` (decode steps over context x batch against the weights-plus-KV floor),
                    ``attention_runs`` (eager, SDPA, tiled: memory, time, bytes), ``kv_heads_reads``,
                    ``profile_sides`` (notebook 11)
    speedups.py     notebook 08's techniques: ``quant_rows``, ``decode_paths``, ``scoreboard_rows``
    profiling.py    ``profile_step`` (where one step's time goes), ``op_group``, ``peak_bytes``

Counting (FLOPs, bytes, floors) is ``inferlab.cost``; figures are ``inferlab.viz``; the command-line
benchmark is ``python -m inferlab.tools.bench``. In a notebook, the measurements leave the few numbers the
gate on disturbed runs judges (``inferlab.gate``).

    >>> from inferlab import measure
    >>> machine = measure.machine_profile(m.device)                      # doctest: +SKIP
    >>> measure.prefill_sweep(m, [8, 64, 256]).medians                   # doctest: +SKIP
"""

from .cache_on_off import CacheComparison, compare_cache
from .kernels import KernelComparison, attention_kernels, kernel_sweep
from .latency import (
    Measurement,
    cached_model,
    compare,
    load_variant,
    measure,
    prompt_of_length,
    timing_model,
    tpot_sweep,
    ttft_sweep,
)
from .long_context import AttentionMemory, Crossover, DecodeGrid, GridPoint, attention_memory, decode_grid
from .machine import machine_profile, measure_bandwidth, measure_machine, measure_matmul
from .profiling import StepProfile, peak_bytes, profile_step
from .roofline import (
    MythCheck,
    Prediction,
    RooflinePoint,
    TpotVerdict,
    compute_bound_from,
    count_ops,
    myth_check,
    predict_sizes,
    roofline_points,
    sweep_costs,
)
from .serving import serve_step_sweep
from .speedups import (
    PathRow,
    QuantRow,
    ScoreRow,
    bench_prompt,
    compiled_decoder,
    decode_paths,
    quant_rows,
    scoreboard_rows,
)
from .sweeps import Sweep, batch_sweep, decode_sweep, prefill_sweep, sample_ids, turn_batch
from .thinking import ThinkingPoint, split_thinking, thinking_sweep

__all__ = [
    "AttentionMemory",
    "CacheComparison",
    "Crossover",
    "DecodeGrid",
    "GridPoint",
    "KernelComparison",
    "Measurement",
    "MythCheck",
    "PathRow",
    "Prediction",
    "QuantRow",
    "RooflinePoint",
    "ScoreRow",
    "StepProfile",
    "Sweep",
    "ThinkingPoint",
    "TpotVerdict",
    "attention_kernels",
    "attention_memory",
    "batch_sweep",
    "bench_prompt",
    "cached_model",
    "compare",
    "compare_cache",
    "compiled_decoder",
    "compute_bound_from",
    "count_ops",
    "decode_grid",
    "decode_paths",
    "decode_sweep",
    "kernel_sweep",
    "load_variant",
    "machine_profile",
    "measure",
    "measure_bandwidth",
    "measure_machine",
    "measure_matmul",
    "myth_check",
    "peak_bytes",
    "predict_sizes",
    "prefill_sweep",
    "profile_step",
    "prompt_of_length",
    "quant_rows",
    "roofline_points",
    "sample_ids",
    "scoreboard_rows",
    "serve_step_sweep",
    "split_thinking",
    "sweep_costs",
    "thinking_sweep",
    "timing_model",
    "tpot_sweep",
    "ttft_sweep",
    "turn_batch",
]
