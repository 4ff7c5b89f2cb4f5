"""The attention explorer: pick a layer, a head and a query token; see the pattern and the query's row.

Everything is drawn from recorded ``attention.Patterns``; moving a slider never runs the model. Given a
``compute`` function (text -> ``Patterns``), a text box records a new prompt; bad input shows a message.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w
from IPython.display import display

from ..attention import Patterns
from ..viz import attention as va
from ..viz import show_token
from . import error_box, message


class AttentionExplorer(w.VBox):
    """Sliders for layer and head, a query dropdown, one head or all heads; ``figures`` holds what is shown."""

    def __init__(self, patterns: Patterns, compute: Callable[[str], Patterns] | None = None, *,
                 grid_max_tokens: int = 32) -> None:
        if not isinstance(patterns, Patterns):
            raise TypeError(f"patterns must be attention.Patterns, got {type(patterns).__name__}. "
                            "Fix: Patterns.from_trace(trace) or attention.record_patterns(m, ids).")
        self.patterns = patterns
        self.compute = compute
        self.grid_max_tokens = grid_max_tokens
        self.figures: dict[str, object] = {}
        self._grid = None  # the all-heads figure, built once per prompt
        self.layer = w.IntSlider(description="layer", min=0, continuous_update=False)
        self.head = w.IntSlider(description="head", min=0, continuous_update=False)
        self.query = w.Dropdown(description="query token", layout=w.Layout(width="320px"))
        self.view = w.ToggleButtons(options=["one head", "all heads"], value="one head")
        self.status = error_box()
        self.out_map, self.out_row = w.Output(), w.Output()
        controls = [w.HBox([self.layer, self.head]), w.HBox([self.query, self.view])]
        if compute is not None:
            self.text = w.Text(description="prompt", placeholder="type a prompt, press Enter or record",
                               continuous_update=False, layout=w.Layout(width="520px"))
            self.record = w.Button(description="record", button_style="primary")
            self.record.on_click(lambda _b: self.submit())
            self.text.observe(lambda _c: self.submit(), names="value")  # Enter or leaving the box
            controls.insert(0, w.HBox([self.text, self.record]))
        super().__init__([*controls, self.status, self.out_map, self.out_row])
        for control in (self.layer, self.head, self.query, self.view):
            control.observe(lambda _c: self.redraw(), names="value")
        self._load(patterns)

    def _load(self, patterns: Patterns) -> None:
        """Point the controls at new patterns (one redraw at the end)."""
        self.patterns, self._grid = patterns, None
        L, H, T, _ = patterns.shape
        self._quiet = True
        self.layer.max, self.head.max = L - 1, H - 1
        self.layer.value, self.head.value = min(self.layer.value, L - 1), min(self.head.value, H - 1)
        self.query.options = [(f"{i} {show_token(p)}", i) for i, p in enumerate(patterns.pieces)]
        self.query.value = T - 1
        self._quiet = False
        self.redraw()

    def submit(self) -> None:
        """Record the typed prompt with ``compute``; a problem becomes a message, not a traceback."""
        text = self.text.value
        if not text.strip():
            self.status.value = message("The prompt is empty: type a few words first.")
            return
        try:
            patterns = self.compute(text)
        except Exception as exc:  # any failure becomes a readable message in the widget
            self.status.value = message(f"Could not record this prompt: {exc}")
            return
        self.status.value = message(f"Recorded {patterns.shape[2]} tokens.", "ok")
        self._load(patterns)

    def redraw(self) -> None:
        """Draw the current selection from the recorded patterns."""
        if getattr(self, "_quiet", False):
            return
        p, layer, head, query = self.patterns, self.layer.value, self.head.value, self.query.value
        if self.view.value == "all heads":
            if self._grid is None:
                self._grid = va.attention_grid(p, max_tokens=self.grid_max_tokens)
            self.figures["map"] = self._grid
        else:
            self.figures["map"] = va.pattern_figure(p, layer, head)
        self.figures["row"] = va.query_row(p, layer, head, query)
        for out, key in ((self.out_map, "map"), (self.out_row, "row")):
            out.clear_output(wait=True)
            with out:
                display(self.figures[key])


def attention_explorer(patterns: Patterns, compute: Callable[[str], Patterns] | None = None, *,
                       grid_max_tokens: int = 32) -> AttentionExplorer:
    """The explorer widget for recorded ``patterns``; ``compute(text) -> Patterns`` adds a prompt box.

    >>> attention_explorer(pat, compute=lambda text: attention.record_patterns(m, m.encode(text)))  # doctest: +SKIP
    """
    return AttentionExplorer(patterns, compute, grid_max_tokens=grid_max_tokens)
