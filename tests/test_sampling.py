"""Sampling filters against Hugging Face's logits processors, and their edge cases."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

import inferlab as il
from inferlab.sampling import apply_top_k, apply_top_p, explain


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("t,k,p", [(0.7, 10, 1.0), (1.0, 0, 0.9), (1.5, 50, 0.5), (0.3, 5, 0.99), (1.0, 3, 0.3)])
def test_filters_equal_hf_processors(seed, t, k, p):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 1000, generator=g) * 3
    ours = il.filter_logits(logits, il.SamplingConfig(temperature=t, top_k=k, top_p=p))
    theirs = TemperatureLogitsWarper(t)(None, logits.clone())
    if k:
        theirs = TopKLogitsWarper(k)(None, theirs)
    if p < 1:
        theirs = TopPLogitsWarper(p)(None, theirs)
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    assert torch.allclose(ours[~torch.isinf(ours)], theirs[~torch.isinf(theirs)])


def test_top_k_keeps_ties():
    x = torch.tensor([3.0, 2.0, 2.0, 1.0])
    assert torch.isfinite(apply_top_k(x, 2)).tolist() == [True, True, True, False]


def test_top_p_keeps_the_token_that_crosses():
    x = torch.tensor([0.5, 0.3, 0.2]).log()
    assert torch.isfinite(apply_top_p(x, 0.6)).tolist() == [True, True, False]
    assert torch.isfinite(apply_top_p(x, 0.5)).tolist() == [True, False, False]
    assert torch.isfinite(apply_top_p(x, 0.01)).sum() == 1  # always at least one


def test_temperature_zero_is_greedy_and_ignores_generator():
    x = torch.tensor([0.0, 5.0, 1.0])
    assert int(il.sample(x, il.SamplingConfig(temperature=0))) == 1
    stages = explain(x, il.SamplingConfig(temperature=0))
    assert stages["top_p"].tolist() == [0.0, 1.0, 0.0]


def test_tiny_temperature_tends_to_greedy_without_nan():
    x = torch.tensor([10.0, 80.0, 79.0])
    for t in (1e-3, 1e-20, 1e-45):
        probs = il.filter_logits(x, il.SamplingConfig(temperature=t)).softmax(-1)
        assert not torch.isnan(probs).any() and int(il.sample(x, il.SamplingConfig(temperature=t, seed=0),
                                                               il.SamplingConfig(seed=0).generator())) == 1


def test_seeded_sampling_is_reproducible():
    x = torch.randn(500)
    cfg = il.SamplingConfig(temperature=1.0, seed=42)
    a = [int(il.sample(x, cfg, g)) for g in [cfg.generator()] for _ in range(20)]
    b = [int(il.sample(x, cfg, g)) for g in [cfg.generator()] for _ in range(20)]
    assert a == b and len(set(a)) > 1


def test_sample_with_steps_reports_mass_and_counts():
    x = torch.tensor([0.4, 0.3, 0.2, 0.1]).log()
    step = il.sample_with_steps(x, il.SamplingConfig(top_k=3, top_p=0.6, seed=0), il.SamplingConfig(seed=0).generator())
    names = [s.name for s in step.stages]
    assert names == ["model", "temperature", "top_k", "top_p"]
    kept = [s.kept for s in step.stages]
    assert kept == [4, 4, 3, 2]
    assert step.stages[2].removed_mass == pytest.approx(0.1, abs=1e-6)
    assert step.stages[3].removed_mass == pytest.approx(0.2 / 0.9, abs=1e-6)
    assert step.token_id in (0, 1)


@pytest.mark.parametrize("kwargs,match", [
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": float("inf")}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"seed": -3}, "seed"),
])
def test_bad_settings_name_parameter_range_and_fix(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        il.SamplingConfig(**kwargs)
    assert "Fix:" in str(err.value) and "expected" in str(err.value)


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match="top_k"):
        il.SamplingConfig(top_k=2.5)
    with pytest.raises(TypeError, match="temperature"):
        il.SamplingConfig(temperature="hot")
