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
    before = il.set_language(lang)
    try:
        ns = {"il": il, "m": model}
        exec(params, ns)
        exec(demo, ns)
    finally:
        il.set_language(before)
    free, cut, stop_text = ns["free"], ns["cut"], ns["stop_text"]
    assert stop_text and stop_text in free.text, f"{stop_text!r} is not in the text the reader saw: {free.text!r}"
    assert "\ufffd" not in stop_text and "⟨" not in stop_text
    assert cut.stop_reason == f"stop string {stop_text!r}", (cut.stop_reason, free.text)
    assert len(cut.generated_ids) < len(free.generated_ids)
    assert free.text.startswith(cut.text) and stop_text not in cut.text
