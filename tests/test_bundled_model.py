"""The bundled model writes both languages: English after English, Chinese characters after Chinese.

Quality bounds, not exact text: the card (data/models/tiny-gpt2-bilingual/README.md) has the full held-out
losses; here a fixed excerpt of a held-out play must stay close to them, so a retrain that loses its English
fails. Streams of Chinese never show U+FFFD (a character cut between tokens is held back).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import inferlab as il

EXCERPT = Path(__file__).resolve().parents[1] / "data" / "heldout_excerpt.txt"  # Julius Caesar: never trained on
HAN = re.compile(r"[\u4e00-\u9fff]")
ZH_PROMPTS = ("床前明月光，", "春眠不觉晓，", "静夜思\n李白\n床前明月光，疑是地上霜。")  # what the notebooks ask


def common(ch: str) -> bool:
    """Whether a Chinese character is a common one: in GB 2312's first level (the 3,755 most used characters)."""
    try:
        first = ch.encode("gb2312")[0]
    except UnicodeEncodeError:
        return False
    return 0xB0 <= first <= 0xD7


@pytest.fixture(scope="module")
def model():
    return il.load("bundled")


def test_english_held_out_excerpt_stays_near_the_card(model):
    ids = model.encode(EXCERPT.read_text(encoding="utf-8"))[:512]
    logits = il.forward_full(model, ids)[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1].float(), torch.tensor(ids[1:])).item()
    # 4.395 nats/token with the stored weights (the fifth run 4.43, the fourth 4.38, the third 4.46; the
    # Shakespeare-only model had 4.42 here). The two held-out plays: 4.41, the limit 4.45.
    assert loss < 4.45, f"English held-out excerpt: {loss:.3f} nats/token"


def test_chinese_prompt_continues_in_chinese_and_english_in_english(model):
    zh = il.generate(model, "床前明月光，", max_new_tokens=16, temperature=0).text
    en = il.generate(model, "To be, or not to be", max_new_tokens=16, temperature=0).text
    assert len(HAN.findall(zh)) >= 2 and not re.search(r"[A-Za-z]", zh), repr(zh)
    assert len(re.findall(r"[A-Za-z]", en)) >= 10 and not HAN.search(en), repr(en)


@pytest.mark.parametrize("seed", range(4))
def test_a_chinese_stream_never_shows_a_replacement_character(model, seed):
    events = list(il.stream(model, "床前明月光，", max_new_tokens=24, seed=seed, stop_at_eos=False))
    shown = [e.text for e in events]
    assert not any("\ufffd" in t for t in shown), shown
    assert HAN.search("".join(shown)), shown


def test_thinking_split_of_a_chinese_answer_shows_whole_characters(model):
    from inferlab.measure.thinking import split_thinking

    trace = il.generate(model, "床前明月光，", max_new_tokens=12, seed=1, stop_at_eos=False)
    assert any(p.startswith("⟨") for p in trace.generated_pieces)  # tokens alone: byte pieces, shown as hex
    for budget in range(1, 11):  # wherever the cut falls, each side shows only whole characters
        hidden, visible, _ = split_thinking(trace, budget)
        assert "\ufffd" not in hidden + visible and hidden + visible == trace.text


# --------------------------------------------------------------------- notebook 03's heads, on the bundled model
PROMPT_03 = "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun."


@pytest.fixture(scope="module")
def pool(model):
    from inferlab.paths import heldout_text

    return il.heads.token_pool(model, heldout_text(), 200)  # 03's pool: tokens the model has read


def scores_03(model, pool, seed=0):
    trace = il.generate(model, PROMPT_03, max_new_tokens=6, record=("embeddings", "attention", "residual"))
    return il.heads.head_scores(model, il.attention.Patterns.from_trace(trace), repeat_len=20, pool=pool, seed=seed)


def test_03_finds_a_previous_token_head_and_an_induction_head_it_feeds(model, pool):
    s = scores_03(model, pool)
    for kind in ("previous", "induction"):
        layer, head, score = s.top(kind)
        assert score >= 3 * s.baseline[kind], f"{kind}: L{layer}H{head} {score:.3f} < 3 x chance {s.baseline[kind]:.3f}"
    check = s.induction_check()
    assert check.is_induction, check  # above chance, not in layer 0, a previous-token head before it


def copy_losses(model, pool, seed: int):
    """03's measure on seed ``seed``: the first copy's loss (tokens 2..R: random, nothing to copy) and the ablation of
    the top induction head on the second copy (``.loss``: the second copy, ``.loss_off``: with the head off)."""
    s = scores_03(model, pool, seed)
    ids, R = s.repeated.ids, s.repeat_len
    logits = il.forward_full(model, ids)[0].float()
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
    return float(nll[1:R].mean()), il.heads.ablate(model, ids, [s.top("induction")[:2]], start=R + 2)


@pytest.mark.parametrize("seed", range(3))
def test_the_second_copy_is_copied_and_switching_the_induction_head_off_costs_over_a_nat(model, pool, seed):
    first, ab = copy_losses(model, pool, seed)
    # stored weights, seeds 0-2: first copy 11.0 / 12.6 / 9.2, second 1.9 / 6.7 / 2.2, head off 10.8 / 13.0 / 8.6
    # nats/token (the fifth run: second 2.0 / 5.6 / 2.3; the fourth: 2.3 / 4.0 / 2.7; the third: 7.6 / 8.1 / 7.6)
    assert ab.loss <= first - 3.0, f"second copy {ab.loss:.2f} vs first {first:.2f} nats/token: the model does not copy"
    assert ab.loss_off - ab.loss >= 1.0, ab


def test_the_second_copy_costs_under_three_nats_over_five_seeds(model, pool):
    """The issue's target, as the card measures it (mean of seeds 0-4): 2.93 nats/token with the stored weights (the
    fifth run's 2.66)."""
    second = [copy_losses(model, pool, seed)[1].loss for seed in range(5)]
    assert sum(second) / 5 <= 3.0, second


def test_tang_held_out_excerpt_stays_near_the_card(model):
    text = (Path(__file__).resolve().parents[1] / "data" / "heldout_tang_excerpt.txt").read_text(encoding="utf-8")
    ids = model.encode(text)
    total, count = 0.0, 0
    for s in range(0, len(ids) - 1, model.info.n_ctx):
        chunk = ids[s : s + model.info.n_ctx + 1]
        logits = il.forward_full(model, chunk[:-1])[0].float()
        total += torch.nn.functional.cross_entropy(logits, torch.tensor(chunk[1:]), reduction="sum").item()
        count += len(chunk) - 1
    # 2.689 nats/token with the stored weights (the fifth run 2.722, the fourth 2.79, the third 2.87, the second 3.34);
    # the held-out poems 2.689 (the aim: 2.70). A return to the fifth run's weights fails.
    assert total / count < 2.715, f"Tang held-out excerpt: {total / count:.3f} nats/token"


def test_sampled_chinese_is_mostly_common_characters(model):
    """At the notebooks' settings (temperature 0.8, top-k 40) the poems' prompts continue mostly in common characters
    and some clauses have a Tang line's 5 or 7 characters. With the stored weights, over seeds 0-7: 0.98 common, 14 of
    36 clauses shaped (the fifth run: 0.96 and 15 of 32; the fourth: 0.94 and 18 of 33; before the third run 0.63
    common and no clause shaped).
    Seeds 0-2 alone gave 2 of 11 clauses and 3 of 12, too few to tell a model from luck, hence eight seeds. The
    issue's aim, mostly such clauses, is not reached yet."""
    han, clauses = [], []
    for prompt in ZH_PROMPTS:
        for seed in range(8):
            text = il.generate(model, prompt, max_new_tokens=32, temperature=0.8, top_k=40, seed=seed).text
            assert "\ufffd" not in text, (prompt, seed, text)
            han += HAN.findall(text)
            clauses += [c for c in re.split(r"[，。\n]", text)[:-1] if c]  # the last may be cut off
    share = sum(map(common, han)) / len(han)
    shaped = sum(len(c) in (5, 7) and all(map(HAN.match, c)) for c in clauses) / len(clauses)
    assert share >= 0.93 and shaped >= 0.3, (share, shaped, clauses)
