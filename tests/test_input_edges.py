"""Input edges of the sampling functions and the shared validators (issue 30, items 10 and 11).

Each case is a clear error that names the parameter, the value, what is allowed and the fix, raised before
any work; or, for numpy numbers, the same answer as Python's own numbers.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch
from conftest import ForwardCounter

import inferlab as il
from inferlab.errors import check_number
from inferlab.sampling import filter_stages
from inferlab.widgets.sampling import playground
from inferlab.widgets.selfcheck import QUESTIONS_DIR, load_questions

ROW = torch.tensor([2.0, 1.0, 0.5, -1.0])


# --- temperatures outside float32's range ----------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [1e-300, 1e-46, 5e-324, 3.5e38, 1e300])
def test_a_temperature_float32_cannot_hold_is_refused_before_any_forward(model, temperature):
    with ForwardCounter(model) as count, pytest.raises(ValueError) as err:
        il.generate(model, "ROMEO.", 3, temperature=temperature)
    text = str(err.value)
    assert text.startswith(f"temperature={temperature!r} is not allowed: expected temperature = 0 (greedy) or "
                           "1.4e-45 <= temperature <= 3.4e+38. Fix: "), text
    assert count.n == 0


@pytest.mark.parametrize("temperature", [1e-45, 1e-30, 0.004, 3.4e38])
def test_the_extremes_inside_float32_sample_without_nan(temperature):
    config = il.SamplingConfig(temperature=temperature, seed=0)
    logits = torch.tensor([10.0, 80.0, 79.0, float("-inf")])
    probs = il.filter_logits(logits, config).softmax(-1)
    assert not torch.isnan(probs).any() and math.isclose(float(probs.sum()), 1.0, rel_tol=1e-5)
    work = filter_stages(logits, config)
    assert all(not torch.isnan(p).any() for p in work.probs.values())
    assert 0 <= int(il.sample(logits, config, config.generator())) <= 2


@pytest.mark.parametrize("typed", [1e-300, 5e-324, 1e39, 1e-45, 3.4e38, -0.0])
def test_the_playground_never_shows_nan(typed):
    box = playground(torch.tensor([3.0, 1.0, 0.5, -2.0]), lambda i: f"t{i}")
    before = box.state["work"]
    box.controls["temperature"].value = typed
    work = box.state["work"]
    assert all(not torch.isnan(p).any() for p in work.probs.values())
    if typed in (1e-300, 5e-324, 1e39):  # refused: the message says why, the last good view stays
        assert work is before and "temperature=" in box.errors.value and "3.4e+38" in box.errors.value
    else:
        assert box.errors.value == "" and work.config.temperature == typed


# --- il.sample / il.filter_logits / il.filter_stages ----------------------------------------------------------

BAD_LOGITS = [
    ("empty", torch.tensor([]), "logits=(0,)"),
    ("no vocab axis", torch.tensor(3.0), "logits=()"),
    ("3-D", torch.zeros(1, 2, 3), "logits=(1, 2, 3)"),
    ("a NaN", torch.tensor([1.0, float("nan"), 0.0]), "logits='<NaN>'"),
    ("+inf", torch.tensor([1.0, float("inf")]), "logits='<+inf>'"),
    ("all -inf", torch.full((4,), float("-inf")), "logits='<a row where every score is -inf>'"),
    ("one row all -inf", torch.tensor([[1.0, 2.0], [float("-inf")] * 2]), "logits='<a row where every score is -inf>'"),
    ("booleans", torch.tensor([True, False]), "logits='torch.bool'"),
    ("a list", [2.0, 1.0], "logits='list'"),
    ("a numpy array", np.array([2.0, 1.0]), "logits='ndarray'"),
]


@pytest.mark.parametrize(("logits", "says"), [case[1:] for case in BAD_LOGITS], ids=[c[0] for c in BAD_LOGITS])
@pytest.mark.parametrize("call", ["sample", "sample_greedy", "filter_logits"])
def test_bad_logits_are_clear_errors(call, logits, says):
    run = {"sample": lambda: il.sample(logits, il.SamplingConfig(temperature=0.8, top_k=2)),
           "sample_greedy": lambda: il.sample(logits),
           "filter_logits": lambda: il.filter_logits(logits, il.SamplingConfig(top_p=0.9))}[call]
    with pytest.raises(ValueError) as err:
        run()
    assert str(err.value).startswith(says) and "expected" in str(err.value) and "Fix:" in str(err.value), err.value


@pytest.mark.parametrize("config", [0.7, None, {"temperature": 0.7}, "greedy"])
def test_a_config_that_is_not_a_sampling_config_is_a_clear_type_error(config):
    for run in (lambda: il.sample(ROW, config), lambda: il.filter_logits(ROW, config),
                lambda: filter_stages(ROW, config)):
        with pytest.raises(TypeError, match=r"^config must be a SamplingConfig, got .*Fix: pass il.SamplingConfig\("):
            run()


def test_a_generator_that_is_not_one_is_a_clear_type_error():
    with pytest.raises(TypeError, match=r"^generator must be a torch.Generator or None, got int\. Fix: "):
        il.sample(ROW, il.SamplingConfig(temperature=1.0), 7)


def test_filter_stages_checks_top_n():
    for top_n, error in ((0, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="top_n"):
            filter_stages(ROW, il.GREEDY, top_n=top_n)


def test_good_logits_still_sample_as_before():
    assert int(il.sample(ROW)) == 0
    assert il.sample(torch.tensor([[0.0, 1.0], [3.0, float("-inf")]])).tolist() == [1, 0]
    assert int(il.sample(torch.tensor([1, 5, 2]))) == 1  # integer scores are fine
    kept = il.filter_logits(ROW, il.SamplingConfig(top_k=2))
    assert torch.isinf(kept).tolist() == [False, False, True, True]


# --- numpy numbers count as numbers ----------------------------------------------------------------------------

def test_numpy_integers_and_floats_pass_the_shared_validator():
    check_number("k", np.int64(3), low=1, integer=True)
    check_number("k", np.uint8(3), low=1, integer=True)
    check_number("t", np.float32(0.5), low=0.0)
    check_number("t", np.int32(2), low=0.0)
    with pytest.raises(TypeError, match=r"k must be an integer, got float32"):
        check_number("k", np.float32(3.0), integer=True)
    with pytest.raises(TypeError, match="k must be an integer"):
        check_number("k", np.bool_(True), integer=True)
    with pytest.raises(ValueError, match=r"k=np.int64\(0\) is not allowed|k=0 is not allowed"):
        check_number("k", np.int64(0), low=1, integer=True)
    with pytest.raises(ValueError, match=r"t=.*nan"):
        check_number("t", np.float32("nan"))


def test_numpy_settings_give_the_same_answer_as_python_numbers(model):
    plain = il.generate(model, "ROMEO.", 4, temperature=0.8, top_k=20, top_p=0.9, seed=3, stop_at_eos=False)
    numpy = il.generate(model, "ROMEO.", np.int64(4), temperature=np.float64(0.8), top_k=np.int32(20),
                        top_p=np.float64(0.9), seed=np.uint64(3), stop_at_eos=False)
    assert numpy.generated_ids == plain.generated_ids and len(plain.generated_ids) == 4
    assert numpy.config == plain.config and repr(numpy.config) == repr(plain.config)
    assert json.loads(numpy.to_json())["config"] == json.loads(plain.to_json())["config"]  # saved as plain JSON
    config = il.SamplingConfig(temperature=np.float32(0.5), top_k=np.int64(5), top_p=np.float32(0.75),
                               seed=np.int64(1))
    assert [type(v) for v in (config.temperature, config.top_k, config.top_p, config.seed)] == [float, int, float, int]
    assert repr(config) == "SamplingConfig(temperature=0.5, top_k=5, top_p=0.75, seed=1)"


# --- self_check reads only the course's own question files -----------------------------------------------------

def test_self_check_never_reads_a_file_outside_its_folder(tmp_path):
    outside = tmp_path / "x.json"  # a well-formed self-check file anywhere else on the disk
    outside.write_text((QUESTIONS_DIR / "00.json").read_text(encoding="utf-8"), encoding="utf-8")
    sneaky = os.path.relpath(outside.with_suffix(""), QUESTIONS_DIR)  # "../../../tmp/.../x"
    for name in (sneaky, str(outside.with_suffix("")), "../00", "zh/00", "00.json", "", "..", None, 4.5):
        with pytest.raises(ValueError) as err:
            load_questions(name)
        assert str(err.value).startswith(f"notebook={name!r} is not allowed: expected one of ['00', "), err.value
        assert "Fix: pass the notebook's two-digit number, e.g. '04'" in str(err.value)
    assert load_questions(4) == load_questions("04") == load_questions(np.int64(4))


def test_a_malformed_file_in_a_chosen_folder_is_a_clear_error(tmp_path):
    (tmp_path / "01.json").write_text(json.dumps({"questions": [{"no": "question"}]}), encoding="utf-8")
    (tmp_path / "02.json").write_text("{not json", encoding="utf-8")
    for name in ("01", "02"):
        with pytest.raises(ValueError, match=rf"{name}\.json is not a self-check file \(.*\)\. Fix: give it the "
                                             r"structure of .*00\.json"):
            load_questions(name, tmp_path)


@pytest.mark.parametrize(("kwargs", "error"), [({"temperature": 10**400}, ValueError), ({"top_p": 10**400}, ValueError),
                                               ({"seed": 10**400}, ValueError), ({"top_p": -(10**400)}, ValueError)])
def test_integers_beyond_any_float_are_refused_clearly(kwargs, error):
    name = next(iter(kwargs))
    with pytest.raises(error, match=rf"^{name}=-?1000.* is not allowed: expected .*Fix: "):
        il.SamplingConfig(**kwargs)
    assert il.SamplingConfig(top_k=10**400).top_k == 10**400  # a top-k above the vocabulary is simply off


# ----------------------------------------------------------------------------- API edges (issue 30, item 11)
@pytest.mark.parametrize("call", [lambda m: il.generate(m, "ROMEO.", 2), lambda m: il.stream(m, "ROMEO.", 2),
                                  lambda m: il.prefill(m, [15496]), lambda m: il.reference_generate(m, "ROMEO.", 2),
                                  lambda m: il.fast.FastDecoder(m, 16)])
@pytest.mark.parametrize("not_a_model", ["bundled", None])
def test_a_name_or_none_instead_of_a_model(call, not_a_model):
    with pytest.raises(TypeError, match=r"model must be a Model from il.load\(\).*Fix: m = il.load"):
        call(not_a_model)


def test_decode_refuses_ids_outside_the_vocabulary(model):
    assert model.decode([np.int64(15496), 11]) == "Hello,"
    assert model.decode(torch.tensor([15496, 11])) == "Hello,"
    for ids in ([50257], [-1], [1.5], [True]):
        with pytest.raises(ValueError, match=r"whole-number token ids in \[0, 50257\)"):
            model.decode(ids)
    with pytest.raises(TypeError, match="list of token ids"):
        model.decode(15496)


def test_returned_logits_can_be_edited_in_place(model):
    logits, cache = il.prefill(model, [model.encode("ROMEO.")])
    logits[0, int(logits[0].argmax())] = float("-inf")  # the obvious exercise: rule the favourite out
    nxt, _ = il.decode_step(model, int(logits[0].argmax()), cache)
    nxt[0, 0] = 0.0
    assert torch.isfinite(nxt).all() and not nxt.is_inference()


def test_a_model_left_in_training_mode_is_refused(model):
    module = model.transformers_module()
    module.train()
    try:
        with pytest.raises(ValueError, match=r"training mode.*transformers_module\(\).eval\(\)"):
            il.generate(model, "ROMEO.", 2)
    finally:
        module.eval()
    assert len(il.generate(model, "ROMEO.", 2).generated_ids) >= 1


def test_fast_decoder_edges(model):
    with pytest.raises(ValueError, match="max_tokens=0"):
        il.fast.FastDecoder(model, 0, weights="tied")
    fast = il.fast.FastDecoder(model, 16, weights="tied")
    fast.prefill([model.encode("ROMEO.")])
    with pytest.raises(ValueError, match=r"token ids in \[0, 50257\)"):
        fast.step(50257)
    with pytest.raises(TypeError, match="integer token ids"):
        fast.step(198.7)
    assert fast.step(np.int64(198)).shape == (1, model.info.vocab_size)


def test_trace_attention_checks_layer_and_head(model):
    trace = il.generate(model, "ROMEO.", 2, record="attention")
    n_layer, n_head = model.info.n_layer, model.info.n_head
    assert trace.attention(n_layer - 1, n_head - 1).dim() == 2
    for layer, head in ((99, 0), (-1, 0), (0, n_head), (0, -1)):
        with pytest.raises(ValueError, match="pick a"):
            trace.attention(layer, head)
    with pytest.raises(TypeError, match="layer"):
        trace.attention("0", 0)
    with pytest.raises(ValueError, match="pick a layer"):
        trace.decode_rows(99, 0)
