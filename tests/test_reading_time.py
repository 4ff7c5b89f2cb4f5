"""The course knows its own shape: reading times measured by ``inferlab.tools.reading_time``, the README's and
notebook 00's tables carrying them, and 00's map listing every notebook of both editions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from inferlab.tools import reading_time as rt
from inferlab.tools.notebook_files import NotebookError

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE_MIN = 5  # a stated time may drift this far from the tool's before the tables must be redone
HOURS_TOLERANCE = 0.5


def _cell(kind: str, text: str, outputs=None, seconds: float | None = None) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": text}
    if kind == "code":
        cell["outputs"] = outputs or []
        if seconds is not None:
            cell["metadata"]["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00.000000Z",
                                             "shell.execute_reply": f"2026-01-01T00:00:{seconds:09.6f}Z"}
    return cell


def _write(path: Path, cells: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
                    encoding="utf-8")
    return path


def _toy(folder: Path) -> Path:
    return _write(folder / "05_toy.ipynb", [
        _cell("markdown", "# Five words in this heading"),
        _cell("code", "x", seconds=30.0, outputs=[
            {"output_type": "stream", "name": "stdout", "text": "two words"},
            {"output_type": "stream", "name": "stderr", "text": "progress lines are not read"},
            {"output_type": "execute_result", "data": {"text/markdown": "three more words", "text/plain": "ignored"}},
            {"output_type": "display_data", "data": {"application/vnd.plotly.v1+json": {}, "text/plain": "fig"}},
            {"output_type": "display_data", "data": {"application/vnd.jupyter.widget-view+json": {},
                                                     "text/plain": "a placeholder"}}]),
        _cell("code", "y")])


def test_words_figures_views_and_run_time_of_one_notebook(tmp_path):
    t = rt.reading_time(_toy(tmp_path))
    assert (t.words, t.cjk_chars, t.figures, t.views, t.code_cells) == (10, 0, 1, 1, 2)
    assert t.run_s == pytest.approx(30.0) and t.edition == "en" and t.number == "05"
    expected = 10 / rt.WORDS_PER_MIN + rt.FIGURE_MIN + rt.VIEW_MIN + 2 * rt.CODE_CELL_MIN
    assert t.reading_min == pytest.approx(expected) and t.total_min == pytest.approx(expected + 0.5)


def test_chinese_counts_characters_at_its_own_rate(tmp_path):
    t = rt.reading_time(_write(tmp_path / "zh" / "00_x.ipynb", [_cell("markdown", "预填充 prefill 很快。")]))
    assert (t.edition, t.cjk_chars, t.words) == ("zh", 5, 1)
    assert t.reading_min == pytest.approx(5 / rt.CJK_CHARS_PER_MIN + 1 / rt.WORDS_PER_MIN)


def test_a_file_that_is_no_notebook_is_named_with_a_fix(tmp_path):
    bad = tmp_path / "01_bad.ipynb"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(NotebookError, match=r"01_bad\.ipynb: cannot be read as a notebook .* Fix:"):
        rt.reading_time(bad)


def test_the_command_prints_a_table_of_both_editions(tmp_path, capsys):
    _toy(tmp_path / "notebooks")
    _toy(tmp_path / "notebooks" / "zh")
    assert rt.main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 05_toy.ipynb | en |" in out and "| 05_toy.ipynb | zh |" in out and "en: " in out
    assert rt.main(["--root", str(tmp_path / "nowhere")]) == 1
    assert "has no notebooks/ folder" in capsys.readouterr().err


def test_rounding_to_five_minutes():
    assert [rt.rounded(m) for m in (0.4, 31.8, 32.6, 67.5)] == [5, 30, 35, 70]


# ------------------------------------------------------------------ the course's own tables
@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, float]]:
    times = rt.course(ROOT)
    by = {"en": {}, "zh": {}}
    for t in times:
        by[t.edition][t.number] = t.total_min
    return by


def _rows(text: str) -> dict[str, int]:
    """``| NN | ... | minutes |`` rows of a Markdown table: the notebook's number and its last column."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\d\d) \|.*\| (\d+) \|$", text, re.M)}


def _drift(stated: dict[str, int], measured: dict[str, float]) -> dict[str, tuple[int, float]]:
    return {n: (s, round(measured[n], 1)) for n, s in stated.items() if abs(s - measured[n]) > TOLERANCE_MIN}


@pytest.mark.parametrize("readme, edition", [("README.md", "en"), ("README.zh.md", "zh")])
def test_the_readmes_minutes_are_the_tools(readme, edition, measured):
    text = (ROOT / readme).read_text(encoding="utf-8")
    stated = _rows(text)
    assert set(stated) == set(measured[edition]), f"{readme}'s table lists {sorted(stated)}"
    assert not _drift(stated, measured[edition]), (
        f"{readme}: stated vs measured minutes {_drift(stated, measured[edition])}; "
        "fix: copy the Rounded column of `python -m inferlab.tools.reading_time` into the table")
    hours = float(re.search(r"about (\d+(?:\.\d)?) hours|约 (\d+(?:\.\d)?) 小时", text).group(1 if edition == "en"
                                                                                          else 2))
    assert abs(hours - sum(measured[edition].values()) / 60) <= HOURS_TOLERANCE


def _first_cell(path: Path) -> str:
    return "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_the_map_in_00_lists_every_notebook_with_its_minutes(edition, measured):
    folder = ROOT / "notebooks" / ("zh" if edition == "zh" else "")
    files = {p.name[:2] for p in folder.glob("[0-9][0-9]_*.ipynb")}
    stated = _rows(_first_cell(folder / "00_start_here.ipynb"))
    assert set(stated) == files, f"00's map lists {sorted(stated)}, the folder holds {sorted(files)}"
    links = re.findall(r"\]\((\d\d_[\w]+\.ipynb)\)", _first_cell(folder / "00_start_here.ipynb"))
    assert {f[:2] for f in links} | {"00"} == files and all((folder / f).is_file() for f in links)
    assert not _drift(stated, measured[edition]), f"00's map: stated vs measured {_drift(stated, measured[edition])}"


# Every notebook's header states its time: "**Time:** about N minutes" (00: "here (about N minutes)"),
# "**用时**：约 N 分钟".
HEADER = r"\*\*Time:\*\* about (\d+) minutes|here \(about (\d+) minutes\)|\*\*用时\*\*：约 (\d+) 分钟"
NUMBERS = [f"{n:02d}" for n in range(12)]


@pytest.mark.parametrize("edition", ["en", "zh"])
@pytest.mark.parametrize("number", NUMBERS)
def test_the_headers_time_is_the_tools(number, edition, measured):
    folder = ROOT / "notebooks" / ("zh" if edition == "zh" else "")
    path = next(folder.glob(f"{number}_*.ipynb"))
    found = re.search(HEADER, _first_cell(path))
    assert found, f"{path.name}: no time in its header"
    stated = int(next(g for g in found.groups() if g))
    assert abs(stated - measured[edition][number]) <= TOLERANCE_MIN, (path, stated, measured[edition][number])


def test_the_chinese_rate_still_matches_the_translation():
    """240 characters a minute assumes about 1.85 characters per English word; if the translation's ratio drifts
    more than 10% from that, the two editions' times stop being comparable: change ``CJK_CHARS_PER_MIN``."""
    ratio = rt.chars_per_word(rt.course(ROOT))
    assumed = rt.CJK_CHARS_PER_MIN / rt.WORDS_PER_MIN
    assert ratio is not None and abs(ratio / assumed - 1) < 0.10, (ratio, assumed)


def test_the_real_command_runs_without_torch(tmp_path):
    """One run of the real command in a subprocess; it reads JSON only, so it never imports torch."""
    import subprocess
    import sys

    _toy(tmp_path / "notebooks")
    script = ("import runpy, sys\n"
              "sys.argv = ['reading_time', '--root', sys.argv[1]]\n"
              "try:\n"
              "    runpy.run_module('inferlab.tools.reading_time', run_name='__main__')\n"
              "except SystemExit as stop:\n"
              "    assert stop.code == 0, stop.code\n"
              "assert 'torch' not in sys.modules, 'reading_time imported torch'\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| 05_toy.ipynb | en | 10 |" in done.stdout
