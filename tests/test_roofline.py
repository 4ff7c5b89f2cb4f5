"""Figures of notebooks 04 and 05 (viz.roofline, viz.kvcache) and the KV growth widget, on recorded data."""

from __future__ import annotations

import ipywidgets as w
import plotly.graph_objects as go
import pytest
import torch

import inferlab as il
from inferlab import cost, measure
from inferlab.measure import Sweep
from inferlab.viz import kvcache as vk
from inferlab.viz import roofline as vr
from inferlab.widgets import kvcache as wk

MACHINE = cost.MachineProfile("cpu", "float32", bytes_per_s=20e9, flops_per_s=100e9, copy_mb=1, matmul_n=1)
SHAPE = cost.PUBLISHED_SHAPES["gpt2"]


def recorded(job: str, xs, medians, context: int = 0) -> Sweep:
    """A sweep as it was recorded on a CPU (three repeats per point, seconds)."""
    tokens = tuple(xs) if job != "decode" else (1,) * len(xs)
    times = tuple((m * 0.95, m, m * 1.3) for m in medians)
    x_name = {"prefill": "prompt length (tokens)", "decode": "context (tokens in the cache)"}.get(
        job, "batch size (sequences)")
    return Sweep(job, x_name, tuple(xs), times, tokens, context=context, model="gpt2", device="cpu", dtype="float32")


PREFILL = recorded("prefill", (8, 64, 256), (0.020, 0.060, 0.21))
DECODE = recorded("decode", (8, 128, 512), (0.036, 0.037, 0.040), context=8)
BATCH = recorded("decode-batch", (1, 2, 4, 8, 16, 32), (0.036, 0.037, 0.039, 0.045, 0.075, 0.140), context=32)


# ----------------------------------------------------------------------------- viz.roofline
def test_batch_figure():
    turn = measure.turn_batch(BATCH)
    assert turn == 16
    fig = vr.batch_figure(BATCH, turn)
    names = [t.name for t in fig.data]
    assert "tokens/s (measured)" in names and "if the step time never grew" in names
    tps = next(t for t in fig.data if t.name == "tokens/s (measured)")
    # batch / step time, by hand: 1 / 0.036 s, 2 / 0.037 s, ... 32 / 0.140 s
    assert list(tps.y) == pytest.approx([27.78, 54.05, 102.56, 177.78, 213.33, 228.57], abs=0.01)
    ideal = next(t for t in fig.data if t.name == "if the step time never grew")
    assert list(ideal.y) == pytest.approx([b / 0.036 for b in BATCH.xs])
    assert sum(1 for t in fig.data if t.legendgroup == "turn" and list(t.x) == [16, 16]) == 2
    assert fig.layout.xaxis.type == "log" and "batch" in fig.layout.xaxis.title.text
    assert len(vr.batch_figure(BATCH).data) == len(fig.data) - 2
    with pytest.raises(ValueError, match="batch_sweep"):
        vr.batch_figure(PREFILL)


def test_cost_table():
    costs = [cost.prefill_cost(SHAPE, 64, machine=MACHINE), cost.decode_cost(SHAPE, 64, machine=MACHINE)]
    fig = vr.cost_table(costs, ["prefill 64", "decode at 64"])
    table = fig.data[0]
    assert list(table.header.values) == ["forward", "GFLOP", "MB moved", "FLOP per byte", "floor (ms)", "bound by"]
    assert list(table.cells.values[0]) == ["prefill 64", "decode at 64"]
    assert list(table.cells.values[3]) == [f"{c.intensity:.2f}" for c in costs]
    assert len(vr.cost_table([cost.decode_cost(SHAPE, 1)]).data[0].header.values) == 4
    with pytest.raises(ValueError):
        vr.cost_table([])


def test_roofline_points_and_slider():
    points = measure.roofline_points(PREFILL, SHAPE, MACHINE) + measure.roofline_points(DECODE, SHAPE, MACHINE)
    sizes = [1, 4, 16, 64]
    what_if = [(n, cost.prefill_cost(SHAPE, n), cost.decode_cost(SHAPE, 64, n)) for n in sizes]
    fig = vr.roofline(MACHINE, points, what_if)
    roof = fig.data[0]
    assert max(roof.y) == pytest.approx(100.0)  # the flat roof: peak GFLOP/s
    assert min(roof.y) == pytest.approx(min(roof.x) * 20)  # the slope: bandwidth x intensity
    measured = {t.name: t for t in fig.data if "measured" in (t.name or "")}
    assert set(measured) == {"prefill (measured)", "decode (measured)"}
    assert list(measured["decode (measured)"].x) == pytest.approx([p.intensity for p in points[3:]])
    assert "x the floor" in measured["prefill (measured)"].hovertext[0]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["1", "4", "16", "64"]
    assert steps[-1].args[0]["x"][0][0] == pytest.approx(what_if[-1][1].intensity)
    assert fig.layout.xaxis.type == "log" and "FLOP per byte" in fig.layout.xaxis.title.text
    assert len(vr.roofline(MACHINE, points).layout.sliders) == 0
    with pytest.raises(ValueError, match="machine_profile"):
        vr.roofline({"bytes_per_s": 1}, points)


def test_roofline_keeps_two_models_apart():
    tiny = Sweep("decode", "context (tokens in the cache)", (8,), ((0.008,),), (1,), model="tiny")
    points = measure.roofline_points(DECODE, SHAPE, MACHINE) + measure.roofline_points(tiny, SHAPE, MACHINE)
    assert points[0].model == "gpt2" and points[-1].model == "tiny"
    fig = vr.roofline(MACHINE, points)
    measured = {t.name: t for t in fig.data if "measured" in (t.name or "")}
    assert set(measured) == {"decode, gpt2 (measured)", "decode, tiny (measured)"}
    assert len(measured["decode, gpt2 (measured)"].x) == 3 and measured["decode, tiny (measured)"].marker.symbol != \
        measured["decode, gpt2 (measured)"].marker.symbol


def test_prefill_per_token_and_the_knee():
    tiny = Sweep("prefill", "prompt length (tokens)", (8, 64), ((0.004,) * 3, (0.008,) * 3), (8, 64), model="tiny")
    fig = vr.prefill_per_token([PREFILL, tiny], knee=12)
    medians = {t.name: t for t in fig.data if "median" in (t.name or "")}
    assert list(medians["gpt2 (median)"].y) == pytest.approx([20 / 8, 60 / 64, 210 / 256])  # ms per token
    assert list(medians["tiny (median)"].y) == pytest.approx([0.5, 0.125])
    knee = next(t for t in fig.data if "compute-bound" in (t.name or ""))
    assert list(knee.x) == [12, 12] and knee.name.startswith("gpt2: compute-bound from 12 tokens")
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [8, 64, 256]
    assert not any("compute-bound" in (t.name or "") for t in vr.prefill_per_token([PREFILL]).data)
    with pytest.raises(ValueError, match="prefill"):
        vr.prefill_per_token([DECODE])


def test_compute_bound_from_by_hand():
    # ridge 4 FLOP/B (25 GB/s, 100 GFLOP/s): 11 tokens of GPT-2 small do 1.95 GFLOP on ~495 MB (3.9 FLOP/B),
    # 12 tokens 2.12 GFLOP (4.3 FLOP/B): the first compute-bound prompt is 12 tokens long
    ridge4 = cost.MachineProfile("cpu", "float32", 25e9, 100e9, 1, 1)
    assert measure.compute_bound_from(SHAPE, ridge4) == 12
    assert measure.compute_bound_from(SHAPE, ridge4, batch=4) == 3  # 4 x 3 = 12 tokens read each weight once
    assert measure.compute_bound_from(SHAPE, cost.MachineProfile("cpu", "float32", 1e9, 1e15, 1, 1)) is None


def test_tpot_verdict_repr():
    v = measure.TpotVerdict(32, 3.2, "int8", 0.26, 0.5, "fast path (eager)", 0.025, 0.020, 0.0025)
    assert repr(v) == ("TpotVerdict(batch x32 -> step x3.20; int8 (bytes x0.26) -> TPOT x0.50; fast path (eager) "
                       "at 1.2x the bandwidth floor, 10x the compute floor)")


def test_myth_figure():
    check = measure.MythCheck(from_compute_s=0.001, from_bandwidth_s=0.02, measured_s=0.036, context=8)
    fig = vr.myth_figure(check)
    assert list(fig.data[0].y) == pytest.approx([1.0, 20.0, 36.0])
    assert fig.layout.yaxis.type == "log"


# ----------------------------------------------------------------------------- viz.kvcache
def fake_layers(n_layer=3, heads=2, tokens=7, head_dim=4):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(1, heads, tokens, head_dim, generator=g), torch.randn(1, heads, tokens, head_dim, generator=g))
            for _ in range(n_layer)]


def test_kv_tensors_figure():
    layers = fake_layers()
    fig = vk.kv_tensors_figure(layers, tokens=5, prompt_len=3, head=1, pieces=list("abcdefg"))
    assert len(fig.data) == 6  # K and V for each of 3 layers
    assert all(len(t.z) == 4 and len(t.z[0]) == 5 for t in fig.data)  # [head_dim, tokens shown]
    assert fig.data[1].z[2][4] == pytest.approx(float(layers[0][1][0, 1, 4, 2]))
    titles = [a.text for a in fig.layout.annotations]
    assert "layer 2 V [1, 2, 5, 4]" in titles
    assert list(fig.data[0].x) == ["0 a", "1 b", "2 c", "3 d", "4 e"]  # position and token text, for hover
    assert "after decode step 2" in fig.layout.title.text
    assert list(fig.layout.xaxis.range) == [-0.5, 6.5]  # fixed: the cache visibly grows to the right
    with pytest.raises(ValueError, match="outside"):
        vk.kv_tensors_figure(layers, tokens=8)
    with pytest.raises(ValueError, match="head"):
        vk.kv_tensors_figure(layers, head=2)
    with pytest.raises(ValueError, match=r"cache\.layers"):
        vk.kv_tensors_figure([torch.zeros(2, 2)])


def test_cache_bytes_figure(model):
    ids = model.encode("To be, or not")
    logits, cache = il.prefill(model, ids)
    snaps = [cache.snapshot()]
    for _ in range(3):
        logits, cache = il.decode_step(model, int(logits[0].argmax()), cache)
        snaps.append(cache.snapshot())
    per_token = cost.kv_bytes_per_token(cost.Shape.from_info(model.info))
    fig = vk.cache_bytes_figure(snaps, per_token)
    formula, measured = fig.data
    assert list(measured.x) == [len(ids) + i for i in range(4)]
    assert list(measured.y) == pytest.approx([s.total_bytes / 1e3 for s in snaps])
    # the formula line passes through every measured point
    assert all(s.total_bytes == s.tokens * per_token for s in snaps)
    assert f"{per_token:,}" in formula.name
    with pytest.raises(ValueError, match="snapshot"):
        vk.cache_bytes_figure([], per_token)


def test_cache_timing_figure():
    cmp = measure.CacheComparison(
        prompt_len=4, cached_ids=(1, 2, 3), uncached_ids=(1, 2, 3), cached_times=((0.02, 0.01, 0.01),) * 2,
        uncached_times=((0.02, 0.03, 0.04), (0.02, 0.05, 0.04)), max_abs_diff=(0.0, 1e-6, 2e-6),
        max_logit=(10.0,) * 3, device="cpu", dtype="float32", model="fake")
    fig = vk.cache_timing_figure(cmp)
    lines = {t.name: t for t in fig.data if t.name}
    assert list(lines["with cache (one token)"].x) == [4, 5, 6]
    assert list(lines["without cache (whole sequence)"].y) == pytest.approx([20, 40, 40])
    assert list(lines["max |logit diff|"].y) == [None, 1e-6, 2e-6]  # an exact 0 has no place on a log axis
    assert "1 step(s) exactly 0" in fig.layout.annotations[1].text
    # median totals: without (0.09, 0.11) -> 0.10 s, with 0.04 s
    assert "2.5x faster in total with it" in fig.layout.title.text and fig.layout.yaxis2.type == "log"


def test_cache_vs_weights_heatmap():
    loaded = vk.MemoryCase("tiny", 5120, 37_000_000, 512, "float32", "loaded model")
    cases = [loaded] + [vk.MemoryCase.from_shape(s) for s in cost.PUBLISHED_SHAPES.values()]
    fig = vk.cache_vs_weights(cases, batches=(1, 8), contexts=(256, 1024, 32768))
    assert len(fig.data) == len(cases) and [t.visible for t in fig.data].count(True) == 1
    tiny, gpt2 = fig.data[0], fig.data[1]
    assert tiny.z[0][1] is None and tiny.z[0][0] is not None  # 1024 > tiny's 512-token limit
    assert tiny.text[1][0] == f"{8 * 256 * 5120 / 37e6:.2g}"
    assert gpt2.z[0][2] is None and gpt2.z[1][1] is not None
    assert fig.data[-1].z[1][2] is not None  # the 7B model reaches 32k tokens
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == [c.name for c in cases]
    assert vk.PUBLISHED_NOTE in buttons[1].args[1]["title.text"]
    assert vk.PUBLISHED_NOTE not in buttons[0].args[1]["title.text"]
    menu = fig.layout.updatemenus[0]  # its own line under the title (at the top right it hid the title)
    assert menu.x < 0.2 and menu.xanchor == "left" and menu.yanchor == "bottom" and fig.layout.margin.t >= 100
    assert fig.layout.annotations[0].text == "model:"
    gqa = cases[-1]
    assert gqa.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # grouped-query: 8 K/V heads, 16-bit
    # 7.24B weights x 2 bytes = 14.48 GB; at 131,072 B per token the cache weighs as much at about 110,500 tokens
    assert gqa.weight_bytes == pytest.approx(14.48e9, rel=1e-3)
    assert gqa.crossover_tokens == pytest.approx(110_500, rel=1e-3)


# ----------------------------------------------------------------------------- widgets.kvcache
def test_kv_growth_widget():
    layers = fake_layers(tokens=9)
    box = wk.kv_growth(layers, prompt_len=4, pieces=list("abcdefghi"))
    assert isinstance(box, w.VBox)
    shown = box._repr_mimebundle_()  # what a saved notebook shows before the cell runs again
    title = "KV cache growth view (5 decode steps, 3 layers, 2 heads): run the cell to use the slider"
    assert shown["text/plain"] == title and title in shown["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in shown
    slider, head, info, errors, _ = box.children[0].children + box.children[1:]
    assert slider.max == 5 and slider.value == 5
    assert "application/vnd.plotly.v1+json" in box.children[-1].outputs[0]["data"]
    assert "[1, 2, 9, 4]" in info.value and errors.value == ""
    slider.value = 0
    assert "after prefill" in info.value and "[1, 2, 4, 4]" in info.value
    head.value = 7  # bad input: a readable message, not a traceback
    assert "does not exist" in errors.value
    head.value = 1
    assert errors.value == ""
    with pytest.raises(ValueError, match="prompt_len"):
        wk.kv_growth(layers, prompt_len=0)


def test_figures_are_plain_figures():
    assert isinstance(vr.batch_figure(BATCH), go.Figure)
    assert isinstance(vk.kv_tensors_figure(fake_layers()), go.Figure)
