"""measure.serve_runs' measurements for notebook 09: a run's steady state (did the queue grow?), the load sweep, the
decoders' gaps around a long prompt, the step sweep through serve's forward, the spread over workloads.

The steady-state logic is checked on hand-made runs (arrivals and finishes chosen so the answer is known); the rest
runs the bundled model, small.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from inferlab import gate, measure
from inferlab.measure import serve_runs as compare


def fake_run(arrivals, finishes, tokens=2):
    """A ServeResult-like run: request i arrives at ``arrivals[i]`` and gets ``tokens`` tokens, the last at
    ``finishes[i]`` (the first halfway)."""
    reqs = tuple(SimpleNamespace(request=SimpleNamespace(id=i), arrival=a, finish=f, first_token=(a + f) / 2,
                                 token_times=tuple((a + f) / 2 + k * (f - a) / (2 * (tokens - 1))
                                                   for k in range(tokens)))
                 for i, (a, f) in enumerate(zip(arrivals, finishes, strict=True)))
    return SimpleNamespace(requests=reqs)


def test_a_server_that_keeps_up_is_sustained():
    arrivals = [i * 0.1 for i in range(50)]  # 10/s, each served in 0.05 s: the queue never holds more than one
    st = compare.steady_state(fake_run(arrivals, [a + 0.05 for a in arrivals]))
    assert st.seconds == pytest.approx(4.9 - 1.0)  # from the 10th arrival (the first fifth left out) to the last
    # the window opens and closes on an arrival still running: one in the queue at both ends
    assert st.arrived == 39 and st.finished == 39 and st.queue == (1, 1)
    assert st.offered_per_s == pytest.approx(10, rel=0.01) and st.finished_per_s == pytest.approx(39 / 3.9)
    assert st.tokens_per_s == pytest.approx(2 * 39 / 3.9)
    assert st.sustained and st.growth == 0
    assert "sustained" in repr(st)


def test_a_server_slower_than_the_arrivals_is_not_sustained():
    arrivals = [i * 0.1 for i in range(50)]  # 10/s arriving, one finished every 0.4 s: the queue grows
    finishes = [0.4 * (i + 1) for i in range(50)]
    st = compare.steady_state(fake_run(arrivals, finishes))
    assert st.finished_per_s < 0.3 * st.offered_per_s
    assert st.queue[1] - st.queue[0] > 20 and not st.sustained
    assert "queue growing" in repr(st)


def test_sustained_means_finishing_nine_tenths_of_the_arrivals_or_a_queue_that_hardly_grew():
    assert compare.SteadyState(seconds=2.0, arrived=20, finished=18, tokens=100, queue=(3, 5)).sustained
    assert compare.SteadyState(seconds=2.0, arrived=10, finished=8, tokens=100, queue=(3, 5)).sustained  # 2 more
    assert not compare.SteadyState(2.0, 20, 16, 100, (3, 7)).sustained
    # the quiet stored run that four fifths called sustained: 82% finished, the queue grew from 6 to 13
    assert not compare.SteadyState(6.0, 46, 38, 900, (6, 13)).sustained
    # the 2-core run a full batch of slack called sustained: 19 arrived, 13 finished, the queue grew from 4 to 10
    assert not compare.SteadyState(11.8, 19, 13, 336, (4, 10)).sustained


def test_steady_state_refuses_a_run_without_a_window():
    with pytest.raises(ValueError, match="at least 3 requests"):
        compare.steady_state(fake_run([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]))  # all at once: no arrival window
    with pytest.raises(ValueError, match="at least 3 requests"):
        compare.steady_state(fake_run([0.0, 1.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match="warmup"):
        compare.steady_state(fake_run([0.0, 1.0, 2.0], [1.0, 2.0, 3.0]), warmup=1.0)


def test_load_requests_follow_the_duration_within_the_bounds():
    sizes = compare.BenchSizes(load_seconds=8.0, load_requests=(24, 64))
    assert [compare.load_requests(r, sizes) for r in (1.0, 4.0, 7.1, 30.0)] == [24, 32, 57, 64]


def test_load_sweep_measures_each_rate_and_refuses_bad_rates(model):
    sizes = compare.BenchSizes(max_batch=2, prompt_tokens=(4, 8), new_tokens=(2, 4), load_seconds=0.2,
                               load_requests=(5, 6))
    points = compare.load_sweep(model, [20.0, 2000.0], sizes)
    assert [p.rate for p in points] == [20.0, 2000.0] and [p.summary.requests for p in points] == [5, 6]
    assert all(isinstance(p.steady, compare.SteadyState) and p.sustained == p.steady.sustained for p in points)
    for bad, match in (([], "rates"), (5.0, "rates"), ([1.0, 0.0], "rates"), ([math.inf], "rates")):
        with pytest.raises(ValueError, match=match):
            compare.load_sweep(model, bad, sizes)
    with pytest.raises(ValueError, match="load_requests"):
        compare.load_sweep(model, [1.0], compare.BenchSizes(load_requests=(2, 6)))
    with pytest.raises(ValueError, match="load_seconds"):
        compare.load_sweep(model, [1.0], compare.BenchSizes(load_seconds=0))


def test_gap_phases_splits_the_gaps_at_the_long_prompts_arrival_and_first_token():
    dec = SimpleNamespace(request=SimpleNamespace(id=0), token_times=(0.0, 0.1, 0.2, 0.3, 1.3, 1.8, 1.9))
    long = SimpleNamespace(request=SimpleNamespace(id=1), arrival=0.25, first_token=1.8, token_times=(1.8,))
    ph = compare.gap_phases(SimpleNamespace(requests=(dec, long)), {0}, 1)
    assert ph.before == pytest.approx(0.1)  # gaps ending by 0.25: 0.1, 0.1
    assert ph.during == pytest.approx(0.5) and ph.longest_during == pytest.approx(1.0)  # 0.1, 1.0, 0.5
    with pytest.raises(ValueError, match="long_id"):
        compare.gap_phases(SimpleNamespace(requests=(dec, long)), {0}, 7)


def test_step_sweep_times_serves_forward_and_leaves_the_gates_record(model, monkeypatch):
    left = []
    monkeypatch.setattr(gate, "leave", lambda r: left.append(r) or r)
    sweep = measure.serve_step_sweep(model, [1, 2], context=8, repeats=2)
    assert sweep.job == "decode-batch" and sweep.xs == (1, 2) and all(len(t) == 2 for t in sweep.times)
    assert [r["kind"] for r in left] == ["batch"] and left[0]["via"] == "serve_step_sweep"
    assert left[0]["medians"] == pytest.approx(list(sweep.medians))
    for bad, match in (({"batches": []}, "batches"), ({"batches": [0]}, "batches"), ({"repeats": 0}, "repeats"),
                       ({"context": 0}, "context")):
        kwargs = {"batches": [1], **bad}
        with pytest.raises(ValueError, match=match):
            measure.serve_step_sweep(model, kwargs.pop("batches"), **kwargs)


def test_batching_spread_pools_workloads_run_both_ways_round(model):
    sizes = compare.BenchSizes(max_batch=2, requests=3, prompt_tokens=(4, 8), new_tokens=(2, 4), workloads=2)
    spread = compare.batching_spread(model, sizes, seed=3)
    runs = [b.runs for b in spread.runs]
    assert [(w[0], w[1]) for w in spread.workloads] == [(3, "static"), (4, "continuous")]
    tokens = sum(r[p].summary.generated_tokens for r in runs for p in ("continuous",))
    seconds = sum(r["continuous"].summary.seconds for r in runs)
    static = sum(r["static"].summary.generated_tokens for r in runs) / sum(
        r["static"].summary.seconds for r in runs)
    assert spread.pooled == pytest.approx(tokens / seconds / static)
    assert len(spread.ratios) == 2 and "pooled" in repr(spread)
    with pytest.raises(ValueError, match="workloads"):
        compare.batching_spread(model, compare.BenchSizes(workloads=0))
