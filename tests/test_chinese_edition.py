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


_CJK = re.compile(r"[\u4e00-\u9fff]")


def _strings(node):
    """Every string inside a JSON value (a plotly figure, a widget's state, a self-check file)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def stored_output_texts(nb_path: Path) -> list[str]:
    """What a zh notebook's stored outputs show a reader: printed text, Markdown, HTML, every string of a stored
    plotly figure, and the labels/options/HTML held in the stored widget state. Only strings with Chinese in them:
    a figure's colours, trace types and numbers are not prose, and the term table is about Chinese wording."""
    nb = _notebook(nb_path)
    found: list[str] = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                found.append("".join(output["text"]) if isinstance(output["text"], list) else output["text"])
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/"):
                    found.append("".join(value) if isinstance(value, list) else value)
                elif "plotly" in mime or "widget" in mime:
                    found.extend(_strings(value))
    state = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model in state.get("state", {}).values():
        found.extend(s for k, v in model.get("state", {}).items()
                     if k in {"description", "value", "placeholder", "tooltip", "_options_labels", "_titles", "options"}
                     for s in _strings(v))
    return [s for s in found if _CJK.search(s)]


def zh_texts() -> dict[str, str]:
    """Every Chinese text a reader meets, by where it lives (what the term lint and the typography test read): the zh
    notebooks' markdown and stored outputs, the zh self-checks, the glossary, the locale strings, README.zh.md and
    docs/*.zh.md."""
    texts = {str(p.relative_to(ROOT)): _markdown(p) for p in ZH_NOTEBOOKS
             if str(p.relative_to(ROOT)) not in TERMS["pending"]}
    texts.update({f"{p.relative_to(ROOT)} (stored outputs)": "\n".join(stored_output_texts(p)) for p in ZH_NOTEBOOKS
                  if str(p.relative_to(ROOT)) not in TERMS["pending"]})
    texts.update({str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
                  for p in [ROOT / "README.zh.md", ROOT / "notebooks" / "zh" / "GLOSSARY.md",
                            *sorted((ROOT / "docs").glob("*.zh.md"))]})
    for p in sorted((ROOT / "data" / "selfcheck" / "zh").glob("*.json")):
        texts[str(p.relative_to(ROOT))] = "\n".join(_strings(json.loads(p.read_text(encoding="utf-8"))))
    texts.update(_locale_values())
    return texts


def test_term_lint_reads_self_checks_glossary_and_stored_outputs():
    """The places a reader looks that the first lint missed are in what it reads."""
    texts = zh_texts()
    for where in ["data/selfcheck/zh/08.json", "notebooks/zh/GLOSSARY.md",
                  "notebooks/zh/00_start_here.ipynb (stored outputs)"]:
        assert texts.get(where, "").strip(), where
    assert _CJK.search(texts["notebooks/zh/06_sampling.ipynb (stored outputs)"])


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
    rows = [HardwareFloor(spec, {"gpt2": 0.005, "7B model (fp16)": 0.1}, {"gpt2": 0.5e9, "7B model (fp16)": 14e9})]
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
    assert "7B 模型（fp16）" in seen["hardware"] and "7B model" not in seen["hardware"]


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
    # zh-only additions: the language, and --notebook-dir so the zh notebooks' "English version" links (../) resolve
    zh = commands(zh_text.replace("notebooks/zh/", "notebooks/").replace(', "INFERLAB_LANG": "zh"', "")
                  .replace("--notebook-dir=notebooks ", ""))
    missing = sorted(c for c in en - zh if not any(c in z for z in zh))
    assert not missing, f"docs/WORKSHOP.zh.md lacks what docs/WORKSHOP.md says: {missing}"


# --- item 7: Chinese typography -----------------------------------------------------------------------------------

_CODE = _QUOTED[:2]  # fenced and inline code keep their own punctuation


def test_no_ascii_space_after_chinese_punctuation_nor_ascii_ellipsis():
    """。，：；！？ take no ASCII space after them (a table's `|` aside); Chinese text ends with …… not '...'."""
    bad = re.compile(r"[。：，；！？] +(?=[^\s|])|[\u4e00-\u9fff] ?\.\.\.(?!\))|\.\.\.[\u4e00-\u9fff]")
    found = []
    for where, text in zh_texts().items():
        if where.endswith("(stored outputs)"):  # print(label, value) puts that space there: code, not prose
            continue
        for pattern in _CODE:
            text = pattern.sub("X", text)
        found += [f"{where}: …{text[max(0, m.start() - 12): m.end() + 8]!r}…" for m in bad.finditer(text)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_one_header_form_across_the_chinese_notebooks(path):
    """Each zh notebook opens with **目标**： (a list), then **用时**： and **前置**：, in that order (the colon outside
    the bold: see the next test)."""
    first = next("".join(c["source"]) for c in _notebook(path)["cells"] if c["cell_type"] == "markdown")
    at = [first.find(mark) for mark in ("**目标**：", "**用时**：", "**前置**：")]
    assert -1 not in at and at == sorted(at), (path.name, at)
    assert not re.search(r"\*\*(时间|你将会?)[：。]?\*\*|\*\*目标。\*\*|\*\*[^*]{1,6}：\*\*", first), path.name


# --- bold that renders: CommonMark's flanking rules ----------------------------------------------------------------
# JupyterLab (marked) and GitHub (CommonMark) will not close ``**`` after punctuation when a letter follows, nor open
# it before punctuation when a letter precedes: ``**目标：**学完`` shows its asterisks, since full-width ：（）。 are
# punctuation and 汉字 are letters. The lint renders each text with a CommonMark parser and looks for asterisks left
# over in the text it shows.

def unrendered_emphasis(text: str) -> list[str]:
    """The pieces of ``text`` (Markdown) that a CommonMark renderer shows with literal ``**`` or ``__``."""
    from markdown_it import MarkdownIt

    text = re.sub(r"\{[^{}\n]*\}", "X", text)  # a catalog's {fields}: a value stands there when a reader sees it
    text = re.sub(r"(?<=\d)\*\*(?=\d)", "^", text)  # 2**64 in an error message is arithmetic, not emphasis
    found: list[str] = []

    def walk(tokens):
        for tok in tokens:
            if tok.type == "text" and ("**" in tok.content or "__" in tok.content):
                found.append(tok.content)
            walk(tok.children or [])

    walk(MarkdownIt("commonmark").parse(text))
    return found


def _stored_markdown(nb_path: Path) -> list[str]:
    """The Markdown a zh notebook's stored outputs show (narration is printed as ``text/markdown``)."""
    out = []
    for cell in _notebook(nb_path)["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/markdown")
            if text:
                out.append("".join(text) if isinstance(text, list) else text)
    return out


def bold_texts() -> dict[str, str]:
    """Everything Chinese a reader sees as Markdown: the zh notebooks (cells and stored Markdown outputs), the
    glossary, README.zh, docs/*.zh.md, every zh locale string and every zh self-check string."""
    texts = {str(p.relative_to(ROOT)): _markdown(p) for p in ZH_NOTEBOOKS}
    texts.update({f"{p.relative_to(ROOT)} (stored output {i})": t for p in ZH_NOTEBOOKS
                  for i, t in enumerate(_stored_markdown(p))})
    texts.update({str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in
                  [ROOT / "notebooks" / "zh" / "GLOSSARY.md", ROOT / "README.zh.md",
                   *sorted((ROOT / "docs").glob("*.zh.md"))]})
    texts.update({f"{p.name}: {k}": v for p in sorted((ROOT / "lib" / "inferlab" / "locale").glob("zh_*.json"))
                  for k, v in json.loads(p.read_text(encoding="utf-8")).items()})
    for p in sorted((ROOT / "data" / "selfcheck" / "zh").glob("*.json")):
        texts.update({f"{p.relative_to(ROOT)} #{i}": s
                      for i, s in enumerate(_strings(json.loads(p.read_text(encoding="utf-8"))))})
    return texts


def test_the_bold_lint_sees_what_commonmark_does_not_render():
    assert unrendered_emphasis("**目标：**学完之后") and unrendered_emphasis("拖动**[温度](G.md#t)**滑块")
    assert unrendered_emphasis("把**“引号”**放进粗体")
    assert not unrendered_emphasis("**目标**：学完之后") and not unrendered_emphasis("拖动[**温度**](G.md#t)滑块")
    assert not unrendered_emphasis("是**{name}**：{n} 个") and not unrendered_emphasis("小于 2**64 的整数")
    assert not unrendered_emphasis("`a**b` 与 **粗体**。")


def test_every_bold_span_in_the_chinese_edition_renders():
    found = [f"{where}: {piece[:60]!r}" for where, text in bold_texts().items() for piece in unrendered_emphasis(text)]
    assert not found, "\n".join(found)


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


# --- issue 48, item 6: the timeline and ModelInfo speak Chinese in the zh edition, English unchanged --------------

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_timeline_names_the_jobs_and_the_characters_its_byte_tokens_belong_to(model, lang):
    """A Chinese answer is mostly byte tokens: each timeline row names the character its bytes belong to (as 01's
    chips do), and the legend says Prefill / Decode. The English figure keeps its labels as they were."""
    from inferlab.viz import latency as vlat

    before = i18n._chosen
    il.set_language(lang)
    try:
        trace = il.generate(model, "床前明月光，", max_new_tokens=6, temperature=0)
        fig = vlat.timeline(trace)
    finally:
        i18n._chosen = before
    names = {t.name for t in fig.data if t.type == "bar"}
    rows = [y for t in fig.data if t.type == "bar" for y in t.y][1:]
    if lang == "en":
        assert {"prefill", "decode"} <= names
        assert rows[0] == f"0: prefill → {vlat.show_token(trace.generated_pieces[0])!r}"
    else:
        assert {"Prefill", "Decode"} <= names and "prefill" not in names
        assert rows[0].startswith("0：Prefill → ")
        byte_rows = [r for r in rows if "⟨" in r]
        assert byte_rows, rows  # the bundled model writes Chinese: some tokens are bytes of a character
        assert any(" 属于 " in r for r in byte_rows), byte_rows


def test_byte_tokens_name_their_character():
    from inferlab.viz.latency import _pieces_with_characters

    before = i18n._chosen
    il.set_language("zh")
    try:
        labels = _pieces_with_characters(["床", "⟨e7⟩", "⟨9f⟩⟨a5⟩", "。", "⟨e5⟩"])
    finally:
        i18n._chosen = before
    assert labels == ["床", "⟨e7⟩ 属于 知", "⟨9f⟩⟨a5⟩ 属于 知", "。", "⟨e5⟩"]  # an unfinished character: bytes only


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_model_info_says_where_the_weights_came_from_in_the_readers_language(model, lang):
    import dataclasses

    info = dataclasses.replace(model.info, source="random-weights")
    before = i18n._chosen
    il.set_language(lang)
    try:
        text = repr(info)
    finally:
        i18n._chosen = before
    assert ("from random-weights:" in text) if lang == "en" else ("随机权重" in text and "random-weights" not in text)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_profile_names_the_decode_step_and_uses_chinese_commas(lang):
    from inferlab.measure.profiling import StepProfile

    prof = StepProfile("gpt2 decode step", 0.043, {"matmul": 0.038, "attention": 0.001}, ())
    before = i18n._chosen
    il.set_language(lang)
    try:
        text = repr(prof)
    finally:
        i18n._chosen = before
    if lang == "en":
        assert text.startswith("StepProfile(gpt2 decode step: 43.00 ms/step = ") and ", " in text
    else:
        assert "gpt2 Decode 步" in text and "decode step" not in text and ", " not in text and "，" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_projection_lists_its_axes_with_the_readers_comma(lang):
    import torch

    from inferlab.vocab_space import Projection

    pca = Projection(["one", "two"], ["numbers", "numbers"], torch.zeros(2, 2), [0.18, 0.13])
    before = i18n._chosen
    il.set_language(lang)
    try:
        text = repr(pca)
    finally:
        i18n._chosen = before
    assert ("18%, 13%" in text) if lang == "en" else ("18%、13%" in text and ", " not in text)


def test_self_check_answers_print_whole_numbers_with_separators():
    """09's block size (1,179,648 bytes) showed as 1.17965e+06 through ``:g``."""
    from inferlab.widgets.selfcheck import Question, grade, number, static_html

    assert number(1179648) == "1,179,648" and number(0.731) == "0.731" and number(38.6) == "38.6"
    q = Question("how many bytes?", answer=1179648, tolerance=0, unit="bytes", why="16 x 73,728.")
    assert "1,179,648 bytes" in static_html([q], "09_serving")
    assert "the answer is 1,179,648 bytes" in grade(q, "12", reveal=True)[1]


def test_a_trade_off_says_which_side_is_paid():
    """“A，换来 B” reads "give A, get B": 09's answer said the reverse of its lesson. A trade-off in a zh self-check
    names the price with 以……为代价 before what it buys."""
    found = [s for p in sorted((ROOT / "data" / "selfcheck" / "zh").glob("*.json"))
             for s in _strings(json.loads(p.read_text(encoding="utf-8"))) if "换来" in s and "为代价，换来" not in s]
    assert not found, found


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_serving_policy_names_in_the_readers_language(lang):
    from inferlab.serve.report import policy_text

    before = i18n._chosen
    il.set_language(lang)
    try:
        names = [policy_text(k) for k in ("static", "continuous", "contiguous max-length", "paged", "other")]
    finally:
        i18n._chosen = before
    expected = (["static", "continuous", "contiguous max-length", "paged", "other"] if lang == "en" else
                ["静态批处理", "连续批处理", "按最长长度整段预留", "分页", "other"])
    assert names == expected


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_printed_labels_and_numbers_follow_the_reader(lang):
    """What 03, 04, 07 and 09 print from identifiers (a prompt's language, a job, a kernel, a peer engine) shows in
    the reader's language; 09's SLO and cached positions carry separators. English prints what it always did."""
    from types import SimpleNamespace as NS

    from inferlab import cost
    from inferlab.measure.kernels import RECORDING, KernelComparison
    from inferlab.measure.languages import PromptTTFT
    from inferlab.measure.serve_runs import SERVE_MODEL_LAYOUT
    from inferlab.measure.sweeps import Sweep
    from inferlab.narrate import n03, n07, n09
    from inferlab.timing import summarize
    from inferlab.tokens import TextCost

    kernels = KernelComparison({k: Sweep("prefill", "prompt length (tokens)", (16,), ((0.01, 0.011),), (16,))
                                for k in ("sdpa", RECORDING)}, {}, {"sdpa": (0.0,), RECORDING: (1e-6,)})
    rows = [PromptTTFT("gpt2", TextCost(name, 10, 20, 20), summarize([0.01, 0.012])) for name in ("中文", "English")]
    peers = NS(tokens_per_s={"inferlab.serve": 190.0, "generate() padded": 92.0, SERVE_MODEL_LAYOUT: 97.0},
               same_as_serve={"generate() padded": 8, SERVE_MODEL_LAYOUT: 8}, requests=8, new_tokens=32)
    steady = NS(sustained=True, offered_per_s=7.5, finished_per_s=7.5, tokens_per_s=174.0, queue=(7, 7))
    points = [NS(rate=7.5, summary=NS(ttft=NS(p99=0.767)), steady=steady)]
    before = i18n._chosen
    il.set_language(lang)
    try:
        seen = {"job": repr(cost.decode_cost(cost.published_shape("gpt2"), 8)), "kernels": repr(kernels),
                "table": n07.language_table(rows), "peer": n09.peer(peers), "knee": n09.knee(points, 1.0),
                "prefix": n09.prefix(0.288, 0.042, 256, 1280), "lens": n03.logit_lens(["a", "b"], [0.0, 0.2], 0.5)}
    finally:
        i18n._chosen = before
    assert "1,000 ms" in seen["knee"] and "1000.0" not in seen["knee"] and "1,280" in seen["prefix"]
    if lang == "en":
        assert seen["job"].startswith("Cost(decode: ") and "eager + recording" in seen["kernels"]
        assert "| English |" in seen["table"] and "generate() padded:" in seen["peer"]
        assert "a: 0%, b: 20%" in seen["lens"]
    else:
        assert seen["job"].startswith("Cost(Decode：") and "eager + 记录注意力" in seen["kernels"]
        assert "| 英语 |" in seen["table"] and "English" not in seen["table"]
        assert "generate()（填充）" in seen["peer"] and "padded" not in seen["peer"] and "a：0%，b：20%" in seen["lens"]


def test_a_latin_field_between_chinese_characters_gets_the_editions_space():
    """The catalogs space Latin words and digits off from 汉字 ("在 GPT-2 上"); a field that may be either
    ("在{name}上") gets that space only where its value starts or ends with a Latin letter or digit."""
    key = "{x:.2f}x DynamicCache's on {name}"
    before = i18n._chosen
    try:
        il.set_language("zh")
        assert i18n.catalog("zh")[key].startswith("在{name}上")
        latin, chinese = (il.tr(key, x=1.05, name=il.tr(n)) for n in ("GPT-2's shape", "the bundled model"))
        assert latin.startswith("在 GPT-2 的形状上") and chinese.startswith("在内置模型上")
        assert il.tr("{n} more merge(s) to go", n=3) == i18n.catalog("zh")["{n} more merge(s) to go"].format(n=3)
        il.set_language("en")
        assert il.tr(key, x=1.05, name="GPT-2's shape") == "1.05x DynamicCache's on GPT-2's shape"
    finally:
        i18n._chosen = before
