"""Units, said one way everywhere: milliseconds, bytes, and "memory-/compute-bound".

Every number a notebook prints goes through these, so 12.3 ms, 1.5 KiB and "memory-bound" read the same in
every figure, table and sentence (in the reader's language where words are involved).
"""

from __future__ import annotations

import math

from .errors import bad_value
from .i18n import tr


def ms(seconds: float) -> str:
    """Seconds as a duration in prose: ``0.0123`` -> ``'12.3 ms'``; below 10 ms two decimals (``'1.23 ms'``)."""
    return f"{seconds * 1e3:.1f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.2f} ms"


def ms_cell(seconds: float | None) -> str:
    """Seconds as a table cell in milliseconds, two decimals, no unit (the header says it); ``'n/a'`` when unknown."""
    return "n/a" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.2f}"


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``: bytes in the largest binary unit that keeps the number >= 1."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def bound_text(bound: str) -> str:
    """``"memory"`` -> "memory-bound", ``"compute"`` -> "compute-bound" (``Cost.bound``), in the reader's language."""
    if bound not in ("memory", "compute"):
        raise bad_value("bound", bound, "'memory' or 'compute'", "pass Cost.bound")
    return tr("memory-bound") if bound == "memory" else tr("compute-bound")
