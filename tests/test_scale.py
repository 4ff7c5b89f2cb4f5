"""The notebooks' test scale (``inferlab.scale``) and the model the notebooks time (``measure.timing_model``)."""

from __future__ import annotations

import pytest

import inferlab as il
from inferlab import measure, scale


def test_the_scale_comes_from_the_environment(monkeypatch):
    for raw, expected in (("", "full"), ("full", "full"), (" TEST ", "test"), ("test", "test")):
        monkeypatch.setenv(scale.ENV, raw)
        assert scale.current() == expected
        assert scale.is_test() == (expected == "test")
        assert scale.pick(full=3, test=1) == (1 if expected == "test" else 3)
    monkeypatch.delenv(scale.ENV)
    assert scale.current() == "full"


@pytest.mark.parametrize("raw", ["tests", "small", "1"])
def test_a_misspelt_scale_is_refused_with_the_fix(monkeypatch, raw):
    monkeypatch.setenv(scale.ENV, raw)
    with pytest.raises(ValueError) as err:
        scale.current()
    assert f"INFERLAB_SCALE={raw!r}" in str(err.value) and "'full' or 'test'" in str(err.value)
    assert "Fix: unset INFERLAB_SCALE" in str(err.value)


def test_the_suite_runs_at_the_test_scale():
    # tests/run.sh and conftest.py set it, so every notebook kernel the suite starts runs the small sizes
    assert scale.is_test()


def test_timing_model_is_gpt2s_shape_cut_at_the_test_scale(model, monkeypatch):
    g = measure.timing_model(model)
    assert g.info.source == "random-weights" and (g.info.n_layer, g.info.d_model) == (scale.TEST_BLOCKS, 768)
    assert g.info.dtype == model.info.dtype and g.info.device == model.info.device
    monkeypatch.setattr(measure.latency, "FULL_SIZE", model.info.n_params)  # a "big" loaded model is timed itself
    assert measure.timing_model(model) is model
    assert measure.timing_model(model, always_shape=True).info.n_layer == scale.TEST_BLOCKS


def test_load_variant_keeps_the_depth_of_a_cut_shape():
    g = il.load("random:gpt2", verbose=False, n_layer=1)
    half, why = measure.load_variant(g, dtype="bfloat16")
    assert half is not None, why
    assert half.info.n_layer == 1 and half.info.dtype == il.checkpoints.resolve_dtype("bfloat16", "cpu")


def test_full_run_is_only_an_explicit_one(monkeypatch):
    for value, expected in (("1", True), (" 1 ", True), ("0", False), ("yes", False), ("", False)):
        monkeypatch.setenv(scale.FULL_RUN_ENV, value)
        assert scale.full_run() is expected, value
    monkeypatch.delenv(scale.FULL_RUN_ENV)
    assert scale.full_run() is False
