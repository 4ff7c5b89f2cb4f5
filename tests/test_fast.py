"""The fast path gives the engine's tokens (greedy, seeded, every weight layout, compiled) and its memory."""

from __future__ import annotations

import json
import re

import pytest
import torch
import torch.nn.functional as F

import inferlab as il
from inferlab import fast
from inferlab.fast import choice as fast_choice
from inferlab.fast import decoder as fast_decoder
from inferlab.fast import rows as fast_rows
from inferlab.fast.layouts import PRODUCTS, ROW_COUNTS, RowPlan, linear_onednn, linear_packed, onednn_packing, pack
from inferlab.measure import profiling

PROMPT = "To be, or not to be, that is the question"

pytestmark = pytest.mark.usefixtures("own_choice_cache")  # conftest.py: a choice cache of its own


@pytest.fixture(scope="module")
def decoder(model) -> fast.FastDecoder:
    return fast.FastDecoder(model, 96, weights="tied")


def test_tied_head_logits_are_bitwise_the_engines(model, decoder):
    ids = model.encode(PROMPT)
    ref, cache = il.prefill(model, [ids])
    got = decoder.prefill([ids])
    assert torch.equal(ref, got)
    token = int(ref.argmax())
    for _ in range(4):
        ref, cache = il.decode_step(model, token, cache)
        got = decoder.step(token)
        assert torch.equal(ref, got)
        token = int(ref.argmax())
    assert decoder.tokens == cache.tokens


def test_prompt_gelu_is_hugging_faces_on_tied_and_one_pass_elsewhere(model):
    y = torch.randn(8, 12) * 3
    assert torch.equal(fast.PromptScratch(8, y).gelu_(y.clone()), fast.gelu_new(y))  # bitwise, in place
    one_pass = fast.PromptScratch(8, y, exact=False).gelu_(y.clone())
    assert torch.equal(one_pass, torch.nn.functional.gelu(y, approximate="tanh"))
    assert torch.allclose(one_pass, fast.gelu_new(y), atol=1e-6)  # the same function, rounded differently
    ids = model.encode(PROMPT)
    ref, _ = il.prefill(model, [ids])
    got = fast.FastDecoder(model, 64, weights="transposed").prefill([ids])
    assert torch.allclose(ref, got, atol=1e-3) and int(ref.argmax()) == int(got.argmax())


@pytest.mark.parametrize("weights", fast.WEIGHTS)
def test_greedy_tokens_match_generate(model, weights):
    if weights == "packed" and not fast.onednn_packing():
        pytest.skip("no oneDNN weight packing in this PyTorch")
    ref = il.generate(model, PROMPT, max_new_tokens=16, stop_at_eos=False)
    got = fast.FastDecoder(model, 64, weights=weights).generate(PROMPT, max_new_tokens=16, stop_at_eos=False)
    assert got.generated_ids == ref.generated_ids
    assert got.text == ref.text
    assert got.latency.n_tokens == 16 and got.latency.tpot > 0


def test_seeded_sampling_matches_generate(model, decoder):
    settings = {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 7}
    ref = il.generate(model, PROMPT, max_new_tokens=12, stop_at_eos=False, **settings)
    got = decoder.generate(PROMPT, max_new_tokens=12, stop_at_eos=False, **settings)
    assert got.generated_ids == ref.generated_ids


def test_greedy_matches_hugging_face_generate(model, decoder):
    ref = il.reference_generate(model, PROMPT, 12, stop_at_eos=False)
    assert decoder.generate(PROMPT, max_new_tokens=12, stop_at_eos=False).generated_ids == ref


@pytest.mark.parametrize("weights", ["tied", "rows"])
def test_fixed_shape_step_used_by_compile_and_cuda_graphs_matches(model, weights):
    """The masked whole-cache step (what torch.compile and CUDA graphs run) agrees with the eager one.

    ``"rows"`` is the arithmetic of the compiled CPU step ((W * x).sum(-1), attention as sums), run here
    uncompiled: torch.compile is lazy, so calling ``_step_fixed`` directly runs it eagerly.
    """
    ids = model.encode(PROMPT)
    eager = fast.FastDecoder(model, 40, weights="tied")
    fixed = fast.FastDecoder(model, 40, weights=weights, compile=weights == "rows")
    assert fixed.weights == weights
    a, b = eager.prefill([ids]), fixed.prefill([ids])
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    for _ in range(3):
        token = a.argmax(-1, keepdim=True)
        a = eager.step(token)
        with torch.inference_mode():
            b = fixed._step_fixed(token, torch.tensor([fixed.tokens]))
        fixed.tokens += 1
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        assert int(a.argmax()) == int(b.argmax())


def test_rows_memory_is_the_cache_and_one_copy_of_each_block_matrix(model):
    """Worked by hand for the bundled model (8 layers, d_model 160, fp32) and 40 cache slots:
    K and V:  2 x 8 layers x 40 slots x 160 x 4 bytes                                  =   409,600
    matrices: (160x480 qkv + 160x160 out + 160x640 fc + 640x160 out) = 307,200 weights
              x 8 layers x 4 bytes (biases and the tied head are not copied)            = 9,830,400
    """
    assert (model.info.n_layer, model.info.d_model, model.info.dtype) == (8, 160, torch.float32)
    assert fast.FastDecoder(model, 40, weights="rows").extra_bytes == 10_240_000
    assert fast.FastDecoder(model, 40, weights="tied").extra_bytes == 409_600  # the cache alone


def test_batch_decodes_each_row_like_batch_one(model):
    ids = model.encode(PROMPT)
    one, two = fast.FastDecoder(model, 32, weights="tied"), fast.FastDecoder(model, 32, batch=2, weights="tied")
    a = one.prefill([ids])
    b = two.prefill([ids, ids])
    torch.testing.assert_close(b[0], a[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(two.step([5, 5])[1], one.step(5)[0], rtol=1e-5, atol=1e-5)


def test_clear_errors(model, decoder):
    with pytest.raises(ValueError, match="max_tokens"):
        fast.FastDecoder(model, 10**6)
    with pytest.raises(ValueError, match="weights"):
        fast.FastDecoder(model, 16, weights="sideways")
    with pytest.raises(ValueError, match="weights"):
        fast.FastDecoder(model, 16, weights="packed", compile=True)
    with pytest.raises(ValueError, match="cuda_graph"):
        fast.FastDecoder(model, 16, cuda_graph=True)
    with pytest.raises(ValueError, match="max_tokens"):
        fast.FastDecoder(model, 16).generate(PROMPT, max_new_tokens=20)
    small = fast.FastDecoder(model, len(model.encode(PROMPT)) + 1, weights="tied")
    small.prefill([model.encode(PROMPT)])
    small.step(1)
    with pytest.raises(ValueError, match="max_tokens"):
        small.step(1)
    assert "tied" in repr(decoder) and "eager" in repr(decoder)


def test_compiled_step_matches(model):
    """The compiled CPU step (weights "rows": products and attention as reductions) gives the engine's tokens."""
    ref = il.generate(model, PROMPT, max_new_tokens=8, stop_at_eos=False)
    dec = fast.FastDecoder(model, 32, weights="rows" if model.device.type == "cpu" else "tied", compile=True)
    got = dec.generate(PROMPT, max_new_tokens=8, stop_at_eos=False)
    assert got.generated_ids == ref.generated_ids
    seeded = {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 7}
    ref = il.generate(model, PROMPT, max_new_tokens=8, stop_at_eos=False, **seeded)
    assert dec.generate(PROMPT, max_new_tokens=8, stop_at_eos=False, **seeded).generated_ids == ref.generated_ids
    dec.prefill([model.encode(PROMPT)])
    prof = profiling.profile_step(lambda: dec.step(3), label="compiled", repeats=2, warmup=1)
    graphs = [calls for name, _, calls in prof.top_ops if profiling.op_group(name) == "compiled graph (fused)"]
    assert graphs == [1]  # the whole step is one call of one generated graph ...
    assert prof.groups["matmuls"] == 0  # ... with no eager mm/addmm/linear beside it


# ----------------------------------------------------------------------------- weights="auto": measured, remembered
def fake_timings(winner: str, seen: list):
    """A stand-in for ``time_candidates``: ``winner`` steps in 1 ms, every other candidate in 2 ms; runs nothing."""
    def timings(runs, device=None, rounds=None):
        seen.append(sorted(runs))
        return {k: 0.001 if k == winner else 0.002 for k in runs}
    return timings


CPU_CANDIDATES = ["rows+compile", "packed", "transposed", "tied"]  # compile=True on a CPU with oneDNN


@pytest.mark.parametrize("winner", CPU_CANDIDATES)
def test_auto_takes_whichever_candidate_measured_fastest(model, monkeypatch, tmp_path, winner):
    if model.device.type != "cpu" or not fast.onednn_packing():
        pytest.skip("the candidates listed here are a CPU's with oneDNN")
    seen = []
    monkeypatch.setattr(fast_choice, "_MEMORY", {})
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_choice, "time_candidates", fake_timings(winner, seen))
    dec = fast.FastDecoder(model, 24, compile=True)
    # every candidate was offered to the measurement (beside it: the packed candidate's rows, measured once)
    assert [s for s in seen if "tied" in s] == [sorted(CPU_CANDIDATES)]
    assert fast_choice.label(dec.weights, dec.compiled) == dec.choice.winner == winner
    assert dec.choice.source == "measured" and dec.choice.margin == 2.0
    assert f"chosen: {winner} won: 1.00 ms/step, 2.00x faster than" in repr(dec)
    if not dec.compiled:  # (the compiled winner is not run here: compiling is test_compiled_step_matches's job)
        ref = il.generate(model, PROMPT, max_new_tokens=4, stop_at_eos=False)
        assert dec.generate(PROMPT, max_new_tokens=4, stop_at_eos=False).generated_ids == ref.generated_ids


def test_the_choice_is_cached_in_a_file_and_reused(model, monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_choice, "_MEMORY", {})
    monkeypatch.setattr(fast_choice, "time_candidates", fake_timings("tied", []))
    assert fast.FastDecoder(model, 24).weights == "tied"
    stored = json.loads((tmp_path / "fast_choice.json").read_text())
    key = fast_choice.cache_key(model, batch=1, compile=False)
    assert stored[key]["weights"] == "tied" and not stored[key]["compiled"]

    def no_measuring(runs, device=None, rounds=None):
        raise AssertionError("a remembered choice must not be measured again")

    monkeypatch.setattr(fast_choice, "time_candidates", no_measuring)
    monkeypatch.setattr(fast_choice, "_MEMORY", {})  # a new process: only the file remembers
    again = fast.FastDecoder(model, 24)
    assert again.weights == "tied" and again.choice.source == "cached"
    # when it was measured travels with it (notebook 08 labels remembered times with it)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", again.choice.measured_at)
    assert again.choice.measured_at == stored[key]["measured_at"]


def test_a_corrupt_cache_file_is_ignored_and_rewritten(model, monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_choice, "_MEMORY", {})
    monkeypatch.setattr(fast_choice, "time_candidates", fake_timings("transposed", []))
    (tmp_path / "fast_choice.json").write_text("{not json")
    with pytest.warns(UserWarning) as said:  # the one rule of inferlab.kept: said once, then measured afresh
        dec = fast.FastDecoder(model, 24)
    assert [str(w.message) for w in said] == [
        f"FastDecoder(weights='auto'): ignored {tmp_path / 'fast_choice.json'} (JSONDecodeError: Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1)); this machine is measured again and the file "
        "rewritten. Delete the file if another program owns it."]
    assert dec.weights == "transposed" and dec.choice.source == "measured"
    stored = json.loads((tmp_path / "fast_choice.json").read_text())
    assert [v["weights"] for v in stored.values() if "weights" in v] == ["transposed"]  # (and the packed rows)


def test_a_candidate_that_cannot_run_is_left_out_with_its_reason():
    def no_compiler():
        raise RuntimeError("no C++ compiler found\n(details)")

    got = fast_choice.time_candidates({"tied": lambda: None, "rows+compile": no_compiler})
    assert got["rows+compile"] == "RuntimeError: no C++ compiler found"
    assert isinstance(got["tied"], float)


@pytest.mark.skipif(not onednn_packing(), reason="this PyTorch cannot pre-pack weights for oneDNN")
def test_rows_padded_to_any_count_give_the_unpadded_product():
    # "packed" pads a product's rows to the count it streams fastest at (extra rows dropped): no row may change
    torch.manual_seed(0)
    w, b = torch.randn(96, 64), torch.randn(96)  # [out, in]
    for n in (1, 2, 3):
        x = torch.randn(n, 64)
        plain_ = linear_onednn(x, pack(w, n), b, gelu=True)
        for rows in (n, *ROW_COUNTS):
            got = linear_packed(x, pack(w, rows), b, gelu=rows % 2 == 1, rows=rows)
            want = F.gelu(x @ w.T + b, approximate="tanh") if rows % 2 == 1 else x @ w.T + b
            assert got.shape == (n, 96)
            assert torch.allclose(got, want, atol=1e-4), (n, rows)
            if rows % 2 == 1:
                assert torch.allclose(got, plain_, rtol=1e-5, atol=1e-6), (n, rows)


def test_a_padded_plan_steps_the_unpadded_logits(model, monkeypatch):
    # every product padded to 8 rows (a plan no machine may choose, so every padded branch runs) against none
    if not onednn_packing():
        pytest.skip("this PyTorch cannot pre-pack weights for oneDNN")
    logits = {}
    for name, plan in {"unpadded": RowPlan.unpadded(1), "padded": RowPlan(dict.fromkeys(PRODUCTS, 8))}.items():
        monkeypatch.setattr(fast_decoder, "packed_rows", lambda model, batch, step=None, plan=plan: plan)
        dec = fast.FastDecoder(model, 24, weights="packed")
        assert dec.rows_plan == plan
        steps = [dec.prefill([[model.eos_id] * 5])]
        steps += [dec.step(t) for t in (11, 12, 13)]
        steps.append(dec.extend([[14, 15, 16]]))  # a verify's three rows, padded to eight
        logits[name] = steps
    assert "padded: qkv 1 -> 8" in repr(dec)
    for a, b in zip(logits["unpadded"], logits["padded"], strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def fake_row_times(times: dict[int, float]):
    def timings(runs, device=None, rounds=None):
        return {k: times[int(k)] for k in runs}
    return timings


@pytest.mark.parametrize("times, batch, want", [
    ({1: 1.0, 2: 0.9, 4: 0.5}, 1, 4),    # four rows stream fastest: pad to four
    ({1: 1.0, 2: 0.98, 4: 1.2}, 1, 1),   # 2% is noise, not a win: no padding
    ({1: 0.5, 2: 0.9, 4: 0.9}, 1, 1),    # the CPU where padding never helps
    ({2: 1.0, 4: 0.6}, 2, 4),            # batch 2 pads to four too
    ({3: 1.0, 4: 0.8}, 3, 4),
    ({4: 1.0}, 4, 4),                    # four rows and more: nothing to measure
])
def test_the_plan_pads_only_where_the_padded_product_was_measured_faster(model, monkeypatch, tmp_path,
                                                                        times, batch, want):
    monkeypatch.setattr(fast_choice, "time_candidates", fake_row_times(times))
    plan, measured = fast_rows.measure_rows(model, batch=batch)
    assert plan.rows == dict.fromkeys(PRODUCTS, want)
    assert measured["head"] == times and set(measured) == set(PRODUCTS)


def test_the_plan_is_remembered_per_machine_and_batch(model, monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_choice, "_MEMORY", {})
    monkeypatch.setattr(fast_choice, "time_candidates", fake_row_times({1: 1.0, 2: 0.5, 4: 0.8}))
    assert fast_rows.packed_rows(model, batch=1).rows == dict.fromkeys(PRODUCTS, 2)
    stored = json.loads((tmp_path / "fast_choice.json").read_text())
    key = fast_choice.cache_key(model, batch=1, compile=False, what="packed rows")
    assert stored[key]["rows"] == dict.fromkeys(PRODUCTS, 2) and stored[key]["step_s"]["fc"]["2"] == 0.5

    def no_measuring(runs, device=None, rounds=None):
        raise AssertionError("a remembered plan must not be measured again")

    monkeypatch.setattr(fast_choice, "time_candidates", no_measuring)
    monkeypatch.setattr(fast_choice, "_MEMORY", {})  # a new process: only the file remembers
    assert fast_rows.packed_rows(model, batch=1).rows == dict.fromkeys(PRODUCTS, 2)
    with pytest.raises(AssertionError, match="must not be measured"):
        fast_rows.packed_rows(model, batch=2)  # another batch is another measurement
    fast_choice.remember(key, {**stored[key], "rows": dict.fromkeys(PRODUCTS, 8)})  # timed among other counts
    with pytest.raises(AssertionError, match="must not be measured"):
        fast_rows.packed_rows(model, batch=1)


def test_a_timed_step_repeats_the_same_work(model):
    # the layout choice, the row plans and measure.step_floor time step_again: each call must decode at one position
    dec = fast.FastDecoder(model, 16, weights="tied")
    dec.prefill([[model.eos_id] * 5])
    first, second = dec.step_again(5), dec.step_again(5)
    assert dec.tokens == 6 and torch.equal(first, second)


def fake_step_times(times: dict[str, float]):
    def timings(runs, device=None, rounds=None):
        return {k: times[k] for k in runs}
    return timings


@pytest.mark.parametrize("times, batch, plan, want", [
    # the per-product plan lost to "every product at four" on whole steps: a batch-1 step runs batch 4's kernels
    ({"all 1": 1.0, "all 2": 0.99, "all 4": 0.8, "per product": 0.85}, 1, {"qkv": 2}, "all 4"),
    ({"all 1": 1.0, "all 2": 0.99, "all 4": 1.1, "per product": 0.98}, 1, {"qkv": 2}, "all 1"),  # 2%: noise
    ({"all 1": 1.0, "all 2": 0.99, "all 4": 0.9, "per product": 0.7}, 1, {"qkv": 2}, "per product"),
    ({"all 2": 1.0, "all 4": 0.9}, 2, {}, "all 4"),  # the product plan is "all 4": timed once
    ({"all 4": 1.0}, 4, {}, "all 4"),
])
def test_whole_steps_decide_between_the_product_plan_and_uniform_ones(monkeypatch, times, batch, plan, want):
    per_product = RowPlan({**dict.fromkeys(PRODUCTS, 4 if batch == 2 else batch), **plan})
    monkeypatch.setattr(fast_choice, "time_candidates", fake_step_times(times))
    got, measured = fast_rows.choose_by_steps(per_product, batch, step=lambda p: None)
    assert set(measured) == set(times) and set(fast_rows.step_candidates(per_product, batch)) == set(times)
    assert got == (per_product if want == "per product" else RowPlan.uniform(int(want.split()[1])))


@pytest.mark.skipif(not onednn_packing(), reason="this PyTorch cannot pre-pack weights for oneDNN")
def test_a_packed_decoder_takes_the_plan_its_own_whole_steps_chose(model, monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_choice, "_MEMORY", {})
    monkeypatch.setattr(fast_rows, "measure_rows", lambda model, batch: (RowPlan.unpadded(batch), {}))
    stepped = []

    def timings(runs, device=None, rounds=None):
        out = {}
        for name, run in runs.items():
            run()  # a real step of the decoder under that plan
            stepped.append(name)
            out[name] = 0.5 if name == "all 4" else 1.0
        return out

    monkeypatch.setattr(fast_choice, "time_candidates", timings)
    dec = fast.FastDecoder(model, 24, weights="packed")
    assert stepped == ["all 1", "all 2", "all 4"]
    assert dec.rows_plan == RowPlan.uniform(4) and dec.tokens == 0
    assert all(p.pad_rows == 4 for b in dec.blocks for p in (b.qkv, b.proj, b.fc, b.out))
    key = fast_choice.cache_key(model, batch=1, compile=False, what="packed rows by step")
    stored = json.loads((tmp_path / "fast_choice.json").read_text())[key]
    assert stored["rows"] == dict.fromkeys(PRODUCTS, 4) and stored["whole_step_s"]["all 4"] == 0.5
    want = il.generate(model, "ROMEO.", max_new_tokens=6).generated_ids
    assert dec.generate("ROMEO.", max_new_tokens=6).generated_ids == want


def test_weights_are_packed_for_at_least_two_rows_whatever_the_padding(monkeypatch):
    # packed for one row, the same weights ran a verify's or a server's several rows slower (fast.layouts.pack)
    from inferlab.fast import layouts

    seen = []
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", lambda w, rows: seen.append(rows) or w)
    for rows in (1, 2, 4, 8):
        layouts.pack(torch.ones(4, 4), rows)
    assert seen == [2, 2, 4, 8]
