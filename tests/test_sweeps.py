"""Measured sweeps and their counting: shapes of the results, errors, and the cost model against counted FLOPs."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import inferlab as il
from inferlab import cost, sweeps


@pytest.fixture(scope="module")
def shape(model) -> cost.Shape:
    return cost.Shape.from_info(model.info)


MACHINE = cost.MachineProfile("cpu", "float32", bytes_per_s=10e9, flops_per_s=50e9, copy_mb=1, matmul_n=1)


def fake_sweep(job="decode-batch", xs=(1, 2, 4, 8), medians=(1.0, 1.1, 1.5, 3.0), context=16) -> sweeps.Sweep:
    times = tuple((m * 0.9, m, m * 1.2) for m in medians)
    tokens = (1,) * len(xs) if job == "decode" else tuple(xs)
    return sweeps.Sweep(job, "x", tuple(xs), tuple(tokens), times, 1, context, "cpu", "float32", "fake")


# ----------------------------------------------------------------------------- sweeps
def test_prefill_sweep_shapes(model):
    s = sweeps.prefill_sweep(model, [4, 16], repeats=2, warmup=0, batch=2)
    assert s.xs == (4, 16) and s.tokens == (8, 32) and s.job == "prefill"
    assert all(len(t) == 2 and all(v > 0 for v in t) for t in s.times)
    assert len(s.medians) == 2 and all(lo <= m <= hi for lo, m, hi in zip(s.lows, s.medians, s.highs))
    assert s.tokens_per_s[1] == pytest.approx(32 / s.medians[1])
    assert "prefill" in repr(s) and s.to_dict()["xs"] == [4, 16]


def test_decode_sweep_and_limits(model):
    s = sweeps.decode_sweep(model, [4, 8], repeats=2, warmup=1)
    assert s.xs == (4, 8) and s.tokens == (1, 1) and s.context == 4
    assert "C+2" in s.note
    limit = model.info.n_ctx - 1 - 2
    with pytest.raises(ValueError, match="contexts"):
        sweeps.decode_sweep(model, [limit + 1], repeats=2, warmup=1)
    with pytest.raises(ValueError, match="lengths"):
        sweeps.prefill_sweep(model, [model.info.n_ctx + 1])
    with pytest.raises(ValueError, match="lengths"):
        sweeps.prefill_sweep(model, [])
    with pytest.raises(TypeError):
        sweeps.prefill_sweep(model, [2.5])


def test_batch_sweep(model):
    s = sweeps.batch_sweep(model, [1, 3], context=4, repeats=2, warmup=0)
    assert s.xs == (1, 3) and s.tokens == (1, 3) and s.context == 4 and s.job == "decode-batch"
    assert s.tokens_per_s[1] == pytest.approx(3 / s.medians[1])
    assert s.note == ""


def test_decode_step_really_runs_a_batch(model):
    # the sweep relies on decode_step accepting [batch] tokens: one logits row per sequence
    _, cache = il.prefill(model, sweeps.sample_ids(model, 5, batch=3))
    logits, cache = il.decode_step(model, torch.zeros(3, dtype=torch.long), cache)
    assert logits.shape == (3, model.info.vocab_size) and cache.layers[0][0].shape[0] == 3


def test_turn_batch():
    assert sweeps.turn_batch(fake_sweep()) == 8
    assert sweeps.turn_batch(fake_sweep(), factor=1.4) == 4
    assert sweeps.turn_batch(fake_sweep(medians=(1.0, 1.0, 1.1, 1.2))) is None
    assert sweeps.turn_batch(fake_sweep(medians=(1.0, 2.5, 1.1, 2.2))) == 8  # a lone slow point is not the turn


# ----------------------------------------------------------------------------- counting
@pytest.mark.parametrize("length", [1, 7, 40])
def test_prefill_cost_matches_counted_matmuls(model, shape, length):
    """Dense FLOPs of the cost model == torch's FLOP counter on the engine's real prefill.

    The counter does not see the attention kernel (SDPA), so the attention term is added back by hand.
    """
    with FlopCounterMode(display=False) as counter:
        il.prefill(model, sweeps.sample_ids(model, length))
    attention = 4 * shape.n_layer * shape.d_model * length * (length + 1) / 2
    predicted = cost.prefill_cost(shape, length).flops - attention
    # biases, layer norms and the embedding lookup are not matmuls: within 1%
    assert predicted == pytest.approx(counter.get_total_flops(), rel=0.01)


def test_prefill_cost_counts_the_head_once_and_floors(shape):
    c = cost.prefill_cost(shape, 64, batch=2, machine=MACHINE)
    blocks = 2 * shape.n_layer * shape.layer_params
    head = 2 * shape.vocab_size * shape.d_model
    attention = 4 * shape.n_layer * shape.d_model * 64 * 65 / 2
    assert c.flops == pytest.approx(2 * (64 * blocks + head + attention)) and c.tokens == 128
    assert c.floor_compute_s == pytest.approx(c.flops / MACHINE.flops_per_s)
    assert c.floor_memory_s == pytest.approx(c.bytes / MACHINE.bytes_per_s)
    one = cost.prefill_cost(shape, 1)
    assert one.flops == pytest.approx(cost.flops_per_token(shape, 1))  # one prompt token == one decode token


def test_roofline_points_and_costs(shape):
    s = fake_sweep("decode", xs=(8, 64), medians=(0.01, 0.02))
    pts = sweeps.roofline_points(s, shape, MACHINE)
    costs = sweeps.sweep_costs(s, shape, MACHINE)
    assert [p.label for p in pts] == ["decode ctx=8", "decode ctx=64"]
    assert pts[0].intensity == pytest.approx(costs[0].flops / costs[0].bytes)
    assert pts[1].times_floor == pytest.approx(0.02 / costs[1].floor_s)
    assert pts[0].flops_per_s == pytest.approx(costs[0].flops / 0.01)
    b = sweeps.sweep_costs(fake_sweep(), shape, MACHINE)
    assert [c.tokens for c in b] == [1, 2, 4, 8]  # batch sweep: one token per sequence


def test_myth_check(shape):
    check = sweeps.myth_check(shape, MACHINE, measured_s=0.5, context=10)
    c = cost.decode_cost(shape, 10, 1, MACHINE)
    assert check.from_compute_s == c.floor_compute_s and check.from_bandwidth_s == c.floor_memory_s
    assert check.closer == "bandwidth"  # bandwidth predicts the larger (nearer) time for this shape
    near_compute = sweeps.MythCheck(1.0, 100.0, 2.0, 0)
    assert near_compute.closer == "compute"


def test_count_ops(model):
    _, cache = il.prefill(model, [[1, 2, 3]])
    n = sweeps.count_ops(lambda: il.decode_step(model, 4, cache))
    assert n > 10 * model.info.n_layer  # every block runs several operations
    assert sweeps.count_ops(lambda: torch.ones(3) + 1) == 2


# ----------------------------------------------------------------------------- cache on and off
def test_compare_cache_agrees(model):
    ids = model.encode("To be, or not to be")
    cmp = sweeps.compare_cache(model, ids, 6, repeats=1)
    assert cmp.tokens_identical and cmp.logits_agree
    assert len(cmp.cached_ids) == 6 and len(cmp.max_abs_diff) == 6 and cmp.prompt_len == len(ids)
    assert cmp.max_diff < 1e-3 and cmp.speedup > 0
    # the cached tokens are the engine's own greedy tokens
    assert list(cmp.cached_ids) == il.generate(model, "To be, or not to be", max_new_tokens=6,
                                               stop_at_eos=False).generated_ids
    assert len(cmp.step_medians(True)) == 6 and math.isfinite(cmp.total_s(False))
    with pytest.raises(ValueError, match="new_tokens"):
        sweeps.compare_cache(model, ids, model.info.n_ctx)


def test_comparison_can_disagree():
    base = {"prompt_len": 3, "cached_times": ((0.1, 0.1),), "uncached_times": ((0.2, 0.4),), "device": "cpu",
                "dtype": "float32", "model": "fake", "max_logit": (10.0, 10.0)}
    ok = sweeps.CacheComparison(cached_ids=(1, 2), uncached_ids=(1, 2), max_abs_diff=(0.0, 1e-6), **base)
    bad = sweeps.CacheComparison(cached_ids=(1, 2), uncached_ids=(1, 3), max_abs_diff=(0.0, 0.5), **base)
    assert ok.tokens_identical and ok.logits_agree and ok.speedup == pytest.approx(3.0)
    assert not bad.tokens_identical and not bad.logits_agree
