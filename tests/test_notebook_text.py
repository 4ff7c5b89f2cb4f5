"""What every notebook shows as text, in both editions: glyphs every font has, one "Next" style, code that fits.

- No emoji: a browser without an emoji font (CI's WenQuanYi, a plain Linux desktop) draws them as empty boxes.
- The closing link to the next notebook reads the same everywhere: "**Next:** [NN · Title](NN_x.ipynb)", the
  title being the target's heading up to its colon (zh: "**下一篇**：[NN · 标题](…)"); the last one leads back to 00.
- Code lines fit a JupyterLab cell at 1280 px with the file browser open, without a horizontal scrollbar.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
import regex

from inferlab import progress

ROOT = Path(__file__).resolve().parents[1]
ORDER = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PATHS = [f"{e}{n}" for e in ("", "zh/") for n in ORDER]
EMOJI = regex.compile(r"\p{Extended_Pictographic}|\uFE0F")  # pictographs (⏱ ⏳ ✔ …) and the emoji selector
CODE_WIDTH = 88  # columns (a CJK character takes two): what a code cell shows at 1280 px beside the file browser


def _cells(path: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / path).read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("path", PATHS)
def test_markdown_has_no_emoji(path):
    found = {(i, ch) for i, c in enumerate(_cells(path)) if c["cell_type"] == "markdown" for ch in
             EMOJI.findall(_source(c))}
    assert not found, f"{path}: emoji (cell, character) {sorted(found)}: use words, e.g. '**Run time:**'"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_slow_cell_line_has_no_emoji(language, monkeypatch):
    from inferlab import i18n

    monkeypatch.setattr(i18n, "_chosen", language)
    line = progress._slow_line(12.0)
    assert "12" in line and ("仍在运行" in line) == (language == "zh") and not EMOJI.search(line), line


def _title(path: str) -> tuple[str, str]:
    """The number and short title of a notebook: its heading "# NN · Title: subtitle" up to the colon."""
    heading = next(line for line in _source(_cells(path)[0]).splitlines() if line.startswith("# "))
    number, _, title = heading[2:].partition(" · ")
    return number, re.split(r"[:：]", title, maxsplit=1)[0].strip()


@pytest.mark.parametrize("path", PATHS)
def test_the_last_cell_links_to_the_next_notebook_in_one_style(path):
    zh = path.startswith("zh/")
    i = ORDER.index(path.removeprefix("zh/"))
    target = ORDER[(i + 1) % len(ORDER)]
    number, title = _title(("zh/" if zh else "") + target)
    label = ("**下一篇**：", "**回到开头**：") if zh else ("**Next:** ", "**Back to the start:** ")
    expected = f"{label[i + 1 == len(ORDER)]}[{number} · {title}]({target})"
    last = _cells(path)[-1]
    assert last["cell_type"] == "markdown" and _source(last).strip() == expected, (path, _source(last), expected)


def _columns(line: str) -> int:
    """Columns on screen: a wide (CJK) character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


@pytest.mark.parametrize("path", PATHS)
def test_code_lines_fit_the_cell(path):
    long = [(i, _columns(line), line) for i, c in enumerate(_cells(path)) if c["cell_type"] == "code"
            for line in _source(c).splitlines() if _columns(line) > CODE_WIDTH]
    assert not long, f"{path}: {len(long)} code lines over {CODE_WIDTH} characters (cell, length, line): {long[:5]}"
