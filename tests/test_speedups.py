"""Notebook 08's measurements: the profiler's groups, attention kernels, decode paths, the scoreboard, the bench.

These measure on the bundled model: they check that each result has the right structure and that the
paths agree on tokens, never how fast anything was.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from inferlab import cost, fast
from inferlab.measure import profiling, speedups
from inferlab.measure.kernels import KernelComparison
from inferlab.measure.sweeps import Sweep
from inferlab.tools import bench
from inferlab.viz import speed

PROMPT = "To be, or not to be, that is the question"

pytestmark = pytest.mark.usefixtures("own_choice_cache")  # conftest.py: a choice cache of its own


def test_op_groups():
    assert profiling.op_group("aten::addmm") == "matmuls"
    assert profiling.op_group("quantized::linear_dynamic") == "matmuls"
    assert profiling.op_group("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention"
    assert profiling.op_group("aten::native_layer_norm") == "norms & activations"
    assert profiling.op_group("aten::tanh") == "norms & activations"
    assert profiling.op_group("aten::index_copy_") == "other ops"
    assert profiling.op_group("## Call CompiledFxGraph f7urk5hnxhfhzqjx ##") == "compiled graph (fused)"
    assert profiling.op_group("TorchDynamo Cache Lookup") == "Python & dispatch"


def test_profile_step_adds_up(model):
    decoder = fast.FastDecoder(model, 96, weights="tied")
    decoder.prefill([model.encode(PROMPT)])
    prof = profiling.profile_step(lambda: decoder.step(3), label="fast", repeats=3, warmup=1)
    assert set(prof.groups) == set(profiling.GROUPS)
    assert prof.groups["matmuls"] > 0 and prof.groups["attention"] > 0
    calls = {name: count for name, _, count in prof.top_ops}  # per step
    assert calls["aten::addmm"] == 4 * model.info.n_layer  # qkv, attention out, fc, MLP out in every block
    # once per block: SDPA and, when it made the top twelve, the kernel it dispatched to (each counted once)
    assert {c for name, c in calls.items() if "scaled_dot_product" in name} == {model.info.n_layer}
    fig = speed.profile_bars([prof], floor_s=1e-3)
    assert len(fig.data) == len(profiling.GROUPS)
    assert "ms" in fig.layout.xaxis.title.text


def test_profile_paths_profile_the_engine_and_each_decoder_after_the_same_prompt(model):
    ids = model.encode(PROMPT)
    decoders = {"fast": fast.FastDecoder(model, len(ids) + 8, weights="tied"),
                "fast+compile": fast.FastDecoder(model, len(ids) + 8, weights="transposed")}  # a compile that lost
    profiles = profiling.profile_paths(model, ids, decoders, repeats=2, warmup=1)
    assert list(profiles) == ["engine", "fast", "fast+compile"]
    assert [p.label for p in profiles.values()] == ["engine step (HF forward)", "fast step (tied)",
                                                    "fast step (compile lost to transposed)"]
    assert all(p.groups["matmuls"] > 0 for p in profiles.values())
    calls = {name: count for name, _, count in profiles["fast"].top_ops}
    assert calls["aten::addmm"] == 4 * model.info.n_layer  # qkv, attention out, fc, MLP out in every block
    assert decoders["fast"].tokens == len(ids) + 1 + 2 * 2  # after the prompt: one warm-up, two timed, two profiled


def test_fast_decoders_are_the_measured_layout_and_the_compiled_one_when_asked(model, monkeypatch):
    decoders, left_out = speedups.fast_decoders(model, 32, PROMPT, compile=False)
    assert list(decoders) == ["fast"] and left_out == {}
    assert decoders["fast"].choice is not None and not decoders["fast"].compiled  # weights="auto", eager
    other = next(w for w in ("tied", "transposed") if w != decoders["fast"].weights)  # a layout "fast" did not take
    compiled = fast.FastDecoder(model, 32, weights=other)
    monkeypatch.setattr(speedups, "compiled_decoder", lambda *args, **kwargs: (compiled, None))
    decoders, _ = speedups.fast_decoders(model, 32, PROMPT, compile=True)
    assert list(decoders) == ["fast", "fast+compile"] and decoders["fast+compile"] is compiled
    assert profiling.path_label("fast+compile", compiled) == f"fast step (compile lost to {other})"
    assert profiling.path_label("fast", decoders["fast"]) == f"fast step ({decoders['fast'].weights})"  # the winner
    same = fast.FastDecoder(model, 32, weights=decoders["fast"].weights)  # lost to the very layout "fast" runs
    monkeypatch.setattr(speedups, "compiled_decoder", lambda *args, **kwargs: (same, None))
    decoders, left_out = speedups.fast_decoders(model, 32, PROMPT, compile=True)
    assert list(decoders) == ["fast"] and "which is the fast step already measured" in left_out["fast+compile"]


def test_peak_bytes_sees_an_allocation():
    assert profiling.peak_bytes(lambda: torch.empty(1_000_000).fill_(1.0)) >= 4_000_000


def test_a_compiler_failure_is_reported_not_fatal(model, monkeypatch):
    real = speedups.FastDecoder

    def no_compiler(*args, compile=False, **kwargs):
        if compile:
            raise RuntimeError("no C++ compiler found\n(details)")
        return real(*args, **kwargs)

    monkeypatch.setattr(speedups, "FastDecoder", no_compiler)
    dec, why = speedups.compiled_decoder(model, 32, PROMPT)
    assert dec is None and why == "torch.compile failed: RuntimeError: no C++ compiler found"
    with pytest.warns(UserWarning, match=r"left out fast \+ torch.compile .*no C\+\+ compiler"):
        rows = speedups.decode_paths(model, PROMPT, 3, repeats=1, compile=True)
    assert "fast + torch.compile" not in [r.label for r in rows]
    result = bench.bench_model(model, prompt_tokens=8, new_tokens=3, repeats=1, variants=("fast", "fast+compile"),
                               log=lambda *_: None)
    assert set(result["variants"]) == {"fast"} and "no C++ compiler" in result["skipped"]["fast+compile"]
    assert "fast+compile left out: torch.compile failed" in bench.table([result])


def test_a_compiled_candidate_that_lost_is_never_a_second_bar_of_the_same_path(model, monkeypatch):
    # weights="auto" with compile=True keeps an eager layout when it steps faster: that path is already a row
    eager = speedups.FastDecoder(model, 32, weights="tied")
    monkeypatch.setattr(speedups, "compiled_decoder", lambda *args, **kwargs: (eager, None))
    with pytest.warns(UserWarning, match=r"lost to the eager tied layout, already timed as 'fast \(tied head\)'"):
        rows = speedups.decode_paths(model, PROMPT, 3, repeats=1, compile=True)
    assert "fast + torch.compile" not in [r.label for r in rows] and rows[0].shown == rows[0].label
    rows_layout = speedups.FastDecoder(model, 32, weights="tied")
    rows_layout.compiled = True  # stands in for a compiled step: its row names the layout that won
    monkeypatch.setattr(speedups, "compiled_decoder", lambda *args, **kwargs: (rows_layout, None))
    rows = speedups.decode_paths(model, PROMPT, 3, repeats=1, compile=True)
    assert rows[-1].label == "fast + torch.compile"  # the same name in every run: notebook 08 checks the labels
    assert rows[-1].shown == "fast + torch.compile (tied)"


def test_decode_paths_agree_and_ladder_chart(model):
    rows = speedups.decode_paths(model, PROMPT, 4, repeats=1)
    labels = [r.label for r in rows]
    assert labels[:4] == ["engine (DynamicCache)", "engine + StaticCache", "fast (tied head)", "fast (transposed head)"]
    assert len({r.tokens for r in rows}) == 1 and len(rows[0].tokens) == 4
    assert rows[0].extra_bytes is None and rows[2].extra_bytes > 0
    fig = speed.ladder_chart(labels, [r.tpot_s for r in rows], floor_s=1e-3)
    assert list(fig.data[0].x) == labels and "x floor" in fig.data[0].text[0]


def _sweep(job: str, xs: tuple[int, ...], medians: tuple[float, ...]) -> Sweep:
    return Sweep(job, "x", xs, tuple((m,) for m in medians), xs)


def test_scoreboard_rows_compare_each_technique_with_its_baseline():
    kernels = KernelComparison({"eager": _sweep("prefill", (64,), (0.02,)), "sdpa": _sweep("prefill", (64,), (0.01,))},
                               {"eager": (4_000_000,), "sdpa": (1_000_000,)}, {"eager": (0.0,), "sdpa": (1e-6,)})
    qrows = [speedups.QuantRow("fp32", "", 4_000_000, 4_000_000, 0.1, 0.02, 10.0),
             speedups.QuantRow("int8", "", 1_000_000, 1_000_000, 0.1, 0.01, 10.1)]
    paths = [speedups.PathRow("engine", 0.1, 0.02, (1, 2)), speedups.PathRow("fast", 0.05, 0.01, (1, 2), 5_000_000)]
    batch = _sweep("decode-batch", (1, 8), (0.01, 0.02))  # 100 tokens/s at batch 1, 400 at batch 8
    board = speedups.scoreboard_rows(kernels, qrows, {"tiny": (paths, 0.005)}, batch)
    assert [r.technique for r in board] == ["SDPA vs eager attention (prefill)", "int8 weights", "fast (tiny)",
                                            "batch 8 vs 1"]
    assert board[0].ttft == "x0.50 at T=64" and board[0].memory == "x0.25 peak"
    assert board[1].tpot == "x0.50" and "+1.00%" in board[1].quality
    assert board[2].tpot == "x0.50 (2.00x floor)" and board[2].quality == "same tokens"
    assert board[3].tpot == "x2.00 per user" and board[3].quality == "x4.0 tokens/s"


def test_quant_chart_and_scoreboard():
    rows = [speedups.QuantRow("fp32", "", 4_000_000, 4_000_000, 0.1, 2e-3, 10.0),
            speedups.QuantRow("int8", "", 1_000_000, 1_000_000, 0.1, 1e-3, 10.5)]
    fig = speed.quant_chart(rows, bytes_per_s=2e9)
    assert list(fig.data[0].text) == ["fp32", "int8"]
    assert "perplexity 10.50" in fig.data[0].hovertext[1]
    assert fig.layout.xaxis.title.text.startswith("bytes read")
    with pytest.raises(ValueError, match="QuantRow"):
        speed.quant_chart([{"kind": "x"}])
    table = speed.scoreboard([speedups.ScoreRow("int8", "x1.0", "x0.5", "-", "same")])
    assert list(table.data[0].cells.values[0]) == ["int8"] and list(table.data[0].cells.values[2]) == ["x0.5"]
    with pytest.raises(ValueError, match="ScoreRow"):
        speed.scoreboard([{"technique": "int8", "TPOT": "x0.5"}])


def test_product_rates_cover_every_product_of_a_step(model):
    """Worked by hand for the bundled model (8 layers, d_model 160, fp32), bytes per step of each kind:
    qkv [480, 160] x 8 layers x 4 bytes = 2,457,600; the out projection [160, 160] x 8 x 4 = 819,200;
    fc [640, 160] and the MLP's out [160, 640]: 3,276,800 each; the LM head [50257, 160] once = 32,164,480."""
    rates = profiling.product_rates(fast.FastDecoder(model, 16, weights="tied"), repeats=1)
    assert [(r.name, r.shape, r.per_step, r.nbytes) for r in rates] == [
        ("qkv", (480, 160), 8, 2_457_600), ("attn_out", (160, 160), 8, 819_200), ("fc", (640, 160), 8, 3_276_800),
        ("mlp_out", (160, 640), 8, 3_276_800), ("head", (50257, 160), 1, 32_164_480)]
    assert all(r.product_s > 0 and r.read_s > 0 for r in rates)
    assert "GB/s" in repr(rates[0]) and "a plain read" in repr(rates[0])


# ----------------------------------------------------------------------------- notebook 08's sentences
def test_narrate_the_layout_choice_and_its_other_outcomes():
    from inferlab.narrate import n08

    won = fast.Choice("rows", True, {"rows+compile": 0.040, "packed": 0.050, "tied": 0.060})
    text = n08.layout_choice(won)
    assert "kept **rows+compile**, 1.25x faster than the runner-up, *packed*" in text
    assert "compiler's loops" in text and "noise" not in text
    tie = fast.Choice("tied", False, {"tied": 0.0400, "transposed": 0.0404}, "cached")
    text = n08.layout_choice(tie)
    assert "plain path won" in text and "within the noise" in text and "forget()" in text
    alone = fast.Choice("tied", False, source="only candidate")
    assert "one layout" in n08.layout_choice(alone)


def test_narrate_where_the_rest_goes():
    from inferlab.narrate import n08

    # two kinds of product, 4 MB per step each: one streams at half a plain read's speed (20 ms vs 10 ms),
    # the other at 80% (1.25 ms vs 1 ms): 21.25 ms of products
    rates = [profiling.ProductRate("qkv", (1000, 1000), 10, 4_000_000, 0.020, 0.010),
             profiling.ProductRate("head", (1000, 1000), 1, 4_000_000, 0.00125, 0.001)]
    near = n08.where_the_rest_goes(rates, step_s=0.0230, read_floor_s=0.0200)  # 1.15x
    assert "1.15x its read floor" in near and "nothing large is left" in near
    far = n08.where_the_rest_goes(rates, step_s=0.0300, read_floor_s=0.0200)  # products 21.25 ms of 30
    assert "add up to 21.25 ms; the rest, 8.75 ms" in far and "*qkv*, at 50% of a plain read" in far
    around = n08.where_the_rest_goes(rates, step_s=0.0500, read_floor_s=0.0200)  # rest 28.75 ms > products
    assert "*around* the products" in around
    busy = n08.where_the_rest_goes(rates, step_s=0.0250, read_floor_s=0.0200)  # 1.25x, products 21.25 of 25 ms
    assert "*qkv*" in busy and "more than the whole step" not in busy
    noisy = n08.where_the_rest_goes(rates, step_s=0.0210, read_floor_s=0.0100)  # products 21.25 ms > 21 ms
    assert "more than the whole step (21.25 ms)" in noisy
    assert "| qkv | [1000, 1000] x 10 | 4.0 | 20.00 | 0.2 | 0.4 | 50% |" in n08.product_table(rates)


def test_narrate_what_limits_prefill():
    from inferlab.narrate import n08

    pre = speedups.PrefillTimes(256, engine_s=0.5, fast_s=0.4, engine_x_floor=1.7, fast_x_floor=1.3,
                                flops_per_s=150e9, floor_s=0.3)
    prof = profiling.StepProfile("prefill", 1.0, {"matmuls": 0.8, "attention": 0.1, "Python & dispatch": 0.1}, ())
    fast_prof = profiling.StepProfile("prefill", 1.0, {"matmuls": 0.9, "attention": 0.1}, ())
    text = n08.prefill_limit(pre, prof, fast_prof)
    # the ratios are the paired ones, not 500 / 300 ms
    assert "500 ms (1.70x its floor)" in text and "400 ms (1.30x)" in text and "300 ms" in text
    assert "80% of the engine's prefill and 90% of the fast path's" in text and "150 GFLOP/s" in text
    # 90% of 1.30x: the products alone 1.17x the floor, 85% of the square product's rate; 0.13x around them
    assert "about 1.17x the floor (90% of 1.30x)" in text and "about 85% of the rate" in text
    assert "the other 0.13x is attention" in text
    assert "re-run" not in text
    slow = profiling.StepProfile("prefill", 1.0, {"matmuls": 0.2, "Python & dispatch": 0.8}, ())
    text = n08.prefill_limit(dataclasses.replace(pre, engine_x_floor=2.5, fast_x_floor=2.0), slow, fast_prof)
    assert "*Python & dispatch*" in text and "re-run the cell" in text


MACHINE = cost.MachineProfile("cpu", "float32", bytes_per_s=1e15, flops_per_s=1e15, copy_mb=1, matmul_n=1)


def test_prefill_paths_time_both_and_leave_the_fast_cache_filled(model):
    ids = model.encode(PROMPT)
    dec = fast.FastDecoder(model, len(ids) + 1, weights="tied")
    times = speedups.prefill_paths(model, dec, ids, repeats=3, machine=MACHINE)
    assert times.tokens == len(ids) and times.engine_s > 0 and times.fast_s > 0 and times.flops_per_s > 0
    assert dec.tokens == len(ids)
    # the floor is the prompt's FLOPs at the median matmul rate measured between the runs (the given bandwidth is
    # so high that the prefill is compute-bound), not at the stored profile's 1e15 FLOP/s
    flops = cost.prefill_cost(cost.Shape.from_info(model.info), len(ids)).flops
    assert times.floor_s == pytest.approx(flops / times.flops_per_s)
    assert 1e8 < times.flops_per_s < 1e14
    assert times.engine_x_floor > 0 and times.fast_x_floor > 0
    assert f"({times.fast_x_floor:.2f}x)" in repr(times) and "x floor" in repr(times)


# ----------------------------------------------------------------------------- notebook 08's narration cells
def _profile(label: str, step_s: float, **groups: float) -> profiling.StepProfile:
    return profiling.StepProfile(label, step_s, {**dict.fromkeys(profiling.GROUPS, 0.0), **groups},
                                 (("aten::addmm", step_s / 2, 4),))


def test_narrate_the_step_floor_memory_or_compute_bound():
    from inferlab.narrate import n08

    # 40 MB and 80 MFLOP: 2 FLOP/byte, below a ridge of 5 -> memory-bound, floor 40 MB at 20 GB/s = 2 ms
    slow = cost.Cost("decode", 1, 80e6, 40e6, floor_compute_s=80e6 / 100e9, floor_memory_s=40e6 / 20e9)
    text = n08.step_floor(slow, ridge=5.0)
    assert "**40.0 MB**" in text and "2.00 FLOP/byte, below this machine's ridge of 5.0" in text
    assert "**memory-bound**" in text and "**2.000 ms**" in text and text.endswith("tries to remove.")
    busy = cost.Cost("decode", 1, 800e6, 40e6, floor_compute_s=8e-3, floor_memory_s=2e-3)  # 20 FLOP/byte
    assert "above this machine's ridge of 5.0), so it is **compute-bound**: its floor is **8.000 ms**" in \
        n08.step_floor(busy, ridge=5.0)


def test_narrate_the_profiled_paths_and_the_full_size_step():
    from inferlab.narrate import n08

    profiles = {"engine": _profile("engine step", 0.010, matmuls=0.004, **{"Python & dispatch": 0.006}),
                "fast": _profile("fast step", 0.005, matmuls=0.004, **{"Python & dispatch": 0.001}),
                "fast+compile": _profile("fast step, compiled", 0.004, **{"compiled graph (fused)": 0.004})}
    text = n08.step_paths(profiles, floor_s=0.002)
    assert text.splitlines()[0] == ("- **engine step**: 10.00 ms, 5.00x the floor; its largest part is "
                                    "*Python & dispatch* (60%), Python & dispatch 60%")
    assert "- **fast step**: 5.00 ms, 2.50x the floor; its largest part is *matmuls* (80%)" in text
    assert "The paths do the same arithmetic" in text
    floor = cost.Cost("decode", 1, 1e6, 100e6, floor_compute_s=1e-5, floor_memory_s=0.004)  # 100 MB, 4 ms
    text = n08.full_size_steps(profiles, floor, 25e9, compiled=True)
    assert "about **100 MB** per step: floor **4.0 ms**, at the 25.0 GB/s" in text
    assert "*matmuls* take the largest share" in text and "read the weights at about 25.0 GB/s" in text  # 100 MB/4 ms
    assert "the whole step took **4.0 ms**, weights read at 25.0 GB/s" in text
    lost = n08.full_size_steps(profiles, floor, 25e9, compiled=False)  # the "fast+compile" decoder stayed eager
    assert "The compiled step" not in lost and "- **fast step, compiled**" in lost


def test_narrate_attention_memory_quant_table_and_batching():
    from inferlab.narrate import n08

    kernels = KernelComparison({"eager": _sweep("prefill", (16, 64), (0.01, 0.04)),
                                "sdpa": _sweep("prefill", (16, 64), (0.01, 0.02))},
                               {"eager": (2**20, 8 * 2**20), "sdpa": (2**20, 2 * 2**20)}, {"eager": (0.0, 0.0)})
    text = n08.attention_memory(kernels, layer_bytes=2**20)
    assert "At T = 64, eager prefill allocated up to **8.0 MiB** against SDPA's **2.0 MiB** (4.0x)" in text
    assert "took 40.0 ms against 20.0 ms" in text and "(one 1.0 MiB matrix per layer" in text
    rows = [speedups.QuantRow("fp32", "", 4_000_000, 4_000_000, 0.1, 0.02, 10.0, 1.0, 1.0),
            speedups.QuantRow("int8", "", 1_000_000, 1_000_000, 0.1, 0.01, 10.5, 4.0, 2.0),
            speedups.QuantRow("bf16", "", 2_000_000, 2_000_000, 0.1, 0.025, 10.1, 2.0, 0.8)]
    table = n08.quant_table(rows)
    assert "| int8 | 1.0 | 4.0x | 2.00x | 10.00 | 10.50 |" in table
    assert "fastest format here was **int8** (2.00x fp32's speed, 4.0x predicted" in table
    assert "largest perplexity was **int8**'s (10.50 against fp32's 10.00, +5.0%)" in table
    assert "Slower than fp32 although they read fewer bytes: **bf16**" in table  # x0.8 for half the bytes
    assert "short of the bytes' prediction by more than 20%: **int8**" in table  # 2.0x of a predicted 4.0x
    assert "A hypothesis, not measured here" in table and "slow kernels" not in table
    as_predicted = n08.quant_table([rows[0], speedups.QuantRow("int8", "", 1, 1, 0.1, 0.006, math.nan, 4.0, 3.5)])
    assert "Every format reached at least 80%" in as_predicted and "hypothesis" not in as_predicted
    none = n08.quant_table([rows[0], rows[2]])  # bf16 at x0.8: nothing beat fp32
    assert "No format was faster than fp32 here" in none and "fastest format" not in none
    assert "| int8 | 0.0 | 4.0x | 3.50x | 6.00 | - |" in as_predicted and "Quality" not in as_predicted  # nan
    batch = _sweep("decode-batch", (1, 8), (0.01, 0.02))  # 100 tokens/s at batch 1, 400 at batch 8
    assert ("From batch 1 to 8, total throughput went from **100** to **400 tokens/s** (4.0x) while each user's "
            "TPOT went from 10.00 to 20.00 ms (2.0x)") in n08.batching(batch)
    assert "not monotone" not in n08.batching(batch)
    # notebook 08's stored bundled-model curve: batch 1 slower than 2 to 16
    dip = n08.batching(_sweep("decode-batch", (1, 2, 4, 32), (0.00576, 0.00374, 0.00389, 0.00819)))
    assert "(1.4x)" in dip and "**35% faster** from batch 1 to batch 2" in dip and "fastest at **batch 2**" in dip


def test_narrate_quantization_on_two_models_names_a_format_that_wins_on_one_and_loses_on_the_other():
    from inferlab.narrate import n08

    def row(kind, speedup):
        return speedups.QuantRow(kind, "", 1, 1, 0.1, 0.01 / speedup, math.nan, 2.0, speedup)

    full, small = [row("fp32", 1.0), row("bf16", 0.17), row("int8", 2.5)], [row("fp32", 1.0), row("bf16", 1.16),
                                                                             row("int8", 3.0)]
    text = n08.quant_models(full, "gpt2", small, "tiny")
    assert "bf16 0.17x on gpt2 and 1.16x on tiny" in text and "int8 2.50x on gpt2 and 3.00x on tiny" in text
    assert "**bf16** won on one model and lost on the other" in text and "Notebook 07 (section 7.1)" in text
    alike = n08.quant_models(full, "gpt2", [row("fp32", 1.0), row("bf16", 0.5)], "tiny")
    assert "won or lost on both models alike" in alike and "int8" not in alike
    assert "No weight format was timed on both models" in n08.quant_models(full, "gpt2", [row("fp32", 1.0)], "tiny")


def test_narrate_the_decode_path_ladders_and_a_run_where_nothing_won():
    from inferlab.narrate import n08

    won = [speedups.PathRow("engine", 0.1, 0.020, (1,)), speedups.PathRow("fast", 0.1, 0.010, (1,), note="x")]
    lost = [speedups.PathRow("engine", 0.1, 0.010, (1,)), speedups.PathRow("fast", 0.1, 0.012, (1,))]
    text = n08.ladders(won, 0.005, lost, 0.005)
    assert ("On the full-size GPT-2 shape the default engine's TPOT was 20.00 ms (4.00x the floor); the best path, "
            "*fast (x)*, reached **10.00 ms (2.00x the floor)**, 2.00x faster.") in text
    assert "On the bundled model the default engine's TPOT was 10.00 ms (2.00x the floor), and no other path" in text


def test_the_op_picker_redraws_the_chosen_path_and_names_itself_where_no_kernel_runs():
    from IPython.core.formatters import DisplayFormatter

    from inferlab.widgets import speed as wspeed

    profiles = {"engine": _profile("engine step", 0.010, matmuls=0.01), "fast": _profile("fast step", 0.005)}
    box = wspeed.op_picker(profiles)
    pick, out = box.children
    assert list(pick.options) == ["engine step", "fast step"]
    title = lambda: out.outputs[0]["data"]["application/vnd.plotly.v1+json"]["layout"]["title"]["text"]  # noqa: E731
    assert "engine step" in title()
    pick.value = "fast step"
    assert "fast step" in title()
    shown, _ = DisplayFormatter().format(box)
    assert shown["text/plain"] == "Operator picker (2 profiled paths): run the cell to choose a path"
    with pytest.raises(ValueError, match=r"profiles must be StepProfiles.*profile_paths"):
        wspeed.op_picker([])


def test_narrate_the_static_cache_rung_and_where_each_models_saving_went():
    from inferlab.narrate import n08

    def rows(dynamic, static):
        return [speedups.PathRow("engine (DynamicCache)", 0.1, dynamic, (1,)),
                speedups.PathRow("engine + StaticCache", 0.1, static, (1,)), speedups.PathRow("fast", 0.1, 0.01, (1,))]

    slower = n08.ladders(rows(0.0466, 0.0548), 0.01, rows(0.0136, 0.0154), 0.002)
    assert "StaticCache* was slower than the default DynamicCache (its TPOT 1.18x DynamicCache's on GPT-2's " \
           "shape, 1.13x DynamicCache's on the bundled model)" in slower
    assert "compiled or captured in a CUDA graph" in slower
    mixed = n08.ladders(rows(0.0424, 0.0437), 0.01, rows(0.0097, 0.0103), 0.002)  # the stored 1.03x and 1.06x
    assert "(its TPOT 1.06x DynamicCache's on the bundled model)" in mixed
    assert "Elsewhere it tied (its TPOT 1.03x DynamicCache's on GPT-2's shape: within 5%)" in mixed
    faster = n08.ladders(rows(0.0466, 0.0440), 0.01, rows(0.0136, 0.0130), 0.002)
    assert "was not slower than the default DynamicCache here" in faster and "was slower" not in faster
    assert "StaticCache" not in n08.ladders(rows(0.0466, 0.0548)[::2], 0.01, rows(0.0136, 0.0154)[::2], 0.002)
    # the stored bundled-model profiles: matmuls 6.18 -> 2.92 ms, Python 1.87 -> 0.40 ms of 9.60 -> 4.39 ms
    layout = {"engine": _profile("engine", 0.0096, matmuls=0.00618, **{"Python & dispatch": 0.00187}),
              "fast": _profile("fast", 0.00439, matmuls=0.00292, **{"Python & dispatch": 0.0004})}
    text = n08.ladders(rows(0.0466, 0.0548), 0.01, rows(0.0136, 0.0154), 0.002, profiles={"tiny": layout})
    assert "On tiny the profiles of section 2 (engine 9.60 ms, eager fast step 4.39 ms) put **63%** of the " \
           "saving in the matrix products (3.26 ms) and 1.47 ms in Python and dispatch" in text
    overhead = {"engine": _profile("engine", 0.010, matmuls=0.004, **{"Python & dispatch": 0.006}),
                "fast": _profile("fast", 0.005, matmuls=0.004, **{"Python & dispatch": 0.001})}
    text = n08.ladders(rows(0.0466, 0.0548), 0.01, rows(0.0136, 0.0154), 0.002, profiles={"tiny": overhead})
    assert "**100%** of the saving in Python and dispatch (5.00 ms)" in text
    assert "removing overhead is what paid" in text
    norms = {"engine": _profile("engine", 0.010, matmuls=0.004, **{"norms & activations": 0.004,
                                                                   "Python & dispatch": 0.002}),
             "fast": _profile("fast", 0.006, matmuls=0.004, **{"norms & activations": 0.001,
                                                               "Python & dispatch": 0.001})}
    text = n08.ladders(rows(0.0466, 0.0548), 0.01, rows(0.0136, 0.0154), 0.002, profiles={"tiny": norms})
    assert "the largest part of the saving, **75%**, in *" in text
    none = {"engine": overhead["fast"], "fast": overhead["engine"]}
    text = n08.ladders(rows(0.0466, 0.0548), 0.01, rows(0.0136, 0.0154), 0.002, profiles={"tiny": none})
    assert "was not faster than the engine's (10.0 ms against 5.00 ms)" in text


def test_narrate_a_remembered_layout_choice_beside_this_runs_step():
    from inferlab.narrate import n08

    cached = fast.Choice("rows", True, {"rows+compile": 0.01589, "packed": 0.02559}, "cached",
                         measured_at="2026-12-04 13:20 UTC")
    slow = n08.layout_choice(cached, now_s=0.02335)
    assert "**remembered from the choice run on 2026-12-04 13:20 UTC**" in slow
    assert "**This run**: the rows+compile step took 23.35 ms (1.47x the remembered 15.89 ms)" in slow
    assert "slower now than then" in slow
    assert "about its remembered speed" in n08.layout_choice(cached, now_s=0.0165)
    assert "faster now than then" in n08.layout_choice(cached, now_s=0.012)
    undated = n08.layout_choice(dataclasses.replace(cached, measured_at=""))
    assert "run on a date not recorded" in undated and "This run" not in undated
    assert "remembered" not in n08.layout_choice(dataclasses.replace(cached, source="measured"), now_s=0.02)


def test_narrate_the_chosen_layouts_products_at_batch_one_and_four():
    from inferlab.narrate import n08

    def rates(qkv_s, head_s):  # 4 MB of qkv weights and 2 MB of head weights per step
        return [profiling.ProductRate("qkv", (1000, 1000), 1, 4_000_000, qkv_s, 0.0002),
                profiling.ProductRate("head", (500, 1000), 1, 2_000_000, head_s, 0.0001)]

    text = n08.batch_products({1: ("rows", rates(0.0004, 0.0002)), 4: ("packed", rates(0.0002, 0.0001))})
    assert "| product | GB/s at batch 1 (rows) | GB/s at batch 4 (packed) |" in text
    assert "| qkv | 10.0 | 20.0 |" in text and "| **all products** | **10.0** | **20.0** |" in text
    assert "**20.0 GB/s**, 2.00x batch 1's 10.0 GB/s" in text and "notebook 04, section 7" in text
    slower = n08.batch_products({1: ("rows", rates(0.0002, 0.0001)), 4: ("rows", rates(0.0004, 0.0002))})
    assert "slower than batch 1's 20.0 GB/s (0.50x)" in slower
    alike = n08.batch_products({1: ("rows", rates(0.0004, 0.0002)), 4: ("rows", rates(0.00041, 0.0002))})
    assert "about as fast as at batch 1" in alike and "padded" not in alike
    # the fast path's own words for a padded batch-1 layout (FastDecoder.layout) add why one row read as fast as four
    plan = fast.layouts.RowPlan({"qkv": 4, "attn_out": 1, "fc": 1, "mlp_out": 1, "head": 4})
    padded = n08.batch_products({1: (f"packed ({plan.summary(1)})", rates(0.0004, 0.0002)),
                                 4: ("packed", rates(0.00041, 0.0002))})
    assert "GB/s at batch 1 (packed (padded: qkv 1 -> 4, head 1 -> 4 rows))" in padded
    assert "ran padded to the row count measured fastest here" in padded
    unpadded = n08.batch_products({1: (f"packed ({fast.layouts.RowPlan.unpadded(1).summary(1)})",
                                       rates(0.0004, 0.0002)), 4: ("packed", rates(0.00041, 0.0002))})
    assert "no product padded" in unpadded and "ran padded" not in unpadded
