"""Slow notebooks and slow cells say so: a time note in each notebook's header and before every slow cell.

The notes quote the stored run's times (each cell's execution metadata): a note must stay within a factor of two
of what the stored run took, so a re-executed notebook whose times moved far gets its notes updated.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["00_start_here", "01_tokens", "02_embeddings", "03_attention", "04_prefill_and_decode", "05_kv_cache",
             "06_sampling", "07_ttft_and_tpot", "08_making_it_faster", "09_serving",
             "10_speculative_decoding", "11_long_context"]
SLOW_S = 11  # a cell over this in the stored run needs its own note, except the set-up cell (kernel start,
# imports and loading the model: it heads every notebook, and the header's note covers it)
MARK = r"(?:\*\*Run time:\*\*|\*\*运行时间\*\*：)"  # plain words, not "⏱": every font has them
NOTE = re.compile(MARK + r"[^\n]*?(\d+)\s*(?:s\b|秒)")


def _seconds(cell: dict) -> float:
    run = cell.get("metadata", {}).get("execution")
    if not run:
        return 0.0
    start, end = (datetime.fromisoformat(run[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def _near(said: int, took: float) -> bool:
    return took / 2 <= said <= took * 2


@pytest.mark.parametrize("path", [f"{e}{n}.ipynb" for e in ("", "zh/") for n in NOTEBOOKS])
def test_time_notes_match_the_stored_run(path):
    cells = json.loads((ROOT / "notebooks" / path).read_text(encoding="utf-8"))["cells"]
    head = "".join(cells[0]["source"])
    total = sum(_seconds(c) for c in cells)
    note = NOTE.search(head)
    assert note, f"{path}: the header says nothing of how long the notebook runs"
    assert _near(int(note.group(1)), total), f"{path}: header says {note.group(1)} s, the stored run took {total:.0f} s"
    assert "Shut Down Kernel" in head, f"{path}: no tip to shut the kernel down"
    for i, cell in enumerate(cells):
        setup = "import inferlab" in "".join(cell["source"])
        if cell["cell_type"] == "code" and _seconds(cell) > SLOW_S and not setup:
            before = "".join(cells[i - 1]["source"]) if cells[i - 1]["cell_type"] == "markdown" else ""
            said = NOTE.search(before)
            assert said, f"{path}: cell {i} took {_seconds(cell):.0f} s in the stored run and has no time note"
            assert _near(int(said.group(1)), _seconds(cell)), (path, i, said.group(1), _seconds(cell))
