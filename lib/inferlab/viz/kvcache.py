"""Figures for notebook 05: the KV cache growing, its bytes against the formula, memory for time.

Plain data in: a cache's per-layer ``(keys, values)`` tensors ``[batch, heads, tokens, head_dim]``,
``CacheSnapshot`` lists, ``measure.CacheComparison``, and ``MemoryCase`` rows (sizes only).

    >>> fig = kv_tensors_figure(cache.layers, tokens=20, prompt_len=12)     # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..cache import CacheSnapshot
from ..cost import Shape, kv_bytes_per_token
from ..i18n import tr
from ..measure.cache_on_off import CacheComparison
from . import PALETTE, base_layout, name_character, piece_characters, require, rgba, show_token

PUBLISHED_NOTE = "computed from published configs, not measured"  # MemoryCase.source; shown translated


def check_layers(layers) -> None:
    """Raise a clear error unless ``layers`` is a list of ``(K, V)`` tensors ``[batch, heads, tokens, head_dim]``."""
    require(isinstance(layers, (list, tuple)) and len(layers) > 0,
            tr("layers must be a non-empty list of (keys, values) per layer. Fix: pass cache.layers."))
    for i, kv in enumerate(layers):
        require(isinstance(kv, (list, tuple)) and len(kv) == 2 and all(isinstance(t, torch.Tensor) for t in kv),
                tr("layers[{i}] must be a (keys, values) pair of tensors. Fix: pass cache.layers.", i=i))
        require(kv[0].dim() == 4 and kv[0].shape == kv[1].shape, tr(
            "layers[{i}] keys/values must both be [batch, heads, tokens, head_dim], got {k_shape} and {v_shape}. "
            "Fix: pass cache.layers of a KVCache.", i=i, k_shape=list(kv[0].shape), v_shape=list(kv[1].shape)))


def kv_tensors_figure(layers, tokens: int | None = None, *, prompt_len: int = 0, head: int = 0,
                      pieces: Sequence[str] | None = None, seq: int = 0) -> go.Figure:
    """Each layer's K and V for one head, ``[tokens, head_dim]``, as heatmaps: one row per layer.

    Args:
        layers: ``cache.layers``, per layer ``(K, V)`` each ``[batch, heads, tokens, head_dim]``.
        tokens: show the first ``tokens`` positions (the cache as it was then); default all.
        prompt_len: positions that came from the prompt (prefill); later ones came one per decode step.
        head: which head to show. pieces: token text per position, for hover. seq: which sequence of the batch.
    """
    check_layers(layers)
    batch, heads, total, head_dim = layers[0][0].shape
    tokens = total if tokens is None else tokens
    require(1 <= tokens <= total, tr("tokens={tokens} is outside 1..{total} (positions in the cache). "
                                     "Fix: pick a step between 1 and {total}.", tokens=tokens, total=total))
    require(0 <= head < heads, tr("head={head} is outside 0..{last}. Fix: pick one of the {heads} heads.",
                                  head=head, last=heads - 1, heads=heads))
    require(0 <= seq < batch, tr("seq={seq} is outside 0..{last}. Fix: pick a sequence of the batch.",
                                 seq=seq, last=batch - 1))
    n = len(layers)
    shape = f"[{batch}, {heads}, {tokens}, {head_dim}]"
    titles = [tr("layer {layer} {kind} {shape}", layer=i, kind=kind, shape=shape) for i in range(n) for kind in "KV"]
    fig = make_subplots(rows=n, cols=2, subplot_titles=titles, shared_xaxes=True,
                        vertical_spacing=min(0.08, 0.3 / n), horizontal_spacing=0.06)
    # one label per column (position and token text): hover shows it, and no per-cell text is stored
    chars = piece_characters(pieces) if pieces is not None else []  # a piece of a character's bytes names it
    labels = [name_character(f"{p} {show_token(pieces[p])}", chars[p]) if pieces is not None and p < len(pieces)
              else str(p) for p in range(tokens)]
    scale = max(float(t[seq, head, :tokens].abs().max()) for kv in layers for t in kv) or 1.0
    for i, kv in enumerate(layers):
        for j, (kind, t) in enumerate(zip("KV", kv)):
            # [head_dim, tokens]: positions along x. A float32 array is stored compactly (base64) by plotly.
            z = t[seq, head, :tokens].detach().float().cpu().T.numpy()
            fig.add_trace(go.Heatmap(
                z=z, x=labels, zmin=-scale, zmax=scale, colorscale="RdBu", showscale=(i == 0 and j == 0),
                colorbar={"title": tr("value"), "len": 0.3, "y": 1, "yanchor": "top"},
                hovertemplate=tr("layer {layer} {kind}, head {head}<br>position %{{x}}<br>dim %{{y}}: %{{z:.3f}}",
                                 layer=i, kind=kind, head=head) + "<extra></extra>"), row=i + 1, col=j + 1)
            if tokens > prompt_len:  # outline the newest position: the row this step appended
                fig.add_vrect(x0=tokens - 1.5, x1=tokens - 0.5, line={"color": PALETTE[1], "width": 2},
                              row=i + 1, col=j + 1)
            if 0 < prompt_len < tokens:  # where prefill's positions end and decode's begin
                fig.add_vline(x=prompt_len - 0.5, line={"color": "black", "dash": "dot", "width": 1},
                              row=i + 1, col=j + 1)
    # A fixed x range (the whole final cache) so that moving the step shows the cache growing to the right.
    fig.update_xaxes(range=[-0.5, total - 0.5], type="category")
    fig.update_xaxes(title_text=tr("position (tokens); dotted line: end of the prompt"), row=n)
    fig.update_yaxes(title_text="head_dim", col=1)
    step = tokens - prompt_len
    title = (tr("The KV cache after prefill: {tokens} positions per layer, head {head} shown", tokens=tokens, head=head)
             if step <= 0 else
             tr("The KV cache after decode step {step}: {tokens} positions per layer, head {head} shown",
                step=step, tokens=tokens, head=head))
    return base_layout(fig, title, height=140 + 150 * n)


def cache_bytes_figure(snapshots: Sequence[CacheSnapshot], bytes_per_token: int) -> go.Figure:
    """Total cache bytes measured at each step (markers) against the formula line ``bytes_per_token x tokens``."""
    require(len(snapshots) > 0 and all(isinstance(s, CacheSnapshot) for s in snapshots),
            tr("snapshots must be a non-empty list of CacheSnapshot. Fix: collect cache.snapshot() after each step."))
    tokens = [s.tokens for s in snapshots]
    fig = go.Figure()
    span = [0, max(tokens)]
    fig.add_trace(go.Scatter(x=span, y=[t * bytes_per_token / 1e3 for t in span], mode="lines",
                             name=tr("formula: {bytes:,} B x tokens", bytes=bytes_per_token),
                             line={"color": "black", "dash": "dash"}))
    fig.add_trace(go.Scatter(
        x=tokens, y=[s.total_bytes / 1e3 for s in snapshots], mode="markers", name=tr("measured from the cache"),
        marker={"color": PALETTE[1], "size": 8},
        hovertext=[tr("{tokens} tokens: {measured:,} B measured, {formula:,} B by the formula<br>per layer K,V {shape}",
                      tokens=s.tokens, measured=s.total_bytes, formula=s.tokens * bytes_per_token,
                      shape=list(s.layer_shapes[0])) for s in snapshots], hoverinfo="text"))
    return base_layout(fig, tr("KV cache bytes: measured = 2 x layers x heads x head_dim x bytes x tokens"),
                       x=tr("tokens in the cache"), y=tr("cache size (kB)"), height=400)


def cache_timing_figure(cmp: CacheComparison) -> go.Figure:
    """Time per step with and without the cache (median, band over runs), and the logit difference per step."""
    require(isinstance(cmp, CacheComparison),
            tr("expected a CacheComparison. Fix: use inferlab.measure.compare_cache(...)."))
    zeros = sum(1 for d in cmp.max_abs_diff if d == 0)
    diff_title = (tr("max |logit difference| between the two, per step ({zeros} step(s) exactly 0: not drawn on the "
                     "log axis)", zeros=zeros) if zeros else tr("max |logit difference| between the two, per step"))
    fig = make_subplots(rows=2, cols=1, row_heights=[0.68, 0.32], shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=(tr("time of each step (line: median; band: fastest to slowest run)"),
                                        diff_title))
    ctx = [cmp.prompt_len + i for i in range(len(cmp.cached_ids))]
    for cached, color, name in ((False, PALETTE[3], tr("without cache (whole sequence)")),
                                (True, PALETTE[2], tr("with cache (one token)"))):
        runs = cmp.cached_times if cached else cmp.uncached_times
        lows = [min(c) * 1e3 for c in zip(*runs)]
        highs = [max(c) * 1e3 for c in zip(*runs)]
        fig.add_trace(go.Scatter(x=ctx, y=highs, mode="lines", line={"width": 0}, showlegend=False,
                                 hoverinfo="skip"), row=1, col=1)
        fig.add_trace(go.Scatter(x=ctx, y=lows, mode="lines", line={"width": 0}, fill="tonexty",
                                 fillcolor=rgba(color, 0.15), showlegend=False, hoverinfo="skip"), row=1, col=1)
        med = [t * 1e3 for t in cmp.step_medians(cached)]
        fig.add_trace(go.Scatter(x=ctx, y=med, mode="lines+markers", name=name, line={"color": color},
                                 hovertext=[name + "<br>" + (
                                     tr("step {i} over {tokens} tokens: {ms:.3f} ms (prefill)", i=i, tokens=c, ms=m)
                                     if cached and i == 0 else
                                     tr("step {i} over {tokens} tokens: {ms:.3f} ms", i=i, tokens=c, ms=m))
                                     for i, (c, m) in enumerate(zip(ctx, med))], hoverinfo="text"),
                      row=1, col=1)
    diffs = [d if d > 0 else None for d in cmp.max_abs_diff]  # exact zeros cannot sit on a log axis
    fig.add_trace(go.Scatter(x=ctx, y=diffs, mode="markers", name=tr("max |logit diff|"),
                             marker={"color": PALETTE[4]},
                             hovertext=[tr("step {i}: {diff:.2e} (largest |logit| {largest:.1f})", i=i, diff=d,
                                           largest=m) for i, (d, m) in enumerate(zip(cmp.max_abs_diff, cmp.max_logit))],
                             hoverinfo="text"), row=2, col=1)
    fig.update_yaxes(title_text=tr("ms per step"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=tr("|difference|"), type="log", row=2, col=1)
    fig.update_xaxes(title_text=tr("tokens in the sequence when the step runs"), row=2, col=1)
    return base_layout(fig, tr("With and without the KV cache ({model}, {device} {dtype}): {speedup:.1f}x faster in "
                               "total with it", model=cmp.model, device=cmp.device, dtype=cmp.dtype,
                               speedup=cmp.speedup), height=620)


@dataclass(frozen=True)
class MemoryCase:
    """Sizes for the memory heatmap: KV bytes per token, weight bytes, context limit, and where they came from."""

    name: str
    kv_bytes_per_token: int
    weight_bytes: int
    n_ctx: int
    dtype: str
    source: str  # "loaded model" or PUBLISHED_NOTE

    @property
    def crossover_tokens(self) -> float:
        """Cached tokens (batch x context) at which the cache is as large as the weights."""
        return self.weight_bytes / self.kv_bytes_per_token

    @classmethod
    def from_shape(cls, shape: Shape, source: str = PUBLISHED_NOTE, weight_bytes: int | None = None) -> MemoryCase:
        """From a ``cost.Shape`` (published configs: weights counted from the shape)."""
        dtype = {4: "float32", 2: "16-bit", 1: "8-bit"}.get(shape.bytes_per_element, f"{shape.bytes_per_element} B")
        return cls(shape.name, kv_bytes_per_token(shape), weight_bytes or shape.weight_bytes, shape.n_ctx,
                   dtype, source)

    def __repr__(self) -> str:
        return (f"MemoryCase({self.name}: {self.kv_bytes_per_token:,} B/token, "
                f"weights {self.weight_bytes / 1e9:.2f} GB {self.dtype}, "
                f"cache = weights at {self.crossover_tokens:,.0f} tokens; {self.source})")


def _size(b: float) -> str:
    return f"{b / 1e9:.3g} GB" if b >= 1e8 else f"{b / 1e6:.3g} MB"


def cache_vs_weights(cases: Sequence[MemoryCase], batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
                     contexts: Sequence[int] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)) -> go.Figure:
    """Heatmap of cache bytes / weight bytes over batch x context, one model at a time (a dropdown picks it).

    Cells beyond a model's context limit are blank. Published configs are labelled as not measured.
    """
    require(len(cases) > 0 and all(isinstance(c, MemoryCase) for c in cases),
            tr("cases must be a non-empty list of MemoryCase. Fix: MemoryCase.from_shape(shape) for each model."))
    require(len(batches) > 0 and len(contexts) > 0, tr("batches and contexts must be non-empty lists of sizes."))
    xs, ys = [str(c) for c in contexts], [str(b) for b in batches]
    fig = go.Figure()
    titles = []
    for k, case in enumerate(cases):
        ratios = [[b * c * case.kv_bytes_per_token / case.weight_bytes if c <= case.n_ctx else None
                   for c in contexts] for b in batches]
        hover = [[tr("{model}: batch {batch} x context {context}", model=case.name, batch=b, context=c) + "<br>" + (
            tr("beyond this model's context limit") if r is None else
            tr("cache {cache} vs weights {weights}: x{ratio:.3g}", cache=_size(b * c * case.kv_bytes_per_token),
               weights=_size(case.weight_bytes), ratio=r))
            for c, r in zip(contexts, row)] for b, row in zip(batches, ratios)]
        # Plotly colour scales are linear: colour by log2(ratio) and print the ratio itself in each cell.
        fig.add_trace(go.Heatmap(
            x=xs, y=ys, z=[[None if r is None else math.log2(r) for r in row] for row in ratios],
            text=[["" if r is None else f"{r:.2g}" for r in row] for row in ratios], texttemplate="%{text}",
            hovertext=hover, hoverinfo="text", hoverongaps=False, visible=k == 0, name=case.name,
            zmin=-6, zmax=6, colorscale="Viridis",
            colorbar={"title": tr("cache / weights"), "tickvals": [-6, -3, 0, 3, 6],
                      "ticktext": ["1/64", "1/8", "1", "8", "64"]}))
        source = tr("computed from published configs, not measured") if case.source == PUBLISHED_NOTE else case.source
        titles.append(tr("KV cache / weights: {model} ({dtype}; {source})", model=case.name, dtype=case.dtype,
                         source=source))
    buttons = [{"label": c.name, "method": "update",
                "args": [{"visible": [i == k for i in range(len(cases))]}, {"title.text": titles[k]}]}
               for k, c in enumerate(cases)]
    # the dropdown sits on its own line between the title and the plot (at the top right it covered the title)
    fig.update_layout(updatemenus=[{"buttons": buttons, "direction": "down", "x": 0.08, "xanchor": "left",
                                    "y": 1.02, "yanchor": "bottom", "active": 0, "pad": {"b": 4}}],
                      annotations=[{"text": tr("model:"), "x": 0.0, "xref": "paper", "xanchor": "left", "y": 1.045,
                                    "yref": "paper", "yanchor": "bottom", "showarrow": False}])
    fig.update_layout(plot_bgcolor="#e8e8e8")  # blank (grey) cells: beyond the model's context limit
    base_layout(fig, titles[0], x=tr("context (tokens per sequence); grey: beyond the model's context limit"),
                y=tr("batch (sequences)"), height=560)
    fig.update_layout(margin={"t": 110}, title={"y": 0.97, "yanchor": "top"})
    return fig

