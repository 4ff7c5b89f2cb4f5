"""inferlab.measure.long_context: the KV crossover predicted and measured, the decode grid, attention's peak memory."""

from __future__ import annotations

import pytest
from conftest import ForwardCounter

from inferlab import cost
from inferlab.measure import long_context as lc

GPT2 = cost.published_shape("gpt2")
MACHINE = cost.MachineProfile("cpu", "float32", bytes_per_s=10e9, flops_per_s=50e9, copy_mb=1, matmul_n=1)


# --------------------------------------------------------------------- the crossover
def test_predicted_crossover_on_gpt2_by_hand():
    # weights: 12 blocks x (2 x 768^2 + 2 x 768^2 + 2 x 768 x 3072 = 7,077,888) + 50,257 x 768 (tied head)
    #        = 123,532,032 numbers x 4 bytes = 494,128,128 B; KV per token: 2 x 12 x 768 x 4 = 73,728 B
    assert GPT2.weight_bytes == 494_128_128 and cost.kv_bytes_per_token(GPT2) == 73_728
    assert lc.predicted_crossover(GPT2, 8) == pytest.approx(494_128_128 / (8 * 73_728))  # 837.8 tokens
    assert lc.predicted_crossover(GPT2, 1) > GPT2.n_ctx  # batch 1 never reaches it inside GPT-2's window
    with pytest.raises(ValueError, match="batch=0"):
        lc.predicted_crossover(GPT2, 0)


def test_measured_crossover_on_made_up_lines():
    contexts = [100, 400, 700, 1000]
    # 10 ms that does not depend on context + 10 us per cached token: equal at 1,000 tokens
    assert lc.measured_crossover(contexts, [0.010 + 1e-5 * c for c in contexts]) == pytest.approx(1000)
    assert lc.measured_crossover(contexts, [0.02, 0.019, 0.02, 0.019]) is None  # flat (or falling): never
    assert lc.measured_crossover(contexts, [-0.001 + 1e-5 * c for c in contexts]) == 0.0  # all context from the start
    with pytest.raises(ValueError, match="two or more points"):
        lc.measured_crossover([64, 64], [0.1, 0.2])


def test_crossover_repr_has_both_branches():
    grown, flat = lc.Crossover(8, 837.8, 1200.0), lc.Crossover(1, 6702.0, None)
    assert repr(grown) == "Crossover(batch 8: predicted at context 838, measured at 1,200)"
    assert repr(flat) == "Crossover(batch 1: predicted at context 6,702; measured: the step did not grow with context)"
    assert grown.measured_over_predicted == pytest.approx(1200 / 837.8) and flat.measured_over_predicted is None


# --------------------------------------------------------------------- the decode grid (tiny)
def test_decode_grid_at_a_tiny_size(model):
    grid = lc.decode_grid(model, [4, 12], [1, 2], repeats=1, warmup=0, machine=MACHINE)
    assert [s.batch for s in grid.sweeps] == [1, 2] and all(s.xs == (4, 12) for s in grid.sweeps)
    assert grid.bytes_per_s == 10e9 and grid.note == ""
    shape = cost.Shape.from_info(model.info)
    p = grid.points[3]  # batch 2, context 12
    assert (p.batch, p.context) == (2, 12)
    assert p.kv_bytes == 2 * 13 * cost.kv_bytes_per_token(shape)  # 2 sequences x 13 positions read
    assert p.floor_s == pytest.approx((shape.weight_bytes + p.kv_bytes) / 10e9) and p.median_s > 0
    assert p.compute_floor_s == pytest.approx(2 * cost.flops_per_token(shape, 13) / 50e9)  # 2 new tokens' FLOPs
    assert p.bound == ("compute" if p.compute_floor_s > p.floor_s else "memory")
    fast = lc.GridPoint(512, 16, 0.4, floor_s=0.087, weight_bytes=1, kv_bytes=1, compute_floor_s=0.09)
    assert fast.bound == "compute" and lc.GridPoint(64, 1, 0.04, 0.04, 1, 1, 0.001).bound == "memory"
    assert [c.batch for c in grid.crossovers] == [1, 2]
    assert grid.crossovers[1].predicted_context == pytest.approx(lc.predicted_crossover(shape, 2))
    assert "batches [1, 2]" in repr(grid)


def test_decode_grid_refuses_before_any_forward(model):
    with ForwardCounter(model) as count:
        with pytest.raises(ValueError, match="batches"):
            lc.decode_grid(model, [4], [1, 0], repeats=1, machine=MACHINE)
        with pytest.raises(ValueError, match="contexts"):
            lc.decode_grid(model, [model.info.n_ctx], [1], repeats=1, machine=MACHINE)
        with pytest.raises(ValueError, match="repeats=0"):
            lc.decode_grid(model, [4], [1], repeats=0, machine=MACHINE)
    assert count.n == 0


def test_decode_grid_stops_at_the_batch_that_runs_out_of_memory(model, monkeypatch):
    real = lc.decode_sweep

    def sweep(model, contexts, *, batch, **kw):
        if batch >= 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(model, contexts, batch=batch, **kw)

    monkeypatch.setattr(lc, "decode_sweep", sweep)
    grid = lc.decode_grid(model, [4], [2, 4, 8], repeats=1, warmup=0, machine=MACHINE)
    assert [s.batch for s in grid.sweeps] == [2] and grid.note == "stopped at batch 4: out of memory"
    assert grid.crossovers[0].measured_context is None  # one context: no line to fit
    with pytest.raises(RuntimeError, match="even batch 4"):
        lc.decode_grid(model, [4], [4], repeats=1, warmup=0, machine=MACHINE)
    monkeypatch.setattr(lc, "decode_sweep", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("shape mismatch")))
    with pytest.raises(RuntimeError, match="shape mismatch"):  # anything else is not hidden
        lc.decode_grid(model, [4], [1], repeats=1, warmup=0, machine=MACHINE)


# --------------------------------------------------------------------- attention's peak memory
def test_tiled_attention_never_holds_the_score_matrix():
    mem = lc.attention_memory(512, heads=2, head_dim=32, block=64)
    scores = 2 * 512 * 512 * 4  # one [heads, T, T] float32 matrix: 2 MiB
    assert mem.eager_bytes >= scores
    assert mem.tiled_bytes < scores / 2 and mem.sdpa_bytes > 0
    assert mem.tiled_over_eager == pytest.approx(mem.tiled_bytes / mem.eager_bytes)
    assert mem.tiled_over_eager < 0.5
    assert "eager" in repr(mem) and "block 64" in repr(mem)
    with pytest.raises(ValueError, match="block=0"):
        lc.attention_memory(512, block=0)
