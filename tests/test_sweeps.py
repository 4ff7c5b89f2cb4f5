"""inferlab.measure: the sweeps, the kernel comparison, cache on/off, the machine's ceilings, and the roofline maths."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import inferlab as il
from inferlab import cost, measure
from inferlab.measure import Sweep

GPT2 = cost.PUBLISHED_SHAPES["gpt2"]
MACHINE = cost.MachineProfile("cpu", "float32", bytes_per_s=10e9, flops_per_s=50e9, copy_mb=1, matmul_n=1)


def fake_sweep(job="decode-batch", xs=(1, 2, 4, 8), medians=(1.0, 1.1, 1.5, 3.0), context=16) -> Sweep:
    times = tuple((m * 0.9, m, m * 1.2) for m in medians)
    tokens = tuple(xs) if job == "decode-batch" else (1,) * len(xs)
    return Sweep(job, "x", tuple(xs), times, tokens, context=context)


# ----------------------------------------------------------------------------- the Sweep type
def test_sweep_summaries_on_made_up_times():
    s = Sweep("prefill", "prompt length (tokens)", (4, 16), ((0.01, 0.03, 0.02), (0.05, 0.04, 0.06)), (8, 32),
              batch=2, model="fake", device="cpu", dtype="float32")
    assert s.medians == pytest.approx((0.02, 0.05)) and s.lows == (0.01, 0.04) and s.highs == (0.03, 0.06)
    assert s.tokens_per_s == pytest.approx((400.0, 640.0))  # 8 / 0.02, 32 / 0.05
    assert repr(s) == ("Sweep(prefill: prompt length (tokens) [4, 16] -> median ms ['20.00', '50.00'], 3 repeats, "
                       "fake on cpu float32)")
    assert s.to_dict()["xs"] == [4, 16]
    with pytest.raises(ValueError, match="one entry of times"):
        Sweep("prefill", "x", (1, 2), ((0.1,),), (1, 2))


# ----------------------------------------------------------------------------- measured sweeps
def test_prefill_sweep(model):
    s = measure.prefill_sweep(model, [4, 16], repeats=2, warmup=0, batch=2)
    assert s.xs == (4, 16) and s.tokens == (8, 32) and s.job == "prefill" and s.batch == 2
    assert all(len(t) == 2 and all(v > 0 for v in t) for t in s.times)
    assert s.model == model.info.name and s.dtype == "float32"
    with pytest.raises(ValueError, match="lengths"):
        measure.prefill_sweep(model, [model.info.n_ctx + 1])
    with pytest.raises(ValueError, match="lengths"):
        measure.prefill_sweep(model, [])
    with pytest.raises(TypeError):
        measure.prefill_sweep(model, [2.5])


def test_decode_sweep_and_limits(model):
    s = measure.decode_sweep(model, [4, 8], repeats=2, warmup=1)
    assert s.xs == (4, 8) and s.tokens == (1, 1) and s.context == 4 and s.job == "decode"
    assert "C+2" in s.note  # warm-up + 2 repeats: contexts C, C+1, C+2
    limit = model.info.n_ctx - 1 - 2
    with pytest.raises(ValueError, match="contexts"):
        measure.decode_sweep(model, [limit + 1], repeats=2, warmup=1)
    with pytest.raises(ValueError, match="path"):
        measure.decode_sweep(model, [4], repeats=1, path="turbo")


def test_decode_call_grows_the_cache_by_one_per_call(model):
    step = measure.sweeps.decode_call(model, 5, 3, steps=4)
    logits, cache = step()
    assert logits.shape == (3, model.info.vocab_size) and cache.tokens == 6 and cache.batch == 3
    step()
    assert cache.tokens == 7


def test_batch_sweep_decode_prefill_and_fast_path(model):
    s = measure.batch_sweep(model, [1, 3], context=4, repeats=2, warmup=0)
    assert s.job == "decode-batch" and s.xs == (1, 3) and s.tokens == (1, 3) and s.context == 4 and s.note == ""
    p = measure.batch_sweep(model, [1, 3], context=4, repeats=2, warmup=0, job="prefill")
    assert p.job == "prefill-batch" and p.tokens == (4, 12)  # batch x context tokens per prefill
    f = measure.batch_sweep(model, [1, 2], context=4, repeats=2, path="fast", weights="tied")
    assert f.xs == (1, 2) and all(len(t) == 2 for t in f.times)
    with pytest.raises(ValueError, match="job"):
        measure.batch_sweep(model, [1], job="both")
    with pytest.raises(ValueError, match="context"):
        measure.batch_sweep(model, [1], context=model.info.n_ctx, repeats=2)


def test_turn_batch():
    assert measure.turn_batch(fake_sweep()) == 8
    assert measure.turn_batch(fake_sweep(), factor=1.4) == 4
    assert measure.turn_batch(fake_sweep(medians=(1.0, 1.0, 1.1, 1.2))) is None
    assert measure.turn_batch(fake_sweep(medians=(1.0, 2.5, 1.1, 2.2))) == 8  # a lone slow point is not the turn


def test_kernel_sweep_eager_materializes_more(model):
    cmp = measure.kernel_sweep(model, [16, 96], repeats=1)
    assert cmp.kernels == ["eager", "sdpa"] and cmp.lengths == (16, 96)
    assert cmp.sweeps["sdpa"].job == "prefill" and "sdpa" in cmp.sweeps["sdpa"].note
    assert cmp.peak_bytes["eager"][-1] > cmp.peak_bytes["sdpa"][-1]  # the [1, heads, 96, 96] probabilities
    assert cmp.max_abs_diff["eager"] == (0.0, 0.0) and cmp.agree < 1e-3
    assert "eager" in repr(cmp)


def test_kernel_sweep_takes_any_setup(model):
    entered = []

    class Marker:
        def __enter__(self):
            entered.append(1)

        def __exit__(self, *exc):
            return False

    cmp = measure.kernel_sweep(model, [8], {"sdpa": lambda: model.attention_kernel("sdpa"), "marked": Marker},
                               repeats=2, warmup=1, memory=False)
    assert len(entered) == 1 + 2 + 1  # warm-up, 2 timed runs, the logits run
    assert cmp.peak_bytes == {"sdpa": (), "marked": ()} and len(cmp.sweeps["marked"].times[0]) == 2
    with pytest.raises(TypeError, match="kernels"):
        measure.kernel_sweep(model, [8], "eager")


# ----------------------------------------------------------------------------- cache on and off
def test_compare_cache_agrees(model):
    prompt = "To be, or not to be"
    cmp = measure.compare_cache(model, prompt, 6, repeats=1)
    assert cmp.tokens_identical and cmp.logits_agree and cmp.max_diff < 1e-3
    assert len(cmp.cached_ids) == 6 and len(cmp.max_abs_diff) == 6 and cmp.prompt_len == len(model.encode(prompt))
    assert len(cmp.cached_times) == 1 and len(cmp.cached_times[0]) == 6  # one run, one time per step
    # the cached tokens are the engine's own greedy tokens
    assert list(cmp.cached_ids) == il.generate(model, prompt, max_new_tokens=6, stop_at_eos=False).generated_ids
    assert len(cmp.step_medians(True)) == 6 and math.isfinite(cmp.total_s(False))
    with pytest.raises(ValueError, match="new_tokens"):
        measure.compare_cache(model, prompt, model.info.n_ctx)


def test_compare_cache_runs_both_ways(model, monkeypatch):
    seen, real = [], measure.cache_on_off.generate

    def spy(model, prompt, new_tokens, *, use_cache, **kwargs):
        seen.append((use_cache, new_tokens))
        trace = real(model, prompt, new_tokens, use_cache=use_cache, **kwargs)
        if not use_cache:
            trace.generated_ids[-1] = 0  # mark the uncached runs' tokens
        return trace

    monkeypatch.setattr(measure.cache_on_off, "generate", spy)
    cmp = measure.compare_cache(model, "To be", 5, repeats=2, warmup_tokens=2)
    # a short warm-up each way (2 tokens: the long uncached run need not run twice), then 2 timed runs each way
    assert seen[:2] == [(True, 2), (False, 2)] and sorted(seen[2:]) == [(False, 5)] * 2 + [(True, 5)] * 2
    assert cmp.uncached_ids[-1] == 0 and not cmp.tokens_identical and len(cmp.uncached_times) == 2
    assert len(cmp.cached_times[0]) == 5  # the warm-up is not among the timed runs


def test_step_logits_line_up_with_the_steps(model):
    ids, tokens = model.encode("To be, or not"), [11, 393, 407]
    cached, uncached = measure.cache_on_off.step_logits(model, ids, tokens)
    assert cached.shape == uncached.shape == (3, model.info.vocab_size)
    assert float((cached - uncached).abs().max()) < 1e-3
    # the same sequence split one token earlier: one more step, the same logits at the same positions
    _, shorter = measure.cache_on_off.step_logits(model, ids[:-1], [ids[-1], *tokens])
    assert float((cached - shorter[1:]).abs().max()) < 1e-3
    assert float((cached - shorter[:-1]).abs().max()) > 1e-2  # one position off: the comparison would fail


def test_comparison_can_disagree():
    base = {"prompt_len": 3, "cached_times": ((0.1, 0.1),), "uncached_times": ((0.2, 0.4),), "device": "cpu",
            "dtype": "float32", "model": "fake", "max_logit": (10.0, 10.0)}
    ok = measure.CacheComparison(cached_ids=(1, 2), uncached_ids=(1, 2), max_abs_diff=(0.0, 1e-6), **base)
    bad = measure.CacheComparison(cached_ids=(1, 2), uncached_ids=(1, 3), max_abs_diff=(0.0, 0.5), **base)
    assert ok.tokens_identical and ok.logits_agree and ok.speedup == pytest.approx(3.0)  # 0.6 s / 0.2 s
    assert not bad.tokens_identical and not bad.logits_agree


# ----------------------------------------------------------------------------- the machine's ceilings
def test_measure_machine_gives_plausible_ceilings():
    prof = measure.measure_machine("cpu", torch.float32, copy_mb=32, matmul_n=256)
    assert 1e8 < prof.bytes_per_s < 1e13 and 1e8 < prof.flops_per_s < 1e14
    assert prof.copy_mb == 32 and prof.matmul_n == 256 and "GB/s" in repr(prof)
    read = measure.measure_bandwidth("cpu", torch.float32, mb=32, kind="read")
    assert 1e8 < read < 1e13
    with pytest.raises(ValueError, match="kind"):
        measure.measure_bandwidth(kind="write")


def test_bandwidth_counts_bytes_once_for_reads_and_twice_for_copies(monkeypatch):
    monkeypatch.setattr(measure.machine, "time_call", lambda fn, **kw: [(fn(), 0.5)[1], 0.25])  # best: 0.25 s
    mib = 2**20
    assert measure.measure_bandwidth(mb=2, kind="read") == pytest.approx(2 * mib / 0.25)
    assert measure.measure_bandwidth(mb=2, kind="copy") == pytest.approx(2 * 2 * mib / 0.25)
    assert measure.measure_matmul(n=100) == pytest.approx(2 * 100**3 / 0.25)


def test_each_run_is_judged_against_the_floor_at_its_own_rate(monkeypatch):
    rates, sizes = iter([100e9, 200e9, 50e9]), []
    monkeypatch.setattr(measure.machine, "measure_matmul",
                        lambda device, dtype, n, repeats: sizes.append(n) or next(rates))
    seconds = iter([0.3, 0.15, 0.6])  # the machine halves and doubles its speed: each run 1.5x its own floor
    paired = measure.machine.rate_then(lambda: next(seconds))
    runs = [paired() for _ in range(3)]
    assert runs == [(100e9, 0.3), (200e9, 0.15), (50e9, 0.6)]
    assert sizes == [1024] * 3 and measure.machine.matmul_size("cuda") == 8192  # a GPU needs a bigger product
    rate, secs = zip(*runs)
    floor_at = lambda r: 20e9 / r  # noqa: E731 - 20 GFLOP: 0.2 s at 100 GFLOP/s
    assert measure.machine.x_floor_paired(secs, rate, floor_at) == pytest.approx(1.5)
    # against one rate for every run (the median, 100 GFLOP/s), the median run (0.3 s) would read 1.5x too, but
    # the best rate (200) would make it 3.0x: the pairing is what keeps drift out of the ratio
    assert measure.machine.x_floor_paired([0.3, 0.3, 0.3], [200e9, 200e9, 200e9], floor_at) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="one rate per timed run"):
        measure.machine.x_floor_paired([0.3, 0.2], [1e9], floor_at)
    with pytest.raises(ValueError, match="rate_then"):
        measure.machine.x_floor_paired([], [], floor_at)


def test_machine_profile_is_measured_once_and_keeps_the_spread(monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))  # the profile file too: never the session's or the learner's
    rates = iter([[4e9, 5e9, 4.5e9], [40e9, 50e9, 30e9], [6e9], [60e9]])   # bandwidth then matmul, twice
    calls = []

    def fake_measure(device, dtype, repeats):
        calls.append((str(device), dtype))
        bw, mm = next(rates), next(rates)
        return cost.MachineProfile(str(device), "float32", max(bw), max(mm), 1, 1,
                                   bytes_per_s_range=(min(bw), max(bw)), flops_per_s_range=(min(mm), max(mm)),
                                   runs=len(bw))

    monkeypatch.setattr(measure.machine, "measure_machine", fake_measure)
    monkeypatch.setattr(measure.machine, "_PROFILES", {})
    first = measure.machine_profile("cpu")
    assert measure.machine_profile("cpu") is first and len(calls) == 1       # the second call re-used it
    assert first.bytes_per_s == 5e9 and first.bytes_per_s_range == (4e9, 5e9)
    assert first.spread == pytest.approx({"bandwidth": 0.25, "matmul": 50 / 30 - 1})   # 5/4 - 1, 50/30 - 1
    assert "best of 3 runs (spread 25% / 67%)" in repr(first)
    again = measure.machine_profile("cpu", refresh=True)
    assert len(calls) == 2 and again.bytes_per_s == 6e9 and measure.machine_profile("cpu") is again
    assert again.spread == {"bandwidth": 0.0, "matmul": 0.0}
    with pytest.raises(ValueError, match="dtype"):
        measure.machine_profile("cpu", dtype="float32")


def test_measure_machine_keeps_slowest_and_fastest_run(monkeypatch):
    monkeypatch.setattr(measure.machine, "time_call", lambda fn, repeats, **kw: [0.5, 0.25, 1.0][:repeats])
    prof = measure.measure_machine("cpu", copy_mb=1, matmul_n=10, repeats=3)
    assert prof.bytes_per_s_range == pytest.approx((2 * 2**20 / 1.0, 2 * 2**20 / 0.25)) and prof.runs == 3
    assert prof.flops_per_s == pytest.approx(2000 / 0.25) and prof.spread["matmul"] == pytest.approx(3.0)


# ----------------------------------------------------------------------------- counting against measuring
@pytest.mark.parametrize("length", [1, 7, 40])
def test_prefill_cost_matches_counted_matmuls(model, length):
    """Dense FLOPs of the cost model == torch's FLOP counter on the engine's real prefill.

    The counter does not see the fused attention kernel (SDPA): its share, 4 x 4 layers x 160 x T(T+1)/2,
    is worked by hand here (1,280 x T(T+1)).
    """
    with FlopCounterMode(display=False) as counter:
        il.prefill(model, measure.sample_ids(model, length))
    attention = 1_280 * length * (length + 1)
    predicted = cost.prefill_cost(cost.Shape.from_info(model.info), length).flops - attention
    # biases, layer norms and the embedding lookup are not matmuls: within 1%
    assert predicted == pytest.approx(counter.get_total_flops(), rel=0.01)


def test_sweep_costs_per_job_by_hand():
    batch = measure.sweep_costs(fake_sweep(xs=(1, 4), medians=(1.0, 1.0), context=16), GPT2)
    assert [c.tokens for c in batch] == [1, 4]  # one token per sequence
    # 4 x (247,064,064 + 4 x 12 x 768 x 17) = 4 x 247,690,752
    assert batch[1].flops == 990_763_008
    prefill = Sweep("prefill-batch", "batch", (2,), ((1.0,),), (8,), context=4)
    assert measure.sweep_costs(prefill, GPT2)[0].flops == 1_514_081_280  # 2 x 757,040,640 (test_timing_cost)
    step = Sweep("decode step", "context length (tokens)", (11,), ((1.0,),), (1,))
    assert measure.sweep_costs(step, GPT2)[0].flops == 247_469_568  # 10 cached + the new token
    with pytest.raises(ValueError, match="job"):
        measure.sweep_costs(Sweep("other", "x", (1,), ((1.0,),), (1,)), GPT2)


def test_roofline_points_by_hand():
    # decode at 8 cached positions: 247,064,064 + 36,864 x 9 = 247,395,840 FLOP;
    # 494,128,128 + 9 x 73,728 = 494,791,680 B -> floor 0.049479168 s at 10 GB/s
    s = fake_sweep("decode", xs=(8,), medians=(0.098958336,))
    (p,) = measure.roofline_points(s, GPT2, MACHINE)
    assert p.label == "decode ctx=8" and p.flops == 247_395_840 and p.bytes == 494_791_680
    assert p.floor_s == pytest.approx(0.049479168) and p.times_floor == pytest.approx(2.0)
    assert p.intensity == pytest.approx(0.5, abs=0.001) and p.flops_per_s == pytest.approx(2.5e9, rel=1e-3)
    assert [q.label for q in measure.roofline_points(fake_sweep(xs=(2,), medians=(1.0,)), GPT2, MACHINE)] == [
        "decode batch=2"]


def test_myth_check_by_hand():
    check = measure.myth_check(GPT2, MACHINE, measured_s=0.5, context=10)
    assert check.from_bandwidth_s == pytest.approx(0.0494939136)  # 494,939,136 B / 10 GB/s
    assert check.from_compute_s == pytest.approx(0.00494939136)  # 247,469,568 FLOP / 50 GFLOP/s
    assert check.closer == "bandwidth"  # 0.5 s is 10x the bandwidth floor, 100x the compute floor
    assert measure.MythCheck(1.0, 100.0, 2.0, 0).closer == "compute"


def test_count_ops():
    assert measure.count_ops(lambda: torch.ones(3) + 1) == 2  # ones, add


def test_count_ops_sees_every_block(model):
    _, cache = il.prefill(model, [[1, 2, 3]])
    assert measure.count_ops(lambda: il.decode_step(model, 4, cache)) > 10 * model.info.n_layer
