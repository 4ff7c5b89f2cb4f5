"""A benchmark target as one row: what is measured, the target, the measured value, PASS or FAIL, and the numbers
behind it. The serving benchmark (``measure.serving_targets``), the decode-step floor (``measure.step_floor``) and
speculative decoding's targets (``speculative.targets``) all score with it, print with ``target_table`` and return
their rows as one ``Targets``.

    >>> print(target_table("t", [ratio_row("a ratio", 1.5, at_least=2.0, detail="why")]))
    t
    measure                                                                     target   measured  result
    -----------------------------------------------------------------------------------------------------
    a ratio                                                                    >= 2.0x      1.50x  FAIL
        why
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plain import plain


@dataclass(frozen=True)
class TargetRow:
    """One target: what is measured, the target (``ratio >= at_least`` or ``ratio <= at_most``), the measured
    ratio, and the numbers behind it."""

    measure: str
    target: str
    value: float
    passed: bool
    detail: str

    def __repr__(self) -> str:
        return f"TargetRow({self.measure}: {self.value:.3g} ({self.target}) {'PASS' if self.passed else 'FAIL'})"


def ratio_row(measure: str, value: float, *, at_least: float | None = None, at_most: float | None = None,
              detail: str) -> TargetRow:
    """A ``TargetRow`` for a ratio that must reach ``at_least`` (or stay within ``at_most``)."""
    target = f">= {at_least}x" if at_least is not None else f"<= {at_most}x"
    passed = value >= at_least if at_least is not None else value <= at_most
    return TargetRow(measure, target, value, bool(passed), detail)


def target_table(title: str, rows) -> str:
    """``TargetRow``s as a fixed-width text table under ``title``, each row's numbers below it: a share for a
    target in %, a ratio for one in x, else the number (a count, a distance)."""
    head = f"{'measure':<72}{'target':>10}{'measured':>11}  result"
    lines = [title, head, "-" * len(head)]
    for r in rows:
        value = (f"{r.value:.0%}" if r.target.endswith("%") else f"{r.value:.2f}x" if r.target.endswith("x")
                 else f"{r.value:.3g}")
        lines += [f"{r.measure:<72}{r.target:>10}{value:>11}  {'PASS' if r.passed else 'FAIL'}", f"    {r.detail}"]
    return "\n".join(lines)


@dataclass(frozen=True)
class Targets:
    """A benchmark's rows under its title (which names the models they ran on)."""

    title: str
    rows: tuple[TargetRow, ...]

    def table(self) -> str:
        """The rows as a fixed-width text table, each row's numbers below it."""
        return target_table(self.title, self.rows)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready)."""
        return plain(self)
