"""The fast path gives the engine's tokens (greedy, seeded, every weight layout, compiled) and its memory."""

from __future__ import annotations

import json
import re
import warnings

import pytest
import torch

import inferlab as il
from inferlab import fast
from inferlab.fast import choice as fast_choice
from inferlab.fast.layouts import PACKED_ROWS, linear_packed, onednn_packing
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
    def timings(runs, device=None):
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
    assert seen == [sorted(CPU_CANDIDATES)]  # every candidate was offered to the measurement
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

    def no_measuring(runs, device=None):
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
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dec = fast.FastDecoder(model, 24)
    assert dec.weights == "transposed" and dec.choice.source == "measured"
    stored = json.loads((tmp_path / "fast_choice.json").read_text())
    assert [v["weights"] for v in stored.values()] == ["transposed"]


def test_a_candidate_that_cannot_run_is_left_out_with_its_reason():
    def no_compiler():
        raise RuntimeError("no C++ compiler found\n(details)")

    got = fast_choice.time_candidates({"tied": lambda: None, "rows+compile": no_compiler})
    assert got["rows+compile"] == "RuntimeError: no C++ compiler found"
    assert isinstance(got["tied"], float)


@pytest.mark.skipif(not onednn_packing(), reason="this PyTorch cannot pre-pack weights for oneDNN")
def test_one_row_through_two_row_packed_weights_is_the_same_product():
    # "packed" serves one row with the two-row kernel (padded, extra row dropped): the row's result must not change
    torch.manual_seed(0)
    w, b = torch.randn(96, 64), torch.randn(96)  # [out, in]
    for rows in (1, 2, 3):
        x = torch.randn(rows, 64)
        got = linear_packed(x, torch.ops.mkldnn._reorder_linear_weight(w, max(rows, PACKED_ROWS)), b)
        assert got.shape == (rows, 96)
        assert torch.allclose(got, x @ w.T + b, atol=1e-4), rows
