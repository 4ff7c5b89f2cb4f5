"""Latency definitions and summaries (timing), and the cost model on hand-worked numbers (cost)."""

from __future__ import annotations

import math
import time

import pytest

import inferlab as il
from inferlab import cost
from inferlab.timing import Latency, interleave, percentile, summarize, time_call

GPT2 = cost.PUBLISHED_SHAPES["gpt2"]
# 20 GB/s and 100 GFLOP/s: ridge at 5 FLOP/B
MACHINE = cost.MachineProfile("cpu", "float32", bytes_per_s=20e9, flops_per_s=100e9, copy_mb=1, matmul_n=1)


# ----------------------------------------------------------------------------- timing
def test_latency_from_hand_made_timestamps():
    """The one test of the definitions, and of E2E = TTFT + (N - 1) x TPOT, on times worked by hand."""
    lat = Latency.from_times(0.0, [0.10, 0.15, 0.22, 0.30])
    assert lat.n_tokens == 4
    assert lat.ttft == pytest.approx(0.10)  # first token id on the host
    assert lat.e2e == pytest.approx(0.30)  # last token id on the host
    assert lat.tpot == pytest.approx(0.0666667, abs=1e-6)  # (0.30 - 0.10) / 3: the first token is excluded
    assert lat.itl == pytest.approx((0.05, 0.07, 0.08))
    assert lat.ttft + 3 * lat.tpot == pytest.approx(0.30)  # the identity, here 0.10 + 3 x 0.0667
    assert lat.llmperf_per_token == pytest.approx(0.075)  # E2E / N = 0.30 / 4, a different number
    assert lat.tokens_per_second == pytest.approx(15.0)  # 1 / TPOT
    later = Latency.from_times(10.0, [10.10, 10.15, 10.22, 10.30])  # only differences matter
    assert later.ttft == pytest.approx(0.10) and later.tpot == pytest.approx(lat.tpot)


def test_latency_edge_cases():
    one = Latency.from_times(0.0, [0.2])
    assert math.isnan(one.tpot) and one.e2e == one.ttft and one.itl == ()
    assert math.isnan(one.tokens_per_second)
    with pytest.raises(ValueError, match="empty"):
        Latency.from_times(0.0, [])
    with pytest.raises(ValueError, match="non-decreasing"):
        Latency.from_times(0.0, [0.3, 0.2])
    with pytest.raises(ValueError, match="after the request"):
        Latency.from_times(1.0, [0.5])


def test_summary_on_hand_worked_values():
    s = summarize([3.0, 1.0, 4.0, 1.5, 9.0])  # sorted: 1, 1.5, 3, 4, 9
    assert s.n == 5 and s.min == 1.0 and s.max == 9.0
    assert s.median == 3.0 and s.mean == pytest.approx(3.7)  # 18.5 / 5
    assert s.p90 == pytest.approx(7.0)  # position 3.6: 4 + 0.6 x (9 - 4)
    assert s.p99 == pytest.approx(8.8)  # position 3.96: 4 + 0.96 x 5
    assert summarize([1.0, float("nan"), 3.0]).median == 2.0  # NaN (a 1-token TPOT) is left out
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        summarize([])


def test_time_call_warms_up_then_times_each_call():
    calls = []
    out = time_call(lambda: (calls.append(1), time.sleep(0.002)), repeats=4, warmup=2)
    assert len(out) == 4 and len(calls) == 6
    assert all(t >= 0.002 for t in out)  # each time covers the whole call (a sleep lasts at least its length)


def test_interleave_warms_up_then_rotates():
    calls = []
    out = interleave({"a": lambda: calls.append("a") or 1, "b": lambda: calls.append("b") or 2}, 2)
    assert calls == ["a", "b", "a", "b", "b", "a"]  # warm-up a, b; round 1 a, b; round 2 b, a
    assert out == {"a": [1, 1], "b": [2, 2]}
    calls.clear()
    interleave({"a": lambda: calls.append("a")}, 1, warmup=3)
    assert calls == ["a"] * 4


# ----------------------------------------------------------------------------- cost: hand-worked numbers
def test_kv_bytes_per_token_equals_the_real_cache(model):
    # the bundled model: 2 (K, V) x 8 layers x 5 heads x 32 head_dim x 4 bytes = 10,240 bytes per token
    assert cost.kv_bytes_per_token(cost.Shape.from_info(model.info)) == 10_240
    for n in (1, 7, 50):
        _, cache = il.prefill(model, list(range(100, 100 + n)))
        assert cache.nbytes == 10_240 * n


def test_gpt2_small_by_hand():
    # one block: Q, K, V, out 4 x 768^2 = 2,359,296; MLP 2 x 768 x 3072 = 4,718,592; total 7,077,888
    assert GPT2.layer_params == 7_077_888
    # 12 blocks 84,934,656 + the tied embedding 50257 x 768 = 38,597,376
    assert GPT2.weight_params == 123_532_032 and GPT2.weight_bytes == 494_128_128
    assert cost.kv_bytes_per_token(GPT2) == 73_728  # 2 x 12 x 12 x 64 x 4
    # 2 x (84,934,656 + 38,597,376) = 247,064,064 dense; + 4 x 12 x 768 x 11 = 405,504 attention
    assert cost.flops_per_token(GPT2, 0) == 247_064_064
    d = cost.decode_cost(GPT2, 10)  # the new token attends over 11 positions
    assert d.flops == 247_469_568 and d.tokens == 1
    assert d.bytes == 494_939_136  # weights + 11 x 73,728 of cache
    assert d.intensity == pytest.approx(0.5, abs=0.001)  # decode at batch 1, fp32: one multiply-add per weight


def test_gpt2_small_prefill_by_hand():
    p = cost.prefill_cost(GPT2, 4, batch=2)
    # per sequence: 4 x 169,869,312 (blocks) + 77,194,752 (LM head, last position only)
    #   + 4 x 12 x 768 x (1 + 2 + 3 + 4) = 368,640 (attention) = 757,040,640; two sequences: 1,514,081,280
    assert p.flops == 1_514_081_280 and p.tokens == 8
    assert p.bytes == 494_717_952  # weights once + 8 x 73,728 written to the cache
    # one prompt token costs what one decode token does: 247,064,064 + 4 x 12 x 768 x 1 = 247,100,928
    assert cost.prefill_cost(GPT2, 1).flops == cost.decode_cost(GPT2, 0).flops == 247_100_928
    with pytest.raises(ValueError, match="prompt_len"):
        cost.prefill_cost(GPT2, 0)


def test_floors_and_bound_by_hand():
    d = cost.decode_cost(GPT2, 10, machine=MACHINE)
    assert d.floor_memory_s == pytest.approx(0.0247469568)  # 494,939,136 B / 20 GB/s
    assert d.floor_compute_s == pytest.approx(0.00247469568)  # 247,469,568 FLOP / 100 GFLOP/s
    assert d.bound == "memory" and d.floor_s == d.floor_memory_s
    p = cost.prefill_cost(GPT2, 512, machine=MACHINE)
    # 512 x 169,869,312 + 77,194,752 + 36,864 x 512 x 513 / 2 = 91,891,557,888 FLOP -> 0.919 s;
    # 494,128,128 + 512 x 73,728 = 531,876,864 B -> 0.0266 s
    assert p.floor_compute_s == pytest.approx(0.91891557888)
    assert p.floor_memory_s == pytest.approx(0.0265938432)
    assert p.bound == "compute"
    assert MACHINE.ridge == pytest.approx(5.0)
    assert cost.decode_cost(GPT2, 10).floor_s is None  # no machine, no floors


def test_gqa_shrinks_the_cache():
    m = cost.PUBLISHED_SHAPES["mistral-7b (GQA)"]
    assert cost.kv_bytes_per_token(m) == 131_072  # 2 x 32 layers x 8 K/V heads x 128 x 2 bytes
    assert 6.5e9 < m.weight_params < 7.5e9  # published: 7.2B


def test_published_shape_is_the_one_table():
    small = cost.published_shape("gpt2")
    assert (small.n_layer, small.n_head, small.d_model, small.vocab_size, small.n_ctx) == (12, 12, 768, 50257, 1024)
    assert cost.published_shape("distilgpt2").n_layer == 6
    assert cost.published_shape("gpt2-xl").d_model == 1600
    assert cost.published_shape("mistral-7b (GQA)").kv_heads == 8
    assert "distilgpt2" not in cost.PUBLISHED_SHAPES  # the course's comparison table lists the four GPT-2 sizes
    with pytest.raises(ValueError, match="gpt2-medium"):
        cost.published_shape("gpt3")
