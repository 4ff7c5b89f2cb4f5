"""What the heads do: scores of ideal heads, induction on trained tokens (and when it can be claimed), entropy,
the logit lens, and switching heads off."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import inferlab as il
from inferlab import _hf, heads, hooks
from inferlab import attention as A
from inferlab.logit_lens import logit_lens
from inferlab.narrate import n03
from inferlab.viz import heads as vh
from inferlab.viz import show_token
from inferlab.widgets import attention as wa


def test_scores_of_ideal_heads(causal_uniform):
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


def test_entropy(causal_uniform):
    T = 7
    one_key = torch.zeros(T, T)
    one_key[:, 0] = 1
    assert float(heads.attention_entropy(one_key)) == pytest.approx(0.0, abs=1e-6)
    assert float(heads.attention_entropy(causal_uniform(T))) == pytest.approx(heads.uniform_entropy(T), rel=1e-5)


def test_logit_lens_last_stage_is_the_model_output(model, pat):
    lens = logit_lens(model, pat.residual, pat.ids, k=3)
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
    assert len(vh.head_scores_figure(scores).data) == 3
    ent = vh.entropy_figure(heads.attention_entropy(pat.attention), heads.uniform_entropy(pat.shape[2]))
    assert len(ent.data) == model.info.n_head + 1 and "bits" in ent.layout.yaxis.title.text
    lens = logit_lens(model, pat.residual, pat.ids)
    fig = vh.logit_lens_figure(lens)
    assert list(fig.data[0].y) == lens.layer_names
    assert repr(show_token(lens.top_pieces[-1][0][0])) in fig.data[0].customdata[-1][0]


# ----------------------------------------------------------------------------- trained tokens, honest verdicts
def test_token_pool_is_the_most_frequent_tokens(model):
    pool = heads.token_pool(model, " z y z x z y", size=2)  # " z" three times, " y" twice, " x" once
    assert [model.decode([i]) for i in pool] == [" z", " y"]
    with pytest.raises(ValueError, match="text"):
        heads.token_pool(model, "aaaa" if len(model.encode("aaaa")) == 1 else "a")


def test_head_scores_on_trained_tokens(model, pat):
    pool = heads.token_pool(model, il.paths.heldout_text(), size=60)
    ids = heads.random_repeated_ids(model, 10, seed=2, pool=pool)
    assert ids[0] == model.eos_id and ids[1:11] == ids[11:] and set(ids[1:]) <= set(pool)
    scores = heads.head_scores(model, pat, repeat_len=10, seed=2, pool=pool)
    assert scores.repeated.ids == ids
    with pytest.raises(ValueError, match="repeat_len"):
        heads.random_repeated_ids(model, 61, pool=pool)  # more distinct tokens than the pool has


def scores_with(induction_at: tuple[int, int], previous_at: tuple[int, int] | None, value: float = 0.5):
    """Hand-made HeadScores [3 layers, 2 heads]: even-spread 0.1 everywhere, one strong head of each kind given."""
    prev, ind = torch.full((3, 2), 0.1), torch.full((3, 2), 0.1)
    ind[induction_at] = value
    if previous_at is not None:
        prev[previous_at] = 0.9
    return heads.HeadScores(prev, torch.full((3, 2), 0.1), ind, {"previous": 0.1, "first": 0.1, "induction": 0.1},
                            repeated=None, repeat_len=4)


def test_induction_check_needs_an_earlier_previous_token_head():
    assert scores_with((2, 1), (0, 1)).induction_check().is_induction
    assert scores_with((2, 1), (0, 1)).induction_check().previous_before == [(0, 1, pytest.approx(0.9))]
    assert not scores_with((0, 1), (0, 0)).induction_check().is_induction  # layer 0: nothing earlier
    assert not scores_with((2, 1), (2, 0)).induction_check().is_induction  # previous-token head not earlier
    assert not scores_with((2, 1), (0, 1), value=0.15).induction_check().is_induction  # 1.5 x: not above chance
    assert n03.head_title(scores_with((2, 1), (0, 1), value=0.15), "induction").startswith(
        "Highest induction score, not an induction head: layer 2, head 1")
    assert n03.head_title(scores_with((0, 1), None), "induction").startswith("Highest induction score, not an")
    assert n03.head_title(scores_with((2, 1), (0, 1)), "induction").startswith("Top induction head: layer 2, head 1")
    assert n03.head_title(scores_with((2, 1), None), "previous").startswith("Highest-scoring previous-token head, "
                                                                            "not above chance")
    assert "cannot be an induction head" in n03.induction_note(scores_with((0, 1), (0, 0)))
    assert "no induction head" in n03.induction_note(scores_with((2, 1), (0, 1), value=0.15))


# ----------------------------------------------------------------------------- ablation
def test_nothing_switched_off_matches_the_model_exactly(model, pat):
    with heads.heads_off(model, []):
        same = il.forward_full(model, [pat.ids])
    assert torch.equal(same, il.forward_full(model, [pat.ids]))
    ab = heads.ablate(model, pat.ids, [])
    assert ab.loss == ab.loss_off and torch.equal(ab.probs, ab.probs_off) and ab.kl_bits == 0


def test_a_head_switched_off_is_zero_in_the_block_by_hand(model, pat):
    layer, head, hd = 0, 2, model.info.head_dim
    with heads.heads_off(model, [(layer, head)]):
        off = A.record_patterns(model, pat.ids)
    assert hooks.active_hook_count(model) == 0
    hand = A.layer_by_hand(model, off.residual[layer], layer)
    merged = hand.merged.clone()
    merged[:, head * hd:(head + 1) * hd] = 0  # the head's mixed values, switched off
    w = _hf.block_tensors(model)[layer]
    mid = hand.x_in + merged @ w.attn_out.weight + w.attn_out.bias

    def ln(x, n):
        return F.layer_norm(x, (x.shape[-1],), n.weight, n.bias, n.eps)

    out = mid + w.activation(ln(mid, w.ln2) @ w.fc.weight + w.fc.bias) @ w.mlp_out.weight + w.mlp_out.bias
    assert torch.allclose(out, off.residual[layer + 1], atol=1e-5)
    assert not torch.allclose(hand.out, off.residual[layer + 1], atol=1e-3)  # the head did contribute


def test_ablation_changes_the_output_and_a_layer_is_all_its_heads(model, pat):
    one = heads.ablate(model, pat.ids, [(1, 0)])
    assert one.loss_off != one.loss and one.kl_bits > 0
    H = model.info.n_head
    layer = heads.ablate(model, pat.ids, [(1, None)])
    every = heads.ablate(model, pat.ids, [(1, h) for h in range(H)])
    assert torch.equal(layer.probs_off, every.probs_off) and "L1 off" in repr(layer)
    T = len(pat.ids)
    assert heads.ablate(model, pat.ids, [(1, 0)], start=T - 1).loss != one.loss  # scores only the last token


def test_hooks_removed_after_errors(model, pat):
    with pytest.raises(RuntimeError, match="inside"), heads.heads_off(model, [(0, 1), (2, None)]):
        assert hooks.active_hook_count(model) == 2
        raise RuntimeError("a failure inside the block")
    assert hooks.active_hook_count(model) == 0
    for bad in ([(model.info.n_layer, 0)], [(0, model.info.n_head)], [0], [(0, 1), ("x", 0)]):
        with pytest.raises((ValueError, TypeError), match=r"Fix"), heads.heads_off(model, bad):
            pass
        assert hooks.active_hook_count(model) == 0
    with pytest.raises(ValueError, match="start"):
        heads.ablate(model, pat.ids, [(0, 0)], start=0)


def test_ablation_figure_and_widget(model, pat):
    ab = heads.ablate(model, pat.ids, [(1, 2)])
    top = ab.probs.topk(8).indices.tolist()
    fig = vh.ablation_figure(ab, {i: model.decode([i]) for i in top})
    assert list(fig.data[0].y) == pytest.approx(ab.probs[top].tolist())
    assert list(fig.data[1].y) == pytest.approx(ab.probs_off[top].tolist()) and "layer 1 head 2" in fig.data[1].name
    runs = []

    def run(specs):
        runs.append(specs)
        return heads.ablate(model, pat.ids, specs)

    view = wa.ablation_view(run, lambda i: model.decode([i]), model.info.n_layer, model.info.n_head, start=(1, 2))
    assert runs == [[(1, 2)]] and "inferlab-ablation" in view._dom_classes
    view.head.value = wa.ALL
    assert runs[-1] == [(1, None)] and "every head" in view.figures["next"].data[1].name
    assert "loss" in view.result.value and repr(view).startswith("Ablation view: layer 1, every head off: loss")
    broken = wa.ablation_view(lambda specs: heads.ablate(model, [1], specs), str, 2, 2)
    assert "Could not run" in broken.result.value
    text = n03.ablation(ab, "the prompt")
    assert "layer 1, head 2" in text and f"from {ab.loss:.3f} to {ab.loss_off:.3f}" in text


def test_ablation_narration_tells_a_real_change_from_next_to_nothing():
    flat = torch.full((4,), 0.25)

    def made(loss_off: float, kl_bits: float) -> heads.Ablation:
        return heads.Ablation([(2, 1)], start=5, loss=2.0, loss_off=loss_off, probs=flat, probs_off=flat,
                              kl_bits=kl_bits)

    assert "real change" in n03.ablation(made(3.1, 0.5), "the second copy")  # +1.1 nats
    assert "real change" in n03.ablation(made(2.01, 0.2), "the second copy")  # the distribution moved
    quiet = n03.ablation(made(2.015, 0.01), "the second copy")
    assert "next to nothing" in quiet and "(+0.015)" in quiet and "layer 2, head 1" in quiet


def test_ablation_bars_show_bytes_and_stay_apart(model, pat):
    """03's ablation bars named byte tokens ``'·�'`` and ``'�'`` (newcomer review, round three, defect 8), and two
    tokens printed alike shared one bar. Given ``m.decode`` the bars show the bytes, each bar with its id."""
    ab = heads.ablate(model, pat.ids, [(1, 2)])
    byte_ids = model.encode("床前")  # tokens of part of a character
    ab.probs[byte_ids] = 0.2  # make them likely: among the top 8
    fig = vh.ablation_figure(ab, model.decode)
    names = list(fig.data[0].x)
    assert len(set(names)) == len(names) == 8 and not any("\ufffd" in n for n in names), names
    assert f"'⟨e5⟩⟨ba⟩' {byte_ids[0]}" in names
    view = wa.ablation_view(lambda specs: ab, model.decode, model.info.n_layer, model.info.n_head, start=(1, 2))
    assert list(view.figures["next"].data[0].x) == names
    old = wa.ablation_view(lambda specs: ab, lambda i: model.decode([i]), model.info.n_layer, model.info.n_head)
    assert len(set(old.figures["next"].data[0].x)) == 8  # id -> text still works; the ids keep the bars apart
