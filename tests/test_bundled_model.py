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


@pytest.fixture(scope="module")
def model():
    return il.load("bundled")


def test_english_held_out_excerpt_stays_near_the_card(model):
    ids = model.encode(EXCERPT.read_text(encoding="utf-8"))[:512]
    logits = il.forward_full(model, ids)[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1].float(), torch.tensor(ids[1:])).item()
    # 4.49 nats/token with the stored weights; the Shakespeare-only model had 4.42 here. The limit
    # for the two held-out plays is 4.6; this excerpt reads a little easier than the plays' average.
    assert loss < 4.6, f"English held-out excerpt: {loss:.3f} nats/token"


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
