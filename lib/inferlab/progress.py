"""A progress bar for sweeps that never writes into checked outputs.

In a Jupyter kernel it is an ipywidgets bar (a widget, not text on stderr); elsewhere it is silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


def progress(items: Iterable[T], description: str = "", total: int | None = None) -> Iterator[T]:
    """Iterate over ``items`` showing a widget progress bar in Jupyter; closes the bar at the end."""
    items = list(items) if total is None and not hasattr(items, "__len__") else items
    total = total if total is not None else len(items)  # type: ignore[arg-type]
    if not _in_kernel():
        yield from items
        return
    import ipywidgets as w
    from IPython.display import display

    bar = w.IntProgress(value=0, min=0, max=max(total, 1), description=description[:20])
    display(bar)
    try:
        for item in items:
            yield item
            bar.value += 1
    finally:
        bar.close()
