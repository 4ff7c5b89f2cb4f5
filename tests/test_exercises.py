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


@pytest.mark.parametrize("edition,summary", [("", "Solution"), ("zh", "答案")], ids=["en", "zh"])
def test_11_exercises_3_and_4_numbers_hold(edition, summary):
    """Mistral 7B's crossover (about 110,000 tokens with 8 KV heads, 4x sooner with 32) and block=2's three steps."""
    import dataclasses

    from inferlab import cost, flash

    solution = _solution(ROOT / "notebooks" / edition / "11_long_context.ipynb", summary)
    assert "about 110,000 tokens with 8 KV heads" in solution and "4x sooner with 32" in solution
    mistral = cost.published_shape("mistral-7b (GQA)")
    grouped = mistral.weight_bytes / cost.kv_bytes_per_token(mistral)
    full = mistral.weight_bytes / cost.kv_bytes_per_token(dataclasses.replace(mistral, n_kv_head=32))
    assert abs(grouped / 110_000 - 1) < 0.01 and grouped / full == pytest.approx(4)
    assert mistral.n_ctx < grouped < 4 * mistral.n_ctx  # one full window does not reach it, four do
    steps = flash.online_softmax_steps([2.0, 1.0, 3.0, 0.5, 2.5], block=2).steps  # the notebook's row
    assert len(steps) == 3 and [s.rescale < 1 for s in steps] == [True, True, False]  # 0 first, then where max rose
