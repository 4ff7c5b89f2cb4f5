"""Attention opened up: recorded patterns, the hand-computed layer against the model, figures, the explorer."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

import inferlab as il
from inferlab import _hf, hooks, measure
from inferlab import attention as A
from inferlab.recorder import attention_bytes
from inferlab.viz import attention as va
from inferlab.viz import heads as vh
from inferlab.viz import show_token
from inferlab.widgets import attention as wa


# ----------------------------------------------------------------------------- recorded patterns
def test_recorded_patterns_are_causal_probabilities(model, pat):
    L, H, T, T2 = pat.shape
    assert (L, H, T == T2) == (model.info.n_layer, model.info.n_head, True)
    assert torch.allclose(pat.attention.sum(-1), torch.ones(L, H, T), atol=1e-5)
    assert bool((pat.attention.triu(1) == 0).all())
    assert pat.residual.shape == (L + 1, T, model.info.d_model)


def test_record_patterns_matches_generate(model, pat):
    again = A.record_patterns(model, pat.ids)
    assert again.pieces == pat.pieces
    assert torch.allclose(again.attention, pat.attention, atol=1e-6)
    assert torch.allclose(again.residual, pat.residual, atol=1e-5)
    assert hooks.active_hook_count(model) == 0
    assert _hf.current_attention(model) == model.info.attention


def test_record_patterns_refuses_beyond_memory_and_context(model):
    with pytest.raises(ValueError, match="max_record_bytes"):
        A.record_patterns(model, list(range(100, 164)), max_record_bytes=1000)
    with pytest.raises(ValueError, match="context length"):
        A.record_patterns(model, [11] * (model.info.n_ctx + 1))
    assert attention_bytes(4, 5, 10) == 4 * 5 * 100 * 4


# ----------------------------------------------------------------------------- one layer by hand
def test_layer_by_hand_equals_model_every_layer(model, pat):
    for layer in range(model.info.n_layer):
        check = A.check_layer(A.layer_by_hand(model, pat.residual[layer], layer), pat)
        assert check.ok(1e-5), check


def test_layer_by_hand_matches_torch_sdpa(model, pat):
    hand = A.layer_by_hand(model, pat.residual[1], 1)
    ref = F.scaled_dot_product_attention(hand.q, hand.k, hand.v, is_causal=True, scale=hand.scale)
    assert torch.allclose(hand.mixed, ref, atol=1e-5)
    assert math.isclose(hand.scale, 1 / math.sqrt(model.info.head_dim), rel_tol=1e-6)


def test_layer_by_hand_shapes(model, pat):
    T, d, H, hd = pat.shape[2], model.info.d_model, model.info.n_head, model.info.head_dim
    shapes = dict(A.layer_by_hand(model, pat.residual[0], 0).shapes())
    assert shapes["qkv"] == (T, 3 * d)
    assert shapes["q"] == shapes["k"] == shapes["v"] == shapes["mixed"] == (H, T, hd)
    assert shapes["scores"] == shapes["probs"] == (H, T, T)
    assert shapes["out"] == shapes["attn_out"] == (T, d)


def test_check_layer_can_fail(model, pat):
    wrong_input = A.layer_by_hand(model, pat.residual[0], 1)  # layer 1 fed the embeddings
    check = A.check_layer(wrong_input, pat)
    assert not check.ok() and check.output_max_diff > 1e-3


def test_layer_by_hand_rejects_bad_input(model, pat):
    with pytest.raises(ValueError, match="layer"):
        A.layer_by_hand(model, pat.residual[0], model.info.n_layer)
    with pytest.raises(ValueError, match="d_model"):
        A.layer_by_hand(model, pat.residual[0, :, :10], 0)


# ----------------------------------------------------------------------------- decode rows, kernels
def test_decode_rows_equal_uncached_rows(model, short_trace):
    assert A.decode_rows_max_diff(model, short_trace) < 1e-5
    lengths = [len(r) for r in short_trace.decode_rows(0, 0)]
    T = len(short_trace.prompt_ids)
    assert lengths == list(range(T + 1, T + len(short_trace.steps)))


def test_timing_attention_kernels_restores_the_model(model, pat):
    before = _hf.current_attention(model)
    times = measure.attention_kernels(model, len(pat.ids), repeats=1, warmup=0)
    assert times.kernels == ["sdpa", "eager", "eager + recording"] and times.lengths == (len(pat.ids),)
    assert all(len(s.times[0]) == 1 and s.times[0][0] > 0 for s in times.sweeps.values())
    assert times.agree < 1e-3  # the three set-ups compute the same logits
    assert _hf.current_attention(model) == before and hooks.active_hook_count(model) == 0


# ----------------------------------------------------------------------------- figures
def test_pattern_figure_hover_and_axes(pat):
    fig = va.pattern_figure(pat, 1, 2)
    heat = fig.data[0]
    assert "query %{y} -> key %{x}" in heat.hovertemplate
    assert f"id {pat.ids[1]}" in heat.x[1] and repr(show_token(pat.pieces[1])) in heat.y[1]
    assert heat.z[0][1] is None and heat.z[1][1] is not None  # the masked future is blank
    assert len(set(heat.x)) == pat.shape[2]  # repeated pieces stay separate columns
    assert "key position" in fig.layout.xaxis.title.text and "query position" in fig.layout.yaxis.title.text
    with pytest.raises(ValueError, match="Fix"):
        va.pattern_figure(pat, 99, 0)


def test_explorer_and_grid(pat):
    L, H = pat.shape[:2]
    fig = va.pattern_explorer(pat)
    assert len(fig.data) == L * H and len(fig.layout.sliders[0].steps) == L * H
    assert [t.visible for t in fig.data].count(True) == 1
    with pytest.raises(ValueError, match="max_cells"):
        va.pattern_explorer(pat, max_cells=10)
    grid = va.attention_grid(pat)
    assert len(grid.data) == L * H and "pooled" not in grid.layout.title.text
    with pytest.raises(ValueError, match="layers"):
        va.attention_grid(pat, max_panels=H)


def test_grid_downsamples_long_prompts(causal_uniform):
    long = A.Patterns(list(range(100)), ["x"] * 100, causal_uniform(100).expand(2, 3, 100, 100).clone())
    fig = va.attention_grid(long, max_tokens=16)
    assert "pooled" in fig.layout.title.text
    assert all(len(t.z) <= 16 for t in fig.data)
    pooled, b = va.downsample(long.attention, 16)
    assert b == 7 and torch.allclose(pooled.sum(-1), torch.ones(pooled.shape[:-1]), atol=1e-5)


def test_query_row_and_by_hand(model, pat):
    fig = va.query_row(pat, 0, 0, 4)
    assert len(fig.data[0].y) == 5 and sum(fig.data[0].y) == pytest.approx(1, abs=5 * 0.5e-4)  # bars store 4 decimals
    assert f"id {pat.ids[4]}" in fig.data[0].x[4] and "query" in fig.data[0].hovertemplate
    with pytest.raises(ValueError, match="query"):
        va.query_row(pat, 0, 0, 999)
    hand = A.layer_by_hand(model, pat.residual[0], 0)
    fig = va.by_hand_figure(hand, 1, pat.pieces)
    assert len(fig.data) == 3 and fig.data[1].z[0][1] is None  # masked future shown blank


def test_prefill_decode_and_kernel_figures(short_trace):
    fig = va.prefill_decode_figure(short_trace, 0, 1)
    T, N = len(short_trace.prompt_ids), len(short_trace.steps)
    assert len(fig.data[0].z) == T and len(fig.data[1].z) == N - 1
    assert len(fig.data[1].z[0]) == T + N - 1 and fig.data[1].z[0][T + 1] is None and fig.data[1].z[0][T] is not None
    assert fig.data[1].y[0].startswith("step 1:") and f"id {short_trace.generated_ids[0]}" in fig.data[1].y[0]
    sweeps = {k: measure.Sweep("prefill", "prompt length (tokens)", (5,), (t,), (5,))
              for k, t in {"sdpa": (0.001, 0.002, 0.004), "eager": (0.002, 0.003, 0.005)}.items()}
    bars = va.kernel_times_figure(measure.KernelComparison(sweeps, {}, {"sdpa": (0.0,), "eager": (0.0,)})).data[0]
    assert list(bars.x) == ["sdpa", "eager"] and list(bars.y) == pytest.approx([2.0, 3.0])  # medians, ms
    assert list(bars.error_y.arrayminus) == pytest.approx([1.0, 1.0])  # median - min
    assert list(bars.error_y.array) == pytest.approx([2.0, 2.0])  # max - median
    with pytest.raises(ValueError, match="attention"):
        va.prefill_decode_figure(il.Trace("x", [1], ["x"]), 0, 0)


# ----------------------------------------------------------------------------- widget
def test_explorer_widget(model, pat):
    def compute(text):
        return A.record_patterns(model, model.encode(text), max_record_bytes=4 * 2**20)

    ex = wa.attention_explorer(pat, compute=compute)
    assert ex.query.value == pat.shape[2] - 1
    ex.layer.value, ex.head.value, ex.query.value = 1, 2, 3
    assert "Layer 1, head 2" in ex.figures["map"].layout.title.text and len(ex.figures["row"].data[0].y) == 4
    ex.view.value = "all heads"
    assert len(ex.figures["map"].data) == pat.shape[0] * pat.shape[1]
    ex.text.value = "   "  # the box records on Enter (a value change)
    assert "empty" in ex.status.value
    ex.text.value = "word " * 400  # too many tokens for 4 MiB of attention
    assert "Could not record" in ex.status.value and ex.patterns is pat
    ex.text.value = "Hello there, friend"
    assert ex.patterns.shape[2] == len(model.encode("Hello there, friend")) and "Recorded" in ex.status.value
    with pytest.raises(TypeError, match="Patterns"):
        wa.attention_explorer("not patterns")
    assert repr(ex).startswith("Attention explorer:") and "layer 1, head 2" in repr(ex)
    bundle = ex._repr_mimebundle_()  # what a stored notebook shows before the cell runs
    assert bundle["text/plain"].startswith("Attention explorer: ") and "Interactive view" in bundle["text/html"]


# ----------------------------------------------------------------------------- lines view, flash tiles
def three_tokens(heads: int = 1) -> A.Patterns:
    """A hand-made pattern over 3 tokens: row 0 all on itself, row 1 a quarter back, row 2 spread 0.2/0.3/0.5."""
    one = torch.tensor([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.2, 0.3, 0.5]])
    return A.Patterns([10, 11, 12], ["a", " b", " c"], one.expand(1, heads, 3, 3).clone())


def test_lines_figure_widths_are_the_weights():
    fig = vh.lines_figure(three_tokens(), 0, 0, min_weight=0.0, max_width=8)
    # the six allowed (query, key) pairs, width = 8 px x weight
    widths = {(s.y0, s.y1): s.line.width for s in fig.layout.shapes}
    assert widths == pytest.approx({(0, 0): 8.0, (1, 0): 2.0, (1, 1): 6.0, (2, 0): 1.6, (2, 1): 2.4, (2, 2): 4.0})
    assert all(s.x0 < s.x1 for s in fig.layout.shapes)  # from the looking token (left) to the looked-at (right)
    assert len(vh.lines_figure(three_tokens(), 0, 0, min_weight=0.21).layout.shapes) == 5  # 0.2 dropped
    assert [(s.y0, s.y1) for s in vh.lines_figure(three_tokens(), 0, 0, query=2).layout.shapes] == [
        (2, 0), (2, 1), (2, 2)]
    both = vh.lines_figure(three_tokens(heads=2), 0, None)  # every head overlaid, one colour each
    assert len(both.layout.shapes) == 2 * 6 and len({s.line.color for s in both.layout.shapes}) == 2
    assert list(fig.data[0].text) == ["0 'a'", "1 '·b'", "2 '·c'"]  # quoted: a leading space is visible
    with pytest.raises(ValueError, match="head"):
        vh.lines_figure(three_tokens(), 0, 5)


def test_flash_tiles_figure_holds_one_tile():
    fig = vh.flash_tiles_figure(tokens=8, tile=4)
    eager, flash = fig.data
    assert sum(v is not None for row in eager.z for v in row) == 8 * 9 // 2  # the causal half, all in memory
    # query tile 1 (rows 4..7): its causal part of key tile 1 on chip (1+2+3+4 = 10 cells), key tile 0 (4 x 4) folded in
    on_chip = sum(v == 1.0 for row in flash.z for v in row)
    folded = sum(v is not None and v < 1.0 for row in flash.z for v in row)
    assert (on_chip, folded) == (10, 16)
    assert all(v is None for row in flash.z[:4] for v in row)  # other query tiles: nothing stored
    with pytest.raises(ValueError, match="tile"):
        vh.flash_tiles_figure(tokens=4, tile=8)


def test_lines_view_widget(pat):
    view = wa.lines_view(pat)
    assert "inferlab-lines-view" in view._dom_classes and "inferlab-lines-head" in view.head._dom_classes
    assert view.head.value == 0  # one head to start: every head x every token is a hairball
    view.head.value = wa.ALL
    assert "every head" in view.figures["lines"].layout.title.text and "only weights &gt;=" in view.lines.value
    assert "mean of every head" in view.figures["map"].layout.title.text
    view.layer.value, view.head.value, view.query.value = 1, 2, 3
    assert "Layer 1, head 2, token 3 only" in view.figures["lines"].layout.title.text
    assert {s.y0 for s in view.figures["lines"].layout.shapes} == {3}
    assert "Layer 1, head 2" in view.figures["map"].layout.title.text
    assert repr(view) == f"Lines view: {pat.shape[2]} tokens, layer 1, head 2"


def test_lines_svg_lights_a_tokens_lines_on_hover_and_quotes_tokens():
    p = three_tokens()
    svg = vh.lines_svg(p, 0, 0, min_weight=0.0)
    lines = re.findall(r'<line class="q(\d+) k(\d+)"[^>]*stroke-width="([\d.]+)"', svg)
    weights = {(int(q), int(k)): float(wd) for q, k, wd in lines}
    assert weights == {(q, k): round(vh.MAX_WIDTH * float(p.attention[0, 0, q, k]), 3)
                       for q in range(3) for k in range(q + 1)}
    for i in range(3):  # pointing at a token dims every line but its own, on both sides
        assert f":has(.lq{i}:hover) line:not(.q{i})" in svg and f":has(.rk{i}:hover) line:not(.k{i})" in svg
    assert f"0 &#x27;{vh.show_token(p.pieces[0])}&#x27;" in svg  # quoted: a space token is visible
    crowded = vh.lines_svg(three_tokens(heads=2), 0, None)
    drawn = [float(w) for w in re.findall(r"<title>[^<]*: ([\d.]+)</title>", crowded)]
    assert drawn and min(drawn) >= vh.CROWDED and "only weights &gt;=" in crowded


def test_the_cheap_views_sliders_follow_the_hand(model, pat):
    """A slider whose move only redraws stored data is live (continuous_update): 03's explorer and lines view, 05's
    cache view (newcomer review: they redrew only on release)."""
    import ipywidgets as w

    from inferlab.widgets import kvcache as wk

    ex = wa.attention_explorer(pat)
    lines = wa.lines_view(pat)
    _, cache = il.prefill(model, model.encode("To be, or not to be"))
    growth = wk.kv_growth(cache.layers, 3)
    def inside(box):
        for c in getattr(box, "children", ()):
            yield c
            yield from inside(c)
    sliders = [ex.layer, ex.head, lines.layer, *[c for c in inside(growth) if isinstance(c, w.IntSlider)]]
    assert len(sliders) == 4 and all(s.continuous_update for s in sliders), sliders
