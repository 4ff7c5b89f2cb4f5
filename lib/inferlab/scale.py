"""The test scale: the notebooks' same cells with smaller sizes, so the test suite executes every notebook in minutes.

    INFERLAB_SCALE=full    (or unset) the lesson's sizes: what a learner runs, and what the stored notebooks hold
    INFERLAB_SCALE=test    the suite's sizes (``tests/run.sh`` sets it): fewer repeats, shorter sweeps and answers,
                           GPT-2's width with 2 of its 12 blocks for the timings (``TEST_BLOCKS``), and no
                           ``torch.compile`` of GPT-2's shape

A notebook's parameter cell reads it beside ``INFERLAB_FULL_RUN`` (``full_run()``: the learner asks for longer
sweeps) and ``INFERLAB_COMPILE``::

    from inferlab import scale
    REPEATS = scale.pick(full=3, test=1)
    FULL_RUN = scale.full_run()

Only sizes change: the same code runs at both scales. The cells whose outputs the suite checks
(``# NBVAL_CHECK_OUTPUT``) print the same at both, which the suite proves on every notebook: the stored
outputs were made at the full scale (``notebook_tools execute`` always runs there and stamps it), and nbval
compares them with the suite's test-scale run. Timings, and the prose built from them, differ: the test scale
checks that the code runs, never what it measured.
"""

from __future__ import annotations

import os
from typing import TypeVar

ENV = "INFERLAB_SCALE"
FULL_RUN_ENV = "INFERLAB_FULL_RUN"  # "1": the notebooks' longer sweeps and compiled steps (minutes on a CPU)
SCALES = ("full", "test")
TEST_BLOCKS = 2  # blocks of GPT-2's shape that the timed model keeps at the test scale (of 12)

T = TypeVar("T")


def current() -> str:
    """``"full"`` or ``"test"``, from ``INFERLAB_SCALE`` (unset or empty: ``"full"``).

    Raises ``ValueError`` naming the variable, its value and the allowed ones for anything else: a typo must not
    quietly run the suite at the full scale (ten minutes more) or a lesson at the test scale (wrong numbers).
    """
    raw = os.environ.get(ENV, "")
    value = raw.strip().lower() or "full"
    if value not in SCALES:
        raise ValueError(f"{ENV}={raw!r} is not a scale: allowed are {' or '.join(map(repr, SCALES))} ('full', the "
                         f"lesson's sizes, is the default; 'test' is the test suite's). Fix: unset {ENV}, or set it "
                         "to one of those.")
    return value


def is_test() -> bool:
    """True at the test suite's scale (``INFERLAB_SCALE=test``)."""
    return current() == "test"


def pick(full: T, test: T) -> T:
    """``full`` at the lesson's scale, ``test`` at the suite's: ``REPEATS = scale.pick(full=3, test=1)``."""
    return test if is_test() else full


def full_run() -> bool:
    """``INFERLAB_FULL_RUN=1``: the learner asked for the longer sweeps (and 04's compiled step); anything else: no."""
    return os.environ.get(FULL_RUN_ENV, "").strip() == "1"
