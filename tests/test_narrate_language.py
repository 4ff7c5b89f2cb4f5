"""inferlab.narrate in Chinese: each finding comes out as Chinese sentences, in both of its outcomes.

The numbers are hand-made (as in test_narrate_timing.py); what is checked here is the language: Chinese
characters, the numbers carried into the Chinese sentence, no English sentence left over, the articles
quoted in their own words, and Markdown emphasis that still renders around Chinese punctuation.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_heads import scores_with  # hand-made HeadScores, one strong head of each kind

from inferlab import cost, heads, i18n, narrate
from inferlab.measure import CacheComparison, TpotVerdict

n01, n03, n04, n05, n06, n07 = (getattr(narrate, f"n0{i}") for i in (1, 3, 4, 5, 6, 7))
CJK = re.compile(r"[\u4e00-\u9fff]")
# Three Latin words in a row, outside code, maths and link targets: an English phrase left untranslated.
ENGLISH_RUN = re.compile(r"[A-Za-z][A-Za-z'-]*(?:[ ,]+[A-Za-z][A-Za-z'-]*){2,}")
CATALOG = Path(i18n.__file__).resolve().parent / "locale" / "zh_narrate.json"


def english_left(text: str) -> list[str]:
    """English phrases in ``text`` once code spans, LaTeX and link targets are removed."""
    prose = re.sub(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)", " ", text)
    return ENGLISH_RUN.findall(prose)


def chinese(text: str) -> str:
    """``text`` if it reads as Chinese (fails the test otherwise), so a test can go on checking it."""
    assert CJK.search(text), f"no Chinese in: {text!r}"
    assert not english_left(text), f"English left in the Chinese text: {english_left(text)} in {text!r}"
    return text



def comparison(cached_step: float, uncached_steps: tuple[float, ...]) -> CacheComparison:
    n = len(uncached_steps)
    return CacheComparison(prompt_len=300, cached_ids=tuple(range(n)), uncached_ids=tuple(range(n)),
                           cached_times=((cached_step,) * n,), uncached_times=(uncached_steps,),
                           max_abs_diff=(0.0,) * n, max_logit=(1.0,) * n, device="cpu", dtype="float32", model="gpt2")


VERDICT = TpotVerdict(batch=32, batch_time_x=3.2, bytes_label="int8", bytes_x=0.26, bytes_time_x=0.5,
                      fast_label="eager", fast_s=0.025, bandwidth_floor_s=0.020, compute_floor_s=0.0025)


def test_decode_floor_in_chinese_near_and_far(zh):
    near = chinese(n04.decode_floor(1.7, 0.020, 0.002, 0.034, 495, "gpt2", small=("tiny", 7.1)))
    # 34 ms / 2 ms = 17x the compute floor; the numbers travel into the Chinese sentence
    assert "**1.7 倍**" in near and "**17 倍**" in near and "495 MB" in near and "与文章说的一致" in near
    far = chinese(n04.decode_floor(6.0, 0.020, 0.002, 0.120, 495, "gpt2"))
    assert "**没有**接近" in far and "与文章说的一致" not in far and "tiny" not in far


def test_cache_win_in_chinese_several_fold_and_not(zh):
    win = chinese(n05.cache_win(comparison(0.03, (0.2, 0.25, 0.3, 0.35))))  # 1.1 s against 0.12 s: 9.2x
    assert "**用缓存的速度是不用时的 9.2 倍**" in win and "303 个 token" in win and "350.0 ms" in win
    small = chinese(n05.cache_win(comparison(0.03, (0.03, 0.04, 0.04, 0.05))))  # 0.16 s against 0.12 s: 1.3x
    assert "速度只提高到原来的 **1.3 倍**" in small and "文本越长" in small


def test_article_count_quotes_the_article_in_its_own_words(zh):
    same = chinese(n01.article_word_count("什么是量子计算", 4))
    assert "“四个 token”" in same and "(00_start_here.ipynb#the-two-source-articles)" in same
    more = chinese(n01.article_word_count("什么是量子计算", 14))  # 14 / 4 = 3.5
    assert "“四个 token”" in more and "3.5 倍" in more and "量子" in more
    assert "translation" not in more + same  # the Chinese edition quotes, it does not translate back


def test_head_titles_and_verdicts_in_chinese_both_ways(zh):
    real = scores_with((2, 1), (0, 1))  # layer 2's induction head, fed by layer 0's previous-token head
    assert chinese(n03.head_title(real, "induction")) == "最强的归纳头：第 2 层第 1 个头（BOS + R + R）"
    assert n03.head_title(real, "previous") == "最强的前一 token 头：第 0 层第 1 个头"  # the kind's name, translated
    verdicts = chinese(n03.top_heads(real))
    assert "- **前一 token 头**：" in verdicts and "表现得像一个归纳头" in verdicts
    none = scores_with((2, 1), (0, 1), value=0.15)  # 1.5x even spread: below the 2x asked
    assert chinese(n03.head_title(none, "induction")).startswith("归纳得分最高，但不是归纳头")
    verdicts = chinese(n03.top_heads(none))
    assert "**没有归纳头**" in verdicts and "**未高于随机水平**（我们要求 2 倍）" in verdicts


def test_counts_need_no_plural_in_chinese(zh):
    assert n06.tokens_possible(1) == "可选 1 个 token" and n06.tokens_possible(1200) == "可选 1,200 个 token"
    one = chinese(n01.character_cost(n_chars=1, n_bytes=3, n_tokens=1, whole=1))
    assert "**1 个字符**" in one and "**1 个 token**" in one
    many = chinese(n01.character_cost(n_chars=7, n_bytes=21, n_tokens=14, whole=2))
    assert "**7 个字符**" in many and "**14 个 token**" in many and "其余 12 个" in many


def test_lists_and_tables_in_chinese(zh):
    text = chinese(n07.step_profile({"Python & dispatch": 0.02, "matmuls": 0.01}, 0.03, "gpt2"))
    assert "Python 与调度 **67%**、矩阵乘法 **33%**" in text  # 20 of 30 ms; the profiler's groups translated
    table = n04.tpot_verdict(VERDICT)
    assert table.startswith("| 测量 | 结果 |\n|---|---|\n") and "**1.2 倍**" in table  # 25 ms / 20 ms
    assert "“这主要看硬件 GPU 的算力”" in chinese(table)  # article 004, quoted in its own words
    groups = chinese(narrate.n02.cohesion({"numbers": (0.6, 0.1), "days": (0.15, 0.1)}))
    assert "| 数字 | 0.60 | 0.10 | +0.50 |" in groups and "| 星期 |" in groups and "**数字**" in groups


def test_the_other_articles_quotes_in_chinese(zh):
    rows = [SimpleNamespace(spec=SimpleNamespace(name=name, bytes_per_s=bw, source="spec"), floors={"7B": floor},
                            step_bytes={"7B": 14e9})
            for name, bw, floor in (("V100", 900e9, 0.015), ("H100", 3350e9, 0.004))]  # HardwareFloor's fields
    point = chinese(n07.hardware_point(rows, "7B"))
    assert "“明显快了不少”" in point and "3.7 倍" in point  # 3350 / 900
    think = chinese(n07.thinking(64, 0.7, 0.05, 0.01))
    assert "测试时计算扩展" in think and "14.0 倍" in think  # 700 ms / 50 ms


SWEEP = [
    lambda: narrate.n00.cold_call(0.050, 0.010), lambda: narrate.n00.cold_call(0.011, 0.010),
    lambda: narrate.n00.per_token(0.008, 8, 0.004, 7.9, 20.0, "gpt2", knee=21),
    lambda: narrate.n00.per_token(0.040, 8, 0.004, 30.0, 20.0, "gpt2"),
    lambda: n01.language_cost(10, 4.2, "Hindi", 40, 8, 20), lambda: n01.language_cost(10, 4.2, "English", 10, 8, 6),
    lambda: n01.chat_template(2, 80, 30, ["<|im_start|>"], ["<|im_start|>"]),
    lambda: narrate.n02.shared_rows(100, 1000, 0.5), lambda: narrate.n02.shared_rows(0, 1000, 0.05),
    lambda: narrate.n02.cohesion({"a": (0.5, 0.1)}), lambda: narrate.n02.cohesion({"a": (0.2, 0.1)}),
    lambda: narrate.n02.projection(0.31),
    lambda: narrate.n02.neighbours(" king", [0.57, 0.3], [" day", " x"], [0.21, 0.2], 0.76, 0.99, 0.01, 0.4),
    lambda: narrate.n02.neighbours(" king", [0.5, 0.3], [" day", " x"], [0.45, 0.2], 0.3, 0.8, 0.25, 0.6),
    lambda: n03.ablation(heads.Ablation([(1, None), (0, 1)], 1, 2.0, 2.5, None, None, 0.3), "x"),
    lambda: n03.kinds_summary(scores_with((2, 1), None)),
    lambda: n04.ceilings(cost.MachineProfile("cpu", "float32", 20e9, 100e9, 1, 1, bytes_per_s_range=(16e9, 20e9),
                                             runs=7), 0.5, 9.3, 128),
    lambda: n04.prefill_knee((8, 512), (0.03, 0.3), 12, "gpt2"),
    lambda: n04.prefill_knee((8, 512), (0.03, 3.0), None, "gpt2"),
    lambda: n04.decode_gap({"matmuls": 0.065, "attention": 0.226, "Python & dispatch": 0.0}, 0.5, 0.06, 5e8, "g"),
    lambda: n04.batch(32, 1.4, 22.9, None, 100),
    lambda: n04.batch(32, 1.97, 16.2, None, 100),
    lambda: n04.batch(32, 2.1, 15.6, 32, 12, times={1: 0.034, 4: 0.026}),
    lambda: n04.tpot_verdict(dataclasses.replace(VERDICT, fast_s=0.1)),
    lambda: n05.redone_work(10, 1.3, "tiny"), lambda: n05.wall(1024, 73728, 50_000_000),
    lambda: n06.small_temperature(3.0, 1e-38, True, 1e-4, False),
    lambda: n06.long_tail([0.4, 0.1, 0.01], [10, 100, 1000]), lambda: n06.long_tail([0.04, 0.001, 0], [10, 100, 1000]),
    lambda: n06.stage_effects(0.8, 0.05, 50257, 50, 0.2, 12, 0.1, 4.0, 2.0),
    lambda: n07.dtypes({"float32": 0.01, "bfloat16": 0.03}, {"float32": 4e8, "bfloat16": 2e8}, "cpu", "gpt2"),
    lambda: n07.ttft_growth({"gpt2": ((8, 512), (0.01, 1.0))}),
    lambda: n07.batching(1, 8, 0.01, 0.08, 100, 100, 3, "g"), lambda: n07.tail(5, 0.06, 0.061, 95),
    lambda: narrate.n08.where_the_rest_goes([], 0.021, 0.020),
    lambda: n04.prefill_knee((8, 32, 128, 512), (0.0607, 0.0850, 0.1780, 0.6301), 16, "gpt2"),
    lambda: n04.batch_curve((1, 2, 4, 8), (0.0342, 0.0314, 0.0237, 0.0269)),
    lambda: n04.batch_curve((1, 2, 4), (0.010, 0.020, 0.015)),
    lambda: narrate.n08.ladders(*2 * ([narrate.n08.PathRow("engine (DynamicCache)", 0.1, 0.0466, (1,)),
                                       narrate.n08.PathRow("engine + StaticCache", 0.1, 0.0548, (1,))], 0.01),
                                profiles={"g": {
        "engine": SimpleNamespace(step_s=0.0096, groups={"matmuls": 0.0062, "Python & dispatch": 0.0019}),
        "fast": SimpleNamespace(step_s=0.0044, groups={"matmuls": 0.0029, "Python & dispatch": 0.0004})}}),
    lambda: narrate.n08.layout_choice(narrate.n08.Choice("rows", True, {"rows+compile": 0.016, "packed": 0.026},
                                                         "cached", measured_at="2026-12-04 13:20 UTC"), now_s=0.023),
]


@pytest.mark.parametrize("finding", range(len(SWEEP)))
def test_findings_come_out_chinese_and_their_emphasis_renders(zh, finding):
    """Chinese, and no ``**`` left over after Markdown rendering (CommonMark will not close ``**`` that
    follows "。" and touches the next character: the Chinese text must leave a space there)."""
    markdown_it = pytest.importorskip("markdown_it")
    text = chinese(SWEEP[finding]())
    html = re.sub(r"<code>.*?</code>", "", markdown_it.MarkdownIt("commonmark").enable("table").render(text))
    assert "*" not in html.replace("\\times", ""), f"emphasis did not render: {html}"


def test_the_language_comes_back(zh):
    assert "这里的 Decode 受内存带宽限制" in n04.myth(0.002, 0.020, 0.034)
    i18n.set_language("en")
    assert n04.myth(0.002, 0.020, 0.034).endswith("**1.7x** the bandwidth prediction: decode here is bandwidth-bound.")


def test_the_catalog_file_is_sorted_and_readable():
    text = CATALOG.read_text(encoding="utf-8")
    entries = json.loads(text)
    assert text == json.dumps(dict(sorted(entries.items())), ensure_ascii=False, indent=2) + "\n"
    assert all(CJK.search(v) for v in entries.values())
