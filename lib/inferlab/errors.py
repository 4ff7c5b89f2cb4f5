"""Clear errors for bad input: the parameter, the value, the allowed range, and how to fix it."""

from __future__ import annotations

import math
from typing import Any


def bad_value(name: str, value: Any, allowed: str, fix: str) -> ValueError:
    """Build a ``ValueError`` that names the parameter, the value, what is allowed and the fix.

    >>> str(bad_value("top_p", 1.5, "0 < top_p <= 1", "use 1.0 to switch top-p off"))
    'top_p=1.5 is not allowed: expected 0 < top_p <= 1. Fix: use 1.0 to switch top-p off.'
    """
    return ValueError(f"{name}={value!r} is not allowed: expected {allowed}. Fix: {fix}.")


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, integer: bool = False,
                 fix: str = "") -> None:
    """Check that ``value`` is a finite number inside a range, or raise a clear error.

    ``low_open``/``high_open`` exclude the bound itself. Booleans are refused (``True`` is not 1 here).
    """
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__} {value!r}. "
                        f"Fix: pass {kind}{'; ' + fix if fix else ''}.")
    lo = "" if low is None else f"{low} {'<' if low_open else '<='} "
    hi = "" if high is None else f" {'<' if high_open else '<='} {high}"
    allowed = f"{lo}{name}{hi}" if (lo or hi) else f"a finite {kind[2:] if kind.startswith('a ') else kind}"
    if not math.isfinite(value):
        raise bad_value(name, value, allowed, fix or "pass a finite number")
    if low is not None and (value < low or (low_open and value == low)):
        raise bad_value(name, value, allowed, fix or "pass a value in that range")
    if high is not None and (value > high or (high_open and value == high)):
        raise bad_value(name, value, allowed, fix or "pass a value in that range")
