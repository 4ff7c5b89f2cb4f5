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


def test_attention_runs_time_count_and_measure_each_length():
    runs = lc.attention_runs([64, 256], heads=2, head_dim=16, block=32, repeats=1)
    assert [r.T for r in runs] == [64, 256]
    for r in runs:
        assert set(r.seconds) == {"eager", "sdpa", "tiled"} and min(r.seconds.values()) > 0
        assert r.eager_traffic.bytes > r.tiled_traffic.bytes and r.tiled_traffic.block_q == 32
        assert r.memory.block == 32 and r.memory.heads == 2
    assert "T=256" in repr(runs[1]) and "counted" in repr(runs[1])
    with pytest.raises(ValueError, match="lengths"):
        lc.attention_runs([], repeats=1)


def test_kv_heads_reads_count_the_bytes_of_every_layer():
    shape = cost.Shape("toy", 3, 4, 64, 100, 128)  # 3 layers, 4 heads of 16
    reads = lc.kv_heads_reads(shape, 20, 2, (4, 2, 1), repeats=1)
    assert [r.heads.kv_heads for r in reads] == [4, 2, 1] and [r.heads.kind for r in reads] == ["MHA", "GQA", "MQA"]
    for r in reads:
        assert r.cache_bytes == 2 * 20 * r.heads.bytes_per_token  # batch x context x bytes per token, every layer
        assert r.max_diff < 1e-5 and r.seconds > 0
        assert r.crossover == pytest.approx(shape.weight_bytes / (2 * r.heads.bytes_per_token))
    assert "MQA" in repr(reads[2]) and "GB/s" in repr(reads[2])
    with pytest.raises(ValueError, match="divisor of the 4 query heads"):
        lc.kv_heads_reads(shape, 20, 2, (3,), repeats=1)
    with pytest.raises(ValueError, match="context=0"):
        lc.kv_heads_reads(shape, 0, 2, repeats=1)


def test_a_random_fill_times_the_fast_path_without_a_prefill(model):
    from inferlab.measure import sweeps

    with ForwardCounter(model) as count:
        step = sweeps.decode_call(model, 20, 2, 3, path="fast", fill="random", weights="tied")
        step()
    assert count.n == 0  # neither a prefill nor a step goes through the Hugging Face module
    dec = next(c.cell_contents for c in step.__closure__ if hasattr(c.cell_contents, "k"))
    assert dec.tokens == 21 and bool(dec.k[0][:, :, :20].abs().sum(-1).gt(0).all())  # every slot written
    with pytest.raises(ValueError, match="fill='random' is not allowed"):
        sweeps.decode_call(model, 20, 2, 3, path="engine", fill="random")
    with pytest.raises(ValueError, match="fill='cold' is not allowed"):
        sweeps.decode_call(model, 20, 2, 3, path="fast", fill="cold")


def test_decode_grid_on_a_random_cache_and_profiles_either_side(model):
    grid = lc.decode_grid(model, [4, 16, 40], [1, 2], repeats=1, warmup=0, machine=MACHINE, path="fast",
                          fill="random", weights="tied")
    assert [s.batch for s in grid.sweeps] == [1, 2] and len(grid.points) == 6
    sides = lc.profile_sides(model, 2, [4, 40], repeats=1, warmup=0, weights="tied")
    assert list(sides) == [4, 40] and all(p.groups["attention"] > 0 for p in sides.values())
    assert "batch 2, context 40" in sides[40].label
    with pytest.raises(ValueError, match="contexts"):
        lc.profile_sides(model, 2, [model.info.n_ctx], repeats=1)


def test_figures_and_the_traffic_explorer():
    from inferlab import flash
    from inferlab.viz import long_context as vlc
    from inferlab.widgets import long_context as wlc

    runs = [lc.AttentionRun(lc.AttentionMemory(T, 2, 16, 32, "cpu", 4 * T * T, 100 * T, 50 * T),
                            {"eager": 1e-3, "sdpa": 5e-4, "tiled": 2e-3}, flash.eager_traffic(T, 16, heads=2),
                            flash.tiled_traffic(T, 16, heads=2, block_q=32, block_k=32)) for T in (64, 256)]
    fig = vlc.attention_costs(runs)
    assert len(fig.data) == 8  # counted: eager and tiled; peaks and times: eager, SDPA and tiled
    assert list(fig.data[0].y) == [r.eager_traffic.bytes / 2**20 for r in runs]
    steps = vlc.softmax_steps(flash.online_softmax_steps([2.0, 1.0, 3.0]))
    assert [round(y, 4) for y in steps.data[1].y] == [2.0, 2.0, 3.0]  # the running max after each score
    sweep = lc.Sweep("decode", "context", (64, 1000), ((0.03,), (0.06,)), (8, 8), batch=8)
    grid = lc.DecodeGrid((sweep,), GPT2, 25e9)
    fig = vlc.decode_grid(grid)
    assert any(getattr(s, "x0", None) == pytest.approx(lc.predicted_crossover(GPT2, 8)) for s in fig.layout.shapes)
    read = lc.KvRead(flash.kv_heads_table(GPT2, (12,))[0], 8, 512, 10, 1e-3, 0.0, 838.0)
    assert vlc.kv_heads_bars([read]).data[0].y == (10 / 2**20,)
    with pytest.raises(ValueError, match="DecodeGrid"):
        vlc.decode_grid([])
    text = wlc.traffic_text(4096, 64)
    assert "3.0 GiB" in text and "804.0 MiB" in text and "3.9x less" in text  # eager vs tiled at GPT-2's heads
    view = wlc.traffic_explorer()
    block = view.children[0].children[1]
    block.value = 256
    assert "228.0 MiB" in view.children[1].value  # bigger tiles re-read K and V fewer times
