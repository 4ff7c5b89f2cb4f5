"""The same meaning in two languages (inferlab.measure.languages): token counts, interleaved TTFT, the table."""

from __future__ import annotations

import pytest

from inferlab import i18n
from inferlab.measure import languages as L
from inferlab.narrate import n07
from inferlab.timing import summarize
from inferlab.tokens import TextCost

# GPT-2's tokenizer (facts about its vocabulary, counted once by hand): "What", " is", " quantum", " computing", "?"
# are 5 tokens for 26 characters; 什么是量子计算 is 7 characters, each 3 bytes in UTF-8, in 14 tokens:
# 什 2, 么 2, 是 1, 量 2, 子 1, 计 3, 算 3 (a character BPE never merged stays as 3 single-byte tokens).
TEXTS = {"中文": "什么是量子计算", "English": "What is quantum computing?"}


def test_prompt_ttft_refuses_empty_prompts(model):
    with pytest.raises(ValueError, match=r"prompts=\{\} is not allowed.*Fix: e\.g\."):
        L.prompt_ttft({"a": model}, {})


def test_prompt_ttft_times_every_model_and_prompt(model):
    rows = L.prompt_ttft({"a": model, "b": model}, TEXTS, repeats=2, warmup=0)
    assert [(r.model, r.cost.name, r.cost.n_chars, r.cost.n_tokens) for r in rows] == [
        ("a", "中文", 7, 14), ("a", "English", 26, 5), ("b", "中文", 7, 14), ("b", "English", 26, 5)]
    assert all(r.ttft.n == 2 and r.ttft.min > 0 for r in rows)
    assert "中文: 14 tokens, median TTFT" in repr(rows[0])
    with pytest.raises(ValueError, match="repeats"):
        L.prompt_ttft({"a": model}, TEXTS, repeats=0)


def test_markdown_table_has_one_row_per_measurement(model):
    rows = L.prompt_ttft({"tiny": model}, TEXTS, repeats=1, warmup=0)
    table = n07.language_table(rows).splitlines()
    assert table[0] == "| model | prompt | characters | tokens | tokens per character | median TTFT (ms) |"
    assert len(table) == 4 and table[2].startswith("| tiny | 中文 | 7 | 14 | 2.00 | ")
    before = i18n._chosen
    try:
        i18n.set_language("zh")
        header = n07.language_table(rows).splitlines()[0]
        assert "token" in header and "模型" in header
    finally:
        i18n._chosen = before


def _row(name: str, tokens: int, characters: int, ttft_s: float) -> L.PromptTTFT:
    return L.PromptTTFT("gpt2", TextCost(name, tokens, characters, 3 * characters), summarize([ttft_s]))


def test_finding_says_what_the_numbers_showed():
    zh, en = _row("中文", 36, 18, 0.080), _row("English", 12, 63, 0.040)
    answer_zh, answer_en = TextCost("中文", 60, 27, 81), TextCost("English", 20, 100, 100)
    text = n07.language_finding(zh, en, answer_zh, answer_en, tpot_s=0.030)
    # 36 / 12 = 3.0x the tokens; 80 / 40 = 2.00x the time; answers 60 x 30 ms = 1800 ms, 20 x 30 ms = 600 ms
    assert "**36 tokens** in Chinese and **12** in English (3.0x)" in text
    assert "**80.0 ms** against **40.0 ms** (2.00x)" in text and "more prefill" in text
    assert "about 1800 ms against 600 ms" in text
    slower_en = n07.language_finding(zh, _row("English", 12, 63, 0.090), answer_zh, answer_en, tpot_s=0.030)
    assert "lost in the noise" in slower_en and "more prefill" not in slower_en
