"""Notebook 00's decode floor and notebook 06's greedy loop: every outcome their numbers can take."""

from __future__ import annotations

import re

import pytest

from inferlab import i18n
from inferlab.narrate import n00, n06

GB = 1e9
# per_token's fixed part: 10 prompt tokens in 10 ms, a below-the-ridge prompt with a knee at 16 tokens
BASE = {"prefill_s": 0.010, "prompt_tokens": 10, "prompt_intensity": 2.9, "ridge": 5.6, "model": "gpt2", "knee": 16}


@pytest.fixture(autouse=True)
def english():
    i18n.set_language("en")
    yield
    i18n.set_language("en")


def test_decode_is_judged_against_its_memory_floor_not_against_prefill():
    """498 MB at 34 GB/s is a 14.6 ms floor; a 38.5 ms step is 2.6x it (the review's numbers)."""
    far = n00.per_token(decode_s=0.0385, weight_bytes=498e6, bytes_per_s=34 * GB, **BASE)
    assert "`498 MB / 34.0 GB/s = 14.6 ms`" in far and "**38.5 ms**" in far and "2.6x that floor" in far
    assert "at most 38% of it" in far
    assert "notebook 04 tests" in far and "memory-bound here" not in far
    assert "Decode is therefore limited by memory" not in far  # the non-sequitur is gone
    near = n00.per_token(decode_s=0.016, weight_bytes=498e6, bytes_per_s=34 * GB, **BASE)
    assert "only 1.1x that floor" in near and "decode is memory-bound here" in near
    below = n00.per_token(decode_s=0.010, weight_bytes=498e6, bytes_per_s=34 * GB, **BASE)
    assert "beat that floor" in below and "memory-bound here" not in below
    unknown = n00.per_token(decode_s=0.0385, **BASE)  # no bytes or bandwidth: say where it is tested
    assert "notebook 04 tests it" in unknown and "floor:" not in unknown


def test_the_knee_is_the_cost_models_and_04_measures_where_it_really_is():
    text = n00.per_token(decode_s=0.0385, weight_bytes=498e6, bytes_per_s=34 * GB, **BASE)
    assert "**16 prompt tokens**" in text and "really stops falling" in text


def test_the_floor_branches_read_in_chinese():
    i18n.set_language("zh")
    markdown_it = pytest.importorskip("markdown_it")
    for step in (0.0385, 0.016, 0.010, None):
        extra = {"weight_bytes": 498e6, "bytes_per_s": 34 * GB} if step else {}
        text = n00.per_token(decode_s=step or 0.0385, **extra, **BASE)
        assert re.search(r"[\u4e00-\u9fff]", text) and "floor" not in text
        html = markdown_it.MarkdownIt("commonmark").render(text)
        assert "**" not in re.sub(r"<code>.*?</code>", "", html), html


@pytest.mark.parametrize("greedy, loop, sample, says", [
    (0.72, 35, 0.0, ["fell into a loop", "is 35 tokens long", "repeated less"]),
    (0.30, 12, 0.35, ["fell into a loop", "repeated as much this time"]),
    (0.28, 1, 0.0, ["No loop formed", "is 1 token)", "still repeated more"]),
    (0.0, 0, 0.02, ["No loop formed", "is 0 tokens)", "did **not** repeat more"]),
])
def test_greedy_loop_every_outcome(greedy, loop, sample, says):
    text = n06.greedy_repetition(greedy, loop, sample)
    assert all(s in text for s in says), text
    assert "1 tokens" not in text


def test_a_stutter_is_not_a_loop():
    """Three tokens that copy the three before them are a stutter; the loop starts at LOOP_TOKENS."""
    assert "No loop formed" in n06.greedy_repetition(0.3, n06.LOOP_TOKENS - 1, 0.0)
    assert "fell into a loop" in n06.greedy_repetition(0.3, n06.LOOP_TOKENS, 0.0)


def test_greedy_loop_in_chinese():
    i18n.set_language("zh")
    assert n06.greedy_repetition(0.74, 12, 0.0).startswith("贪心解码的 3-gram 有 74% 是重复的")
    assert "12 个 token" in n06.greedy_repetition(0.74, 12, 0.0)
    assert "没有形成循环" in n06.greedy_repetition(0.1, 1, 0.0)
