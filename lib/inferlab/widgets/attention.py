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
from ..i18n import tr
from ..viz import attention as va
from ..viz import heads as vh
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
    """``view`` with its summary and ``use`` (a sentence: how to use it) as the text a stored notebook shows."""
    return titled(view, tr("{summary}. {use}", summary=view.summary(), use=use))


def _not_patterns(patterns) -> TypeError:
    return TypeError(tr("patterns must be attention.Patterns, got {type}. "
                        "Fix: Patterns.from_trace(trace) or attention.record_patterns(m, ids).",
                        type=type(patterns).__name__))


class AttentionExplorer(_Readable, w.VBox):
    """Sliders for layer and head, a query dropdown, one head or all heads; ``figures`` holds what is shown."""

    def __init__(self, patterns: Patterns, compute: Callable[[str], Patterns] | None = None, *,
                 grid_max_tokens: int = 32) -> None:
        if not isinstance(patterns, Patterns):
            raise _not_patterns(patterns)
        self.patterns = patterns
        self.compute = compute
        self.grid_max_tokens = grid_max_tokens
        self.figures: dict[str, object] = {}
        self._grid = None  # the all-heads figure, built once per prompt
        # live: a slider's move redraws from the stored patterns (no model call), so it follows the hand
        self.layer = w.IntSlider(description=tr("layer"), min=0, continuous_update=True)
        self.head = w.IntSlider(description=tr("head"), min=0, continuous_update=True)
        self.query = w.Dropdown(description=tr("query token"), layout=w.Layout(width="320px"))
        # the values stay English (code compares them); the labels are the reader's
        self.view = w.ToggleButtons(options=[(tr("one head"), "one head"), (tr("all heads"), "all heads")],
                                    value="one head")
        self.status = error_box()
        self.out_map, self.out_row = w.Output(), w.Output()
        controls = [w.HBox([self.layer, self.head]), w.HBox([self.query, self.view])]
        if compute is not None:
            self.text = w.Text(description=tr("prompt"), placeholder=tr("type a prompt, press Enter or record"),
                               continuous_update=False, layout=w.Layout(width="520px"))
            self.record = w.Button(description=tr("record"), button_style="primary")
            self.record.add_class("inferlab-explorer-record")  # a handle that does not depend on the language
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
        self.query.options = [(label, i) for i, label in enumerate(vh.token_labels(patterns.pieces))]
        self.query.value = T - 1
        self._quiet = False
        self.redraw()

    def submit(self) -> None:
        """Record the typed prompt with ``compute``; a problem becomes a message, not a traceback."""
        text = self.text.value
        if not text.strip():
            self.status.value = message(tr("The prompt is empty: type a few words first."))
            return
        try:
            patterns = self.compute(text)
        except Exception as exc:  # any failure becomes a readable message in the widget
            self.status.value = message(tr("Could not record this prompt: {error}", error=exc))
            return
        self.status.value = message(tr("Recorded {n} tokens.", n=patterns.shape[2]), "ok")
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
        show_figure(self.out_map, self.figures["map"], tr("attention pattern"))
        show_figure(self.out_row, self.figures["row"], tr("query row"))

    def summary(self) -> str:
        L, H, T, _ = self.patterns.shape
        return tr("Attention explorer: {tokens} tokens, {layers} layers x {heads} heads; showing layer {layer}, "
                  "head {head}, query {query}", tokens=T, layers=L, heads=H, layer=self.layer.value,
                  head=self.head.value, query=self.query.value)


def attention_explorer(patterns: Patterns, compute: Callable[[str], Patterns] | None = None, *,
                       grid_max_tokens: int = 32) -> AttentionExplorer:
    """The explorer widget for recorded ``patterns``; ``compute(text) -> Patterns`` adds a prompt box.

    >>> attention_explorer(pat, compute=lambda text: attention.record_patterns(m, m.encode(text)))  # doctest: +SKIP
    """
    return _titled(AttentionExplorer(patterns, compute, grid_max_tokens=grid_max_tokens),
                   tr("Interactive view: run this cell in JupyterLab to move the sliders or type a prompt."))


ALL = -1  # the dropdowns' "every head" / "every token" choice


def _or_none(value: int) -> int | None:
    return None if value == ALL else value


def _head_options(n_head: int) -> list[tuple[str, int]]:
    """(label, value) pairs: "every head" (``ALL``), then each head."""
    return [(tr("every head"), ALL)] + [(tr("head {h}", h=h), h) for h in range(n_head)]


class LinesView(_Readable, w.VBox):
    """BertViz's lines view next to the heatmap: a layer, a head (or every head) and a token (or every token)."""

    def __init__(self, patterns: Patterns) -> None:
        if not isinstance(patterns, Patterns):
            raise _not_patterns(patterns)
        L, H = patterns.shape[:2]
        self.patterns = patterns
        self.figures: dict[str, object] = {}
        self.layer = w.IntSlider(description=tr("layer"), min=0, max=L - 1, continuous_update=True)  # no model call
        # ALL, not None: a Dropdown whose value is None shows nothing selected
        # one head to start: every head x every token at once is a hairball
        self.head = w.Dropdown(description=tr("head"), options=_head_options(H), value=0)
        self.query = w.Dropdown(description=tr("token"), options=[(tr("every token"), ALL)] + [
            (label, i) for i, label in enumerate(vh.token_labels(patterns.pieces))], layout=w.Layout(width="260px"))
        for control, name in ((self.layer, "layer"), (self.head, "head"), (self.query, "query")):
            control.add_class(f"inferlab-lines-{name}")
        # the lines as SVG with BertViz's hover (point at a token: its lines stay lit), the heatmap beside them;
        # both fit side by side at a laptop's width (1280 px), and stack when narrower
        self.lines = w.HTML(layout=w.Layout(flex="0 0 auto"))
        self.lines.add_class("inferlab-lines-lines")
        self.out_map = w.Output(layout=w.Layout(flex="0 1 auto", min_width="0"))
        self.out_map.add_class("inferlab-lines-map")
        figures = w.HBox([self.lines, self.out_map], layout=w.Layout(flex_flow="row wrap", align_items="flex-start"))
        super().__init__([w.HBox([self.layer, self.head, self.query], layout=w.Layout(flex_flow="row wrap")), figures])
        self.add_class("inferlab-lines-view")
        for control in (self.layer, self.head, self.query):
            control.observe(lambda _c: self.redraw(), names="value")
        self.redraw()

    def redraw(self) -> None:
        """Draw the lines and the heatmap of the current selection (no model run)."""
        p, layer, head = self.patterns, self.layer.value, _or_none(self.head.value)
        query = _or_none(self.query.value)
        self.figures["lines"] = vh.lines_figure(p, layer, head, query=query)
        self.lines.value = vh.lines_svg(p, layer, head, query=query)
        if head is None:  # the layer's mean pattern, the heatmap twin of every head overlaid
            mean = Patterns(p.ids, p.pieces, p.attention[layer:layer + 1].mean(1, keepdim=True))
            heat = va.pattern_figure(mean, 0, 0, title=tr("Layer {layer}, mean of every head", layer=layer))
        else:
            heat = va.pattern_figure(p, layer, head)
        self.figures["map"] = heat.update_layout(width=min(440, 180 + 22 * p.shape[2]))
        show_figure(self.out_map, self.figures["map"], tr("attention pattern"))

    def summary(self) -> str:
        n, layer = self.patterns.shape[2], self.layer.value
        if self.head.value == ALL:
            return tr("Lines view: {n} tokens, layer {layer}, every head", n=n, layer=layer)
        return tr("Lines view: {n} tokens, layer {layer}, head {head}", n=n, layer=layer, head=self.head.value)


def lines_view(patterns: Patterns) -> LinesView:
    """The lines view widget for recorded ``patterns`` (line width = attention weight).

    >>> lines_view(pat)    # doctest: +SKIP
    """
    return _titled(LinesView(patterns),
                   tr("Interactive view: run this cell in JupyterLab to pick a layer, a head and a token."))


def _model_decode(decode) -> bool:
    """Whether ``decode`` is a model's own ``m.decode`` (ids -> text, its tokenizer at hand), not ``id -> text``."""
    return getattr(getattr(decode, "__self__", None), "tokenizer", None) is not None


class AblationView(_Readable, w.VBox):
    """Pick a layer and a head (or the whole layer): ``run`` switches it off; see the loss and next tokens."""

    def __init__(self, run: Callable[[list[HeadSpec]], Ablation], decode: Callable, n_layer: int,
                 n_head: int, *, start: HeadSpec = (0, 0)) -> None:
        self.run, self.decode = run, decode
        self.ablation: Ablation | None = None
        self.figures: dict[str, object] = {}
        self.layer = w.Dropdown(description=tr("layer"), options=list(range(n_layer)), value=start[0])
        self.head = w.Dropdown(description=tr("switch off"), options=_head_options(n_head),
                               value=ALL if start[1] is None else start[1])
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
            self.result.value = message(tr("Could not run the ablation: {error}", error=exc))
            return
        self.ablation = ab
        self.result.value = message(tr("loss {before:.3f} -> {after:.3f} nats/token ({change:+.3f}); next-token "
                                       "distribution moved by {kl:.3g} bits (KL)", before=ab.loss,
                                       after=ab.loss_off, change=ab.loss_off - ab.loss, kl=ab.kl_bits), "info")
        if _model_decode(self.decode):  # m.decode itself: a token of part of a character shows its bytes
            pieces = self.decode
        else:
            pieces = {i: self.decode(i) for i in ab.probs.topk(8).indices.tolist()}
        self.figures["next"] = vh.ablation_figure(ab, pieces)
        show_figure(self.out, self.figures["next"], tr("next-token probabilities"))

    def summary(self) -> str:
        layer, head = self.layer.value, self.head.value
        view = (tr("Ablation view: layer {layer}, every head off", layer=layer) if head == ALL
                else tr("Ablation view: layer {layer}, head {head} off", layer=layer, head=head))
        ab = self.ablation
        if ab is None:
            return view
        return tr("{view}: loss {before:.3f} -> {after:.3f} nats/token", view=view, before=ab.loss,
                  after=ab.loss_off)


def ablation_view(run: Callable[[list[HeadSpec]], Ablation], decode: Callable, n_layer: int,
                  n_head: int, *, start: HeadSpec = (0, 0)) -> AblationView:
    """Switch a head (or a layer's attention) off and see the change; ``run(heads) -> heads.Ablation``.

    ``decode`` names the next tokens: ``m.decode`` (a token of part of a character shows its bytes, ``'⟨e6⟩'``), or
    a function id -> text such as ``lambda i: m.decode([i])`` (which prints such a token as U+FFFD).

    >>> ablation_view(lambda hs: heads.ablate(m, ids, hs), m.decode,  # doctest: +SKIP
    ...               m.info.n_layer, m.info.n_head, start=(1, 3))
    """
    return _titled(AblationView(run, decode, n_layer, n_head, start=start),
                   tr("Interactive view: run this cell in JupyterLab to switch heads off."))
