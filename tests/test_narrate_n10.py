"""Notebook 10's narration follows its numbers: every branch, at its branch point, on synthetic results."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from inferlab.narrate import n10


def _cost(ratios, knee=4, first=0.025):
    ks = tuple(range(1, len(ratios) + 1))
    return NS(sweep=NS(xs=ks, medians=tuple(first * r for r in ratios)), ratios=tuple(ratios), predicted_knee=knee)


@pytest.mark.parametrize("fast, says, not_says", [
    (0.93, "even **faster** than one", "grew more than that"),
    (1.2, "take a few rows in about the time of one", "even **faster**"),
    (1.6, "grew more than that (1.60x)", "take a few rows"),
])
def test_verify_names_the_fast_paths_outcome(fast, says, not_says):
    text = n10.verify(_cost([1.0] * 7 + [fast]), _cost([1.0] * 7 + [fast]))
    assert says in text and not_says not in text


def test_verify_says_where_the_roofline_bends_and_where_the_engine_differs():
    text = n10.verify(_cost([1.0] * 8, knee=6), _cost([1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.1]))
    assert "up to about k = 6" in text and "switches to a slower kernel" in text
    text = n10.verify(_cost([1.0] * 8, knee=None), _cost([1.0] * 8))
    assert "flat over every k tried" in text and "slower kernel" not in text


def _round(proposed, accepted):
    return NS(proposed=proposed, accepted=accepted, emitted=accepted + 1)


def test_rounds_tell_copying_from_few_guesses():
    many = NS(generated_ids=[0] * 13, rounds=[_round(4, 4)] * 2 + [_round(4, 1)] * 2, tokens_per_round=3.0,
              acceptance=0.625, k=4)
    assert "confirms several tokens at once" in n10.rounds(many) and "2 rounds kept all 4" in n10.rounds(many)
    few = NS(generated_ids=[0] * 5, rounds=[_round(0, 0), _round(4, 0)] * 2, tokens_per_round=1.0, acceptance=0.0,
             k=4)
    assert "Few guesses held" in n10.rounds(few) and "2 proposed nothing" in n10.rounds(few)
    assert "no round ran" in n10.rounds(NS(generated_ids=[0], rounds=[]))


def _race(prompt, spec, plain=100.0, gen=50.0, tf=80.0, tpr=2.0, same=True):
    speeds = {"il.generate": gen, "plain": plain, "speculative": spec, "transformers": tf}
    return NS(prompt=prompt, tokens_per_round=tpr, same_tokens=dict.fromkeys(speeds, same),
              over=lambda a, b, s=speeds: s[a] / s[b])


@pytest.mark.parametrize("plain_spec, plain_tpr, says", [
    (170.0, 1.9, "repeat themselves"), (99.0, 1.0, "costs almost nothing"), (80.0, 1.0, "lookup cost time"),
])
def test_race_names_what_lookup_does_where_there_is_nothing_to_look_up(plain_spec, plain_tpr, says):
    text = n10.race([_race("en 1", 200.0)], [_race("plain en", plain_spec, tpr=plain_tpr)])
    assert "**4.00x**" in text and "**2.00x**" in text and says in text
    assert "token for token" in text
    assert "Some answers differ" in n10.race([_race("en 1", 200.0, same=False)], [_race("p", 170.0, tpr=1.9)])


def test_copying_says_whether_the_model_copies():
    assert "It copies:" in n10.copying({"en 1": 40, "en 2": 30, "zh 1": 2})
    assert "It copies little" in n10.copying({"en 1": 0, "en 2": 30, "zh 1": 2})


def _gain(name, alpha, c, predicted, measured):
    return NS(draft=name, alpha=alpha, c=c, k=4, expected_tokens_per_round=2.0, tokens_per_round=2.0,
              predicted_speedup=predicted, speedup=measured)


def test_drafts_say_which_pays_and_how_close_the_prediction_came():
    text = n10.drafts([_gain("lookup", 0.7, 0.0, 1.7, 1.65), _gain("small", 0.5, 0.6, 0.55, 0.53)])
    assert "it **pays** (alpha is well above c)" in text and "it **does not pay** (alpha is not above c)" in text
    assert "came within 4%" in text
    assert "missed the measurement by up to 31%" in n10.drafts([_gain("lookup", 0.7, 0.0, 2.1, 1.6)])


def test_exactness_reads_greedy_and_sampling():
    ex = NS(draws=(250, 4000), rule=(0.05, 0.008), accept_all=(0.9, 0.93))
    assert "**8 of 8**" in n10.exactness(8, 8, ex) and "hands the draft's mistakes back" in n10.exactness(8, 8, ex)
    assert "only 7 of 8" in n10.exactness(7, 8, ex)
    close = NS(draws=(4000,), rule=(0.02,), accept_all=(0.03,))
    assert "too close to tell apart" in n10.exactness(8, 8, close)


def test_server_says_when_the_batch_takes_the_gain_away_and_names_the_dip():
    text = n10.server(2.0, 0.8, 16, 4)
    assert "about one step" in text and "compute-bound" in text
    assert "one-row dip" in n10.server(3.3, 0.8, 16, 4, verify_1=0.8)
    assert "the gain held at batch 16" in n10.server(2.0, 2.1, 16, 4)


def test_transformers_compares_both_and_flags_a_difference():
    rows = [_race("en 1", 200.0)]
    assert "**2.50x**" in n10.transformers(rows, rows) and "Every answer matched" in n10.transformers(rows, rows)
    assert "Some answers differ" in n10.transformers(rows, [_race("en 1", 200.0, same=False)])


def test_one_answer_reads_its_medians_and_says_whether_the_model_copies():
    shares = {"en 1": {1: 0.40, 3: 0.95}, "en 2": {1: 0.50, 3: 0.97}, "en 3": {1: 0.44, 3: 0.99},
              "zh 1": {1: 0.30, 3: 0.90}, "zh 2": {1: 0.42, 3: 0.94}, "zh 3": {1: 0.35, 3: 0.96},
              "random": {1: 1.0, 3: 0.96}}
    text = n10.one_answer(shares, "random", {"en 1": 0, "zh 1": 30, "zh 2": 2})
    assert "**44%** of the English" in text and "**35%** of the Chinese" in text and "**100%**" in text
    assert "last 3 tokens" in text and "**97%** and **94%**" in text
    assert "This model does not" in text and "before 24 tokens" in text
    assert "This model does:" in n10.one_answer(shares, "random", {"en 1": 30, "zh 1": 30, "zh 2": 2})
