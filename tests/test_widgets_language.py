"""Widgets, ``about.environment()`` and error messages in the reader's language (English by default, or Chinese)."""

from __future__ import annotations

import json
import re

import pytest
import torch
from IPython.core.formatters import DisplayFormatter

import inferlab as il
from inferlab import about, i18n
from inferlab.attention import Patterns
from inferlab.errors import bad_value, check_number
from inferlab.widgets import attention as wa
from inferlab.widgets import kvcache as wk
from inferlab.widgets import sampling as ws
from inferlab.widgets import selfcheck as sc
from inferlab.widgets import start as wstart
from inferlab.widgets import streaming as wstream
from inferlab.widgets import tokens as wt

CJK = re.compile(r"[\u4e00-\u9fff]")
HAND = torch.tensor([2.0, 1.0, 0.0])  # softmax 0.6652, 0.2447, 0.0900
PIECES = ["a", " b", "\n"]


@pytest.fixture(autouse=True)
def chinese(monkeypatch):
    """Every test starts in Chinese; monkeypatch puts the previous choice back afterwards."""
    monkeypatch.delenv(i18n.ENV, raising=False)
    monkeypatch.setattr(i18n, "_chosen", None)
    il.set_language("zh")


def _shown(view) -> dict:
    """What a notebook stores for ``view``: its text and HTML representations."""
    data, _ = DisplayFormatter().format(view)
    return data


# ----------------------------------------------------------------------------- labels and messages
def test_sampling_playground_speaks_chinese_and_english_comes_back():
    box = ws.playground(HAND, PIECES, temperature=1.0)
    assert box.sliders["temperature"].description == "温度"
    assert box.sliders["top_k"].description == "Top-k（0 = 关闭）"
    table = box.children[-2].value  # [knobs..., note, errors, table, out]
    assert "<th>阶段</th>" in table and "<th>e<sup>熵</sup>（有效选择数）</th>" in table
    assert "温度之后" in table and "Top-p 之后（从这里采样）" in table
    assert _shown(box)["text/plain"].startswith("采样练习场：")
    il.set_language("en")
    english = ws.playground(HAND, PIECES, temperature=1.0)
    assert english.sliders["temperature"].description == "temperature"
    assert "<th>stage</th>" in english.children[-2].value and not CJK.search(_shown(english)["text/plain"])


def test_a_bad_setting_is_shown_in_a_chinese_frame():
    box = ws.playground(HAND, PIECES)
    box.controls["top_p"].value = 1.5  # the learner types a value the slider cannot reach
    shown = box.errors.value
    assert "top_p=1.5 不被允许：应为 0.0 &lt; top_p &lt;= 1.0。修正方法：" in shown, shown
    box.controls["top_p"].value = 1.0
    box.controls["top_k"].value = 5  # not below the 3-token vocabulary: an explanation, not an error
    assert "Top-k 5 不小于词表大小（3 个 token）" in box.errors.value


def test_kv_growth_summary_and_messages():
    layers = [(torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)) for _ in range(3)]
    box = wk.kv_growth(layers, prompt_len=4)
    assert _shown(box)["text/plain"] == ("KV Cache 增长视图（2 个 Decode 步，3 层，2 个注意力头）："
                                         "运行这个单元格即可拖动滑块")
    step, head = box.children[0].children
    info, errors = box.children[1], box.children[2]
    assert step.description == "Decode 步" and head.description == "注意力头"
    # 2 (K and V) x 1 x 2 heads x 6 tokens x 4 x 4 bytes (float32) = 384 bytes per layer, 1,152 in 3 layers
    assert "第 2 步 Decode 之后：" in info.value and "每层 384 字节，3 层共 1,152 字节" in info.value
    head.value = 7
    assert "head=7 不存在：这个模型的注意力头编号是 0..1。" in errors.value


def test_attention_explorer_summary_and_controls():
    one = torch.tril(torch.ones(3, 3))
    patterns = Patterns([10, 11, 12], ["a", " b", " c"], (one / one.sum(-1, keepdim=True)).expand(2, 2, 3, 3).clone())
    view = wa.attention_explorer(patterns, compute=lambda text: patterns)
    assert (view.layer.description, view.head.description, view.record.description) == ("层", "注意力头", "记录")
    assert [label for label, _ in view.view.options] == ["单个头", "所有头"]
    assert _shown(view)["text/plain"] == (
        "注意力浏览器：3 个 token，2 层 × 2 个注意力头；当前显示第 0 层、第 0 个头、query 位置 2。"
        "交互视图：在 JupyterLab 中运行这个单元格，即可拖动滑块或输入提示词。")
    view.text.value = "   "
    assert "提示词是空的" in view.status.value


def test_next_token_peek_text_and_stored_html():
    peek = wstart.next_token_peek(HAND, PIECES, n=2)
    text = peek.children[1].children[0].value
    assert "温度 1.00" in text and "（id 0）：66.5%" in text
    peek.children[0].value = 0.0
    text = peek.children[1].children[0].value
    assert "贪心解码：总是选第一名的 token" in text and "（温度为 1 时：66.5%）" in text
    assert "下一个 token 预览" in _shown(peek)["text/html"]


def test_streaming_view_buttons_readout_and_messages(model):
    view = wstream.streaming_view(model, "To be", 3, stop_at_eos=False, run=False)
    assert (view.button.description, view.replay_button.description) == ("再运行一次", "慢速回放")
    assert repr(view) == "<流式视图：点击“再运行一次”来流式生成回答>"
    view.replay()
    assert "还没有可回放的内容" in view.error.value
    view.run()
    assert "完成（max_new_tokens）" in view.readout.value and "每秒" in view.readout.value
    assert repr(view).startswith("<流式视图：'To be' -> ") and "（3 个 token，TTFT " in repr(view)


def test_token_box_labels_and_messages(model):
    box = wt.token_box(model.tokenizer, "量子")
    pick, text, view = box.children
    assert pick.description == "示例：" and pick.label == "（你自己的文本）" and pick.value == "(your own text)"
    assert text.placeholder == "输入任意文本……"
    text.value = ""
    box.debouncer.flush()
    assert "输入框是空的" in view.value


# ----------------------------------------------------------------------------- self-checks
def _write(folder, question: str, right: tuple[str, str], wrong: tuple[str, str]) -> None:
    """``folder/00.json`` with one multiple-choice question: (choice, why) for the right and the wrong answer."""
    folder.mkdir(parents=True, exist_ok=True)
    choices = [{"text": right[0], "correct": True, "why": right[1]},
               {"text": wrong[0], "correct": False, "why": wrong[1]}]
    raw = {"notebook": "00_start_here", "questions": [{"question": question, "choices": choices}]}
    (folder / "00.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")


@pytest.fixture
def questions(tmp_path, monkeypatch):
    """A tiny English and Chinese question file in place of data/selfcheck/."""
    _write(tmp_path, "Which stage reads the prompt?", ("Prefill", "It reads every prompt token at once."),
           ("Decode", "It writes one token at a time."))
    _write(tmp_path / "zh", "哪个阶段读取提示词？", ("Prefill（预填充）", "它一次读完所有提示词 token。"),
           ("Decode（解码）", "它一次只写一个 token。"))
    monkeypatch.setattr(sc, "QUESTIONS_DIR", tmp_path)
    return tmp_path


def test_self_check_reads_the_chinese_file_and_answers_in_chinese(questions):
    view = sc.self_check("00")
    heading, first = view.children
    assert heading.value == "<h3>自测（1 道题）</h3>" and "哪个阶段读取提示词？" in first.children[0].value
    radio, check = first.children[1].children
    assert check.description == "检查" and "inferlab-selfcheck-check" in check._dom_classes
    check.click()
    assert "请先选一个答案。" in first.children[2].value
    radio.value = 0
    check.click()
    assert "正确。它一次读完所有提示词 token。" in first.children[2].value
    data = _shown(view)
    assert data["text/plain"] == "自测：1 道题；运行这个单元格即可作答"
    assert "<summary>答案</summary>" in data["text/html"] and "自测（00）" in data["text/html"]
    il.set_language("en")
    assert sc.load_questions("00")[0].text == "Which stage reads the prompt?"


def test_a_missing_chinese_file_is_named(questions):
    (questions / "zh" / "00.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"notebook 00 没有中文自测题：缺少 .*zh/00\.json"):
        sc.self_check("00")
    with pytest.raises(ValueError, match=r"notebook='42' 不被允许"):  # unknown in every language: the usual error
        sc.self_check("42")


def test_a_numeric_answer_in_chinese():
    q = sc.Question("2 × 12 × 12 × 64 × 4 = ?", answer=73728.0, unit="字节", why="K 和 V 各一份。")
    assert sc.grade(q, "36864") == (False, "不太对：答案是 73,728 字节。K 和 V 各一份。")
    assert sc.grade(q, "73，728")[0] is True  # a full-width comma typed as a thousands separator
    assert sc.grade(q, "两个")[1] == "请先输入一个数字（数字，可带小数点）。"


# ----------------------------------------------------------------------------- about and errors
def test_environment_in_chinese(model):
    env = about.environment(model, measure=False)
    labels = [label for label, _ in env.rows()]
    assert labels[0] == "Python" and "torch" in labels  # names stay as they are
    assert {"设备", "模型", "为什么用这个模型", "权重"} <= set(labels)
    weights = dict(env.rows())["权重"]
    assert re.fullmatch(r"\d+\.\d MB（float32）", weights), weights
    lines = {line.strip().split(":")[0]: line for line in repr(env).splitlines()}
    # labels right-aligned in 28 columns, where a CJK character takes two: 22 spaces before "Python", 24 before 设备
    assert lines["Python"].startswith(" " * 22 + "Python: ") and lines["设备"].startswith(" " * 24 + "设备: ")
    assert "<th style='text-align:left'>设备</th>" in env._repr_html_()


def test_error_frames_in_chinese():
    assert str(bad_value("top_p", 1.5, "0 < top_p <= 1", "用 1.0 关闭 top-p")) == (
        "top_p=1.5 不被允许：应为 0 < top_p <= 1。修正方法：用 1.0 关闭 top-p。")
    with pytest.raises(ValueError) as err:
        check_number("temperature", float("nan"), low=0.0)
    assert str(err.value) == "temperature=nan 不被允许：应为 0.0 <= temperature。修正方法：传入一个有限的数。"
    with pytest.raises(TypeError, match=r"^top_k 必须是整数，收到的是 str '5'。修正方法：传入一个整数。$"):
        check_number("top_k", "5", low=0, integer=True)
    with pytest.raises(ValueError, match=r"^n=inf 不被允许：应为 一个有限的数。"):
        check_number("n", float("inf"))
