"""Committed notebooks are stored executed, fresh and error-free, and follow the course's shape.

Each test reads what git holds (``stored_text``): a learner's autosaved working copy is not what these check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from inferlab.tools.notebook_files import notebooks_in, stored_text
from inferlab.tools.notebook_tools import edition_problems, problems

ROOT = Path(__file__).resolve().parents[1]
ALL = notebooks_in(ROOT)  # this checkout's notebooks (both editions), not the installed library's
MAX_CELL_LINES = 15  # STYLE.md: "a code cell that needs more than about 15 lines belongs in the library"


def _id(path: Path) -> str:
    return path.relative_to(ROOT / "notebooks").as_posix()  # "01_tokens.ipynb", "zh/01_tokens.ipynb"


def _stored(path: Path) -> dict:
    text = stored_text(path)
    return json.loads(path.read_text(encoding="utf-8") if text is None else text)


def test_there_are_notebooks():
    for edition in ("", "zh/"):
        names = [_id(p) for p in ALL if p.parent.name == (edition.rstrip("/") or "notebooks")]
        assert names[0] == f"{edition}00_start_here.ipynb" and len(names) >= 10, names
        assert names == sorted(names)


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_stored_outputs_are_fresh(path: Path):
    assert problems(path) == [], f"{path.name}: " + "; ".join(problems(path))


def test_timing_notebooks_of_an_edition_agree():
    """The gate's reference decode step (GPT-2's shape, batch 1) agrees across the timing notebooks of each edition
    (``inferlab.gate``; each notebook's own rules are part of ``problems``)."""
    found = edition_problems(ALL)
    assert not found, "\n".join(f"{_id(p)}: {issue}" for p, issues in found.items() for issue in issues)


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_notebook_shape(path: Path):
    nb = _stored(path)
    cells = nb["cells"]
    text = lambda c: "".join(c["source"])  # noqa: E731
    # a title first, after the link to the other language's twin (*[中文版](zh/...)* / *[English version](...)*)
    # and the one to this notebook in Colab
    first = re.sub(r"^\s*\*\[[^\]]+\]\([^)]+\.ipynb\)(?: · \[[^\]]+\]\(https://colab[^)]+\))?\*\s*", "",
                   text(cells[0]))
    assert cells[0]["cell_type"] == "markdown" and first.startswith("# ")
    markdown = "\n".join(text(c) for c in cells if c["cell_type"] == "markdown")
    assert "<details>" in markdown, "exercises need solutions hidden in <details>"
    assert any(c["cell_type"] == "code" and text(c).lstrip().startswith("# NBVAL_CHECK_OUTPUT") for c in cells), \
        "at least one checked cell"
    following = [p for p in ALL if p.parent == path.parent and p.name > path.name]
    if following:
        assert following[0].name in markdown, f"link to the next notebook ({following[0].name})"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    big = [text(c) for c in cells if c["cell_type"] == "code" and len(text(c).strip().splitlines()) > MAX_CELL_LINES]
    assert not big, f"code cells over {MAX_CELL_LINES} lines belong in the library: {[b[:60] for b in big]}"


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_checked_cells_have_stable_output(path: Path):
    """A checked cell's stored output must not contain things that change between runs."""
    nb = _stored(path)
    for c in nb["cells"]:
        src = "".join(c.get("source", ""))
        if c["cell_type"] != "code" or not src.lstrip().startswith("# NBVAL_CHECK_OUTPUT"):
            continue
        for out in c.get("outputs", []):
            assert out.get("name") != "stderr", f"stderr in a checked cell of {path.name}: {src[:80]}"
            data = out.get("data", {})
            assert "application/vnd.plotly.v1+json" not in data and \
                "application/vnd.jupyter.widget-view+json" not in data, f"figure/widget in a checked cell: {src[:80]}"


# what a hidden cell may not do: a learner who folds hidden cells away must still see everything that was timed
MEASURING = re.compile(r"\b(measure|profiling|speedups|fast|lat|lc|sb|sp)\.\w+\(|\bil\.(generate|stream|load)\(|"
                       r"\bFastDecoder\(|_sweep\(|_runs\(")


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_hidden_cells_narrate_and_do_not_measure(path: Path):
    hidden = [(i, "".join(c["source"])) for i, c in enumerate(_stored(path)["cells"])
              if c["cell_type"] == "code" and c.get("metadata", {}).get("jupyter", {}).get("source_hidden")]
    bad = [(i, m.group(0)) for i, src in hidden for m in [MEASURING.search(src)] if m]
    assert not bad, f"hidden cells that measure (show them; hide only narration): {bad}"
