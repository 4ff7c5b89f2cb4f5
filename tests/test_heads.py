"""What the heads do: scores of ideal heads, induction on a repeated sequence, entropy, the logit lens."""

from __future__ import annotations

import pytest
import torch

import inferlab as il
from inferlab import attention as A
from inferlab import heads
from inferlab.viz import attention as va
from inferlab.viz import show_token


@pytest.fixture(scope="module")
def pat(short_trace) -> A.Patterns:
    return A.Patterns.from_trace(short_trace)


def causal_uniform(T: int) -> torch.Tensor:
    """Evenly spread causal attention ``[query_pos, key_pos]`` over T tokens."""
    return torch.ones(T, T).tril() / torch.arange(1, T + 1).view(-1, 1)


def test_scores_of_ideal_heads():
    T = 9
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(T - 1)] = 1
    first = torch.zeros(T, T)
    first[:, 0] = 1
    assert heads.previous_token_score(prev) == pytest.approx(1.0)
    assert heads.first_token_score(prev) == pytest.approx(1 / (T - 1))
    assert heads.first_token_score(first) == pytest.approx(1.0)
    n = 4  # BOS + R + R: 9 tokens
    ind = first.clone()
    for q in range(1 + n, 1 + 2 * n):
        ind[q] = 0
        ind[q, q - n + 1] = 1
    assert heads.induction_score(ind, n, offset=1) == pytest.approx(1.0)
    assert heads.induction_score(prev, n, offset=1) == pytest.approx(0.0)
    uni = causal_uniform(T)
    assert float(heads.previous_token_score(uni)) == pytest.approx(heads.uniform_baseline(torch.arange(1, T)), rel=1e-5)


def test_random_repeated_ids(model):
    ids = heads.random_repeated_ids(model, 12, seed=3)
    assert len(ids) == 25 and ids[0] == model.eos_id
    assert ids[1:13] == ids[13:] and len(set(ids[1:13])) == 12
    assert ids == heads.random_repeated_ids(model, 12, seed=3) != heads.random_repeated_ids(model, 12, seed=4)


def test_head_scores(model, pat):
    scores = heads.head_scores(model, pat, repeat_len=8)
    L, H = model.info.n_layer, model.info.n_head
    assert scores.previous.shape == scores.first.shape == scores.induction.shape == (L, H)
    layer, head, value = scores.top("induction")
    assert value == pytest.approx(float(scores.induction[layer, head]))
    assert float(scores.induction.max()) == pytest.approx(value)
    assert scores.repeated.shape == (L, H, 17, 17)
    with pytest.raises(ValueError, match="kind"):
        scores.top("punctuation")


def test_entropy():
    T = 7
    one_key = torch.zeros(T, T)
    one_key[:, 0] = 1
    assert float(heads.attention_entropy(one_key)) == pytest.approx(0.0, abs=1e-6)
    assert float(heads.attention_entropy(causal_uniform(T))) == pytest.approx(heads.uniform_entropy(T), rel=1e-5)


def test_logit_lens_last_stage_is_the_model_output(model, pat):
    lens = heads.logit_lens(model, pat.residual, pat.ids, k=3)
    L, T = model.info.n_layer, pat.shape[2]
    assert lens.top_ids.shape == (L + 1, T, 3) and lens.next_prob.shape == (L + 1, T - 1)
    full = il.forward_full(model, [pat.ids])[0]
    assert torch.allclose(lens.logits_last, full, atol=1e-4)
    assert torch.equal(lens.top_ids[-1, :, 0], full.argmax(-1))
    assert bool((lens.top_probs[..., :-1] >= lens.top_probs[..., 1:]).all())
    table = lens.table(T - 1)
    assert table.count("\n") == L + 2 and "block 0" in table


def test_score_entropy_lens_figures(model, pat):
    scores = heads.head_scores(model, pat, repeat_len=6)
    assert len(va.head_scores_figure(scores).data) == 3
    ent = va.entropy_figure(heads.attention_entropy(pat.attention), heads.uniform_entropy(pat.shape[2]))
    assert len(ent.data) == model.info.n_head + 1 and "bits" in ent.layout.yaxis.title.text
    lens = heads.logit_lens(model, pat.residual, pat.ids)
    fig = va.logit_lens_figure(lens)
    assert list(fig.data[0].y) == lens.layer_names
    assert repr(show_token(lens.top_pieces[-1][0][0])) in fig.data[0].customdata[-1][0]
