"""Attention views: the explorer (layer, head, query token), BertViz's lines view, and head ablation.

The explorer and the lines view draw from recorded ``attention.Patterns``; moving a slider never runs the
model. Given a ``compute`` function (text -> ``Patterns``), a text box records a new prompt; bad input
shows a message. The ablation view is given ``run`` (heads to switch off -> ``heads.Ablation``) and runs it
on every change. Stored in a notebook, each view shows a readable line of text (and HTML) until it is run
(``widgets.titled``).

Stable CSS classes for browser tests: ``inferlab-lines-view`` (controls ``inferlab-lines-layer``,
``-head``, ``-query``), ``inferlab-ablation`` (controls ``inferlab-ablation-layer``, ``-head``; result
``inferlab-ablation-result``).
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

from ..attention import Patterns
from ..heads import Ablation, HeadSpec
from ..viz import attention as va
from ..viz import heads as vh
from ..viz import show_token
from . import error_box, message, show_figure, titled


class _Readable:
    """``repr`` is one readable line about the current selection, not ``VBox(children=(...``."""

    def summary(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        try:
            return self.summary()
        except AttributeError:  # not fully built yet
            return f"{type(self).__name__}(...)"


def _titled(view: _Readable, use: str) -> w.Widget:
    """``view`` with its summary and how to use it as the text and HTML a stored notebook shows."""
    return titled(view, f"{view.summary()}. Interactive view: run this cell in JupyterLab to {use}.")


class AttentionExplorer(_Readable, w.VBox):
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
        show_figure(self.out_map, self.figures["map"], "attention pattern")
        show_figure(self.out_row, self.figures["row"], "query row")

    def summary(self) -> str:
        L, H, T, _ = self.patterns.shape
        return (f"Attention explorer: {T} tokens, {L} layers x {H} heads; showing layer {self.layer.value}, "
                f"head {self.head.value}, query {self.query.value}")


def attention_explorer(patterns: Patterns, compute: Callable[[str], Patterns] | None = None, *,
                       grid_max_tokens: int = 32) -> AttentionExplorer:
    """The explorer widget for recorded ``patterns``; ``compute(text) -> Patterns`` adds a prompt box.

    >>> attention_explorer(pat, compute=lambda text: attention.record_patterns(m, m.encode(text)))  # doctest: +SKIP
    """
    return _titled(AttentionExplorer(patterns, compute, grid_max_tokens=grid_max_tokens),
                   "move the sliders or type a prompt")


ALL = -1  # the dropdowns' "every head" / "every token" choice


def _or_none(value: int) -> int | None:
    return None if value == ALL else value


class LinesView(_Readable, w.VBox):
    """BertViz's lines view next to the heatmap: a layer, a head (or every head) and a token (or every token)."""

    def __init__(self, patterns: Patterns) -> None:
        if not isinstance(patterns, Patterns):
            raise TypeError(f"patterns must be attention.Patterns, got {type(patterns).__name__}. "
                            "Fix: Patterns.from_trace(trace) or attention.record_patterns(m, ids).")
        L, H = patterns.shape[:2]
        self.patterns = patterns
        self.figures: dict[str, object] = {}
        self.layer = w.IntSlider(description="layer", min=0, max=L - 1, continuous_update=False)
        # ALL, not None: a Dropdown whose value is None shows nothing selected
        self.head = w.Dropdown(description="head", options=[("every head", ALL)] + [(f"head {h}", h)
                                                                                   for h in range(H)])
        self.query = w.Dropdown(description="token", options=[("every token", ALL)] + [
            (f"{i} {show_token(p)}", i) for i, p in enumerate(patterns.pieces)], layout=w.Layout(width="260px"))
        for control, name in ((self.layer, "layer"), (self.head, "head"), (self.query, "query")):
            control.add_class(f"inferlab-lines-{name}")
        self.out_lines, self.out_map = w.Output(), w.Output()
        figures = w.HBox([self.out_lines, self.out_map], layout=w.Layout(flex_flow="row wrap"))  # narrow: stack
        super().__init__([w.HBox([self.layer, self.head, self.query], layout=w.Layout(flex_flow="row wrap")), figures])
        self.add_class("inferlab-lines-view")
        for control in (self.layer, self.head, self.query):
            control.observe(lambda _c: self.redraw(), names="value")
        self.redraw()

    def redraw(self) -> None:
        """Draw the lines and the heatmap of the current selection (no model run)."""
        p, layer, head = self.patterns, self.layer.value, _or_none(self.head.value)
        self.figures["lines"] = vh.lines_figure(p, layer, head, query=_or_none(self.query.value))
        if head is None:  # the layer's mean pattern, the heatmap twin of every head overlaid
            mean = Patterns(p.ids, p.pieces, p.attention[layer:layer + 1].mean(1, keepdim=True))
            heat = va.pattern_figure(mean, 0, 0, title=f"Layer {layer}, mean of every head")
        else:
            heat = va.pattern_figure(p, layer, head)
        self.figures["map"] = heat.update_layout(width=560)
        show_figure(self.out_lines, self.figures["lines"], "lines view")
        show_figure(self.out_map, self.figures["map"], "attention pattern")

    def summary(self) -> str:
        who = "every head" if self.head.value == ALL else f"head {self.head.value}"
        return f"Lines view: {self.patterns.shape[2]} tokens, layer {self.layer.value}, {who}"


def lines_view(patterns: Patterns) -> LinesView:
    """The lines view widget for recorded ``patterns`` (line width = attention weight).

    >>> lines_view(pat)    # doctest: +SKIP
    """
    return _titled(LinesView(patterns), "pick a layer, a head and a token")


class AblationView(_Readable, w.VBox):
    """Pick a layer and a head (or the whole layer): ``run`` switches it off; see the loss and next tokens."""

    def __init__(self, run: Callable[[list[HeadSpec]], Ablation], decode: Callable[[int], str], n_layer: int,
                 n_head: int, *, start: HeadSpec = (0, 0)) -> None:
        self.run, self.decode = run, decode
        self.ablation: Ablation | None = None
        self.figures: dict[str, object] = {}
        self.layer = w.Dropdown(description="layer", options=list(range(n_layer)), value=start[0])
        self.head = w.Dropdown(description="switch off", options=[("every head", ALL)] + [
            (f"head {h}", h) for h in range(n_head)], value=ALL if start[1] is None else start[1])
        self.layer.add_class("inferlab-ablation-layer")
        self.head.add_class("inferlab-ablation-head")
        self.result = w.HTML()
        self.result.add_class("inferlab-ablation-result")
        self.out = w.Output()
        super().__init__([w.HBox([self.layer, self.head]), self.result, self.out])
        self.add_class("inferlab-ablation")
        for control in (self.layer, self.head):
            control.observe(lambda _c: self.update(), names="value")
        self.update()

    def update(self) -> None:
        """Run the ablation for the current choice; a failure becomes a message."""
        try:
            ab = self.run([(self.layer.value, _or_none(self.head.value))])
        except Exception as exc:  # any failure becomes a readable message in the widget
            self.result.value = message(f"Could not run the ablation: {exc}")
            return
        self.ablation = ab
        self.result.value = message(f"loss {ab.loss:.3f} -> {ab.loss_off:.3f} nats/token "
                                    f"({ab.loss_off - ab.loss:+.3f}); next-token distribution moved by "
                                    f"{ab.kl_bits:.3g} bits (KL)", "info")
        top = ab.probs.topk(8).indices.tolist()
        self.figures["next"] = vh.ablation_figure(ab, {i: self.decode(i) for i in top})
        show_figure(self.out, self.figures["next"], "next-token probabilities")

    def summary(self) -> str:
        ab = self.ablation
        state = "" if ab is None else f": loss {ab.loss:.3f} -> {ab.loss_off:.3f} nats/token"
        who = "every head" if self.head.value == ALL else f"head {self.head.value}"
        return f"Ablation view: layer {self.layer.value}, {who} off{state}"


def ablation_view(run: Callable[[list[HeadSpec]], Ablation], decode: Callable[[int], str], n_layer: int,
                  n_head: int, *, start: HeadSpec = (0, 0)) -> AblationView:
    """Switch a head (or a layer's attention) off and see the change; ``run(heads) -> heads.Ablation``.

    >>> ablation_view(lambda hs: heads.ablate(m, ids, hs), lambda i: m.decode([i]),  # doctest: +SKIP
    ...               m.info.n_layer, m.info.n_head, start=(1, 3))
    """
    return _titled(AblationView(run, decode, n_layer, n_head, start=start), "switch heads off")
