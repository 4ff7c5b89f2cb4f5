"""What the core library shows a reader follows il.set_language: reprs, tables, load messages, widget errors.

The data underneath does not change language: job names, profile groups and stop reasons stay the English
keys that code compares against.
"""

from __future__ import annotations

import re

import pytest

import inferlab as il
from inferlab import cost, diversity, i18n, measure
from inferlab import tokens as T
from inferlab.cache import CacheSnapshot
from inferlab.measure.profiling import StepProfile
from inferlab.measure.sweeps import Sweep

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def chinese(monkeypatch):
    """Chinese for one test, then whatever was chosen before."""
    before = i18n._chosen
    monkeypatch.delenv(i18n.ENV, raising=False)
    i18n.set_language("zh")
    yield
    i18n._chosen = before


def _machine() -> cost.MachineProfile:
    # 10 GB/s, 100 GFLOP/s: ridge 10 FLOP/B; runs 3 with (8, 10) GB/s and (50, 100) GFLOP/s -> spread 25% / 100%
    return cost.MachineProfile("cpu", "float32", 10e9, 100e9, 64, 256, (8e9, 10e9), (50e9, 100e9), 3)


def test_reprs_are_chinese_and_keep_their_numbers(chinese):
    lat = il.timing.Latency.from_times(0.0, [0.5, 0.6, 0.7, 0.8])  # TTFT 500 ms, TPOT 100 ms, E2E 800 ms
    assert repr(lat) == "Latency(TTFT 500.00 ms，TPOT 100.00 ms，E2E 800.00 ms，共 N=4 个 token)"
    snap = CacheSnapshot(7, ((1, 5, 7, 32),) * 4, (8960,) * 4, 35840, "float32")
    assert repr(snap) == "CacheSnapshot(7 个 token，4 层 x K,V [1, 5, 7, 32]，35,840 字节 float32)"
    assert repr(_machine()) == ("MachineProfile(cpu float32：复制带宽 10.0 GB/s，矩阵乘法 100.0 GFLOP/s，脊点 10.0 "
                                "FLOP/B，取 3 次运行中最好的一次（波动 25% / 100%）)")
    # 7 8 9 7 8 9 7 8 9: 7 trigrams, the last 4 repeat an earlier one; the loop runs 6 tokens
    assert repr(diversity.repetition([7, 8, 9, 7, 8, 9, 7, 8, 9])) == (
        "Repetition(7 个 3-gram 中有 4 个与前面重复（57%），最长循环 6 个 token)")
    decode = cost.decode_cost(cost.published_shape("gpt2"), 10, machine=_machine())
    assert "（内存带宽密集型）" in repr(decode) and "时间下限" in repr(decode) and decode.bound == "memory"


def test_english_stays_the_default_text():
    i18n_before = i18n._chosen
    try:
        i18n.set_language("en")
        lat = il.timing.Latency.from_times(0.0, [0.5, 0.6, 0.7, 0.8])
        assert repr(lat) == "Latency(TTFT 500.00 ms, TPOT 100.00 ms, E2E 800.00 ms, N=4)"
        assert repr(diversity.repetition([7, 8, 9, 7, 8, 9, 7, 8, 9])) == (
            "Repetition(4 of 7 3-grams repeat an earlier one (57%), longest loop 6 tokens)")
        assert repr(diversity.repetition([7, 8, 9, 9, 5])).endswith("longest loop 1 token)")  # no "1 tokens"
    finally:
        i18n._chosen = i18n_before


def test_tables_and_labels_are_chinese_but_the_keys_stay_english(chinese):
    prof = StepProfile("engine", 0.004, {"matmuls": 0.003, "Python & dispatch": 0.001}, ())
    assert repr(prof) == "StepProfile(engine：每步 4.00 ms = 矩阵乘法 3.00，Python 与调度 1.00 ms)"
    assert list(prof.groups) == ["matmuls", "Python & dispatch"]  # data: narrate and viz look these up
    sweep = Sweep("prefill", "prompt length (tokens)", (8, 16), ((0.001,), (0.002,)), (8, 16))
    assert repr(sweep) == "Sweep(prefill：prompt length (tokens) [8, 16] -> 中位数 ms ['1.00', '2.00']，重复 1 次)"
    header = measure.latency.summary_markdown({"TTFT": il.summarize([0.01, 0.03])}).split("\n")[0]
    assert header == "| 指标 | 运行次数 | 均值 (ms) | 中位数 (ms) | p90 (ms) | p99 (ms) |"


def test_errors_a_widget_shows_are_chinese(chinese, model):
    with pytest.raises(ValueError, match=r"用 1\.0 关闭 top-p"):
        il.SamplingConfig(top_p=1.5)
    with pytest.raises(ValueError, match="至少一个字符"):
        T.tokenize(model.tokenizer, "")
    # "To be" is 2 tokens; 2 + 600 = 602 > the bundled model's 512
    with pytest.raises(ValueError, match=r"提示词（2 个 token）\+ max_new_tokens（600）= 602，超出了模型 512 个 token"):
        il.generate(model, "To be", 600)


def test_which_model_and_why_is_chinese(chinese, capsys):
    m = il.load("bundled", device="cpu")
    said = capsys.readouterr().out
    assert said.startswith("inferlab：已加载 tiny-gpt2-bilingual（bundled；指定使用内置模型。要使用真正的 GPT-2")
    assert CJK.search(m.info.reason) and "INFERLAB_MODEL" in m.info.reason
    assert repr(m.info).startswith("ModelInfo('tiny-gpt2-bilingual'，来源 内置模型：8 层 x 5 个注意力头")
    sweep = measure.prefill_sweep(m, [2], repeats=1, warmup=0)
    assert sweep.x_name == "提示词长度（token 数）" and sweep.job == "prefill"  # the axis title follows the reader
