"""Notebook 09's figures, SLO slider and narration (viz.serve, widgets.serve, narrate.n09), in both languages.

The runs are real but small (the bundled model, a few requests); the narration's numbers are hand-made, so both of
each finding's outcomes are told.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest
from test_narrate_language import chinese

from inferlab import i18n, narrate
from inferlab.measure import serve_runs as compare
from inferlab.serve import run, workload
from inferlab.viz import serve as vs
from inferlab.widgets import serve as ws

n09 = narrate.n09


@pytest.fixture(scope="module")
def served(model):
    """Six requests over 5 blocks of 16: some wait for blocks, none is preempted twice."""
    reqs = workload(6, 200.0, (4, 20), (3, 8), 2, model=model)
    return run(model, reqs, max_batch=4, kv_blocks=5)


def test_gantt_shows_each_phase_of_each_request(served):
    fig = vs.gantt(served)
    assert [t.name for t in fig.data] == ["waiting", "prefill", "decode"]
    start = vs.first_runs(served)
    for s, wait, pre, dec in zip(served.requests, *(t.x for t in fig.data), strict=True):
        assert wait == pytest.approx((start[s.request.id] - s.arrival) * 1e3)
        assert pre == pytest.approx((s.first_token - start[s.request.id]) * 1e3)
        assert dec == pytest.approx((s.finish - s.first_token) * 1e3) and wait >= 0 and pre > 0
    assert fig.data[2].base[0] == pytest.approx(served.requests[0].first_token * 1e3)


def test_block_map_colours_each_held_block_by_its_request(served):
    z = vs.block_map(served).data[0].z
    assert len(z) == 5 and len(z[0]) == len(served.iterations)
    for j, it in enumerate(served.iterations):
        held = {b: rid for rid, table in it.tables for b in table}
        assert {b: z[b][j] for b in held} == held
        assert sum(not math.isnan(z[b][j]) for b in range(5)) == it.used_blocks


def test_kv_usage_and_its_bars(served, model):
    reqs = workload(3, math.inf, (20, 40), 4, 1, model=model)
    first = compare.kv_positions(run(model, reqs, max_batch=3), longest=44)[0]
    prompts = [len(r.prompt_ids) for r in reqs]  # after the first iteration: every prompt, in blocks of 16
    assert first == (3 * 44, 16 * sum(-(-p // 16) for p in prompts), sum(prompts))
    usage = compare.kv_usage(served, longest=28)
    (reserved, used), (paged, used_again) = usage["contiguous max-length"], usage["paged"]
    assert used == used_again and 0 < used <= paged <= used + 15 * 4  # at most one partly empty block each
    assert reserved == pytest.approx(28 * sum(len(it.tables) for it in served.iterations) / len(served.iterations))
    fig = vs.kv_waste_bars(usage)
    assert list(fig.data[0].y) == [used, used] and list(fig.data[1].y) == [reserved - used, paged - used]
    with pytest.raises(ValueError, match="kv_usage"):
        vs.kv_waste_bars({"paged": 3})


def steady(rate, sustained=True):
    """A SteadyState-like window: ``rate`` requests/s arrived; all finished, or a third of them and the queue grew."""
    fin = rate if sustained else rate / 3
    return SimpleNamespace(offered_per_s=rate, finished_per_s=fin, tokens_per_s=10 * fin, sustained=sustained,
                           queue=(2, 3) if sustained else (2, 40))


def points(*p99s, sustained=(True, True, True, True)):
    return [SimpleNamespace(rate=r, summary=SimpleNamespace(tokens_per_s=10 * r, ttft=SimpleNamespace(
        p50=t / 2, p90=t, p99=t)), steady=steady(r, ok)) for r, t, ok in zip((1.0, 2.0, 4.0, 8.0), p99s, sustained,
                                                                           strict=False)]


SPREAD_WINS = SimpleNamespace(ratios=(1.5, 1.7, 1.4, 1.6), pooled=1.55)
SPREAD_MIXED = SimpleNamespace(ratios=(1.1, 1.9, 1.3, 1.6), pooled=1.45)
SPREAD_LITTLE = SimpleNamespace(ratios=(0.95, 1.2, 1.05, 1.1), pooled=1.08)
PEER_FAR = SimpleNamespace(requests=8, new_tokens=32,
                           same_as_serve={"generate_batch": 8, compare.SERVE_MODEL_LAYOUT: 8},
                           tokens_per_s={"inferlab.serve": 200.0, "generate_batch": 50.0,
                                         compare.SERVE_MODEL_LAYOUT: 50.0})


def test_load_curve_and_the_slo_slider():
    pts = points(0.2, 0.25, 0.9, 5.0)
    fig = vs.load_curve(pts, slo_s=1.0)
    assert list(fig.data[1].y) == pytest.approx([200, 250, 900, 5000]) and fig.layout.shapes[0].y0 == 1000
    assert list(fig.data[1].marker.symbol) == ["circle"] * 4  # every rate sustained
    grows = vs.load_curve(points(0.2, 0.25, 0.9, 5.0, sustained=(True, True, False, False)), slo_s=1.0)
    assert list(grows.data[1].marker.symbol) == ["circle", "circle", "circle-open", "circle-open"]
    assert "not sustained" in grows.data[1].hovertext[2] and "not sustained" not in grows.data[1].hovertext[1]
    label = next(a for a in fig.layout.annotations if a.text == "SLO")  # on a log axis plotly puts it at 10**y
    assert fig.layout.yaxis.type == "log" and 10**label.y == pytest.approx(1000)
    assert ws.best_within(pts, 1.0).rate == 4.0 and ws.best_within(pts, 0.1) is None
    # a rate whose queue grew met the SLO only because the requests stopped: the slider never names it
    grew = points(0.2, 0.25, 0.9, 5.0, sustained=(True, True, False, False))
    assert ws.best_within(grew, 1.0).rate == 2.0 and ws.best_within(grew, 10.0).rate == 2.0
    assert ws.best_within(points(0.2, 0.25, 0.9, 5.0, sustained=(False,) * 4), 10.0) is None
    view = ws.slo_picker(pts)
    slider, box, note = view.controls["slider"], view.controls["box"], view.children[1]
    slider.value = 300.0
    assert "20.0 tokens/s" in note.value and box.value == 300  # 2 requests/s is the best within 300 ms
    slider.value = 100.0
    assert "No rate" in note.value and "slider spans" not in note.value
    with pytest.raises(ValueError, match="LoadPoints"):
        vs.load_curve([1, 2])



def test_the_slo_box_takes_a_value_past_the_sliders_end_and_says_so():
    """A typed 50 ms below the slider's 100 ms end is used as typed, never clamped silently (review #50, 09_slo_50)."""
    view = ws.slo_picker(points(0.2, 0.25, 0.9, 5.0))  # the slider spans 100 ms (half of 200) to 10 s
    slider, box, note = view.controls["slider"], view.controls["box"], view.children[1]
    box.value = 50.0
    assert box.value == 50.0 and slider.value == pytest.approx(100.0)  # the slider stops at its end, the box keeps 50
    assert "within 50 ms" in note.value and "slider spans 100-10,000 ms" in note.value
    box.value = 20_000.0  # past the top end: every sustained rate meets it
    assert "20,000 ms" in note.value and "slider spans" in note.value and slider.value == pytest.approx(10_000.0)
    box.value = 300.0  # inside the range again: the slider follows, no remark
    assert slider.value == pytest.approx(300.0) and "20.0 tokens/s" in note.value and "slider spans" not in note.value
    box.value = -5.0
    assert "above 0" in note.value

def test_gap_timeline_and_compare_bars(served):
    fig = vs.gap_timeline({"run": served}, {0, 1})
    gaps = [y for y in fig.data[0].y if y is not None]
    assert sorted(gaps) == pytest.approx(sorted(g * 1e3 for g in compare.gaps(served, {0, 1})))
    assert list(vs.compare_bars({"a": 1.0, "b": 2.0}, "t", "y").data[0].y) == [1.0, 2.0]
    with pytest.raises(ValueError, match="ServeResult"):
        vs.gantt("not a result")


def summary(tps, t50, t99, tpot=0.05, n=16):
    pct = SimpleNamespace
    return SimpleNamespace(tokens_per_s=tps, requests=n, ttft=pct(p50=t50, p99=t99), tpot=pct(p50=tpot))


FINDINGS = {  # each finding in both outcomes: (the lesson holds, it does not)
    "why_batch": (([1, 4, 16], [0.02, 0.022, 0.03]), ([1, 4, 16], [0.02, 0.07, 0.3])),
    "static_vs_continuous": ((summary(20, 3, 9), summary(35, 0.3, 2)), (summary(20, 3, 9), summary(21, 2.9, 8))),
    "paging": (({"contiguous max-length": (800, 300), "paged": (330, 300)}, 8.5, 4, 192),
               ({"contiguous max-length": (400, 380), "paged": (390, 380)}, 4.2, 4, 100)),
    "spread": ((SPREAD_WINS,), (SPREAD_LITTLE,)),
    "knee": ((points(0.2, 0.25, 0.9, 5.0, sustained=(True, True, True, False)), 1.0), (points(0.2, 0.25), 0.1)),
    "chunks": ((2.0, 0.3, 2.1, 2.6, 64, 768, 0.02, 0.25), (0.2, 0.19, 0.3, 0.35, 64, 96, 0.02, 0.17)),
    "prefix": ((1.2, 0.2, 256, 1792), (0.5, 0.45, 32, 64)),
    "peer": ((SimpleNamespace(requests=8, new_tokens=32, tokens_per_s={"inferlab.serve": 30.0, "generate_batch": 28.0},
                              same_as_serve={"inferlab.serve": 8, "generate_batch": 8}),),
             (SimpleNamespace(requests=8, new_tokens=32, tokens_per_s={"inferlab.serve": 20.0, "generate_batch": 40.0},
                              same_as_serve={"inferlab.serve": 8, "generate_batch": 8}),)),
}


# words of each outcome's own sentence (English): the lesson holds, it does not
BRANCH = {"why_batch": ("This is why servers batch", "set its time here"),
          "static_vs_continuous": ("refills a slot the moment", "gained little"),
          "spread": ("Every workload favoured", "gained little on this machine"),
          "paging": ("turns saved memory into throughput", "fitted few more"),
          "knee": ("**goodput**", "No rate tried"),
          "chunks": ("bounded slowdown", "did not smooth"),
          "prefix": ("only computes its own part", "saved less here"),
          "peer": ("keep up with", "was faster on this run")}


def test_a_much_faster_serve_says_why_in_both_languages(zh):
    """Requests all at once measure kernels and layouts: said in every outcome, with the layout's share measured."""
    chinese(n09.peer(PEER_FAR))
    i18n.set_language("en")
    text = n09.peer(PEER_FAR)
    assert "made it **4.0x** faster" in text and "not because it scheduled better" in text
    assert "keep up with" not in text and "was faster" not in text
    flat = SimpleNamespace(**{**vars(PEER_FAR), "tokens_per_s": {**PEER_FAR.tokens_per_s,
                                                                 compare.SERVE_MODEL_LAYOUT: 190.0}})
    text = n09.peer(flat)
    assert "made little difference" in text and "pre-packed" not in text
    for cmp in (PEER_FAR, flat, *FINDINGS["peer"][0], *FINDINGS["peer"][1]):
        assert "not its scheduling" in n09.peer(cmp)
    assert "pre-packed" not in n09.peer(FINDINGS["peer"][0][0])  # no model-layout bar: no sentence about it
    i18n.set_language("zh")
    chinese(n09.peer(flat))


def test_the_spread_warns_where_one_workload_gained_little(zh):
    chinese(n09.spread(SPREAD_MIXED))
    i18n.set_language("en")
    text = n09.spread(SPREAD_MIXED)
    assert "can mislead" in text and "1.10x to 1.90x" in text and "**1.45x**" in text
    assert "Every workload" not in text and "gained little on this machine" not in text


def test_the_knee_names_a_goodput_only_where_the_server_kept_up(zh):
    """The stored run named 117 tokens/s at 26 requests/s, which the server finished at about 6/s: a rate whose
    queue grew is never named, even within the SLO."""
    burst = points(0.2, 0.25, 0.5, 0.55, sustained=(True, True, False, False))
    kept = points(0.2, 0.25, 0.3, 0.35)
    only_growing = points(0.5, 0.6, 0.7, 2.0, sustained=(False, False, False, True))  # the sustained rate: past the SLO
    for pts in (burst, kept, only_growing):
        chinese(n09.knee(pts, 1.0))
    i18n.set_language("en")
    text = n09.knee(burst, 1.0)
    assert "20.0 tokens/s (at 2.0 requests/s" in text  # not 4 or 8 requests/s: their queues grew
    assert "From 4.0 requests/s on, requests arrived faster" in text and "queue grew from 2 to 40" in text
    assert "never tripled" in text
    text = n09.knee(kept, 1.0)
    assert "it kept up" in text and "80.0 tokens/s (at 8.0 requests/s" in text and "arrived faster" not in text
    assert "finished 100% as many requests as arrived" in text  # the share is said, not "as fast as they arrived"
    text = n09.knee(only_growing, 1.0)
    assert "only while its queue was growing" in text and "**goodput**" not in text and "No rate tried" not in text


def test_the_knee_refuses_a_rate_above_the_measured_service_rate(zh):
    """A point called sustained at a rate above what an overloaded run finished per second is not named."""
    pts = points(0.2, 0.3, 0.5, sustained=(True, False, True))
    pts[1].steady.finished_per_s = 1.5  # at 2/s it finished 1.5/s: 4/s cannot be sustained whatever its window said
    i18n.set_language("en")
    assert "10.0 tokens/s (at 1.0 requests/s" in n09.knee(pts, 1.0)


def test_chunked_decodes_slow_down_instead_of_stopping(zh):
    slowed = (0.8, 0.11, 0.8, 1.2, 64, 768, 0.022, 0.095)
    kept = (0.8, 0.03, 0.8, 1.2, 64, 768, 0.022, 0.025)
    chinese(n09.chunks(*slowed)), chinese(n09.chunks(*kept))
    i18n.set_language("en")
    text = n09.chunks(*slowed)
    assert "slow down instead of stopping" in text and "**4.3x**" in text and "kept their pace" not in text
    text = n09.chunks(*kept)
    assert "kept their pace" in text and "slow down" not in text


@pytest.mark.parametrize("name", list(FINDINGS))
def test_each_finding_has_two_outcomes_in_both_languages(name, zh):
    holds, not_held = (getattr(n09, name)(*args) for args in FINDINGS[name])
    chinese(holds), chinese(not_held)
    assert not re.search(r"[\u4e00-\u9fff）][;.,:] ", holds + not_held), "English punctuation in the Chinese text"
    i18n.set_language("en")
    holds, not_held = (getattr(n09, name)(*args) for args in FINDINGS[name])
    yes, no = BRANCH[name]
    assert yes in holds and no not in holds, holds
    assert no in not_held and yes not in not_held, not_held


def test_the_tpot_sentence_follows_the_numbers(zh):
    """Continuous batching's TPOT is called higher only where it was (a stored zh run had it lower, prose: higher)."""
    static, lower = summary(20, 3, 9, tpot=0.025), summary(35, 0.3, 2, tpot=0.022)
    higher = summary(35, 0.3, 2, tpot=0.03)
    chinese(n09.static_vs_continuous(static, lower))
    chinese(n09.static_vs_continuous(static, higher))
    i18n.set_language("en")
    assert "no higher" in n09.static_vs_continuous(static, lower)
    assert "a little higher" in n09.static_vs_continuous(static, higher)


def test_the_long_prompts_cost_follows_the_numbers(zh):
    """The long prompt is said to pay for chunking only when its TTFT rose (a stored zh run: 931 ms whole, 862 ms in
    chunks, and the prose said it paid)."""
    chinese(n09.chunks(0.9, 0.1, 0.93, 0.86, 64, 768, 0.02, 0.09))
    i18n.set_language("en")
    assert "lost nothing" in n09.chunks(0.9, 0.1, 0.93, 0.86, 64, 768, 0.02, 0.09)
    assert "paid for it" in n09.chunks(0.55, 0.1, 0.58, 0.75, 64, 768, 0.02, 0.09)
