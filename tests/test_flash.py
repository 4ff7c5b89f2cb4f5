"""inferlab.flash: tiled attention equals SDPA, the online softmax step by step, the byte counts, the refusals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from inferlab import cost, flash
from inferlab.flash import eager_attention, kv_heads_table, online_softmax_steps, tiled_attention


def qkv(batch, heads, kv_heads, T, head_dim, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, heads, T, head_dim, generator=g),
            torch.randn(batch, kv_heads, T, head_dim, generator=g),
            torch.randn(batch, kv_heads, T, head_dim, generator=g))


def sdpa(q, k, v):
    """The reference: PyTorch's causal attention on K/V repeated to one per query head."""
    group = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                          is_causal=True)


# --------------------------------------------------------------------- equal to SDPA
@pytest.mark.parametrize("shape, blocks", [
    ((1, 12, 12, 128, 64), (64, 64)),   # GPT-2's heads, blocks that divide T
    ((2, 12, 12, 100, 64), (32, 48)),   # blocks that do not divide T: short last tiles
    ((1, 4, 4, 37, 8), (5, 7)),         # unequal, odd blocks
    ((1, 3, 3, 1, 16), (8, 8)),         # one token
    ((1, 2, 2, 50, 16), (64, 64)),      # one tile bigger than T
])
def test_tiled_equals_sdpa(shape, blocks):
    q, k, v = qkv(*shape)
    out = tiled_attention(q, k, v, block_q=blocks[0], block_k=blocks[1])
    assert out.shape == q.shape
    assert float((out - sdpa(q, k, v)).abs().max()) <= 1e-5
    assert float((eager_attention(q, k, v) - sdpa(q, k, v)).abs().max()) <= 1e-5


def test_tiled_equals_sdpa_at_4096_tokens_on_gpt2_heads():
    q, k, v = qkv(1, 12, 12, 4096, 64)
    out = tiled_attention(q, k, v, block_q=256, block_k=256)
    assert float((out - sdpa(q, k, v)).abs().max()) <= 1e-5


@pytest.mark.parametrize("kv_heads", [4, 1])  # grouped-query (3 query heads per KV head), multi-query
def test_grouped_kv_heads_equal_sdpa_on_repeated_kv(kv_heads):
    q, k, v = qkv(2, 12, kv_heads, 70, 32)
    out = tiled_attention(q, k, v, block_q=16, block_k=24)
    assert float((out - sdpa(q, k, v)).abs().max()) <= 1e-5
    assert float((eager_attention(q, k, v) - sdpa(q, k, v)).abs().max()) <= 1e-5


def test_the_causal_mask_passed_explicitly_is_accepted():
    q, k, v = qkv(1, 2, 2, 9, 8)
    mask = torch.ones(9, 9, dtype=torch.bool).tril()
    assert torch.equal(tiled_attention(q, k, v, block_q=4, block_k=4, attn_mask=mask),
                       tiled_attention(q, k, v, block_q=4, block_k=4))


# --------------------------------------------------------------------- the online softmax, shown
def test_online_softmax_steps_hand_worked():
    r = online_softmax_steps([2.0, 1.0, 3.0])
    s0, s1, s2 = r.steps
    # step 0: max -inf -> 2, nothing to rescale (exp(-inf) = 0), sum e^0 = 1
    assert (s0.max_before, s0.max_after, s0.rescale, s0.sum_after) == (-math.inf, 2.0, 0.0, 1.0)
    # step 1: 1 < 2, max stays, rescale 1, sum 1 + e^(1-2)
    assert (s1.max_after, s1.rescale) == (2.0, 1.0) and s1.sum_after == pytest.approx(1 + math.exp(-1))
    # step 2: 3 > 2, old sum shrinks by e^(2-3): (1 + e^-1) e^-1 + e^0
    assert s2.max_after == 3.0 and s2.rescale == pytest.approx(math.exp(-1))
    assert s2.sum_after == pytest.approx((1 + math.exp(-1)) * math.exp(-1) + 1)
    assert r.probs == pytest.approx(torch.softmax(torch.tensor([2.0, 1.0, 3.0], dtype=torch.float64), 0).tolist())
    assert "rescale 0.3679" in repr(r)


def test_online_softmax_in_blocks_gives_the_same_probabilities():
    row = torch.randn(23, generator=torch.Generator().manual_seed(1)) * 5
    one, four = online_softmax_steps(row), online_softmax_steps(row, block=4)
    assert len(one.steps) == 23 and len(four.steps) == 6 and four.steps[-1].scores == tuple(row[20:].double().tolist())
    assert four.probs == pytest.approx(one.probs)
    assert four.probs == pytest.approx(torch.softmax(row.double(), 0).tolist())


# --------------------------------------------------------------------- bytes through slow memory
def test_tiled_traffic_hand_worked():
    t = flash.tiled_traffic(5, 2, block_q=2, block_k=3)
    # query tiles end at rows 2, 4, 5: they stream 2 + 4 + 5 = 11 keys and 11 values of 2 numbers each.
    # read: Q 5 x 2 = 10, K 11 x 2 = 22, V 22 -> 54 numbers x 4 bytes = 216; written: O 5 x 2 = 10 -> 40 bytes
    assert (t.read_bytes, t.written_bytes, t.bytes) == (216, 40, 256)
    # fast memory: Q tile 2x2 + output 2x2 + K tile 3x2 + V tile 3x2 + scores 2x3 + max, sum 2 + 2 = 30 numbers
    assert (t.fast_bytes, t.score_bytes) == (120, 0)
    assert flash.tiled_traffic(5, 2, block_q=2, block_k=3, heads=3, batch=2).bytes == 6 * 256  # per (batch, head)


def test_eager_traffic_hand_worked():
    e = flash.eager_traffic(5, 2)
    # read Q, K (2 x 5 x 2 = 20), S (25), P (25), V (10) = 80 numbers = 320 B; write S (25), P (25), O (10) = 240 B
    assert (e.read_bytes, e.written_bytes, e.bytes, e.score_bytes) == (320, 240, 560, 100)
    assert flash.eager_traffic(5, 2, bytes_per_element=2).bytes == 280


def test_tiles_move_fewer_bytes_at_long_context_and_bigger_tiles_fewer_still():
    eager = flash.eager_traffic(4096, 64, heads=12)
    small, big = (flash.tiled_traffic(4096, 64, heads=12, block_q=b, block_k=b) for b in (64, 256))
    assert big.bytes < small.bytes < eager.bytes
    assert eager.score_bytes == 12 * 4096 * 4096 * 4  # 768 MiB of scores the tiled version never stores
    assert "through slow memory" in repr(small)


def test_kv_heads_table_on_gpt2():
    rows = kv_heads_table(cost.published_shape("gpt2"))
    # 2 (K and V) x 12 layers x kv_heads x 64 x 4 bytes
    assert [r.bytes_per_token for r in rows] == [2 * 12 * h * 64 * 4 for h in (12, 4, 1)] == [73728, 24576, 6144]
    assert [r.kind for r in rows] == ["MHA", "GQA", "MQA"]
    assert rows[0].bytes_at_n_ctx == 73728 * 1024
    assert "KV heads" in repr(rows[1])


# --------------------------------------------------------------------- refusals, before any work
@pytest.mark.parametrize("kwargs, match", [
    ({"block_q": 0}, "block_q=0"),
    ({"block_k": -4}, "block_k=-4"),
    ({"is_causal": False}, "is_causal=False"),
    ({"attn_mask": torch.ones(6, 6, dtype=torch.bool)}, "attn_mask"),
    ({"attn_mask": torch.zeros(6, 6)}, "attn_mask"),
])
def test_tiled_attention_refuses(kwargs, match):
    q, k, v = qkv(1, 2, 2, 6, 4)
    with pytest.raises(ValueError, match=match):
        tiled_attention(q, k, v, **kwargs)


def test_tiled_attention_refuses_a_fractional_block():
    q, k, v = qkv(1, 2, 2, 6, 4)
    with pytest.raises(TypeError, match="block_q must be an integer"):
        tiled_attention(q, k, v, block_q=2.5)


def test_shapes_that_do_not_match_are_named():
    q, k, v = qkv(1, 12, 12, 6, 4)
    with pytest.raises(ValueError, match=r"q, k, v.*4-D"):
        tiled_attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match=r"k, v.*\[1, kv_heads, 6, 4\]"):
        tiled_attention(q, k[:, :, :5], v[:, :, :5])
    with pytest.raises(ValueError, match=r"k, v"):
        tiled_attention(q, k, v[..., :3])
    with pytest.raises(ValueError, match=r"kv_heads=5.*divisor of the 12"):
        tiled_attention(q, k[:, :5], v[:, :5])
    with pytest.raises(ValueError, match=r"kv_heads=5"):
        eager_attention(q, k[:, :5], v[:, :5])


def test_counts_and_tables_refuse_bad_sizes():
    with pytest.raises(ValueError, match="T=0"):
        flash.tiled_traffic(0, 64)
    with pytest.raises(ValueError, match="block_k=0"):
        flash.tiled_traffic(64, 64, block_k=0)
    with pytest.raises(ValueError, match="head_dim=-1"):
        flash.eager_traffic(64, -1)
    with pytest.raises(ValueError, match=r"kv_heads=5.*divisor"):
        kv_heads_table(cost.published_shape("gpt2"), (12, 5))
    with pytest.raises(ValueError, match="kv_heads=13"):
        kv_heads_table(cost.published_shape("gpt2"), (13,))
    with pytest.raises(ValueError, match="kv_heads"):
        kv_heads_table(cost.published_shape("gpt2"), ())
    with pytest.raises(ValueError, match="scores"):
        online_softmax_steps([])
    with pytest.raises(ValueError, match="scores"):
        online_softmax_steps([1.0, -math.inf])
    with pytest.raises(ValueError, match="block=0"):
        online_softmax_steps([1.0], block=0)


# --------------------------------------------------------------------- one new token against a grouped cache
@pytest.mark.parametrize("kv_heads", [12, 4, 1])
def test_decode_attention_equals_sdpa_on_repeated_kv(kv_heads):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 12, 1, 16, generator=g)
    k, v = (torch.randn(3, kv_heads, 40, 16, generator=g) for _ in "kv")
    group = 12 // kv_heads
    ref = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    out = flash.decode_attention(q, k, v)
    assert out.shape == q.shape and (out - ref).abs().max() < 1e-5


def test_decode_attention_refuses_before_any_work():
    q, k = torch.zeros(1, 12, 1, 16), torch.zeros(1, 4, 40, 16)
    with pytest.raises(ValueError, match=r"one new token per sequence"):
        flash.decode_attention(torch.zeros(1, 12, 2, 16), k, k)
    with pytest.raises(ValueError, match=r"k, v=.*\[1, kv_heads, context, 16\]"):
        flash.decode_attention(q, k, torch.zeros(1, 4, 41, 16))
    with pytest.raises(ValueError, match=r"kv_heads=5 is not allowed: expected a divisor of the 12 query heads"):
        flash.decode_attention(q, torch.zeros(1, 5, 40, 16), torch.zeros(1, 5, 40, 16))


def test_refusals_speak_chinese(zh):
    q = torch.zeros(1, 12, 8, 16)
    with pytest.raises(ValueError, match="这里只实现了因果掩码"):
        tiled_attention(q, q, q, is_causal=False)
    with pytest.raises(ValueError, match="分块至少要有一行 query"):
        tiled_attention(q, q, q, block_q=0)
