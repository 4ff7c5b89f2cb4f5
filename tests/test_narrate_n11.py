"""inferlab.narrate.n11: each finding of notebook 11 from hand-made numbers, at every branch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inferlab import cost, flash, narrate
from inferlab.measure import long_context as lc
from inferlab.measure.profiling import StepProfile

n11 = narrate.n11
GPT2 = cost.published_shape("gpt2")


def run(T, eager_s=0.1, sdpa_s=0.02, tiled_s=0.05, tiled_peak=None, block=64):
    """An AttentionRun at T for one layer's 12 heads: peaks made up, traffic counted."""
    eager_peak = 3 * 12 * T * T * 4
    mem = lc.AttentionMemory(T, 12, 64, block, "cpu", eager_peak, 12 * T * 64 * 4,
                             tiled_peak if tiled_peak is not None else eager_peak // 100)
    return lc.AttentionRun(mem, {"eager": eager_s, "sdpa": sdpa_s, "tiled": tiled_s},
                           flash.eager_traffic(T, 64, heads=12),
                           flash.tiled_traffic(T, 64, heads=12, block_q=block, block_k=block))


def test_tiles_equal_to_rounding_or_not():
    equal = n11.tiles_equal({256: 4e-7, 4096: 1.9e-6}, 64)
    assert "**1.9e-06**" in equal and "T = 4,096" in equal and "256, 4,096" in equal and "float32 rounding" in equal
    off = n11.tiles_equal({256: 3e-3}, 64)
    assert "**more than rounding**" in off and "1e-05" in off and "float32 rounding" not in off


def test_traffic_saves_or_not():
    long = n11.traffic([run(256), run(4096)])
    # eager 4 T d + 4 T^2 elements; tiled at 64 x 64 reads K and V once per query tile: 3.0 GiB against 804 MiB
    assert "**3.0 GiB**" in long and "**804.0 MiB**" in long and "3.9x less" in long and "writes the whole" in long
    short = n11.traffic([run(64, block=16)])  # tiles small against head_dim: little saved
    assert "saves little traffic" in short


def test_memory_against_the_tenth():
    ok = n11.memory([run(4096)])
    assert "1.0% of eager's" in ok and "This, not speed" in ok
    over = n11.memory([run(512, tiled_peak=3 * 12 * 512 * 512 * 4 // 5)])
    assert "20.0% of eager's" in over and "More than a tenth" in over


@pytest.mark.parametrize("device, s, expected", [
    ("cpu", (0.1, 0.02, 0.5), ["On this CPU the flash kernel was **5.0x faster**", "the slowest, 5.0x eager"]),
    ("cpu", (0.1, 0.2, 0.05), ["was not faster than eager: a CPU's caches", "beat eager here (2.0x faster)"]),
    ("cuda:0", (0.1, 0.01, 0.5), ["On this GPU the fused kernel is **10.0x faster**", "the slowest"]),
    ("cuda:0", (0.1, 0.2, 0.5), ["On this GPU the fused kernel was not faster", "the slowest"]),
])
def test_times_read_for_a_cpu_or_a_gpu(device, s, expected):
    text = n11.times([run(4096, *s)], device)
    assert "At T = 4,096 one call took 100.0 ms eager" in text
    for piece in expected:
        assert piece in text


def test_crossovers_each_outcome():
    grid = SimpleNamespace(crossovers=(lc.Crossover(1, 6702.0, None), lc.Crossover(8, 838.0, 900.0),
                                       lc.Crossover(16, 419.0, 1000.0), lc.Crossover(32, 209.0, 100.0)))
    text = n11.crossovers(grid, 1024)
    lines = text.split("\n")
    assert len(lines) == 4 and all(line.startswith("- ") for line in lines)
    assert "beyond GPT-2's 1,024-token window" in lines[0] and "no crossover" in lines[0]
    assert "**900** (1.07x): within 25%" in lines[1] and "beyond" not in lines[1]
    assert "(2.39x): later than predicted" in lines[2]
    assert "(0.48x): earlier than predicted" in lines[3]


def point(context, batch, ratio, compute=False):
    floor = 0.02
    return lc.GridPoint(context, batch, floor * ratio, floor, 1, 1, floor * 2 if compute else 0.001)


def test_floor_ratio_flat_up_down_and_compute_bound():
    grid = SimpleNamespace(sweeps=[SimpleNamespace(batch=b) for b in (1, 8, 32)], points=[
        point(64, 1, 1.6), point(1000, 1, 1.7),
        point(64, 8, 1.6), point(512, 8, 1.9), point(1000, 8, 2.4),
        point(64, 32, 4.9, compute=True), point(1000, 32, 2.5)])
    b1, b8, b32 = n11.floor_ratio(grid).split("\n")
    assert "Batch 1: 1.60x to 1.70x the floor; it kept its distance" in b1
    assert "from context 1,000 it departs upward (2.40x)" in b8  # 1.9 / 1.6 is within 25%; 2.4 is not
    assert "from context 1,000 it departs downward (2.50x)" in b32 and "At contexts 64 the roofline" in b32
    assert "compute-bound" not in b1 + b8


def profile(attention, step):
    return StepProfile("p", step, {"matmuls": step - attention, "attention": attention}, ())


def test_attention_share_either_side_or_not():
    sides = {64: profile(0.005, 0.045), 1000: profile(0.045, 0.085)}
    both = n11.attention_share(sides, 838.0)
    assert "**11%**" in both and "**53%**" in both and "either side of the predicted crossover (838)" in both
    same = n11.attention_share(sides, 6702.0)
    assert "same side of the predicted crossover (6,702)" in same
    flat = n11.attention_share({64: profile(0.02, 0.04), 1000: profile(0.02, 0.08)}, 838.0)
    assert "did not grow" in flat


def reads(times, batch=8, context=1000, shape=GPT2):
    rows = flash.kv_heads_table(shape, (12, 4, 1))
    return [lc.KvRead(r, batch, context, batch * context * r.bytes_per_token, t, 0.0,
                      shape.weight_bytes / (batch * r.bytes_per_token)) for r, t in zip(rows, times)]


def test_kv_heads_time_and_crossover_branches():
    followed = n11.kv_heads(reads((0.036, 0.012, 0.003)), 1024)
    assert "shrank 12x" in followed and "time 12.0x" in followed and "The time followed the bytes" in followed
    assert "from context 838 to 2,513, 10,053" in followed and "with 4, 1 KV heads a batch of 8 never" in followed
    fixed = n11.kv_heads(reads((0.035, 0.02, 0.0105), batch=32), 1024)
    assert "The time fell less than the bytes" in fixed
    assert "later, but still inside the window" in n11.kv_heads(reads((0.03, 0.01, 0.003), batch=128), 1024)


def test_the_narration_speaks_chinese(zh):
    assert "舍入误差" in n11.tiles_equal({256: 4e-7}, 64)
    assert "批大小 8" in n11.crossovers(SimpleNamespace(crossovers=(lc.Crossover(8, 838.0, 900.0),)), 1024)
