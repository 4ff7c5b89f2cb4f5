"""Progress that never writes into checked outputs: a bar for sweeps, a line under any slow cell.

In a Jupyter kernel both are ipywidgets (widgets, not text on stderr), closed when done; elsewhere silent.
"""

from __future__ import annotations

import html
import os
import threading
import time
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


# ----------------------------------------------------------------------------- a line under slow cells
SLOW_S = 10.0
QUIET_ENV = "INFERLAB_NO_SLOW_NOTE"  # "1": no line (stored runs and the test suite set it)


def _slow_line(seconds: float) -> str:
    from .i18n import tr

    text = tr("This cell is still running: {s:.0f} s so far (a slow cell; this line goes when it ends)", s=seconds)
    return f'<span style="color:#555;font-family:sans-serif">{html.escape(text)}</span>'


def watch_slow_cells(after_s: float = SLOW_S) -> bool:
    """In a live Jupyter kernel, a cell still running after ``after_s`` seconds shows a line counting them.

    The line is a widget, closed when the cell ends (like the progress bars, it is never stored). Registered
    once per kernel (``viz.setup_notebook()`` calls it); returns whether it is on. Off outside a kernel and
    when ``INFERLAB_NO_SLOW_NOTE=1`` (stored runs and the test suite: their outputs stay as they were).
    """
    if os.environ.get(QUIET_ENV) == "1" or not _in_kernel():
        return False
    from IPython import get_ipython

    shell = get_ipython()
    if getattr(shell, "_inferlab_slow_cells", False):
        return True
    import ipywidgets as w  # here, not in the thread: on a busy machine the import alone can take a second or more
    from IPython.display import display

    state: dict = {}

    def tick(stop: threading.Event, started: float) -> None:
        if stop.wait(after_s):
            return
        line = w.HTML(_slow_line(time.perf_counter() - started))
        display(line)
        while not stop.wait(1.0):
            line.value = _slow_line(time.perf_counter() - started)
        line.close()

    def pre_run_cell(info=None) -> None:
        state["stop"] = threading.Event()
        state["thread"] = threading.Thread(target=tick, args=(state["stop"], time.perf_counter()), daemon=True)
        state["thread"].start()

    def post_run_cell(result=None) -> None:
        if "stop" in state:
            state["stop"].set()
            state["thread"].join(timeout=2)

    shell.events.register("pre_run_cell", pre_run_cell)
    shell.events.register("post_run_cell", post_run_cell)
    shell._inferlab_slow_cells = True
    return True
