"""Latency definitions, summaries, the cost model, and the KV formula against a real cache."""

from __future__ import annotations

import math

import pytest
import torch

import inferlab as il
from inferlab import cost
from inferlab.timing import Latency, percentile, summarize, time_call


def test_latency_definitions_on_made_up_times():
    lat = Latency.from_times(10.0, [10.30, 10.35, 10.45, 10.50])
    assert lat.ttft == pytest.approx(0.30)
    assert lat.e2e == pytest.approx(0.50)
    assert lat.tpot == pytest.approx(0.20 / 3)  # first token excluded
    assert lat.itl == pytest.approx((0.05, 0.10, 0.05))
    assert lat.ttft + (lat.n_tokens - 1) * lat.tpot == pytest.approx(lat.e2e)
    assert lat.llmperf_per_token == pytest.approx(0.5 / 4)


def test_latency_edge_cases():
    one = Latency.from_times(0.0, [0.2])
    assert math.isnan(one.tpot) and one.e2e == one.ttft
    with pytest.raises(ValueError, match="empty"):
        Latency.from_times(0.0, [])
    with pytest.raises(ValueError, match="non-decreasing"):
        Latency.from_times(0.0, [0.3, 0.2])


def test_trace_latency_identity(model):
    lat = il.generate(model, "To be", 8).latency
    assert lat.n_tokens == 8 and lat.ttft > 0
    assert lat.ttft + 7 * lat.tpot == pytest.approx(lat.e2e, rel=1e-9)


def test_summary_matches_numpy_percentiles():
    import numpy as np

    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3, 5.8, 9.7, 9.3, 2.3]
    s = summarize(xs)
    assert s.median == pytest.approx(np.median(xs))
    assert s.p90 == pytest.approx(np.percentile(xs, 90))
    assert s.p99 == pytest.approx(np.percentile(xs, 99))
    assert s.mean == pytest.approx(np.mean(xs))
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        summarize([])


def test_time_call_counts_repeats():
    calls = []
    out = time_call(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(out) == 4 and len(calls) == 6 and all(t >= 0 for t in out)


def test_kv_formula_equals_real_cache_bytes(model):
    shape = cost.Shape.from_info(model.info)
    per_token = cost.kv_bytes_per_token(shape)
    assert per_token == 2 * model.info.n_layer * model.info.n_head * model.info.head_dim * 4
    for n in (1, 7, 50):
        _, cache = il.prefill(model, list(range(100, 100 + n)))
        assert cache.nbytes == per_token * n


def test_gpt2_small_numbers_from_reference():
    g = cost.PUBLISHED_SHAPES["gpt2"]
    assert cost.kv_bytes_per_token(g) == 73_728
    assert cost.kv_bytes_per_token(g) * 1024 == 72 * 2**20
    assert 240e6 < cost.flops_per_token(g, 0) < 250e6  # ~247 MFLOP per token plus attention
    d = cost.decode_cost(g, 100)
    assert 0.4 < d.intensity < 0.6  # decode at batch 1, fp32: ~0.5 FLOP/byte
    p = cost.prefill_cost(g, 256)
    assert p.intensity > 50 * d.intensity  # each weight reused 256 times


def test_gqa_shrinks_the_cache():
    m = cost.PUBLISHED_SHAPES["mistral-7b (GQA)"]
    assert cost.kv_bytes_per_token(m) == 2 * 32 * 8 * 128 * 2
    assert 6.5e9 < m.weight_params < 7.5e9


def test_floors_and_bound_from_a_machine_profile():
    machine = cost.MachineProfile("cpu", "float32", bytes_per_s=20e9, flops_per_s=100e9, copy_mb=1, matmul_n=1)
    g = cost.PUBLISHED_SHAPES["gpt2"]
    d = cost.decode_cost(g, 10, machine=machine)
    assert d.bound == "memory" and d.floor_s == pytest.approx(d.bytes / 20e9)
    p = cost.prefill_cost(g, 512, machine=machine)
    assert p.bound == "compute" and p.floor_s == pytest.approx(p.flops / 100e9)
    assert machine.ridge == pytest.approx(5.0)


def test_measure_machine_gives_plausible_ceilings():
    prof = cost.measure_machine("cpu", torch.float32, copy_mb=32, matmul_n=256)
    assert 1e8 < prof.bytes_per_s < 1e13 and 1e8 < prof.flops_per_s < 1e14
    assert "GB/s" in repr(prof)
