"""Clear errors for bad input: the parameter, the value, the allowed range, and how to fix it.

The frame of each message is in the reader's language (``i18n.tr``); the values stay as they are. A raise
site passes ``allowed``/``fix`` through ``tr`` too when a learner can trigger it from a widget.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .i18n import tr


def one_line(exc: BaseException, limit: int = 200, *, named: bool = True) -> str:
    """``exc`` as one line for a message that must stay one line: its text's first line, cut at ``limit``
    characters, after its type's name (``named=False``: the text alone). An exception with no text gives its
    type's name.

    >>> one_line(ValueError("bad shape\\n  at line 3"))
    'ValueError: bad shape'
    >>> one_line(KeyError(), named=False)
    'KeyError'
    """
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    first = text.splitlines()[0][:limit]
    return f"{type(exc).__name__}: {first}" if named else first


def bad_value(name: str, value: Any, allowed: str, fix: str) -> ValueError:
    """Build a ``ValueError`` that names the parameter, the value, what is allowed and the fix.

    >>> str(bad_value("top_p", 1.5, "0 < top_p <= 1", "use 1.0 to switch top-p off"))
    'top_p=1.5 is not allowed: expected 0 < top_p <= 1. Fix: use 1.0 to switch top-p off.'
    """
    return ValueError(tr("{name}={value!r} is not allowed: expected {allowed}. Fix: {fix}.",
                         name=name, value=value, allowed=allowed, fix=fix))


def _wrong_type(name: str, value: Any, integer: bool, fix: str) -> TypeError:
    """The ``TypeError`` for a value that is not a number (whole sentences: Chinese needs its own word order)."""
    fields = {"name": name, "type": type(value).__name__, "value": value, "fix": fix}
    if integer:
        text = (tr("{name} must be an integer, got {type} {value!r}. Fix: pass an integer; {fix}.", **fields) if fix
                else tr("{name} must be an integer, got {type} {value!r}. Fix: pass an integer.", **fields))
    else:
        text = (tr("{name} must be a number, got {type} {value!r}. Fix: pass a number; {fix}.", **fields) if fix
                else tr("{name} must be a number, got {type} {value!r}. Fix: pass a number.", **fields))
    return TypeError(text)


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, integer: bool = False,
                 fix: str = "") -> None:
    """Check that ``value`` is a finite number inside a range, or raise a clear error.

    ``low_open``/``high_open`` exclude the bound itself. Booleans are refused (``True`` is not 1 here).
    numpy's integers and floats count as integers and numbers (``numbers.Integral``/``numbers.Real``), as
    Python's own do: ``np.int64(5)`` from an array is a fine ``top_k``.
    ``fix`` replaces the default advice (give it through ``tr`` where a learner reads it).
    """
    ok_type = isinstance(value, numbers.Integral) if integer else isinstance(value, numbers.Real)
    if isinstance(value, bool) or not ok_type:
        raise _wrong_type(name, value, integer, fix)
    lo = "" if low is None else f"{low} {'<' if low_open else '<='} "
    hi = "" if high is None else f" {'<' if high_open else '<='} {high}"
    # the range is arithmetic, which reads the same in every language (an int is always finite: no integer case)
    allowed = f"{lo}{name}{hi}" if (lo or hi) else tr("a finite number")
    if not isinstance(value, numbers.Integral) and not math.isfinite(value):  # ints are finite (10**400 too)
        raise bad_value(name, value, allowed, fix or tr("pass a finite number"))
    if low is not None and (value < low or (low_open and value == low)):
        raise bad_value(name, value, allowed, fix or tr("pass a value in that range"))
    if high is not None and (value > high or (high_open and value == high)):
        raise bad_value(name, value, allowed, fix or tr("pass a value in that range"))


def check_utf8(name: str, text) -> str:
    """Refuse a non-string, or a string with no UTF-8 bytes (a lone surrogate): BPE works on UTF-8 bytes.

    A lone surrogate (``"\ud800"``) is half of a character outside the Basic Multilingual Plane, such as
    an emoji, left behind when a string is cut between the two halves of a UTF-16 pair.
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string, got {type(text).__name__}. Fix: pass the text in quotes.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = text if len(text) <= 40 else text[max(0, exc.start - 10):exc.start + 10]
        raise bad_value(name, shown, tr("text that can be written as UTF-8 (whole characters only)"),
                        tr("remove the lone surrogate U+{code:04X} at character {position} (half of an emoji or "
                           "other character, left by cutting a string), or paste the whole character again",
                           code=ord(text[exc.start]), position=exc.start)) from None
    return text
