"""Self-checks: a few questions at the end of each notebook, answered in a widget, each choice explained.

    from inferlab.widgets.selfcheck import self_check
    self_check("04")        # the questions of notebook 04, from data/selfcheck/04.json
                            # (in Chinese, after il.set_language("zh"): data/selfcheck/zh/04.json)

A question is either multiple choice (every choice carries ``correct`` and ``why``: the explanation shown
when the learner picks it) or numeric (``answer``, ``tolerance``, ``unit`` and one ``why``). Where no kernel
draws the widget (the offline HTML edition, nbviewer), the same questions show as a list with each answer
in a ``<details>`` block.
"""

from __future__ import annotations

import html
import json
import numbers
import random
import re
from dataclasses import dataclass
from pathlib import Path

import ipywidgets as w

from ..errors import bad_value, one_line
from ..i18n import DEFAULT, language, tr
from ..paths import REPO
from . import message, titled

QUESTIONS_DIR = REPO / "data" / "selfcheck"  # English; each other language in a folder named by its code ("zh/")


@dataclass(frozen=True)
class Choice:
    text: str
    correct: bool
    why: str


@dataclass(frozen=True)
class Question:
    """One question: ``choices`` for multiple choice, or ``answer`` (+ ``tolerance``, ``unit``) for a number."""

    text: str
    choices: tuple[Choice, ...] = ()
    answer: float | None = None
    tolerance: float = 0.0
    unit: str = ""
    why: str = ""

    @property
    def numeric(self) -> bool:
        return self.answer is not None


def questions_dir(lang: str | None = None) -> Path:
    """The folder of the questions in ``lang`` (default: the reader's language): ``data/selfcheck/`` or ``.../zh/``."""
    lang = language() if lang is None else lang
    return QUESTIONS_DIR if lang == DEFAULT else QUESTIONS_DIR / lang


def load_questions(notebook: str, folder: Path | None = None) -> list[Question]:
    """The questions of ``notebook`` ("04"), read from ``folder/04.json`` (default: ``questions_dir()``).

    A notebook that has English questions but none in the reader's language is an error naming the missing file.
    ``notebook`` is a name inside the folder, never a path: ``"../../x"`` is refused, so only the course's own
    question files (or those of ``folder``) are ever read. An integer (4) means "04".
    """
    chosen = questions_dir() if folder is None else Path(folder)
    if isinstance(notebook, numbers.Integral) and not isinstance(notebook, bool) and 0 <= notebook <= 99:
        notebook = f"{int(notebook):02d}"
    if not isinstance(notebook, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", notebook):
        known = sorted(p.stem for p in chosen.glob("*.json"))
        raise bad_value("notebook", notebook, tr("one of {known}", known=known),
                        tr("pass the notebook's two-digit number, e.g. '04'"))
    path = chosen / f"{notebook}.json"
    if not path.is_file():
        english = QUESTIONS_DIR / f"{notebook}.json"
        if folder is None and chosen != QUESTIONS_DIR and english.is_file():
            raise FileNotFoundError(tr(
                "No Chinese self-check for notebook {notebook}: {path} is missing. Fix: write it with the same "
                "structure as {english} (the same questions and answers, in Chinese), or call "
                'il.set_language("en").', notebook=notebook, path=path, english=english))
        known = sorted(p.stem for p in chosen.glob("*.json"))
        raise bad_value("notebook", notebook, tr("one of {known}", known=known),
                        tr("pass the notebook's two-digit number, e.g. '04'"))
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return [Question(q["question"], _shuffled(tuple(Choice(c["text"], bool(c.get("correct")), c["why"])
                                                        for c in q.get("choices", [])), f"{notebook}:{i}"),
                         q.get("answer"), q.get("tolerance", 0.0), q.get("unit", ""), q.get("why", ""))
                for i, q in enumerate(raw["questions"])]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:  # a hand-made folder's file
        raise ValueError(tr("{path} is not a self-check file ({error}). Fix: give it the structure of {example}.",
                            path=path, error=one_line(e, 80),
                            example=QUESTIONS_DIR / "00.json")) from None


def _shuffled(choices: tuple[Choice, ...], key: str) -> tuple[Choice, ...]:
    """The choices in an order fixed by ``key`` (notebook and question number): the files list the right answer
    anywhere (often first, as it is written first), and a learner who always picks one place must not score. The
    same key gives the same order in every language and every run, so the HTML edition and a twin stay stable."""
    order = list(range(len(choices)))
    random.Random(key).shuffle(order)
    return tuple(choices[i] for i in order)


def grade(question: Question, answer: int | float | str | None, *, reveal: bool = True) -> tuple[bool | None, str]:
    """(right?, what to tell the learner) for ``answer``: a choice's index, or a number (text is parsed).

    ``None`` for "right?" means there was nothing to grade (no choice made, or not a number). A wrong number
    with ``reveal=False`` (the widget's first try) says only "too high" or "too low", keeping the answer back.
    """
    if question.numeric:
        try:
            value = float(str(answer).replace(",", "").replace("，", ""))  # thousands separators, either width
        except ValueError:
            return None, tr("Type a number first (digits, an optional decimal point).")
        if abs(value - question.answer) <= question.tolerance:
            return True, tr("Right. {why}", why=question.why)
        if not reveal:
            if value > question.answer:
                return False, tr("Not yet: {value:g} is too high. Try once more (a second try shows the answer).",
                                 value=value)
            return False, tr("Not yet: {value:g} is too low. Try once more (a second try shows the answer).",
                             value=value)
        if question.unit:
            return False, tr("Not quite: the answer is {answer} {unit}. {why}", answer=number(question.answer),
                             unit=question.unit, why=question.why)
        return False, tr("Not quite: the answer is {answer}. {why}", answer=number(question.answer), why=question.why)
    if answer is None:
        return None, tr("Pick an answer first.")
    choice = question.choices[int(answer)]
    if choice.correct:
        return True, tr("Right. {why}", why=choice.why)
    return False, tr("Not this one. {why}", why=choice.why)


def number(x: float) -> str:
    """An answer as the course prints numbers: a whole number with thousands separators (1,179,648, not the
    1.17965e+06 that ``:g`` gives), anything else as short as ``:g`` makes it (0.731, 38.6)."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def static_html(questions: list[Question], notebook: str) -> str:
    """The questions as HTML with each answer and its explanation folded in ``<details>`` (no kernel needed)."""
    stop, colon = tr(". "), tr(": ")  # 。 and ： in Chinese, with no space after them
    items = []
    for q in questions:
        if q.numeric:
            options, answer = "", f"<p><b>{number(q.answer)} {html.escape(q.unit)}</b>{stop}{html.escape(q.why)}</p>"
        else:
            options = "<ul>" + "".join(f"<li>{html.escape(c.text)}</li>" for c in q.choices) + "</ul>"
            answer = "<ul>" + "".join(
                f"<li>{'✔' if c.correct else '✘'} <b>{html.escape(c.text)}</b>{colon}{html.escape(c.why)}</li>"
                for c in q.choices) + "</ul>"
        items.append(f"<li><p>{html.escape(q.text)}</p>{options}"
                     f"<details><summary>{html.escape(tr('Answer'))}</summary>{answer}</details></li>")
    heading = html.escape(tr("Self-check ({notebook})", notebook=notebook))
    return f'<div class="inferlab-static inferlab-selfcheck"><h3>{heading}</h3><ol>{"".join(items)}</ol></div>'


def _question_box(number: int, q: Question) -> w.VBox:
    prompt = w.HTML(f"<b>{number}.</b> {html.escape(q.text)}")
    if q.numeric:
        entry = w.Text(placeholder=tr("a number ({unit})", unit=q.unit) if q.unit else tr("a number"),
                       layout=w.Layout(width="220px"))
    else:
        entry = w.RadioButtons(options=[(c.text, i) for i, c in enumerate(q.choices)], value=None,
                               layout=w.Layout(width="auto"))
    check, feedback = w.Button(description=tr("Check"), layout=w.Layout(width="90px")), w.HTML("")
    check.add_class("inferlab-selfcheck-check")  # a handle for the browser test in every language

    wrong = [0]  # wrong numbers so far: the first one gets a hint, the second the answer

    def on_check(_=None):
        ok, why = grade(q, entry.value, reveal=not q.numeric or wrong[0] >= 1)
        wrong[0] += ok is False
        feedback.value = message(why, {True: "ok", False: "error", None: "info"}[ok])

    check.on_click(on_check)
    box = w.VBox([prompt, w.HBox([entry, check], layout=w.Layout(align_items="flex-start")), feedback])
    box.add_class("inferlab-selfcheck-question")
    return box


def self_check(notebook: str, folder: Path | None = None) -> w.VBox:
    """The self-check widget of ``notebook`` ("04"): each question, a Check button, the explanation.

    The questions are in the reader's language (``questions_dir()``), unless ``folder`` says where to read them.
    """
    questions = load_questions(notebook, folder)
    n = len(questions)
    box = w.VBox([w.HTML(f"<h3>{html.escape(tr('Self-check ({n} questions)', n=n))}</h3>"),
                  *(_question_box(i, q) for i, q in enumerate(questions, start=1))])
    box.add_class("inferlab-selfcheck")
    return titled(box, tr("Self-check: {n} questions; run the cell to answer them", n=n),
                  static_html=static_html(questions, notebook))
