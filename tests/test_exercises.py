"""Exercise solutions that quote numbers say what the bundled model really does (the suite's model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import inferlab as il

ROOT = Path(__file__).resolve().parents[1]


def _solution(notebook: Path, summary: str) -> str:
    text = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                     if c["cell_type"] == "markdown")
    return re.search(rf"<summary>{summary}</summary>(.*?)</details>", text, re.S).group(1)


@pytest.mark.parametrize("edition,prompt,summary", [("", "To be, or not to be,", "Solution 2"),
                                                    ("zh", "床前明月光，", "答案 2")], ids=["en", "zh"])
def test_00_exercise_2_temperature_moves_the_mass_into_the_tail(model, edition, prompt, summary):
    """At temperature 2 fewer candidates keep 1% and the top token loses most of its share: the solution's numbers."""
    solution = _solution(ROOT / "notebooks" / edition / "00_start_here.ipynb", summary)
    assert f"`{prompt}`" in solution
    logits, _ = il.prefill(model, model.encode(prompt))
    seen = {}
    for t in (1.0, 2.0):
        p = (logits[0].float() / t).softmax(-1)
        seen[t] = (int((p > 0.01).sum()), 100 * p.max().item())
    assert seen[2.0][0] < seen[1.0][0], "temperature 2 should leave fewer candidates above 1%"
    bold = re.findall(r"\*\*([\d.]+%?)\*\*", solution)  # the counts and the top token's share, in order
    assert len(bold) == 4 and [int(bold[0]), int(bold[2])] == [seen[1.0][0], seen[2.0][0]], (bold, seen)
    for shown, share in ((bold[1], seen[1.0][1]), (bold[3], seen[2.0][1])):
        digits = len(shown.rstrip("%").partition(".")[2])  # as precise as the text: 77% or 5.1%
        assert abs(float(shown.rstrip("%")) - share) <= 0.5 * 10 ** -digits + 1e-9, (shown, share)
