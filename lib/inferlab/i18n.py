"""The language a learner reads: English (the default) or Simplified Chinese, chosen in one place.

Everything the library shows a reader — figure titles, axis labels, hover text, legends, widget labels and
their messages, narration built from numbers, ``about.environment()``, the errors a widget shows — goes
through ``tr``. The English text is the key (as with gettext's msgid), so the code reads as it did; the
Chinese text lives in ``locale/zh_*.json`` (one file per area of the library). A test checks that every
``tr("...")`` in the library has a Chinese entry with the same ``{fields}``.

Choose the language once per notebook (``il.set_language("zh")``) or for a whole session with the
environment variable ``INFERLAB_LANG=zh``::

    >>> from inferlab import i18n
    >>> i18n.set_language("en"); i18n.tr("{n} tokens", n=3)
    '3 tokens'
    >>> i18n.by_language(en="To be, or not to be", zh="床前明月光，")   # examples that differ by reader
    'To be, or not to be'
"""

from __future__ import annotations

import json
import os
import re
import string
import warnings
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

LANGUAGES = {"en": "English", "zh": "简体中文"}
DEFAULT = "en"
ENV = "INFERLAB_LANG"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
# Spellings a learner may reasonably type for the two languages.
_ALIASES = {"zh-cn": "zh", "zh_cn": "zh", "zh-hans": "zh", "cn": "zh", "chinese": "zh", "中文": "zh",
            "en-us": "en", "en_us": "en", "en-gb": "en", "english": "en"}

# Traditional Chinese: the course's Chinese is in Simplified characters, the nearest it has; said once.
_TRADITIONAL = {"zh-tw", "zh_tw", "zh-hant", "zh_hant", "zh-hk", "zh_hk", "zh-mo", "zh_mo"}

_chosen: str | None = None
_warned: set[str] = set()  # settings already warned about (once each per process)
T = TypeVar("T")


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, UserWarning, stacklevel=3)


def _normalize(lang: Any, name: str) -> str:
    key = str(lang).strip().lower() if isinstance(lang, str) else lang
    if key in _TRADITIONAL:
        _warn_once(f"traditional:{key}", f"{name}={lang!r}: the course's Chinese edition is written in Simplified "
                   "characters; using it (\"zh\").")
        return "zh"
    key = _ALIASES.get(key, key)
    if key not in LANGUAGES:
        allowed = ", ".join(f"{k!r} ({v})" for k, v in LANGUAGES.items())
        # Built by hand, not with errors.bad_value: i18n sits below errors (errors may translate).
        raise ValueError(f"{name}={lang!r} is not allowed: expected one of {allowed}. "
                         'Fix: call il.set_language("en") or il.set_language("zh").')
    return key


def set_language(lang: str) -> str:
    """Choose the language of everything the library shows from now on; returns the code ("en" or "zh")."""
    global _chosen
    _chosen = _normalize(lang, "lang")
    return _chosen


def language() -> str:
    """The language in use: the last ``set_language``, else ``INFERLAB_LANG``, else English.

    A language the course does not have in ``INFERLAB_LANG`` never stops the library: it warns once and uses
    English (``set_language`` with one, a call in your own code, raises instead).
    """
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV, "").strip()
    if not env:
        return DEFAULT
    try:
        return _normalize(env, ENV)
    except ValueError:
        allowed = ", ".join(f"{k!r} ({v})" for k, v in LANGUAGES.items())
        _warn_once(f"env:{env}", f"{ENV}={env!r} is not a language of this course ({allowed}): using English. "
                   f"Fix: set {ENV}=zh or {ENV}=en, or unset it.")
        return DEFAULT


def catalog_files(lang: str) -> dict[str, dict[str, str]]:
    """Each ``locale/{lang}_*.json`` file's name -> its translations (English text -> translated text)."""
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(LOCALE_DIR.glob(f"{lang}_*.json"))}


@cache
def catalog(lang: str) -> dict[str, str]:
    """All translations into ``lang``, English text -> translated text (empty for English).

    Files are merged in name order; a text translated differently in two files keeps the first file's
    translation here (the test suite refuses such a pair, so it never reaches a learner).
    """
    merged: dict[str, str] = {}
    for table in catalog_files(lang).values():
        for key, text in table.items():
            merged.setdefault(key, text)
    return merged


def tr(text: str, /, **fields: Any) -> str:
    """``text`` in the current language, with ``{fields}`` filled in (``str.format`` syntax, e.g. ``{ms:.1f}``).

    A missing translation falls back to English (the test suite makes sure none is missing).
    """
    lang = language()
    if lang != DEFAULT:
        text = catalog(lang).get(text, text)
        if fields and lang == "zh":
            return _spaced_format(text, fields)
    return text.format(**fields) if fields else text


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z0-9]")


def _spaced_format(text: str, fields: dict[str, Any]) -> str:
    """``text.format(**fields)``, with the Chinese edition's spacing where a field meets a 汉字.

    The catalogs put a space between Chinese and Latin letters or digits ("在 GPT-2 上"). A field may be either
    (``在{name}上`` with ``name`` "内置模型" or "GPT-2 的形状"), so the space goes in here, on the side where a value
    that starts or ends with a Latin letter or digit touches a 汉字: "在内置模型上", "在 GPT-2 的形状上".
    """
    f = string.Formatter()
    out: list[str] = []
    after_field = False  # the last piece in out is a field's value
    for literal, name, spec, conversion in f.parse(text):
        if literal:
            if after_field and _LATIN.match(out[-1][-1:]) and _HAN.match(literal[0]):
                out.append(" ")
            out.append(literal)
            after_field = False
        if name is None:
            continue
        value, _ = f.get_field(name, (), fields)
        value = f.format_field(f.convert_field(value, conversion), f.vformat(spec, (), fields) if spec else "")
        if value and out and _HAN.match(out[-1][-1:]) and _LATIN.match(value[0]):
            out.append(" ")
        out.append(value)
        after_field = True
    return "".join(out)


def by_language(**choices: T) -> T:
    """Pick the value for the current language: ``by_language(en="...", zh="...")`` (both must be given)."""
    missing = sorted(set(LANGUAGES) - set(choices))
    extra = sorted(set(choices) - set(LANGUAGES))
    if missing or extra:
        fix = ", ".join(m + "=..." for m in missing) if missing else "only " + ", ".join(LANGUAGES)
        raise ValueError(f"by_language got {sorted(choices)}: expected one keyword per language "
                         f"({', '.join(LANGUAGES)}). Fix: give {fix}.")
    return choices[language()]
