"""The language switch: one mechanism, every message in both languages, English by default."""

from __future__ import annotations

import ast
import json
import re
import string
import warnings
from pathlib import Path

import pytest

from inferlab import i18n

LIB = Path(i18n.__file__).resolve().parent
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
# Messages whose Chinese text is rightly the English one (no word to translate). Keep this short.
# "prefill" and "decode": the edition's terms are the English words (data/zh_terms.json), glossed once in each
# notebook's prose, not in every legend, hover and progress bar (the review's "gloss once").
SAME_IN_BOTH: set[str] = {"prefill", "decode"}


def _sources() -> list[tuple[str, str]]:
    """(where, Python source) for every library module and every English notebook's code cell."""
    out = [(str(p.relative_to(LIB)), p.read_text(encoding="utf-8")) for p in sorted(LIB.rglob("*.py"))
           if p.name != "i18n.py"]
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                # IPython magics and shell lines are not Python; blank them out, keeping line numbers.
                src = "\n".join("" if ln.lstrip().startswith(("!", "%")) else ln for ln in src.split("\n"))
                out.append((f"{nb.name} cell {i}", src))
    return out


def _tr_calls() -> list[tuple[str, int, ast.expr]]:
    """Every ``tr(...)`` / ``il.tr(...)`` call in the library and the notebooks, with its first argument."""
    calls = []
    for where, source in _sources():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "tr") or (isinstance(f, ast.Attribute) and f.attr == "tr"):
                calls.append((where, node.lineno, node.args[0]))
    return calls


def _fields(text: str) -> set[str]:
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_message_is_a_literal_with_a_chinese_translation():
    calls = _tr_calls()
    assert len(calls) > 50, "the library should show its text through i18n.tr"
    zh = i18n.catalog("zh")
    not_literal = [f"{p}:{ln}" for p, ln, arg in calls
                   if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str))]
    assert not not_literal, f"tr() needs a literal English text (fields go in keywords): {not_literal}"
    missing = sorted({f"{p}:{ln}: {arg.value!r}" for p, ln, arg in calls if arg.value not in zh})
    assert not missing, "add these to lib/inferlab/locale/zh_*.json:\n" + "\n".join(missing)


def test_translations_keep_the_fields_and_are_chinese():
    zh = i18n.catalog("zh")
    assert zh, "no Chinese catalog found in lib/inferlab/locale/"
    wrong_fields = [k for k, v in zh.items() if _fields(k) != _fields(v)]
    assert not wrong_fields, f"translation must use the same {{fields}} as the English: {wrong_fields[:5]}"
    words = re.compile(r"[A-Za-z]")
    untranslated = [k for k, v in zh.items()
                    if words.search(re.sub(r"\{[^}]*\}", "", k)) and not CJK.search(v) and k not in SAME_IN_BOTH]
    assert not untranslated, f"these Chinese entries contain no Chinese: {untranslated[:10]}"


def test_one_translation_per_text_across_catalogs():
    seen: dict[str, tuple[str, str]] = {}
    clashes = []
    for name, table in i18n.catalog_files("zh").items():
        for key, text in table.items():
            if key in seen and seen[key][1] != text:
                clashes.append(f"{key!r}: {seen[key][0]} says {seen[key][1]!r}, {name} says {text!r}")
            seen.setdefault(key, (name, text))
    assert not clashes, "one English text, one Chinese translation:\n" + "\n".join(clashes)


def test_no_stale_translations():
    used = {arg.value for _, _, arg in _tr_calls() if isinstance(arg, ast.Constant)}
    stale = sorted(set(i18n.catalog("zh")) - used)
    assert not stale, f"remove from lib/inferlab/locale/zh_*.json (no tr() uses them): {stale[:10]}"


@pytest.fixture
def restore_language():
    before = i18n._chosen
    yield
    i18n._chosen = before


def test_english_is_the_default_and_the_env_variable_chooses(monkeypatch, restore_language):
    i18n._chosen = None
    monkeypatch.delenv(i18n.ENV, raising=False)
    assert i18n.language() == "en"
    monkeypatch.setenv(i18n.ENV, "zh_CN")
    assert i18n.language() == "zh"
    i18n.set_language("en")  # an explicit choice wins over the environment
    assert i18n.language() == "en"


def test_tr_switches_language_and_fills_fields(restore_language):
    key = next(k for k in i18n.catalog("zh") if _fields(k))
    fields = dict.fromkeys(_fields(key), 1)
    i18n.set_language("en")
    english = i18n.tr(key, **fields)
    i18n.set_language("zh")
    chinese = i18n.tr(key, **fields)
    assert english != chinese and CJK.search(chinese) and "{" not in chinese
    assert i18n.by_language(en="a", zh="b") == "b"


def test_bad_language_names_the_choices(restore_language):
    with pytest.raises(ValueError, match=r"lang='fr' is not allowed.*'en'.*'zh'.*set_language"):
        i18n.set_language("fr")
    with pytest.raises(ValueError, match="give zh="):
        i18n.by_language(en="only English")


@pytest.mark.parametrize("value", ["fr", "de_DE", "klingon"])
def test_an_unknown_language_in_the_environment_warns_once_and_uses_english(monkeypatch, restore_language, value):
    """A language setting never stops inference: INFERLAB_LANG=fr warns once, then the library speaks English."""
    monkeypatch.setattr(i18n, "_chosen", None)
    monkeypatch.setattr(i18n, "_warned", set())
    monkeypatch.setenv(i18n.ENV, value)
    with pytest.warns(UserWarning, match=rf"INFERLAB_LANG='{value}' is not a language of this course .*using English"):
        assert i18n.language() == "en"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: no warning
        assert i18n.language() == "en" and i18n.tr("tokens/s") == "tokens/s"
    with pytest.raises(ValueError, match="lang='fr' is not allowed"):  # an explicit call in your code still raises
        i18n.set_language("fr")


@pytest.mark.parametrize("value", ["zh-TW", "zh_TW", "zh-Hant", "zh-HK"])
def test_traditional_chinese_uses_the_simplified_edition_with_a_note(monkeypatch, restore_language, value):
    monkeypatch.setattr(i18n, "_chosen", None)
    monkeypatch.setattr(i18n, "_warned", set())
    monkeypatch.setenv(i18n.ENV, value)
    with pytest.warns(UserWarning, match="Simplified characters"):
        assert i18n.language() == "zh"
    assert i18n.set_language(value) == "zh"
