"""Sampling filters against Hugging Face's logits processors, the stages worked by hand, and edge cases."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

import inferlab as il
from inferlab.sampling import STAGE_NAMES, apply_top_k, apply_top_p, filter_stages


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
    work = filter_stages(x, il.SamplingConfig(temperature=0))
    assert work.final.tolist() == [0.0, 1.0, 0.0]


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


# Logits [2, 1, 0] worked by hand (e = 2.71828):
#   softmax at T=1: e^2 = 7.389, e^1 = 2.718, e^0 = 1; sum 11.107 -> p = 0.6652, 0.2447, 0.0900
#   entropy = 0.6652 ln(1/0.6652) + 0.2447 ln(1/0.2447) + 0.0900 ln(1/0.0900)
#           = 0.6652 * 0.4076 + 0.2447 * 1.4076 + 0.0900 * 2.4076 = 0.2711 + 0.3445 + 0.2167 = 0.8323 nats
#   top_k=2 removes id 2 (0.0900 of the mass); renormalized: 7.389 / 10.107 = 0.7311, 2.718 / 10.107 = 0.2689
#   entropy = 0.7311 * ln(1.3679) + 0.2689 * ln(3.7183) = 0.7311 * 0.3133 + 0.2689 * 1.3133 = 0.5822 nats
#   top_p=0.7 then: ascending cumulative 0.2689, 1.0; drop while <= 1 - 0.7 = 0.3 -> drops id 1 (0.2689 of
#   the mass); one token left, entropy 0
HAND = torch.tensor([2.0, 1.0, 0.0])


def test_stages_by_hand_top_k_then_top_p():
    work = filter_stages(HAND, il.SamplingConfig(top_k=2, top_p=0.7))
    assert [s.name for s in work.stages] == list(STAGE_NAMES) == ["model", "temperature", "top_k", "top_p"]
    assert work.probs["model"].tolist() == pytest.approx([0.6652, 0.2447, 0.0900], abs=1e-4)
    assert work.probs["top_k"].tolist() == pytest.approx([0.7311, 0.2689, 0.0], abs=1e-4)
    assert work.final.tolist() == [1.0, 0.0, 0.0]
    assert [s.kept for s in work.stages] == [3, 3, 2, 1]
    assert [s.removed_mass for s in work.stages] == pytest.approx([0.0, 0.0, 0.0900, 0.2689], abs=1e-4)
    assert [s.entropy for s in work.stages] == pytest.approx([0.8323, 0.8323, 0.5822, 0.0], abs=1e-4)
    assert work.stages[2].top_ids == (0, 1, 2) and work.stages[2].top_probs[:2] == pytest.approx((0.7311, 0.2689),
                                                                                                    abs=1e-4)
    assert "top_k:2" in repr(work) and "removed 0.090" in repr(work.stages[2])


def test_stages_by_hand_temperature_reshapes_without_removing():
    # T=0.5 doubles the logits: [4, 2, 0]; e^4 = 54.598, e^2 = 7.389, 1; sum 62.987 -> 0.8668, 0.1173, 0.0159
    work = filter_stages(HAND, il.SamplingConfig(temperature=0.5))
    assert work.probs["temperature"].tolist() == pytest.approx([0.8668, 0.1173, 0.0159], abs=1e-4)
    assert [s.kept for s in work.stages] == [3, 3, 3, 3] and work.stages[1].removed_mass == 0.0
    # entropy = 0.8668 * ln(1.1537) + 0.1173 * ln(8.525) + 0.0159 * ln(62.99) = 0.1239 + 0.2514 + 0.0658 = 0.4411
    assert work.stages[1].entropy == pytest.approx(0.4411, abs=1e-4)  # sharper than the model's 0.8323


def test_stages_by_hand_greedy_is_one_hot_after_the_model():
    work = filter_stages(HAND, il.GREEDY)
    assert [s.kept for s in work.stages] == [3, 1, 1, 1]
    assert work.stages[1].removed_mass == pytest.approx(1 - 0.6652, abs=1e-4)  # everything but the argmax
    assert work.stages[1].entropy == 0.0 and work.stages[2].removed_mass == 0.0


def test_top_k_bigger_than_vocab_keeps_everything():
    work = filter_stages(HAND, il.SamplingConfig(top_k=100))
    assert [s.kept for s in work.stages] == [3, 3, 3, 3]
    assert torch.equal(work.final, work.probs["model"])


@pytest.mark.parametrize("bad", [torch.zeros(2, 3), torch.tensor([]), torch.tensor([1.0, float("nan")]),
                                 torch.full((3,), float("-inf")), [2.0, 1.0]])
def test_filter_stages_refuses_bad_logits(bad):
    with pytest.raises(ValueError, match=r"logits.*Fix"):
        filter_stages(bad, il.GREEDY)


def test_filter_stages_needs_a_config():
    with pytest.raises(TypeError, match="SamplingConfig"):
        filter_stages(HAND, {"temperature": 0.5})


def test_sample_with_steps_reports_mass_and_counts():
    # p = 0.4, 0.3, 0.2, 0.1: top-k 3 removes 0.1; top-p 0.6 on 0.4/0.9, 0.3/0.9, 0.2/0.9 drops 0.2/0.9 = 0.2222
    x = torch.tensor([0.4, 0.3, 0.2, 0.1]).log()
    step = il.sample_with_steps(x, il.SamplingConfig(top_k=3, top_p=0.6, seed=0), il.SamplingConfig(seed=0).generator())
    assert [s.kept for s in step.stages] == [4, 4, 3, 2]
    assert step.stages[2].removed_mass == pytest.approx(0.1, abs=1e-6)
    assert step.stages[3].removed_mass == pytest.approx(0.2222, abs=1e-4)
    assert step.token_id in (0, 1)
    assert step.prob == pytest.approx(0.4 / 0.7 if step.token_id == 0 else 0.3 / 0.7, abs=1e-5)


def test_sample_with_steps_draws_what_sample_draws():
    x = torch.randn(300, generator=torch.Generator().manual_seed(1)) * 2
    cfg = il.SamplingConfig(temperature=0.9, top_k=50, top_p=0.95, seed=5)
    g1, g2 = cfg.generator(), cfg.generator()
    drawn = [il.sample_with_steps(x, cfg, g1).token_id for _ in range(25)]
    assert drawn == [int(il.sample(x, cfg, g2)) for _ in range(25)] and len(set(drawn)) > 1


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
