"""Self-checks (widgets.selfcheck) and readable stored views (widgets.titled)."""

from __future__ import annotations

import json
from pathlib import Path

import ipywidgets as w
import pytest
from IPython.core.formatters import DisplayFormatter

from inferlab.widgets import titled
from inferlab.widgets.selfcheck import QUESTIONS_DIR, grade, load_questions, self_check, static_html

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_every_notebook_has_three_or_four_questions():
    assert [f"{i:02d}" for i in range(10)] == NOTEBOOKS[:10]  # and every later notebook, whatever it is numbered
    for number in NOTEBOOKS:
        raw = json.loads((QUESTIONS_DIR / f"{number}.json").read_text(encoding="utf-8"))
        assert (ROOT / "notebooks" / f"{raw['notebook']}.ipynb").is_file(), raw["notebook"]
        assert 3 <= len(load_questions(number)) <= 4, number


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_each_question_has_one_right_answer_and_explains_every_choice(number):
    for q in load_questions(number):
        if q.numeric:
            assert q.why and q.tolerance >= 0 and grade(q, q.answer)[0] is True, q.text
        else:
            assert sum(c.correct for c in q.choices) == 1 and len(q.choices) >= 3, q.text
            assert all(len(c.why) > 20 for c in q.choices), q.text


def test_grading_a_number():
    q = next(q for q in load_questions("06") if q.numeric)  # logits 2 and 0 at T=2: e / (e + 1) = 0.731
    assert grade(q, "0.731")[0] is True and grade(q, "0.725")[0] is True
    ok, why = grade(q, "0.881")  # the temperature-1 answer: the classic mistake
    assert ok is False and why.startswith("Not quite: the answer is 0.731.")
    assert grade(q, "about a half") == (None, "Type a number first (digits, an optional decimal point).")
    kv = next(q for q in load_questions("05") if q.numeric)  # 2 x 12 x 12 x 64 x 4 bytes
    assert grade(kv, "73,728")[0] is True and grade(kv, "36864")[0] is False


def test_grading_a_choice_explains_the_pick():
    q = load_questions("00")[0]
    right = next(i for i, c in enumerate(q.choices) if c.correct)
    wrong = next(i for i, c in enumerate(q.choices) if not c.correct)
    assert grade(q, right) == (True, "Right. " + q.choices[right].why)
    assert grade(q, wrong) == (False, "Not this one. " + q.choices[wrong].why)
    assert grade(q, None) == (None, "Pick an answer first.")


def test_the_widget_answers_a_click():
    view = self_check("04")
    first = view.children[1]  # [heading, question 1, ...]
    radio, check = first.children[1].children
    radio.value = next(i for i, c in enumerate(load_questions("04")[0].choices) if c.correct)
    check.click()
    assert "Right." in first.children[2].value and "#1b5e20" in first.children[2].value


def test_unknown_notebook_is_a_clear_error():
    with pytest.raises(ValueError, match=r"notebook='42' is not allowed: expected one of \['00'"):
        self_check("42")


def test_stored_view_text_and_static_html():
    plain = titled(w.VBox([w.IntSlider()]), "Attention explorer: run the cell to use the sliders")
    data, _ = DisplayFormatter().format(plain)
    assert data["text/plain"] == "Attention explorer: run the cell to use the sliders"
    assert "inferlab-view-title" in data["text/html"] and "application/vnd.jupyter.widget-view+json" in data
    data, _ = DisplayFormatter().format(self_check("03"))
    assert data["text/plain"] == "Self-check: 4 questions; run the cell to answer them"
    assert data["text/html"].count("<details>") == 4 and 'class="inferlab-static' in data["text/html"]
    assert data["text/html"] == static_html(load_questions("03"), "03")


def test_a_wrong_number_gets_a_second_try_before_the_answer():
    """The first wrong number says too high / too low and keeps the answer back; the second shows it."""
    q = next(q for q in load_questions("06") if q.numeric)
    box = self_check("06")
    question = next(b for b in box.children[1:] if q.text in b.children[0].value)
    entry, check = question.children[1].children
    feedback = question.children[2]
    entry.value = "0.881"
    check.click()
    assert "too high" in feedback.value and f"{q.answer:g}" not in feedback.value
    entry.value = "0.5"
    check.click()
    assert f"the answer is {q.answer:g}" in feedback.value
    assert grade(q, "0.2", reveal=False) == (False, "Not yet: 0.2 is too low. Try once more "
                                                    "(a second try shows the answer).")


def test_the_right_answer_is_not_always_in_one_place_and_the_order_is_fixed():
    """A learner who always picks the first (or any one) choice must not score: the right answer's position varies
    over the course; the order is the same on every load and in both languages (the twins match question by
    question)."""
    from collections import Counter

    from inferlab.widgets.selfcheck import QUESTIONS_DIR, load_questions

    places: Counter = Counter()
    for path in sorted(QUESTIONS_DIR.glob("*.json")):
        en, again = load_questions(path.stem), load_questions(path.stem)
        zh = load_questions(path.stem, QUESTIONS_DIR / "zh")
        assert en == again
        for q_en, q_zh in zip(en, zh):
            if q_en.choices:
                place = next(i for i, c in enumerate(q_en.choices) if c.correct)
                assert q_zh.choices[place].correct, (path.stem, q_en.text)
                places[place] += 1
    most = max(places.values())
    assert len(places) >= 3 and most <= 0.5 * sum(places.values()), places
