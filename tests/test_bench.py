"""``python -m inferlab.tools.bench`` and the measurements it shares with notebook 08 (weight formats, kernels).

The profiler, decode paths, compiler fallback and scoreboard are tested in ``test_speedups.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

import inferlab as il
from inferlab import kept
from inferlab.cost import MachineProfile, Shape, prefill_cost
from inferlab.measure import KernelComparison, Sweep, speedups
from inferlab.tools import bench
from inferlab.viz import speed

PROMPT = "To be, or not to be, that is the question"

pytestmark = pytest.mark.usefixtures("own_choice_cache")  # conftest.py: a choice cache of its own


# ----------------------------------------------------------------------------- weight formats, kernels
def test_quant_rows_and_chart(model, monkeypatch):
    from types import SimpleNamespace

    from inferlab import quantize as q

    # perplexity on the held-out text is quantize's own test; here a stand-in keeps this test fast
    texts = []
    monkeypatch.setattr(speedups, "perplexity", lambda m, text: texts.append(text) or SimpleNamespace(perplexity=12.5))
    rows = speedups.quant_rows({k: q.quantize(model, k) for k in ("fp32", "bf16")}, PROMPT, 3, repeats=1,
                               text="the text to score")
    assert texts == ["the text to score"] * 2
    assert [r.kind for r in rows] == ["fp32", "bf16"]
    assert rows[0].predicted_speedup == 1.0 and rows[0].measured_speedup == 1.0
    assert rows[1].predicted_speedup == pytest.approx(2.0, rel=0.05)  # half the bytes per step
    assert rows[1].perplexity == 12.5 and "MB per step" in repr(rows[1])
    alone = speedups.quant_rows({"bf16": q.quantize(model, "bf16")}, PROMPT, 2, repeats=1)
    assert alone[0].predicted_speedup is None  # no fp32 row to compare with
    scored = len(texts)
    blind = speedups.quant_rows({"fp32": q.quantize(model, "fp32")}, PROMPT, 2, repeats=1, quality=False)
    assert math.isnan(blind[0].perplexity) and len(texts) == scored  # random weights: no perplexity computed
    fig = speed.quant_chart(rows, bytes_per_s=1e9)
    assert list(fig.data[0].text) == ["fp32", "bf16"] and fig.data[1].name == "bytes / bandwidth"
    with pytest.raises(ValueError, match="QuantRow"):
        speed.quant_chart([{"kind": "fp32"}])


def fake_kernels() -> KernelComparison:
    sweeps = {k: Sweep("prefill", "prompt length (tokens)", (16, 64), ((s / 4,), (s,)), (16, 64))
              for k, s in (("eager", 0.02), ("sdpa", 0.01))}
    return KernelComparison(sweeps, {"eager": (1_000_000, 4_000_000), "sdpa": (500_000, 1_000_000)},
                            {"eager": (0.0, 0.0), "sdpa": (1e-6, 2e-6)})


def test_prefill_chart():
    fig = speed.prefill_chart(fake_kernels())
    assert [t.name for t in fig.data] == ["eager time", "eager memory", "sdpa time", "sdpa memory"]
    assert list(fig.data[0].y) == pytest.approx([5.0, 20.0])  # ms
    assert list(fig.data[3].y) == pytest.approx([500_000 / 2**20, 1_000_000 / 2**20])  # MiB
    with pytest.raises(ValueError, match="kernel_sweep"):
        speed.prefill_chart([])


# ----------------------------------------------------------------------------- the command
def test_benchmark_command_writes_json_and_table(tmp_path, capsys):
    out = tmp_path / "bench.json"
    result = bench.main(["--models", "bundled", "--repeats", "1", "--new-tokens", "3", "--prompt-tokens", "8",
                         "--variants", "engine", "generate()", "fast", "--out", str(out)])
    printed = capsys.readouterr().out
    r = result["results"][0]
    assert set(r["variants"]) == {"engine", "generate()", "fast"}
    assert r["read_bytes_per_s"] == result["read_bytes_per_s"] > 0  # the read-only bandwidth, measured once
    assert "x generate()" in printed and "x read floor" in printed and out.exists()
    assert result["cpu"] == kept.cpu_name() and result["threads"] >= 1  # two machines' tables compare
    assert result["torch"] in printed and "MKL:" in printed and "oneDNN:" in printed
    assert r["choices"]["fast"]["summary"] in printed  # which layout the fast path measured fastest
    assert result["command"].startswith("python -m inferlab.tools.bench")
    # issue 47's targets: the batch-1 step against the read of its weights, batch 2 and 4, and generate()
    assert "decode steps against their read floor" in printed and "batch-1 step / batch-4 step" in printed
    assert "fast TPOT / generate() TPOT" in printed and "engine TPOT / generate() TPOT" in printed
    assert set(r["step_floor"]["step_s"]) == {1, 2, 4} and r["step_floor"]["x_floor"][1] > 0


def test_bench_profiles_each_path_through_the_measure_module(model):
    result = bench.bench_model(model, prompt_tokens=8, new_tokens=3, repeats=1, variants=("engine", "fast"),
                               profile=True, log=lambda *_: None)
    assert list(result["profiles"]) == ["engine", "fast"]  # the variants' names, as measure.profile_paths returns
    assert result["profiles"]["fast"]["label"].startswith("fast step (") and result["profiles"]["fast"]["step_s"] > 0
    assert [r["name"] for r in result["product_rates"]["fast"]] == ["qkv", "attn_out", "fc", "mlp_out", "head"]
    text = bench.table([result])
    assert "profile of one engine step (HF forward):" in text and "profile of one fast step (" in text


def test_apply_floors_by_hand():
    machine = MachineProfile("cpu", "float32", bytes_per_s=20e9, flops_per_s=100e9, copy_mb=1, matmul_n=1)
    result = {"model": "gpt2", "shape": [12, 12, 768, 50257, 1024, 4], "prompt_tokens": 10, "new_tokens": 2,
              "variants": {"engine": {"ttft_s": 0.1, "tpot_s": 0.0495012864}}}
    bench.apply_floors(result, machine, read_bytes_per_s=10e9)
    # decode at context 10 + 2 // 2 = 11: 494,128,128 + 12 x 73,728 = 495,012,864 B -> 24.7506432 ms at 20 GB/s
    assert result["tpot_floor_s"] == pytest.approx(0.0247506432)
    assert result["tpot_read_floor_s"] == pytest.approx(0.0495012864)  # the same bytes at 10 GB/s
    engine = result["variants"]["engine"]
    assert engine["tpot_x_floor"] == pytest.approx(2.0) and engine["tpot_x_read_floor"] == pytest.approx(1.0)


def test_apply_floors_judges_each_request_against_the_rate_measured_just_before_it():
    machine = MachineProfile("cpu", "float32", bytes_per_s=1e15, flops_per_s=1e12, copy_mb=1, matmul_n=1)
    shape = Shape("gpt2", 12, 12, 768, 50257, 1024, 4)
    flops = prefill_cost(shape, 256).flops
    # three requests, the machine at 100, 200 and 50 GFLOP/s; each took 1.4x the floor at its own rate
    rates = [100e9, 200e9, 50e9]
    runs = [1.4 * flops / r for r in rates]
    result = {"model": "gpt2", "shape": [12, 12, 768, 50257, 1024, 4], "prompt_tokens": 256, "new_tokens": 2,
              "variants": {"fast": {"ttft_s": sorted(runs)[1], "tpot_s": 0.02, "ttft_runs_s": runs,
                                    "flops_per_s_runs": rates},
                           "old": {"ttft_s": 0.5, "tpot_s": 0.02}}}
    bench.apply_floors(result, machine)
    assert result["variants"]["fast"]["ttft_x_floor"] == pytest.approx(1.4)
    assert result["ttft_floor_flops_per_s"] == 100e9  # the floor row: at the median rate measured
    assert result["ttft_floor_s"] == pytest.approx(flops / 100e9)
    assert result["variants"]["old"]["ttft_x_floor"] == pytest.approx(0.5 / (flops / 100e9))  # no pairs: the floor's



# ----------------------------------------------------------------------------- the serving targets (issue 31)
def test_serve_entry_prints_every_target_with_its_verdict(tmp_path, capsys):
    from inferlab.measure import serving_targets as serve_bench

    assert tuple(serve_bench.ROWS) == bench.SERVE_ROWS  # the command's --rows choices name the library's rows
    out = tmp_path / "serve.json"
    # the bundled model for the timings too: seconds; the rows' numbers mean nothing at these sizes
    result = bench.main(["serve", "--small", "--model", "bundled", "--threads", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    rows = result["rows"]
    assert len(rows) == len(bench.SERVE_ROWS) + 2 and json.loads(out.read_text())["rows"] == rows
    for needle in ("continuous / static throughput", "transformers generate_batch", "paged / contiguous",
                   "long prompt arrives", "prefix caching", "solo il.generate"):
        line = next((ln for ln in printed.splitlines() if needle in ln), None)
        assert line is not None, f"no row for {needle!r}"
        assert line.rstrip().endswith(("PASS", "FAIL")) and ("x " in line or "%" in line), line
    detail = rows[0]["detail"]  # the throughput row's own workload: more requests, arriving faster than the estimate
    assert "1 workloads of 5 requests" in detail and "1.5 x the estimated capacity" in detail, detail
    assert "idle slots static/continuous" in detail, detail
    equal, diverged = rows[-2], rows[-1]
    assert equal["passed"] and equal["value"] == 1.0 and "preemptions" in equal["detail"]
    assert diverged["passed"] and diverged["value"] == 0 and "0 requests diverged" in diverged["detail"]
    assert "answers equal: 6/6" in printed  # serve and generate_batch answered alike


def test_serve_rows_count_what_they_say(model):
    from inferlab.measure import serving_targets as serve_bench
    from inferlab.serve import run, workload

    reqs = workload(6, math.inf, (4, 8), (3, 6), 1, model=model)
    few = run(model, reqs, max_batch=6, block_size=16, kv_blocks=2)  # room for two at a time
    assert 1 <= serve_bench.in_flight(few) <= 2
    assert serve_bench.in_flight(run(model, reqs, max_batch=6)) == 6  # all six at once from the start
    gaps = serve_bench.gaps(few, {0, 1})
    assert len(gaps) == sum(r.max_new_tokens - 1 for r in reqs[:2]) and min(gaps) > 0


def test_a_divergence_is_judged_by_the_solo_runs_logit_margin(model, monkeypatch):
    from inferlab.measure import serve_runs as compare
    from inferlab.measure import serving_targets as serve_bench
    from inferlab.serve import request

    r = request(model, "ROMEO. But soft", max_new_tokens=4)
    want = compare.solo_tokens(model, r)
    logits = il.prefill(model, [*r.prompt_ids, *want[:2]])[0][0]
    runner_up = int(logits.topk(2).indices[1])
    d = compare.divergence(model, "continuous", r, 2, runner_up, want)
    assert d.solo == want[2] and d.margin == pytest.approx(float(logits[want[2]] - logits[runner_up]), abs=1e-5)
    assert d.margin > 0 and d.near_tie == (d.margin < compare.NEAR_TIE)
    far = compare.Divergence("static", 0, 1, 7, 8, 2.5)
    checked = compare.Equality({"static": compare.SettingCheck(3, 4, 0, True)}, (far,))
    monkeypatch.setattr(serve_bench, "equality", lambda m: checked)
    row = serve_bench.divergence_row(model)
    assert not row.passed and row.value == 1 and "static #0 token 1: margin 2.5" in row.detail


def test_the_throughput_row_alternates_which_policy_runs_first(model, monkeypatch):
    from inferlab.measure import serve_runs as compare
    from inferlab.measure import serving_targets as serve_bench

    sizes = dataclasses.replace(compare.BenchSizes.small(), workloads=3)
    res = compare.batching_runs(model, sizes, 0, ("continuous", "static")).runs
    assert list(res) == ["continuous", "static"]  # run in the order asked
    with pytest.raises(ValueError, match=r"order=.*'static' and 'continuous' once each"):
        compare.batching_runs(model, sizes, 0, ("static", "static"))
    with pytest.raises(ValueError, match=r"order=None"):
        compare.batching_runs(model, sizes, 0, None)
    orders, real = [], compare.batching_runs

    def spy(m, s, seed, order):
        orders.append((seed, order))
        return real(m, s, seed, order)
    monkeypatch.setattr(compare, "batching_runs", spy)
    row = serve_bench.throughput_row(model, sizes, seed=4)
    assert orders == [(4, ("static", "continuous")), (5, ("continuous", "static")), (6, ("static", "continuous"))]
    assert "3 workloads of 5 requests" in row.detail, row.detail


def test_speculative_entry_refuses_bad_repeats_and_prints_each_row_with_its_verdict(model, capsys):
    from inferlab.measure.targets import TargetRow
    from inferlab.speculative import targets

    with pytest.raises(SystemExit):
        bench.main(["speculative", "--repeats", "0"])
    assert "--repeats 0: must be at least 1" in capsys.readouterr().err
    refusals = targets.refusal_row(model)  # every bad input refused by name, before any work
    assert refusals.passed and refusals.value == 1.0, refusals
    table = targets.Targets("t", (refusals, TargetRow("a ratio", ">= 2.0x", 1.5, False, "why"))).table()
    lines = table.splitlines()
    assert lines[3].rstrip().endswith("PASS") and "100%" in lines[3], table
    assert lines[5].rstrip().endswith("FAIL") and "1.50x" in lines[5] and lines[6].strip() == "why", table


# ----------------------------------------------------------------------------- a step against its read floor
def test_each_step_is_judged_against_the_read_of_its_own_round(model, monkeypatch):
    from inferlab.measure import step_floor as sf

    # rounds where the machine streamed 4x slower once: the step of that round is judged against that round's read
    fake = {"read": [1.0, 1.0, 4.0], "batch 1": [1.5, 1.6, 4.4], "batch 2": [1.5, 1.5, 6.0]}
    monkeypatch.setattr(sf, "interleave", lambda runs, rounds: {k: fake[k] for k in runs})
    got = sf.step_floor(model, (1, 2), context=4, rounds=3)
    assert got.x_floor[1] == pytest.approx(1.5)  # median of 1.5, 1.6, 1.1 (not 1.6 / 1.0, the medians' ratio)
    assert got.step_s == {1: 1.6, 2: 1.5} and got.read_s == 1.0
    assert got.batch_one_against(2) == pytest.approx(1.6 / 1.5)
    assert got.weight_bytes == sum(w.numel() * w.element_size() for w in sf.step_matrices(model))
    rows = sf.decode_targets(got, {"variants": {"generate()": {"tpot_s": 0.010}, "fast": {"tpot_s": 0.004},
                                                "engine": {"tpot_s": 0.0106}}})
    verdicts = {r.measure: (round(r.value, 3), r.passed) for r in rows}
    assert verdicts == {"fast path, batch-1 decode step / read floor (read in the same round)": (1.5, True),
                        "batch-1 step / batch-2 step (no slower, within 5%)": (1.067, False),
                        "fast TPOT / generate() TPOT": (0.4, True), "engine TPOT / generate() TPOT": (1.06, False)}


def test_step_floor_refuses_bad_input_before_any_work(model):
    from inferlab.measure.step_floor import step_floor

    for kwargs, match in (({"batches": (0,)}, "batches"), ({"batches": (1.5,)}, "batches"),
                          ({"context": 0}, "context"), ({"context": 10**6}, "context"), ({"rounds": 0}, "rounds"),
                          ({"steps": True}, "steps")):
        with pytest.raises((ValueError, TypeError), match=match):
            step_floor(model, **kwargs)
