"""A slider over decode steps: each layer's K and V ``[batch, heads, tokens, head_dim]`` getting one row longer.

The cache only ever appends, so the cache after step ``s`` is the final cache's first ``prompt_len + s``
positions: the widget takes the final ``cache.layers`` once and slices it (no model call in callbacks).

    >>> kv_growth(cache.layers, prompt_len=12, pieces=pieces)      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as w

from ..i18n import tr
from ..viz.kvcache import check_layers, kv_tensors_figure
from . import message, show_figure, titled


def _summary(layers, tokens: int, prompt_len: int) -> str:
    """One line: shape per layer and total bytes at this step."""
    batch, heads, _, head_dim = layers[0][0].shape
    per_layer = 2 * batch * heads * tokens * head_dim * layers[0][0].element_size()
    step = tokens - prompt_len
    when = tr("after prefill") if step <= 0 else tr("after decode step {step}", step=step)
    return tr("{when}: every layer holds K and V of shape [{batch}, {heads}, {tokens}, {head_dim}] "
              "[batch, heads, tokens, head_dim] = {per_layer:,} bytes per layer, {total:,} bytes in {layers} layers",
              when=when, batch=batch, heads=heads, tokens=tokens, head_dim=head_dim, per_layer=per_layer,
              total=per_layer * len(layers), layers=len(layers))


def kv_growth(layers, prompt_len: int, pieces: Sequence[str] | None = None, head: int = 0) -> w.VBox:
    """Slider over steps (0 = right after prefill) and a head picker; redraws the K/V heatmaps of every layer.

    Args:
        layers: the final ``cache.layers``: per layer ``(K, V)``, each ``[batch, heads, tokens, head_dim]``.
        prompt_len: positions written by prefill (>= 1); the rest were written one per decode step.
        pieces: token text per position (hover labels). head: the head shown first.
    """
    check_layers(layers)
    layers = [(k.detach().float().cpu(), v.detach().float().cpu()) for k, v in layers]  # copy once
    _, heads, total, _ = layers[0][0].shape
    if not 1 <= prompt_len <= total:
        raise ValueError(tr("prompt_len={prompt_len} is outside 1..{total} (positions in the cache). "
                            "Fix: pass the number of prompt tokens given to prefill.",
                            prompt_len=prompt_len, total=total))
    step = w.IntSlider(value=total - prompt_len, min=0, max=total - prompt_len, description=tr("decode step"),
                       continuous_update=True, style={"description_width": "initial"})  # stored tensors: live
    head_box = w.IntText(value=min(max(head, 0), heads - 1), description=tr("head"), layout={"width": "140px"})
    info, errors, out = w.HTML(), w.HTML(), w.Output()

    def redraw(_=None) -> None:
        h = head_box.value
        if not 0 <= h < heads:
            errors.value = message(tr("head={h} does not exist: this model has heads 0..{last}. Pick one of those.",
                                      h=h, last=heads - 1))
            return
        errors.value = ""
        tokens = prompt_len + step.value
        info.value = message(_summary(layers, tokens, prompt_len), "info")
        fig = kv_tensors_figure(layers, tokens, prompt_len=prompt_len, head=h, pieces=pieces)
        show_figure(out, fig, tr("KV cache figure"))

    step.observe(redraw, names="value")
    head_box.observe(redraw, names="value")
    redraw()
    return titled(w.VBox([w.HBox([step, head_box]), info, errors, out]),
                  tr("KV cache growth view ({steps} decode steps, {layers} layers, {heads} heads): run the cell "
                     "to use the slider", steps=total - prompt_len, layers=len(layers), heads=heads))
