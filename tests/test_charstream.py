"""charstream: what one meaning costs in Chinese and English, and a stream that waits for a character's last byte.

The token ids below are facts about GPT-2's tokenizer (the bundled model's), worked out once by hand:
'疑' = e7 96 91 is three one-byte tokens [163, 244, 239]; '是' = e6 98 af is one token 42468;
'地' = e5 9c b0 is [28839 (e5 9c), 108 (b0)]; '明' = e6 98 8e is [23626 (e6 98), 236 (8e)];
'月' = e6 9c 88 is [17312 (e6 9c), 230 (88)].
"""

from __future__ import annotations

import pytest

import inferlab as il
from inferlab import charstream, i18n
from inferlab import tokens as T
from inferlab.cost import Shape
from inferlab.generation import TextAssembler, TokenEvent
from inferlab.narrate import n01


def _events(tokenizer, ids, *, final_at_end=True):
    """TokenEvents as il.stream makes them: the text each token makes safe to show (TextAssembler)."""
    text = TextAssembler(tokenizer)
    return [TokenEvent(i, t, text.add(t, final=final_at_end and i == len(ids) - 1), 0.0, 0.0)
            for i, t in enumerate(ids)]


def test_a_character_cut_over_three_tokens_is_held_back_then_shown_whole(model):
    ids = [163, 244, 239, 42468, 28839, 108]  # 疑 | 是 | 地, as the tokenizer cuts '疑是地'
    assert model.encode("疑是地") == ids
    flow = charstream.follow(model.tokenizer, _events(model.tokenizer, ids))
    rows = [(s.raw.hex(" "), s.held.hex(" "), s.shown, s.joined, s.span) for s in flow.steps]
    assert rows == [("e7", "e7", "", "", 0),
                    ("96", "e7 96", "", "", 0),
                    ("91", "", "疑", "疑", 3),
                    ("e6 98 af", "", "是", "", 0),       # a whole character in one token: nothing to join
                    ("e5 9c", "e5 9c", "", "", 0),
                    ("b0", "", "地", "地", 2)]
    assert flow.text == "疑是地"
    assert (flow.n_chars, flow.n_joined, flow.n_waits) == (3, 2, 3)
    assert flow.shown_replacements == 0
    assert flow.alone_replacements == 5  # every token but 是 is part of a character on its own
    assert flow.unfinished == b""


def test_an_invalid_sequence_and_an_unfinished_character_are_reported(model):
    # e6 98 (first two bytes of 明) then e6 9c 88 (月): e6 98 never completes -> one U+FFFD, then 月 in 2 tokens.
    flow = charstream.follow(model.tokenizer, _events(model.tokenizer, [23626, 17312, 230]))
    assert [s.completed for s in flow.steps] == ["", "\ufffd", "月"]
    assert [(s.joined, s.span) for s in flow.steps] == [("", 0), ("", 0), ("月", 2)]
    cut = charstream.follow(model.tokenizer, _events(model.tokenizer, [23626], final_at_end=False))
    assert cut.unfinished == b"\xe6\x98"


def test_table_marks_the_completing_step_and_summary_uses_the_counts(model, english):
    flow = charstream.follow(model.tokenizer, _events(model.tokenizer, [163, 244, 239]))
    table = n01.stream_table(flow).splitlines()
    assert len(table) == 2 + 3
    assert table[-1].endswith("| ✓ 疑 (3 tokens) |") and "`�`" in table[2]
    assert n01.stream_summary(flow).startswith("3 tokens made 1 characters; 1 of those characters arrived in pieces")
    i18n.set_language("zh")
    assert "✓ 疑（3 个 token）" in n01.stream_table(flow)


def test_follow_reads_a_real_stream(model):
    s = il.stream(model, "床前明月光，", max_new_tokens=6)
    flow = charstream.follow(model.tokenizer, s)
    assert flow.n_tokens == 6 and [x.token_id for x in flow.steps] == s.trace.generated_ids
    assert flow.text == s.trace.text


def test_compare_counts_the_articles_question(model, english):
    (pair,) = charstream.compare(model.tokenizer, {"q": ("What is quantum computing?", "什么是量子计算？")})
    # English: 5 tokens, 26 characters, 26 bytes. Chinese: 14 tokens for 什么是量子计算 + 3 for '？' (ef bc 9f).
    assert (pair.en.n_tokens, pair.en.n_chars, pair.en.n_bytes) == (5, 26, 26)
    assert (pair.zh.n_tokens, pair.zh.n_chars, pair.zh.n_bytes) == (17, 8, 24)
    assert pair.ratio == pytest.approx(3.4)
    text = pair.what_it_costs(Shape.from_info(model.info), 512, tpot=0.010)
    # 17 and 5 tokens at 10 ms each; 17 / 512 = 3.32%; 512 / (17 / 8) = 240 characters fit.
    assert "170 ms for the Chinese vs 50 ms for the English" in text
    assert "3.32% vs 0.98%" in text and "about 240 Chinese characters" in text
    assert "| q · Chinese | `什么是量子计算？` | 8 | 24 | 17 | 2.12 |" in n01.pair_cost_table([pair])


def test_per_character_counts_tokens_touching_each_character(model):
    # ids [20015, 222 | 20046, 230 | 42468 | 34932, 237 | 36310 | 164, 106, 94 | 163, 106, 245]
    # 什 2, 么 2, 是 1, 量 2, 子 1, 计 3, 算 3
    assert charstream.per_character(T.tokenize(model.tokenizer, "什么是量子计算")) == {1: 2, 2: 3, 3: 2}


def test_bad_input_names_the_parameter_and_the_fix(model):
    with pytest.raises(ValueError, match=r"pairs=\{\} is not allowed.*Fix"):
        charstream.compare(model.tokenizer, {})
    with pytest.raises(ValueError, match=r"pairs\['q'\].*two texts"):
        charstream.compare(model.tokenizer, {"q": "What is quantum computing?"})
    with pytest.raises(ValueError, match=r"events=.*at least one TokenEvent"):
        charstream.follow(model.tokenizer, [])
    with pytest.raises(TypeError, match=r"TokenEvents.*Fix: pass il.stream"):
        charstream.follow(model.tokenizer, [163])
    (pair,) = charstream.compare(model.tokenizer, {"q": ("a", "甲")})
    with pytest.raises(ValueError, match="tpot=0"):
        pair.what_it_costs(Shape.from_info(model.info), 512, tpot=0)
