"""Speculative decoding (notebook 10): exact answers, a cache that rolls back, the accept rule's distribution,
prompt lookup's guesses, the cost model's formulas, and every refusal before any forward pass."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from conftest import ForwardCounter

import inferlab as il
from inferlab import speculative as sp
from inferlab.fast import FastDecoder
from inferlab.sampling import SamplingConfig
from inferlab.speculative import runners

PASSAGE = ("Friends, Romans, countrymen, lend me your ears;\nI come to bury Caesar, not to praise him.\n"
           "The evil that men do lives after them;\nThe good is oft interred with their bones.\n")
GROUNDED = PASSAGE + PASSAGE + "Friends, Romans, countrymen, lend me your ears;\nI come"
ZH = "床前明月光，疑是地上霜。举头望明月，低头思故乡。\n床前明月光，疑是地上霜。举头"
PLAIN = "ROMEO.\n"


@pytest.fixture(scope="module")
def draft(model):
    return sp.first_layers(model, 2)


# ----------------------------------------------------------------------------- prompt lookup
def test_lookup_takes_the_latest_earlier_match_and_falls_back_to_shorter_ngrams():
    assert sp.lookup([1, 2, 3, 9, 1, 2, 4, 5, 1, 2], k=2, ngram=2) == [4, 5]  # the latest "1 2", not the first
    assert sp.lookup([7, 3, 8, 8, 1, 3], k=3, ngram=3) == [8, 8, 1]  # no "8 1 3" or "1 3" before: "3" alone
    assert sp.lookup([1, 2, 3, 4], k=3, ngram=3) == []  # nothing repeats
    assert sp.lookup([5, 6, 5], k=4, ngram=1) == [6, 5]  # fewer than k left after the match
    assert sp.lookup([5], k=4, ngram=3) == []


# ----------------------------------------------------------------------------- exact (greedy)
@pytest.mark.parametrize("prompt, path", [(GROUNDED, "fast"), (ZH, "fast"), (PLAIN, "fast"), (GROUNDED, "engine")],
                         ids=["en-grounded", "zh-grounded", "plain", "en-grounded-engine"])
def test_greedy_lookup_equals_generate_token_for_token(model, prompt, path):
    ref = il.generate(model, prompt, 20)
    out = sp.generate(model, prompt, 20, path=path, k=4)
    assert out.generated_ids == ref.generated_ids and out.text == ref.text
    assert sum(r.emitted for r in out.rounds) + 1 == len(out.generated_ids)
    assert out.latency.n_tokens == len(ref.generated_ids)


@pytest.mark.parametrize("prompt", [GROUNDED, ZH], ids=["en", "zh"])
def test_greedy_model_draft_equals_generate(model, draft, prompt):
    ref = il.generate(model, prompt, 16)
    out = sp.generate(model, prompt, 16, draft=draft, k=3)
    assert out.generated_ids == ref.generated_ids
    for i, r in enumerate(out.rounds):  # k guesses a round, fewer only where the answer has less room left
        room = 16 - 1 - sum(x.emitted for x in out.rounds[:i])
        assert r.proposed == min(3, room - 1), (i, r)


def test_lookup_guesses_are_accepted_where_the_answer_repeats(model):
    out = sp.generate(model, "春风", 40, path="fast")  # the bundled model's answer repeats itself here
    assert out.tokens_per_round > 1.2, out  # guesses were accepted: fewer target forwards than tokens
    assert 0 < out.acceptance <= 1 and out.alpha >= out.acceptance
    none = sp.generate(model, "春风", 40, draft="none")
    assert none.generated_ids == out.generated_ids and none.tokens_per_round == 1.0


def test_stop_strings_and_stop_tokens_end_inside_a_round(model, draft):
    free = il.generate(model, GROUNDED, 30).generated_ids
    stop_text = model.decode(free[5:7])
    for d in ("lookup", draft):
        ref = il.generate(model, GROUNDED, 30, stop_strings=[stop_text])
        out = sp.generate(model, GROUNDED, 30, draft=d, stop_strings=[stop_text])
        assert (out.generated_ids, out.text, out.stop_reason) == (ref.generated_ids, ref.text, ref.stop_reason)
        assert ref.stop_reason.startswith("stop string")
        ref = il.generate(model, GROUNDED, 30, stop_token_ids=[free[9]])
        out = sp.generate(model, GROUNDED, 30, draft=d, stop_token_ids=[free[9]])
        assert (out.generated_ids, out.stop_reason) == (ref.generated_ids, "stop token")
        assert sum(r.emitted for r in out.rounds) + 1 == len(out.generated_ids)


def test_eos_ends_the_answer_as_generate_does(model):
    free = il.generate(model, GROUNDED, 12, stop_at_eos=False).generated_ids
    certain = free[4]

    class EosIs:  # the tokenizer, with another id as <|endoftext|> (as tests/test_engine.py does)
        def __init__(self, tok):
            self._tok, self.eos_token_id = tok, certain

        def __getattr__(self, name):
            return getattr(self._tok, name)

        def __call__(self, *a, **k):
            return self._tok(*a, **k)
    forced = dataclasses.replace(model, tokenizer=EosIs(model.tokenizer))
    out = sp.generate(forced, GROUNDED, 12)
    assert out.stop_reason == "stop token" and out.generated_ids == free[: free.index(certain) + 1]


# ----------------------------------------------------------------------------- the caches roll back
def test_kv_cache_crop_then_step_equals_a_fresh_prefill(model):
    ids = model.encode(PASSAGE)[:12]
    _, cache = il.prefill(model, [ids])
    cache.crop(7)
    after_crop, _ = il.decode_step(model, ids[7], cache)
    fresh, _ = il.prefill(model, [ids[:8]])
    assert cache.tokens == 8 and torch.allclose(after_crop, fresh, atol=1e-5)
    with pytest.raises(ValueError, match="tokens"):
        cache.crop(9)


def test_fast_decoder_extend_and_crop_match_single_steps(model):
    ids = model.encode(PASSAGE)[:12]
    dec = FastDecoder(model, 32, weights="tied")
    dec.prefill([ids[:5]])
    many = dec.extend([ids[5:9]])[0]
    one = FastDecoder(model, 32, weights="tied")
    one.prefill([ids[:5]])
    singles = torch.stack([one.step(t)[0] for t in ids[5:9]])
    assert torch.allclose(many, singles, atol=1e-4)
    dec.crop(6)
    again = dec.step(ids[6])[0]
    fresh = FastDecoder(model, 32, weights="tied")
    assert torch.allclose(again, fresh.prefill([ids[:7]])[0], atol=1e-4)


# ----------------------------------------------------------------------------- the accept rule's distribution
def _first_token_tv(rule, draws: int, seed: int = 0) -> float:
    """Total variation between the rule's output and the target p, for a draft q that disagrees with it."""
    g = torch.Generator().manual_seed(seed)
    p_logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 0.3])
    q = torch.tensor([0.05, 0.05, 0.5, 0.3, 0.05, 0.05])
    sampling = SamplingConfig(temperature=1.0)
    counts = torch.zeros(6)
    for _ in range(draws):
        guess = int(torch.multinomial(q, 1, generator=g))
        logits = torch.stack([p_logits, p_logits])
        accepted, token = rule(logits, [guess], [q], sampling, g)
        counts[guess if accepted else token] += 1
    return 0.5 * float((counts / draws - p_logits.softmax(-1)).abs().sum())


def _accept_everything(logits, guesses, qs, sampling, generator):
    return len(guesses), 0


def test_the_rejection_rule_samples_the_target_and_accepting_everything_does_not():
    assert _first_token_tv(sp.accept, 4000) <= 0.03
    assert _first_token_tv(_accept_everything, 4000) >= 0.1


def test_sampling_runs_with_both_drafts_and_a_seed_repeats(model, draft):
    for d in ("lookup", draft):
        a = sp.generate(model, GROUNDED, 16, draft=d, temperature=0.9, top_k=40, top_p=0.95, seed=3)
        b = sp.generate(model, GROUNDED, 16, draft=d, temperature=0.9, top_k=40, top_p=0.95, seed=3)
        assert a.generated_ids == b.generated_ids and len(a.generated_ids) == 16


# ----------------------------------------------------------------------------- cost
def test_expected_tokens_and_speedup_formulas():
    assert sp.expected_tokens_per_round(0.0, 4) == 1.0
    assert sp.expected_tokens_per_round(1.0, 4) == 5.0
    assert math.isclose(sp.expected_tokens_per_round(0.5, 2), 1.75)
    assert math.isclose(sp.predicted_speedup(0.5, 2, 0.25), 1.75 / 1.5)
    with pytest.raises(ValueError, match="alpha"):
        sp.expected_tokens_per_round(1.5, 4)


def test_verify_cost_times_each_k_with_its_floor(model):
    cost = sp.verify_cost(model, [1, 2, 4], context=16, repeats=1, warmup=0)
    assert cost.sweep.xs == (1, 2, 4) and cost.path == "fast" and len(cost.floor_s) == 3
    assert cost.ratios[0] == 1.0 and all(f > 0 for f in cost.floor_s)
    assert cost.predicted_ratios[0] == 1.0 and cost.predicted_ratios[-1] >= 1.0
    engine = sp.verify_cost(model, [1, 2], context=16, repeats=1, warmup=0, path="engine")
    assert engine.path == "engine"


# ----------------------------------------------------------------------------- refusals, before any work
@pytest.fixture
def no_work(model, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a decoder was built before the input was checked")
    monkeypatch.setattr(runners, "FastDecoder", refuse)
    with ForwardCounter(model) as count:
        yield
    assert count.n == 0


@pytest.mark.parametrize("kwargs, name", [
    ({"k": 0}, "k"), ({"k": 65}, "k"), ({"k": 2.5}, "k"), ({"ngram": 0}, "ngram"), ({"draft": "ngram"}, "draft"),
    ({"draft": 3}, "draft"), ({"temperature": -1}, "temperature"), ({"top_p": 2}, "top_p"),
    ({"stop_token_ids": [10 ** 6]}, "stop_token_ids"), ({"path": "gpu"}, "path"), ({"max_new_tokens": 0}, "max_new"),
])
def test_bad_settings_are_refused_by_name(model, no_work, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        sp.generate(model, GROUNDED, **{"max_new_tokens": 8, **kwargs})


def test_a_draft_of_another_vocabulary_or_dtype_is_refused(model, no_work):
    other_vocab = dataclasses.replace(model, info=dataclasses.replace(model.info, vocab_size=50000))
    with pytest.raises(ValueError, match=r"draft.*vocabulary"):
        sp.generate(model, GROUNDED, 8, draft=other_vocab)
    other_dtype = dataclasses.replace(model, info=dataclasses.replace(model.info, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"draft.*dtype"):
        sp.generate(model, GROUNDED, 8, draft=other_dtype)


def test_a_draft_on_another_device_is_refused(model, no_work, monkeypatch):
    class Elsewhere(type(model)):
        device = torch.device("meta")
    moved = Elsewhere(model._module, model.tokenizer, model.info)
    with pytest.raises(ValueError, match=r"draft.*device"):
        sp.generate(model, GROUNDED, 8, draft=moved)


def test_a_target_that_is_not_a_model_is_refused():
    with pytest.raises(TypeError, match="model must be a Model"):
        sp.generate("bundled", GROUNDED, 8)
    with pytest.raises(ValueError, match="n_layer"):
        sp.first_layers(il.load("bundled", verbose=False), 8)


def test_a_stop_inside_a_round_counts_only_the_tokens_it_emitted(model):
    for prompt in (GROUNDED, "春风", ZH):
        free = sp.generate(model, prompt, 40, stop_at_eos=False)
        pos = 1  # the first token comes from the prefill
        for r in free.rounds:
            token = free.generated_ids[pos]
            if r.emitted >= 2 and token not in free.generated_ids[:pos]:  # a stop at the round's first token
                break
            pos += r.emitted
        else:
            continue
        out = sp.generate(model, prompt, 40, stop_at_eos=False, stop_token_ids=[token])
        assert out.generated_ids == free.generated_ids[:pos + 1] and out.stop_reason == "stop token"
        assert out.rounds[-1].emitted == 1 < out.rounds[-1].accepted + 1
        assert sum(r.emitted for r in out.rounds) + 1 == len(out.generated_ids)
        return
    pytest.fail("no round emitted two tokens with a new first one: pick another prompt")


def test_the_predicted_knee_is_where_the_arithmetic_outgrows_the_read(model):
    """The roofline's knee compares each k's compute floor with that k's own byte floor (which grows a little with
    k: the new tokens' keys and values), not with the first k's."""
    from inferlab.speculative.cost import VerifyCost

    sweep = sp.verify_cost(model, [1, 2], context=8, repeats=1, warmup=0).sweep
    flat = VerifyCost(sweep, "fast", 8, (1.0, 1.01), (1.0, 1.01))
    assert flat.predicted_knee is None
    assert VerifyCost(sweep, "fast", 8, (1.0, 1.5), (1.0, 1.01)).predicted_knee == 2


def test_one_answer_share_counts_where_looking_back_finds_one_right_answer():
    from inferlab.speculative import bench as sb

    # 1 2 3 1 2 3: from position 3, the 3 has never been followed, then "1 -> 2" and "2 -> 3" point to one answer
    assert sb.one_answer_share([1, 2, 3, 1, 2, 3], 3, 1) == pytest.approx(2 / 3)
    # after 1 came 2 and then 3: looking back for one 1 finds two answers; for "5 1" it finds one
    assert sb.one_answer_share([1, 2, 1, 3, 1, 2], 3, 1) == 0.0
    assert sb.one_answer_share([5, 1, 2, 3, 1, 3, 5, 1, 2], 8, 2) == 1.0
    assert sb.one_answer_share([5, 1, 2, 3, 1, 3, 5, 1, 2], 8, 1) == 0.0
    for kwargs, name in (({"ngram": 0, "start": 2}, "ngram"), ({"ngram": 2, "start": 1}, "start"),
                         ({"ngram": 1, "start": 6}, "start")):
        with pytest.raises(ValueError, match=name):
            sb.one_answer_share([1, 2, 3, 1, 2, 3], **kwargs)


def test_in_text_one_token_points_back_to_one_answer_far_less_often_than_three(model):
    """What notebook 10 counts on the held-out passages: the current token alone (an induction head's look-up) finds
    one answer at 35-46% of the answers' tokens, the last three (prompt lookup's) at 95-100%."""
    from inferlab.speculative import bench as sb

    shares = sb.one_answer_shares(model, 3)
    assert sorted(shares) == ["en 1", "en 2", "en 3", "zh 1", "zh 2", "zh 3"]
    for name, share in shares.items():
        assert share[1] < 0.6 and share[3] > 0.9 and share[1] < share[2] < share[3], (name, share)
