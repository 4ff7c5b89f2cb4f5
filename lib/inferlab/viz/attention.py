"""Attention figures: one head's pattern, all heads as small multiples, a query row, a layer by hand,
prefill vs decode rows, and kernel timings (what heads do, and the logit lens: ``viz/heads.py``).

Inputs are recorded data (``attention.Patterns``, ``heads.HeadScores``, ``logit_lens.LogitLens``, ``Trace``, tensors);
nothing here runs a model. Patterns are ``[layers, heads, query_pos, key_pos]``; rows are queries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..attention import LayerByHand, Patterns
from ..i18n import tr
from ..measure.kernels import KernelComparison
from ..trace import Trace
from . import PALETTE, base_layout, name_character, piece_characters, require, show_token

SCALE = "Blues"


def axis_labels(pieces: Sequence[str], ids: Sequence[int] | None = None, start: int = 0) -> list[str]:
    """Category labels ``"pos 'piece' (id N)"``, unique thanks to the position (repeated pieces stay apart); a piece
    of a character's bytes names it: ``"3 '⟨e5⟩⟨ba⟩' of 床 (id 161)"``."""
    ids = ids if ids is not None else [None] * len(pieces)
    return [name_character(f"{start + i} {show_token(p)!r}", c) + ("" if t is None else f" (id {t})")
            for i, (p, t, c) in enumerate(zip(pieces, ids, piece_characters(pieces)))]


def axis_ticks(labels: Sequence[str], max_ticks: int = 40) -> dict:
    """Show ``pos piece`` under the axis (the id only on hover), thinned when there are many tokens."""
    step = max(1, math.ceil(len(labels) / max_ticks))
    vals = list(labels[::step])
    return {"tickmode": "array", "tickvals": vals, "ticktext": [v.split(" (id ")[0] for v in vals],
            "type": "category"}


def heat_z(matrix: torch.Tensor, q_start: int | None = None) -> list[list[float | None]]:
    """Plain rounded values (small stored figures); NaN and, with ``q_start``, future keys become blank."""
    m = matrix.detach().float().clone()
    if q_start is not None:
        q = torch.arange(q_start, q_start + m.shape[0]).view(-1, 1)
        m[torch.arange(m.shape[1]).view(1, -1) > q] = float("nan")
    return [[None if math.isnan(v) else round(v, 4) for v in row] for row in m.tolist()]


def _hover() -> str:
    """Hover text of one attention cell (built when a figure is, so it is in the reader's language)."""
    return tr("query %{y} -> key %{x}: %{z:.3f}") + "<extra></extra>"


def _check_patterns(patterns) -> None:
    require(isinstance(patterns, Patterns), tr(
        "patterns must be attention.Patterns, got {kind}. "
        "Fix: Patterns.from_trace(trace) or attention.record_patterns(m, ids).", kind=type(patterns).__name__))


def _check_head(patterns: Patterns, layer: int, head: int) -> None:
    _check_patterns(patterns)
    L, H = patterns.shape[:2]
    require(isinstance(layer, int) and 0 <= layer < L, tr(
        "layer={layer!r} is out of range: the patterns have {n} layers. Fix: pick 0..{last}.",
        layer=layer, n=L, last=L - 1))
    require(isinstance(head, int) and 0 <= head < H, tr(
        "head={head!r} is out of range: each layer has {n} heads. Fix: pick 0..{last}.", head=head, n=H, last=H - 1))


def _heatmap(matrix: torch.Tensor, keys: list[str], queries: list[str], q_start: int = 0, **kw) -> go.Heatmap:
    """One pattern ``[query_pos, key_pos]``; the masked future is left blank."""
    return go.Heatmap(z=heat_z(matrix, q_start), x=keys, y=queries, hovertemplate=_hover(), colorscale=SCALE,
                      zmin=0, zmax=1, **kw)


def pattern_figure(patterns: Patterns, layer: int, head: int, *, title: str | None = None) -> go.Figure:
    """One head's pattern ``[query_pos, key_pos]`` as a heatmap; hover: query -> key: weight."""
    _check_head(patterns, layer, head)
    T = patterns.shape[2]
    labels = axis_labels(patterns.pieces, patterns.ids)
    fig = go.Figure(_heatmap(patterns.attention[layer, head], labels, labels, colorbar={"title": tr("weight")}))
    fig.update_xaxes(**axis_ticks(labels), tickangle=-60)
    fig.update_yaxes(**axis_ticks(labels), autorange="reversed")
    return base_layout(fig, title or tr("Layer {layer}, head {head}: who each token looks at ({n} x {n})",
                                        layer=layer, head=head, n=T),
                       tr("key position (the token looked at)"), tr("query position (the token looking)"),
                       height=max(380, 18 * min(T, 40) + 160))


def pattern_explorer(patterns: Patterns, *, max_cells: int = 200_000) -> go.Figure:
    """Every head's heatmap in one figure with a slider (works in a static HTML export, no kernel)."""
    _check_patterns(patterns)
    L, H, T, _ = patterns.shape
    cells = L * H * T * T
    require(cells <= max_cells, tr(
        "{heads} heads x {n}x{n} = {cells:,} cells is more than max_cells={max_cells:,} for one figure. "
        "Fix: use a shorter prompt, attention_grid (which downsamples), or the widget (one head at a time).",
        heads=L * H, n=T, cells=cells, max_cells=max_cells))
    labels = axis_labels(patterns.pieces, patterns.ids)
    fig = go.Figure([_heatmap(patterns.attention[i // H, i % H], labels, labels, visible=i == 0,
                              colorbar={"title": tr("weight")}) for i in range(L * H)])

    def title(i: int) -> str:
        return tr("Layer {layer}, head {head} (move the slider: layer x head)", layer=i // H, head=i % H)

    steps = [{"label": f"L{i // H} H{i % H}", "method": "update",
              "args": [{"visible": [j == i for j in range(L * H)]}, {"title": title(i)}]}
             for i in range(L * H)]
    fig.update_layout(sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": tr("showing ")},
                                "pad": {"t": 90}}])
    fig.update_xaxes(**axis_ticks(labels), tickangle=-60)
    fig.update_yaxes(**axis_ticks(labels), autorange="reversed")
    return base_layout(fig, title(0), tr("key position"), tr("query position"),
                       height=max(480, 18 * min(T, 40) + 280))


def downsample(attention: torch.Tensor, max_tokens: int) -> tuple[torch.Tensor, int]:
    """Pool ``[..., query_pos, key_pos]`` into blocks of ``b`` positions so that T/b <= ``max_tokens`` (T tokens).

    Keys in a block are summed and query rows averaged, so every pooled row still sums to 1.
    Returns the pooled tensor and ``b`` (1 when nothing was pooled).
    """
    T = attention.shape[-1]
    b = max(1, math.ceil(T / max_tokens))
    if b == 1:
        return attention, 1
    n = math.ceil(T / b)
    pad = n * b - T
    a = torch.nn.functional.pad(attention, (0, pad, 0, pad))
    a = a.reshape(*attention.shape[:-2], n, b, n, b).sum(-1).sum(-2)
    counts = torch.full((n,), float(b))
    counts[-1] = b - pad
    return a / counts.view(n, 1), b


def attention_grid(patterns: Patterns, *, max_tokens: int = 32, layers: Sequence[int] | None = None,
                   max_panels: int = 160) -> go.Figure:
    """All layers x heads as small multiples (rows: layers, columns: heads).

    Long prompts are pooled to at most ``max_tokens`` cells a side (the title says so) to stay responsive.
    """
    _check_patterns(patterns)
    L, H, T, _ = patterns.shape
    layers = list(range(L)) if layers is None else list(layers)
    require(bool(layers) and all(isinstance(i, int) and 0 <= i < L for i in layers), tr(
        "layers={layers!r}: expected layer numbers 0..{last}. Fix: e.g. layers=[0, {last}].",
        layers=layers, last=L - 1))
    require(len(layers) * H <= max_panels, tr(
        "{layers} layers x {heads} heads = {panels} panels is more than max_panels={max_panels}. "
        "Fix: pass layers=[...] with at most {fit} layers.",
        layers=len(layers), heads=H, panels=len(layers) * H, max_panels=max_panels, fit=max_panels // H))
    pooled, b = downsample(patterns.attention[layers], max_tokens)
    fig = make_subplots(rows=len(layers), cols=H, shared_xaxes=True, shared_yaxes=True,
                        horizontal_spacing=0.01, vertical_spacing=0.02,
                        column_titles=[tr("head {head}", head=h) for h in range(H)],
                        row_titles=[tr("layer {layer}", layer=i) for i in layers])
    for r, layer in enumerate(layers):
        for h in range(H):
            hover = (tr("layer {layer}, head {head}<br>query position %{{y}} -> key position %{{x}}: %{{z:.3f}}",
                        layer=layer, head=h) if b == 1 else
                     tr("layer {layer}, head {head}<br>query block of {b} positions %{{y}} -> "
                        "key block of {b} positions %{{x}}: %{{z:.3f}}", layer=layer, head=h, b=b))
            fig.add_trace(go.Heatmap(z=heat_z(pooled[r, h]), colorscale=SCALE, zmin=0, zmax=1,
                                     showscale=(r == 0 and h == 0), colorbar={"title": tr("weight")},
                                     hovertemplate=hover + "<extra></extra>"),
                          row=r + 1, col=h + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    note = "" if b == 1 else ("<br><sub>" + tr(
        "{tokens} tokens pooled to {n} x {n} (keys summed, queries averaged over blocks of {b})",
        tokens=T, n=pooled.shape[-1], b=b) + "</sub>")
    return base_layout(fig, tr("Every head at once: {layers} layers x {heads} heads", layers=len(layers), heads=H)
                       + note, height=max(300, 130 * len(layers) + 80))


def query_row(patterns: Patterns, layer: int, head: int, query: int) -> go.Figure:
    """Where one query token puts its weight: bars over key positions 0..query (they sum to 1)."""
    _check_head(patterns, layer, head)
    T = patterns.shape[2]
    require(isinstance(query, int) and 0 <= query < T, tr(
        "query={query!r}: expected a position 0..{last}. Fix: pick a token of the prompt.", query=query, last=T - 1))
    row = [round(w, 4) for w in patterns.attention[layer, head, query, : query + 1].tolist()]
    labels = axis_labels(patterns.pieces[: query + 1], patterns.ids[: query + 1])
    fig = go.Figure(go.Bar(x=labels, y=row, marker_color=PALETTE[0],
                           hovertemplate=tr("query {label} -> key %{{x}}: %{{y:.3f}}", label=labels[query])
                           + "<extra></extra>"))
    fig.update_xaxes(**axis_ticks(labels), tickangle=-60)
    return base_layout(fig, tr("Layer {layer}, head {head}: query {piece!r} (pos {pos}) over its {n} allowed keys",
                               layer=layer, head=head, piece=show_token(patterns.pieces[query]), pos=query,
                               n=query + 1),
                       tr("key position"), tr("attention weight (row sums to 1)"), height=360)


def by_hand_figure(hand: LayerByHand, head: int, pieces: Sequence[str]) -> go.Figure:
    """Three steps of one head side by side: raw scores QK^T/sqrt(d), after the causal mask, after softmax."""
    require(isinstance(hand, LayerByHand), tr("hand must come from attention.layer_by_hand(m, x_in, layer)."))
    H, T, _ = hand.scores.shape
    require(isinstance(head, int) and 0 <= head < H,
            tr("head={head!r}: expected 0..{last}. Fix: pick one of those.", head=head, last=H - 1))
    require(len(pieces) == T, tr("pieces has {n} entries for {positions} positions. Fix: pass patterns.pieces.",
                                 n=len(pieces), positions=T))
    masked = hand.masked[head].masked_fill(~hand.mask, float("nan"))
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.06, subplot_titles=[
        tr("scores = q k^T / sqrt(head_dim)"), tr("causal mask: future set to -inf (blank)"),
        tr("softmax: rows sum to 1")])
    a = float(hand.scores[head].abs().max())  # one symmetric scale for raw and masked scores, white at 0
    panels = [(hand.scores[head], "RdBu_r", -a, a), (masked, "RdBu_r", -a, a), (hand.probs[head], SCALE, 0, 1)]
    labels = axis_labels(pieces)
    for c, (z, scale, lo, hi) in enumerate(panels):
        fig.add_trace(go.Heatmap(z=heat_z(z), x=labels, y=labels, colorscale=scale, zmin=lo, zmax=hi, showscale=False,
                                 hovertemplate=_hover()), row=1, col=c + 1)
    fig.update_xaxes(**axis_ticks(labels, max_ticks=12), tickangle=-60)
    fig.update_yaxes(autorange="reversed", **axis_ticks(labels, max_ticks=25))
    fig.update_yaxes(showticklabels=False, col=2)  # the rows are the same queries: label them once, on the left
    fig.update_yaxes(showticklabels=False, col=3)
    fig.update_xaxes(title_text=tr("key position"))
    fig.update_yaxes(title_text=tr("query position"), col=1)
    return base_layout(fig, tr("Layer {layer}, head {head}: from scores to probabilities ({n} x {n})",
                               layer=hand.layer, head=head, n=T),
                       height=max(420, 14 * min(T, 40) + 200))


def prefill_decode_figure(trace: Trace, layer: int, head: int) -> go.Figure:
    """The prefill's T x T pattern on top; below it, one row per decode step, stacked as they were made."""
    require(isinstance(trace, Trace), tr("trace must be an inferlab.Trace from generate(..., record=('attention',))."))
    require("attention" in trace.recorded,
            tr("attention was not recorded. Fix: generate(..., record=('attention',))."))
    require(len(trace.steps) >= 2, tr("the trace has no decode step. Fix: generate with max_new_tokens >= 2."))
    pre = trace.attention(layer, head)
    rows = trace.decode_rows(layer, head)
    T, W = pre.shape[0], len(trace.all_ids) - 1  # W: every token fed to the model (the last is never fed)
    ids = trace.all_ids[:W]
    pieces = (trace.prompt_pieces + trace.generated_pieces)[:W]
    dec = torch.full((len(rows), W), float("nan"))
    for i, r in enumerate(rows):
        dec[i, : len(r)] = r
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[T, len(rows) + 1],
                        subplot_titles=[
                            tr("prefill: one forward pass, {n} query rows x {n} keys", n=T),
                            tr("decode: one new query row per step ({steps} steps, rows grow by one)",
                               steps=len(rows))])
    labels = axis_labels(pieces, ids)
    steps = [tr("step {n}: {label}", n=i + 1, label=q) for i, q in enumerate(labels[T:])]
    fig.add_trace(_heatmap(torch.cat([pre, torch.full((T, W - T), float("nan"))], 1), labels, labels[:T],
                           colorbar={"title": tr("weight")}), row=1, col=1)
    fig.add_trace(_heatmap(dec, labels, steps, q_start=T, showscale=False), row=2, col=1)
    fig.update_xaxes(**axis_ticks(labels), tickangle=-60, row=2, col=1)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(**axis_ticks(labels[:T]), row=1, col=1)
    fig.update_yaxes(**axis_ticks(steps), row=2, col=1)
    fig.update_xaxes(title_text=tr("key position (prompt, then generated tokens)"), row=2, col=1)
    return base_layout(fig, tr("Layer {layer}, head {head}: prefill matrix and decode rows", layer=layer, head=head),
                       height=max(460, 16 * (T + len(rows)) + 240))


def kernel_times_figure(times: KernelComparison) -> go.Figure:
    """Median time of one prefill per attention kernel, with min-max whiskers over repeats (first length)."""
    require(isinstance(times, KernelComparison), tr("times must come from measure.attention_kernels(m, tokens)."))
    names = times.kernels
    seconds = {n: times.sweeps[n].times[0] for n in names}
    med = [times.sweeps[n].medians[0] * 1e3 for n in names]
    lo = [m - min(seconds[n]) * 1e3 for m, n in zip(med, names)]
    hi = [max(seconds[n]) * 1e3 - m for m, n in zip(med, names)]
    shown = [tr("eager + recording") if n == "eager + recording" else n for n in names]  # sdpa, eager: identifiers
    fig = go.Figure(go.Bar(x=shown, y=med, marker_color=[PALETTE[i] for i in range(len(names))],
                           error_y={"type": "data", "array": hi, "arrayminus": lo},
                           hovertemplate=tr("%{x}: median %{y:.2f} ms") + "<extra></extra>"))
    n = len(next(iter(seconds.values())))
    return base_layout(fig, tr("One prefill pass over {tokens} tokens (median of {n}, whiskers min-max)",
                               tokens=times.lengths[0], n=n),
                       tr("attention kernel"), tr("milliseconds"), height=360)
