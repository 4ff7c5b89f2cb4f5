"""The Chinese edition as a reader meets it: demos that work in both languages, one term per concept, typography.

The term table is data (``data/zh_terms.json``); the lint reads the zh notebooks' markdown, the zh locale strings,
README.zh.md and docs/*.zh.md, as a reader sees them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import inferlab as il
from inferlab import i18n

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _code_cell(nb: dict, marker: str) -> str:
    """The one code cell whose source contains ``marker``."""
    found = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and marker in "".join(c["source"])]
    assert len(found) == 1, f"{len(found)} code cells contain {marker!r}"
    return found[0]


# --- item 1: notebook 06's stop-string demo stops, in both editions ---------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_stop_string_demo_stops_in_both_editions(model, lang):
    """Run notebook 06's own cells (prompt, then the stop-string demo) on the bundled model in each language."""
    en = _notebook(ROOT / "notebooks" / "06_sampling.ipynb")
    zh = _notebook(ROOT / "notebooks" / "zh" / "06_sampling.ipynb")
    params, demo = _code_cell(en, "\nPROMPT = il.by_language"), _code_cell(en, "stop_strings=[stop_text]")
    assert (params, demo) == (_code_cell(zh, "\nPROMPT = il.by_language"), _code_cell(zh, "stop_strings=[stop_text]"))
    before = i18n._chosen  # the language chosen before the test comes back after it
    il.set_language(lang)
    try:
        ns = {"il": il, "m": model}
        exec(params, ns)
        exec(demo, ns)
    finally:
        i18n._chosen = before
    free, cut, stop_text = ns["free"], ns["cut"], ns["stop_text"]
    assert stop_text and stop_text in free.text, f"{stop_text!r} is not in the text the reader saw: {free.text!r}"
    assert "\ufffd" not in stop_text and "⟨" not in stop_text
    assert cut.stop_reason == f"stop string {stop_text!r}", (cut.stop_reason, free.text)
    assert len(cut.generated_ids) < len(free.generated_ids)
    assert free.text.startswith(cut.text) and stop_text not in cut.text


# --- item 2: one term per concept (the term table is data/zh_terms.json) -----------------------------------------

TERMS = json.loads((ROOT / "data" / "zh_terms.json").read_text(encoding="utf-8"))
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))


def _markdown(nb_path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in _notebook(nb_path)["cells"] if c["cell_type"] == "markdown")


def _locale_values() -> dict[str, str]:
    """'file: English key' -> Chinese text, for every zh locale string (keys only n08 uses are pending)."""
    pending = set(TERMS["pending_keys"])
    return {f"{p.name}: {k}": v for p in sorted((ROOT / "lib" / "inferlab" / "locale").glob("zh_*.json"))
            for k, v in json.loads(p.read_text(encoding="utf-8")).items() if k not in pending}


def zh_texts() -> dict[str, str]:
    """Every Chinese text a reader meets, by where it lives (what the term lint and the typography test read)."""
    texts = {str(p.relative_to(ROOT)): _markdown(p) for p in ZH_NOTEBOOKS
             if str(p.relative_to(ROOT)) not in TERMS["pending"]}
    texts.update({str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
                  for p in [ROOT / "README.zh.md", *sorted((ROOT / "docs").glob("*.zh.md"))]})
    texts.update(_locale_values())
    return texts


_QUOTED = [re.compile(r"```.*?```", re.S), re.compile(r"`[^`\n]*`"), re.compile(r"“[^”]*”"),
           re.compile(r"^\s*>.*$", re.M), re.compile(r"https?://\S+|\]\([^)]*\)|<a [^>]*>")]


def prose(text: str) -> str:
    """``text`` without code, the articles' quotations (“…”, > lines) and link targets: what the course itself says."""
    for pattern in _QUOTED:
        text = pattern.sub(" ", text)
    return text


def term_violations(where: str, text: str) -> list[str]:
    """Each losing variant of data/zh_terms.json found in ``text``'s prose, with its context."""
    text = prose(text)
    found = []
    for entry in TERMS["terms"]:
        plain = text
        if "gloss" in entry:  # Prefill（预填充）, 预填充（Prefill）: the one place the other name may stand
            term, gloss = re.escape(entry["term"]), re.escape(entry["gloss"])
            plain = re.sub(rf"{term}[\W_]{{0,3}}（[\W_]{{0,2}}{gloss}|{gloss}[\W_]{{0,3}}（[\W_]{{0,2}}{term}", " ",
                           plain, flags=re.I)
        for losing in entry["losing"]:
            for hit in re.finditer(losing, plain):
                context = plain[max(0, hit.start() - 15): hit.end() + 15].replace("\n", " ")
                found.append(f"{where}: {hit.group()!r} (say {entry['term']!r}) in …{context}…")
    return found


def test_term_table_is_well_formed():
    concepts = [e["concept"] for e in TERMS["terms"]]
    assert len(concepts) == len(set(concepts))
    for entry in TERMS["terms"]:
        assert entry["term"] and entry["losing"], entry
        for losing in entry["losing"]:
            assert not re.search(losing, entry["term"]), f"{entry['term']!r} matches its own losing variant {losing!r}"


def test_term_lint_sees_a_losing_variant():
    """The lint's own check: a losing variant in plain prose is found, a gloss or a quotation is not."""
    assert term_violations("x", "读完提示词的预填充很快")
    assert term_violations("x", "每个解码步读一遍权重")
    assert not term_violations("x", "**Prefill（预填充）**读完提示词；文章说“预填充阶段”；`kv 缓存`")


def test_one_term_per_concept():
    found = [v for where, text in zh_texts().items() for v in term_violations(where, text)]
    assert not found, f"{len(found)} losing variants (data/zh_terms.json says which term wins):\n" + "\n".join(found)


# --- item 3: what a Chinese reader sees is Chinese (identifiers kept, with a gloss) ------------------------------

def _figure_text(fig) -> str:
    return json.dumps(fig.to_plotly_json(), ensure_ascii=False)


def test_chinese_labels_for_jobs_languages_kernels_and_hardware():
    from inferlab.cost import PUBLISHED_MEMORY, HardwareFloor
    from inferlab.measure.kernels import RECORDING, KernelComparison
    from inferlab.measure.sweeps import Sweep
    from inferlab.narrate import n07
    from inferlab.tokens import TextCost
    from inferlab.viz import attention as va
    from inferlab.viz import latency as vlat
    from inferlab.viz import tokens as vt

    sweep = Sweep("decode step", "context (tokens in the cache)", (8, 64), ((0.01, 0.012), (0.02, 0.021)), (1, 1))
    kernels = KernelComparison({k: Sweep("prefill", "prompt length (tokens)", (16,), ((0.01, 0.011),), (16,))
                                for k in ("sdpa", "eager", RECORDING)}, {}, {})
    spec = PUBLISHED_MEMORY["laptop, DDR5-5600 (2 channels)"]
    rows = [HardwareFloor(spec, {"gpt2": 0.005}, {"gpt2": 0.5e9})]
    before = i18n._chosen
    il.set_language("zh")
    try:
        seen = {"sweep": _figure_text(vlat.sweep_figure(sweep)),
                "languages": _figure_text(vt.cost_bars([TextCost("English", 10, 45, 45), TextCost("Korean", 9, 5, 9)])),
                "kernels": _figure_text(va.kernel_times_figure(kernels)),
                "hardware": n07.hardware_table(rows)}
    finally:
        i18n._chosen = before
    assert "Decode 步" in seen["sweep"] and "decode step" not in seen["sweep"]
    assert "英语" in seen["languages"] and "韩语" in seen["languages"] and "English" not in seen["languages"]
    assert "eager + 记录注意力" in seen["kernels"] and "recording" not in seen["kernels"]
    assert "双通道" in seen["hardware"] and "channels" not in seen["hardware"]


# --- item 6: README.zh.md keeps up with README.md -----------------------------------------------------------------

def test_chinese_readme_has_every_command_name_and_test_of_the_english_one():
    """Every `code` span of README.md (commands, flags, paths, test names) is in README.zh.md too: same facts."""
    code = re.compile(r"`([^`\n]+)`")
    en = set(code.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    zh_readme = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    missing = sorted(en - set(code.findall(zh_readme)))
    assert not missing, f"README.zh.md lacks what README.md says: {missing}"
    sections = re.compile(r"^##+ ", re.M)
    assert len(sections.findall(zh_readme)) >= len(sections.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    for china in ("HF_ENDPOINT", "pypi.tuna.tsinghua.edu.cn", "WORKSHOP.zh.md"):
        assert china in zh_readme, china


def test_chinese_workshop_guide_runs_the_same_commands():
    """docs/WORKSHOP.zh.md gives every command of docs/WORKSHOP.md (comments aside) and every `code` span."""
    def commands(text: str) -> set[str]:
        blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
        lines = {re.sub(r"\s+#.*$", "", line).strip() for block in blocks for line in block.splitlines()}
        return {line for line in lines if line and not line.startswith("#")} | set(re.findall(r"`([^`\n]+)`", text))

    en = commands((ROOT / "docs" / "WORKSHOP.md").read_text(encoding="utf-8"))
    zh_text = (ROOT / "docs" / "WORKSHOP.zh.md").read_text(encoding="utf-8")  # its commands open the zh edition
    zh = commands(zh_text.replace("notebooks/zh/", "notebooks/").replace(', "INFERLAB_LANG": "zh"', ""))
    missing = sorted(c for c in en - zh if not any(c in z for z in zh))
    assert not missing, f"docs/WORKSHOP.zh.md lacks what docs/WORKSHOP.md says: {missing}"


# --- item 7: Chinese typography -----------------------------------------------------------------------------------

_CODE = _QUOTED[:2]  # fenced and inline code keep their own punctuation


def test_no_ascii_space_after_chinese_punctuation_nor_ascii_ellipsis():
    """。，：；！？ take no ASCII space after them (a table's `|` aside); Chinese text ends with …… not '...'."""
    bad = re.compile(r"[。：，；！？] +(?=[^\s|])|[\u4e00-\u9fff] ?\.\.\.(?!\))|\.\.\.[\u4e00-\u9fff]")
    found = []
    for where, text in zh_texts().items():
        for pattern in _CODE:
            text = pattern.sub("X", text)
        found += [f"{where}: …{text[max(0, m.start() - 12): m.end() + 8]!r}…" for m in bad.finditer(text)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", [p for p in ZH_NOTEBOOKS if p.name < "08"], ids=lambda p: p.name[:2])
def test_one_header_form_across_the_chinese_notebooks(path):
    """Each zh notebook 00-07 opens with **目标：** (a list), then **用时：** and **前置：**, in that order."""
    first = next("".join(c["source"]) for c in _notebook(path)["cells"] if c["cell_type"] == "markdown")
    at = [first.find(mark) for mark in ("**目标：**", "**用时：**", "**前置：**")]
    assert -1 not in at and at == sorted(at), (path.name, at)
    assert not re.search(r"\*\*(时间|你将会?)[：。]?\*\*|\*\*目标。?\*\*|\*\*[^*]{1,6}：\*\* ", first), path.name


def test_self_check_html_uses_chinese_punctuation(tmp_path):
    from inferlab.widgets import selfcheck

    folder = tmp_path / "zh"
    folder.mkdir()
    (folder / "00.json").write_text(json.dumps({"questions": [
        {"question": "哪个阶段读取提示词？", "choices": [{"text": "Prefill", "correct": True, "why": "它一次读完。"},
                                                  {"text": "Decode", "correct": False, "why": "它一次写一个。"}]},
        {"question": "几个 token？", "answer": 14, "tolerance": 0, "unit": "个", "why": "数一数。"}]},
        ensure_ascii=False), encoding="utf-8")
    before = i18n._chosen
    il.set_language("zh")
    try:
        page = selfcheck.static_html(selfcheck.load_questions("00", folder), "00")
    finally:
        i18n._chosen = before
    assert "<b>Prefill</b>：它一次读完。" in page and "<b>14 个</b>。数一数。" in page
    assert "</b>: " not in page and "</b>. " not in page
