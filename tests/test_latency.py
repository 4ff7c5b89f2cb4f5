"""TTFT/TPOT of whole requests (inferlab.measure.latency), figures of measured time (viz.latency), streaming widget."""

from __future__ import annotations

import pytest

import inferlab as il
from inferlab import cost, measure
from inferlab.cost import PUBLISHED_SHAPES, MachineProfile, decode_cost
from inferlab.measure import Sweep, thinking
from inferlab.measure import latency as L
from inferlab.timing import Latency
from inferlab.viz import latency as V
from inferlab.widgets.streaming import streaming_view

PROMPT = "To be, or not to be"


@pytest.fixture(scope="module")
def measured(model) -> L.Measurement:
    return L.measure(model, PROMPT, 5, repeats=3, warmup=1)


def fake_measurement(trace, ttfts=(0.010, 0.012, 0.011), tpot=0.002, n=5) -> L.Measurement:
    """Made-up runs with known numbers (no timing noise)."""
    runs = tuple(Latency.from_times(0.0, [t + i * tpot for i in range(n)]) for t in ttfts)
    return L.Measurement(PROMPT, 6, runs, (), trace, {})


# ----------------------------------------------------------------------------- helpers
def test_token_times_rebuilds_arrivals():
    lat = Latency.from_times(1.0, [1.25, 1.30, 1.34, 1.40, 1.45])
    assert thinking.token_times(lat) == pytest.approx([0.25, 0.30, 0.34, 0.40, 0.45])  # TTFT, then + each gap


def test_summary_markdown_converts_to_ms():
    text = L.summary_markdown({"TTFT": il.summarize([0.001, 0.002, 0.003])})
    assert "| TTFT | 3 | 2.00 | 2.00 |" in text


# ----------------------------------------------------------------------------- measure
def test_measure_counts_runs_and_tokens(measured):
    assert len(measured.runs) == 3 and len(measured.warmup_runs) == 1
    assert all(r.n_tokens == 5 for r in measured.runs)  # EOS ignored: every run makes exactly N
    assert measured.prompt_tokens == len(il.load("bundled", verbose=False).encode(PROMPT))
    assert measured.trace.latency == measured.runs[-1]


def test_summaries_are_ordered(measured):
    for s in (measured.ttft, measured.tpot, measured.e2e, measured.itl):
        assert s.min <= s.median <= s.p90 <= s.p99 <= s.max
    assert measured.itl.n == 3 * 4
    assert "| TPOT |" in measured.markdown() and "ms" in repr(measured)


def test_measure_rejects_bad_settings(model):
    with pytest.raises(ValueError, match="repeats"):
        L.measure(model, PROMPT, 2, repeats=0)
    with pytest.raises(ValueError, match="prompt"):
        L.measure(model, "", 2)


def test_tpot_needs_two_tokens(model):
    one = L.measure(model, PROMPT, 1, repeats=1, warmup=0)
    with pytest.raises(ValueError, match="max_new_tokens >= 2"):
        _ = one.tpot
    assert "TPOT" not in one.markdown()


# ----------------------------------------------------------------------------- sweeps
def test_prompt_of_length_is_close(model):
    for n in (1, 17, 100):
        assert abs(len(model.encode(L.prompt_of_length(model, n))) - n) <= 2
    with pytest.raises(ValueError, match="n_tokens"):
        L.prompt_of_length(model, model.info.n_ctx)


def test_ttft_sweep_reports_real_lengths(model):
    s = L.ttft_sweep(model, [4, 40], repeats=2, warmup=0)
    assert len(s.xs) == 2 and s.xs[0] < s.xs[1] and all(len(v) == 2 for v in s.times)
    assert all(v > 0 for vals in s.times for v in vals)


def test_tpot_sweep_bins_every_gap(model):
    s = L.tpot_sweep(model, PROMPT, 9, bin_size=3, repeats=2, warmup=0)
    n_prompt = len(model.encode(PROMPT))
    assert s.xs == (n_prompt + 1, n_prompt + 4, n_prompt + 7)
    assert sum(len(v) for v in s.times) == 2 * 8  # repeats x (N - 1) gaps


def test_thinking_delays_the_first_visible_token(model):
    points = measure.thinking_sweep(model, PROMPT, (0, 4), answer_tokens=2, repeats=2, warmup=0)
    assert points[0].first_visible == points[0].first_token  # no thinking: TTFT is the visible TTFT
    assert all(v > f for v, f in zip(points[1].first_visible, points[1].first_token))


def test_split_thinking(short_trace):
    hidden, visible, lat = measure.split_thinking(short_trace, 2)
    assert hidden + visible == "".join(short_trace.generated_pieces)
    assert lat.ttft == short_trace.token_times[2] and lat.n_tokens == len(short_trace.token_times) - 2
    with pytest.raises(ValueError, match="budget"):
        measure.split_thinking(short_trace, 99)


def test_load_variant_and_compare(model):
    bf16, why = L.load_variant(model, dtype="bfloat16")
    assert bf16 is not None and str(bf16.info.dtype) == "torch.bfloat16", why
    res = L.compare({"fp32": model, "bf16": bf16}, PROMPT, 3, repeats=2, warmup=0)
    assert list(res) == ["fp32", "bf16"] and all(len(r.runs) == 2 for r in res.values())
    assert res["bf16"].settings["dtype"] == "bfloat16"


def test_load_variant_reports_what_is_missing(model):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    none, why = L.load_variant(model, device="cuda")
    assert none is None and "cuda" in why


def test_predictions_are_floors_plus_overhead_by_hand(model, short_trace):
    machine = MachineProfile("cpu", "float32", bytes_per_s=20e9, flops_per_s=100e9, copy_mb=1, matmul_n=1)
    meas = fake_measurement(short_trace, tpot=0.0025)  # 6 prompt tokens, 5 new: the step at context 6 + 5 // 2 = 8
    shapes = {k: v for k, v in PUBLISHED_SHAPES.items() if k.startswith("gpt2")}
    preds = measure.predict_sizes(meas, model, machine, shapes)
    assert [p.name for p in preds] == [model.info.name, *shapes] and preds[0].measured
    assert not any(p.measured for p in preds[1:])
    # bundled model: 8 blocks x 307,200 + 8,041,120 (tied head) + 2 x 160 (one row each of wte and wpe) weights
    # x 4 B = 41,994,880 B, + 9 x 10,240 B of cache = 42,087,040 B -> floor 2.104352 ms; measured 2.5 ms, so
    # 0.395648 ms above the floor, 0.049456 ms per layer (8 layers)
    assert preds[0].tpot_floor_s == pytest.approx(2.104352e-3) and preds[0].tpot_s == pytest.approx(2.5e-3)
    # GPT-2 small: 494,128,128 + 9 x 73,728 = 494,791,680 B -> 24.739584 ms, + 12 layers x 0.049456 ms
    assert preds[1].tpot_floor_s == pytest.approx(24.739584e-3)
    assert preds[1].tpot_s == pytest.approx(25.333056e-3)
    assert preds[1].tpot_bound == "memory"  # decode at batch 1 is memory-bound
    assert "PREDICTED" in repr(preds[1])
    real = {"gpt2": fake_measurement(short_trace, tpot=0.03)}
    again = measure.predict_sizes(meas, model, machine, shapes, also_measured=real)
    assert again[1].measured and again[1].tpot_s == pytest.approx(0.03) and not again[2].measured


def test_cached_model_never_downloads(model, monkeypatch):
    monkeypatch.setattr(il.hub, "hub_cached", lambda name: False)
    assert L.cached_model("gpt2", model) is None
    assert L.cached_model(model.info.name, model) is None  # the loaded model is not loaded twice


# ----------------------------------------------------------------------------- figures
def test_timeline_content(short_trace):
    fig = V.timeline(short_trace)
    names = [t.name for t in fig.data]
    assert names == ["tokenize", "prefill", "decode", "token id on the host"]
    assert len(fig.data[2].x) == len(short_trace.steps) - 1
    assert any(str(short_trace.generated_ids[1]) in str(c) for c in fig.data[2].customdata)
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "TTFT" in texts and "E2E" in texts and "TPOT" in texts
    assert fig.layout.xaxis.title.text == "time since the request (ms)"
    assert len(V.timeline(short_trace, max_tokens=2).data[2].x) == 1
    with pytest.raises(ValueError, match="Fix"):
        V.timeline(il.Trace(prompt="x", prompt_ids=[1], prompt_pieces=["x"]))


TTFT = Sweep("TTFT", "prompt length (tokens)", (8, 64), ((0.01, 0.012), (0.02, 0.03)), (8, 64))


def test_sweep_figure_box_and_band():
    box = V.sweep_figure(TTFT, style="box")
    assert [t.type for t in box.data] == ["box", "box", "scatter"]
    assert list(box.data[-1].y) == pytest.approx([11.0, 25.0])  # medians in ms
    assert box.layout.yaxis.title.text == "TTFT (ms)" and box.layout.xaxis.title.text == "prompt length (tokens)"
    band = V.sweep_figure(TTFT)
    top, low, median = band.data
    assert list(top.y) == pytest.approx([12.0, 30.0]) and list(low.y) == pytest.approx([10.0, 20.0])
    assert low.fill == "tonexty" and "2 repeats" in median.hovertext[0]
    with pytest.raises(ValueError, match="style"):
        V.sweep_figure(TTFT, style="violin")
    with pytest.raises(ValueError, match="Fix"):
        V.sweep_figure([0.1, 0.2])


def test_sweep_figure_with_floors():
    prefill = Sweep("prefill", "prompt length (tokens)", (8, 64, 256), ((0.019, 0.020, 0.026),) * 3, (8, 64, 256),
                    model="gpt2", device="cpu", dtype="float32")
    machine = MachineProfile("cpu", "float32", 20e9, 100e9, 1, 1)
    floors = measure.sweep_costs(prefill, PUBLISHED_SHAPES["gpt2"], machine)
    fig = V.sweep_figure(prefill, floors)
    assert len(fig.data) == 4  # band top, band bottom (filled), median, floor
    assert list(fig.data[3].y) == pytest.approx([c.floor_s * 1e3 for c in floors])
    assert "bound" in fig.data[3].hovertext[0] and "Prefill" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "time per forward (ms)"
    with pytest.raises(ValueError, match="sweep_costs"):
        V.sweep_figure(prefill, floors=[decode_cost(PUBLISHED_SHAPES["gpt2"], 1)] * 3)  # no machine -> no floors


def test_warmup_compare_batch_figures(short_trace):
    meas = fake_measurement(short_trace)
    fig = V.warmup(meas.runs)
    assert fig.data[0].x[0] == "call 1 (cold)" and len(fig.data) == 2
    fig = V.compare({"a": meas, "b": meas})
    assert len(fig.data) == 2 and list(fig.data[1].x) == ["a", "b"]
    batch = Sweep("decode-batch", "batch size (sequences)", (1, 4), ((0.001, 0.001), (0.002, 0.002)), (1, 4))
    fig = V.batch(batch)
    assert list(fig.data[0].y) == pytest.approx([1000, 2000])  # tokens/s: 1 / 1 ms, 4 / 2 ms
    assert list(fig.data[1].y) == pytest.approx([1.0, 2.0])  # each user's TPOT in ms
    assert (fig.data[0].yaxis, fig.data[1].yaxis) == ("y", "y2")  # bars on the left axis, the line on the right
    with pytest.raises(ValueError, match="batch_sweep"):
        V.batch(TTFT)


def test_model_size_and_thinking_figures(model, short_trace):
    machine = MachineProfile("cpu", "float32", 20e9, 100e9, 1, 1)
    preds = measure.predict_sizes(fake_measurement(short_trace), model, machine, {"gpt2": PUBLISHED_SHAPES["gpt2"]})
    fig = V.model_sizes(preds)
    assert any("PREDICTED" in (t.name or "") for t in fig.data)
    assert fig.layout.yaxis.type == "log"
    pts = [measure.ThinkingPoint(0, (0.01,), (0.01,), (0.002,)), measure.ThinkingPoint(10, (0.01,), (0.03,), (0.002,))]
    fig = V.thinking(pts)
    assert list(fig.data[-1].y) == pytest.approx([10.0, 30.0])  # TTFT + budget x TPOT, in ms


# ----------------------------------------------------------------------------- widget
def test_streaming_view_runs_and_reads_out(model):
    view = streaming_view(model, PROMPT, max_new_tokens=4, stop_at_eos=False)
    assert view.trace is not None and len(view.trace.generated_ids) == 4
    assert "TTFT" in view.readout.value and "done" in view.readout.value
    assert "To be, or not to be" in view.text.value and view.error.value == ""
    first = view.trace
    view.tokens.value = 2
    view.button.click()
    assert view.trace is not first and len(view.trace.generated_ids) == 2


def test_streaming_view_shows_bad_input_as_a_message(model):
    view = streaming_view(model, "", max_new_tokens=3)
    assert view.trace is None and "prompt" in view.error.value
    view = streaming_view(model, PROMPT, max_new_tokens=3, temperature=-1)
    assert "temperature" in view.error.value


# ----------------------------------------------------------------------------- why TTFT is not TPOT (notebook 00)
def test_first_token_parts_times_the_three_forwards(model):
    parts = L.first_token_parts(model, PROMPT, repeats=2, warmup=1)
    assert parts.prompt_tokens == len(model.encode(PROMPT)) and parts.model == model.info.name
    assert min(parts.prefill_s, parts.one_token_s, parts.decode_s) > 0
    # the bundled model: 8 layers of d_model 160 (8 x 12 x 160^2 = 2,457,600 block weights), a 50257 x 160 head
    # (8,041,120); 7 prompt tokens: head 16,082,240 FLOPs of 2 x 10,498,720 + 4 x 8 x 160 x 7 = 21,033,280 -> 76.5%
    assert round(parts.head_share, 3) == 0.765
    assert "LM head 76%" in repr(parts)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        L.first_token_parts(model, "a")


def fake_parts(prefill_s, head_share=0.87) -> L.FirstToken:
    return L.FirstToken("tiny", 8, prefill_s, 0.010, 0.011, head_share)


def test_narrate_first_token_both_outcomes():
    from inferlab.narrate import n00

    near = n00.first_token(fake_parts(0.012))  # 8 tokens cost 1.2x one token
    assert "1.2x a single token" in near and "LM head, 87%" in near
    layers = n00.first_token(fake_parts(0.012, head_share=0.31))
    assert "Reading every weight once" in layers and "LM head" not in layers
    far = n00.first_token(fake_parts(0.040))  # 4x one token: the layers' per-token work shows
    assert "4.0x a single token" in far and "per-token work" in far


def test_narrate_per_token_never_calls_a_short_prefill_compute_bound():
    from inferlab.narrate import n00

    below = n00.per_token(0.008, 8, 0.004, 7.9, 20.0, "gpt2", knee=21)  # 8 prompt tokens, ridge 20 FLOP/B
    assert "4.0x cheaper" in below and "still limited by memory" in below and "about **21 prompt tokens**" in below
    above = n00.per_token(0.008, 8, 0.004, 30.0, 20.0, "gpt2")
    assert "*compute-bound*), as the articles say" in above
    none = n00.per_token(0.040, 8, 0.004, 7.9, 400.0, "gpt2", knee=None)
    assert "NOT cheaper" in none and "for no prompt that fits" in none


def test_narrate_cold_call_and_two_models():
    from inferlab.narrate import n00

    assert "(5x faster)" in n00.cold_call(0.050, 0.010)
    assert "small this time" in n00.cold_call(0.011, 0.010)
    assert "random weights are enough" in n00.two_models("tiny", 9_000_000, "gpt2", 124_000_000)
    assert "is full-size" in n00.two_models("gpt2", 124_000_000, "gpt2", 124_000_000)


# ----------------------------------------------------------------------------- notebook 07's findings
def test_narrate_dtypes_explains_by_bytes_both_ways():
    from inferlab.narrate import n07

    halves = n07.dtypes({"float32": 0.010, "float16": 0.005}, {"float32": 4e8, "float16": 2e8}, "cuda", "gpt2")
    assert "float16 0.50x the time for 0.50x the bytes" in halves and "half the bytes per weight" in halves
    slower = n07.dtypes({"float32": 0.010, "bfloat16": 0.030}, {"float32": 4e8, "bfloat16": 2e8}, "cpu", "gpt2")
    assert "did NOT make decode clearly faster" in slower and "on this CPU" in slower
    assert "A hypothesis, not measured" in slower  # a cause without a measurement beside it is only a hypothesis
    assert "it converts each weight" not in slower
    barely = n07.dtypes({"float32": 0.010, "float16": 0.009}, {"float32": 4e8, "float16": 2e8}, "cpu", "gpt2")
    assert "did NOT make decode clearly faster" in barely  # 0.9x the time for half the bytes is not the bytes' story
    part = n07.dtypes({"float32": 0.010, "bfloat16": 0.0076}, {"float32": 4e8, "bfloat16": 2e8}, "cpu", "gpt2")
    assert "explain only part" in part and "0.76x the time" in part and "about half the time" not in part
    assert "nothing to compare" in n07.dtypes({"float32": 0.01}, {"float32": 4e8}, "cpu", "gpt2")


def test_narrate_model_sizes_and_profile(model):
    from inferlab.narrate import n07

    trace = il.generate(model, PROMPT, 5, stop_at_eos=False)
    small, big = fake_measurement(trace, tpot=0.002), fake_measurement(trace, tpot=0.006)
    text = n07.model_sizes({"gpt2": small, "gpt2-medium": big}, {"gpt2": 124e6, "gpt2-medium": 355e6},
                           {"gpt2": 0.001, "gpt2-medium": 0.003})
    assert "2.0x its memory floor" in text and "2.9x the parameters cost 3.0x the TPOT" in text
    flat = n07.model_sizes({"tiny": small, "gpt2": small}, {"tiny": 9e6, "gpt2": 124e6}, {"tiny": 1e-4, "gpt2": 1e-3})
    assert "cost only 1.0x the TPOT" in flat
    mm = n07.step_profile({"matmuls": 0.006, "Python & dispatch": 0.002}, 0.010, "gpt2")
    assert "matmuls **75%**, Python & dispatch **25%**" in mm and "not per-operation overhead" in mm  # 6 of 8 ms
    py = n07.step_profile({"matmuls": 0.002, "Python & dispatch": 0.006}, 0.010, "tiny")
    assert "Python and dispatch (launching each operation), not the weights" in py
    other = n07.step_profile({"matmuls": 0.002, "attention": 0.001, "norms & activations": 0.005,
                              "Python & dispatch": 0.0}, 0.010, "gpt2")
    assert "The largest part was norms & activations" in other and "Python" not in other


def test_narrate_hardware_table_is_labelled_computed():
    from inferlab.narrate import n07

    gpt2 = PUBLISHED_SHAPES["gpt2"]
    rows = cost.hardware_floors({"gpt2": gpt2}, context=0)
    table = n07.hardware_table(rows)
    assert table.startswith("**Computed from published specifications, not measured.**")
    assert "| NVIDIA H200 | 4,800 GB/s |" in table and "NVIDIA H200 Tensor Core GPU datasheet" in table
    assert table.count("\n| ") == len(cost.PUBLISHED_MEMORY) + 1  # header + one row per device
    assert "(900 -> 3350 GB/s, 3.7x)" in n07.hardware_point(rows, "gpt2")


def test_narrate_thinking_says_quality_cannot_be_shown():
    from inferlab.narrate import n07

    text = n07.thinking(64, 0.138, 0.010, 0.002)
    assert "2.00 ms per hidden token" in text and "13.8x" in text and "**What this cannot show: quality.**" in text


# ----------------------------------------------------------------------------- widgets: replay, peek, reprs
def test_streaming_view_replays_without_running_the_model(model, monkeypatch):
    from inferlab.widgets import streaming

    view = streaming_view(model, PROMPT, max_new_tokens=4, stop_at_eos=False)
    first = view.trace
    sleeps, shown = [], []
    monkeypatch.setattr(streaming.time, "sleep", sleeps.append)
    monkeypatch.setattr(streaming, "stream", lambda *a, **k: pytest.fail("replay must not run the model"))
    view._show = lambda prompt, answer: shown.append(answer)
    view.replay(4.0)
    assert sleeps == [0.25] * 4 and shown[-1] == first.text and view.trace is first
    assert "slow-motion replay at 4 tokens/s" in view.readout.value and "(done)" in view.readout.value
    view.replay(0)
    assert "must be a number &gt; 0" in view.error.value


def test_streaming_view_reads_well_before_it_is_run(model):
    view = streaming_view(model, PROMPT, max_new_tokens=3, run=False)
    assert repr(view) == "<Streaming view: press Run again to stream an answer>"
    view.replay()
    assert "Nothing to replay yet" in view.error.value
    view.run()
    bundle = view._repr_mimebundle_()
    plain = bundle["text/plain"]
    assert plain.startswith(f"<Streaming view: {PROMPT!r} -> ") and "3 tokens, TTFT" in plain
    assert "Interactive view" in bundle["text/html"] and "TTFT" in bundle["text/html"]


def test_peek_keeps_the_models_order_at_temperature_0():
    import torch

    from inferlab.widgets import start

    logits = torch.tensor([0.0, 3.0, 1.0, 2.0])  # model's order: 1, 3, 2, 0
    rows = start.ranked(logits, 0.0, 3)
    assert [i for i, _, _ in rows] == [1, 3, 2] and [p for _, p, _ in rows] == [1.0, 0.0, 0.0]
    # at temperature 1: e^3, e^2, e^1 over (1 + e + e^2 + e^3) = 0.6439, 0.2369, 0.0871
    assert [round(p1, 4) for _, _, p1 in rows] == [0.6439, 0.2369, 0.0871]
    box = start.next_token_peek(logits, ["a", "b", "c", "d"], n=3)
    box.children[0].value = 0.0
    text = box.children[1].children[0].value
    assert text.index("id 1") < text.index("id 3") < text.index("id 2") and "at temperature 1: 23.7%" in text
    assert repr(box).startswith("<Next-token peek") and "Interactive view" in box._repr_mimebundle_()["text/html"]
