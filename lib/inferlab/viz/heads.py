"""Head views: what kind each head is (scores, entropy), the logit lens, BertViz's lines view, what switching a
head off changed, and Flash Attention's tiles.

Plain data in, a plotly figure out: ``attention.Patterns`` (``[layers, heads, query_pos, key_pos]``),
``heads.Ablation``, or plain numbers. Nothing here runs a model.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..attention import Patterns
from ..heads import Ablation, HeadScores
from ..i18n import tr
from ..logit_lens import LogitLens
from . import PALETTE, base_layout, clip, name_character, piece_characters, require, show_token
from .attention import SCALE, axis_labels, axis_ticks, heat_z
from .sampling import piece

MAX_WIDTH = 8.0  # pixels: the width of a line carrying all of a query's weight
LABEL_COLUMNS = 18  # a token's position and text in the lines view, cut to this many columns (a Chinese character
# takes two); the character a piece of bytes is part of follows whole
CROWDED = 0.15  # every head x every token: only weights from here up are drawn (a hairball otherwise)
_SVG_IDS = itertools.count()


def token_label(position: int, piece: str, chars: str = "") -> str:
    """A token as the lines view names it: position and quoted text, ``3 '·be'`` (a space shows as ``·``); a piece
    of a character's bytes also names the character (``chars``, from ``piece_characters``): ``3 '⟨e5⟩' of 床``."""
    return name_character(f"{position} '{show_token(piece)}'", chars)


def token_labels(pieces: Sequence[str]) -> list[str]:
    """``token_label`` of every piece of one sequence (``patterns.pieces``), bytes naming their character."""
    return [token_label(i, p, c) for i, (p, c) in enumerate(zip(pieces, piece_characters(pieces)))]


def line_segments(attention: torch.Tensor, *, query: int | None = None,
                  min_weight: float = 0.02) -> list[tuple[int, int, float]]:
    """``(query_pos, key_pos, weight)`` for every weight >= ``min_weight`` of one pattern ``[query_pos, key_pos]``
    (only row ``query`` when given), in row order."""
    require(attention.dim() == 2 and attention.shape[0] == attention.shape[1], tr(
        "attention must be one head's pattern [query_pos, key_pos], got shape {shape}. "
        "Fix: patterns.attention[layer, head].", shape=list(attention.shape)))
    rows = range(attention.shape[0]) if query is None else [query]
    return [(q, k, float(attention[q, k])) for q in rows for k in range(q + 1)
            if float(attention[q, k]) >= min_weight]


def lines_figure(patterns: Patterns, layer: int, head: int | None = None, *, query: int | None = None,
                 min_weight: float = 0.02, max_width: float = MAX_WIDTH) -> go.Figure:
    """BertViz's lines view: tokens twice (left: looking, right: looked at), a line for each weight,
    line width = ``max_width`` x weight. ``head=None`` overlays every head of the layer, one colour each;
    ``query`` keeps one token's lines. Weights below ``min_weight`` are not drawn."""
    require(isinstance(patterns, Patterns), tr(
        "patterns must be attention.Patterns, got {kind}. "
        "Fix: Patterns.from_trace(trace) or attention.record_patterns(m, ids).", kind=type(patterns).__name__))
    L, H, T, _ = patterns.shape
    require(isinstance(layer, int) and 0 <= layer < L,
            tr("layer={layer!r}: expected 0..{last}. Fix: pick one.", layer=layer, last=L - 1))
    require(head is None or (isinstance(head, int) and 0 <= head < H),
            tr("head={head!r}: expected 0..{last}, or None for every head. Fix: pick one of those.",
               head=head, last=H - 1))
    require(query is None or (isinstance(query, int) and 0 <= query < T),
            tr("query={query!r}: expected a position 0..{last}, or None for every token. Fix: pick a token.",
               query=query, last=T - 1))
    heads = range(H) if head is None else [head]
    shapes = []
    for h in heads:
        hexa = PALETTE[h % len(PALETTE)]
        color = f"rgba({int(hexa[1:3], 16)},{int(hexa[3:5], 16)},{int(hexa[5:7], 16)},0.75)"  # see-through overlaps
        for q, k, wt in line_segments(patterns.attention[layer, h], query=query, min_weight=min_weight):
            shapes.append({"type": "line", "x0": 0.12, "y0": q, "x1": 0.88, "y1": k, "layer": "below",
                           "line": {"color": color, "width": round(max_width * wt, 3)}})
    labels = token_labels(patterns.pieces)
    fig = go.Figure([go.Scatter(x=[0.1] * T, y=list(range(T)), mode="text", text=labels, textposition="middle left",
                                hovertemplate=tr("%{text} (looking)") + "<extra></extra>", showlegend=False),
                     go.Scatter(x=[0.9] * T, y=list(range(T)), mode="text", text=labels,
                                textposition="middle right",
                                hovertemplate=tr("%{text} (looked at)") + "<extra></extra>", showlegend=False)])
    for h in heads:  # a legend entry per colour
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=tr("head {head}", head=h),
                                 line={"color": PALETTE[h % len(PALETTE)], "width": 4}))
    fig.update_layout(shapes=shapes, showlegend=head is None)
    fig.update_xaxes(range=[-0.45, 1.45], visible=False, fixedrange=True)
    fig.update_yaxes(range=[T - 0.5, -0.5], visible=False)
    titles = {(True, True): tr("Layer {layer}, every head", layer=layer),
              (True, False): tr("Layer {layer}, every head, token {query} only", layer=layer, query=query),
              (False, True): tr("Layer {layer}, head {head}", layer=layer, head=head),
              (False, False): tr("Layer {layer}, head {head}, token {query} only", layer=layer, head=head, query=query)}
    title = titles[head is None, query is None]
    fig = base_layout(fig, title + "<br><sub>" + tr("line width = attention weight") + "</sub>",
                      height=max(300, 22 * T + 110))
    fig.update_layout(legend={"orientation": "h", "x": 0, "y": 0, "yanchor": "top", "font": {"size": 11}})
    return fig.update_layout(width=480, margin={"l": 10, "r": 10, "t": 100, "b": 40 if head is None else 10})


def lines_svg(patterns: Patterns, layer: int, head: int | None = None, *, query: int | None = None,
              min_weight: float = 0.02, max_width: float = MAX_WIDTH) -> str:
    """The lines view as an SVG (HTML) with BertViz's hover: point at a token, only its lines stay lit.

    Left, the tokens looking; right, the tokens looked at; line width = ``max_width`` x weight, one colour
    per head. Pointing at a left token keeps the lines it sends, at a right token the lines it receives
    (CSS only: it works in JupyterLab and in a static page alike). Every line has a tooltip with its weight.
    With every head and every token, weights below ``CROWDED`` are left out, and the caption says so.
    """
    fig = lines_figure(patterns, layer, head, query=query, min_weight=min_weight, max_width=max_width)  # checks
    H, T = patterns.shape[1:3]
    crowded = head is None and query is None
    floor = max(min_weight, CROWDED) if crowded else min_weight
    heads = range(H) if head is None else [head]
    row, top, width = 22, 16, 400  # narrow, as BertViz's: the heatmap fits beside it at a laptop's width
    left, right = 150, width - 150  # room for a label such as 12 '⟨e5⟩⟨ba⟩' 属于 床前
    uid = f"il-lines-{next(_SVG_IDS)}"
    labels = token_labels(patterns.pieces)
    parts, css = [], []
    for h in heads:
        color = PALETTE[h % len(PALETTE)]
        for q, k, wt in line_segments(patterns.attention[layer, h], query=query, min_weight=floor):
            tip = html.escape(tr("{looking} -> {looked} (head {head}): {weight:.2f}", looking=labels[q],
                                 looked=labels[k], head=h, weight=wt))
            parts.append(f'<line class="q{q} k{k}" x1="{left}" y1="{top + row * q}" x2="{right}" '
                         f'y2="{top + row * k}" stroke="{color}" stroke-opacity="0.75" '
                         f'stroke-width="{round(max_width * wt, 3)}"><title>{tip}</title></line>')
    for i, (text, chars) in enumerate(zip(patterns.pieces, piece_characters(patterns.pieces))):
        shown = html.escape(name_character(clip(token_label(i, text), LABEL_COLUMNS), chars))  # the character whole
        parts.append(f'<text class="lq{i}" x="{left - 6}" y="{top + row * i + 4}" text-anchor="end">{shown}</text>')
        parts.append(f'<text class="rk{i}" x="{right + 6}" y="{top + row * i + 4}">{shown}</text>')
        css.append(f"#{uid}:has(.lq{i}:hover) line:not(.q{i}), #{uid}:has(.rk{i}:hover) line:not(.k{i})"
                   "{stroke-opacity:0.06}")
        css.append(f"#{uid} .lq{i}:hover, #{uid} .rk{i}:hover{{font-weight:bold}}")
    caption = fig.layout.title.text.split("<br>")[0] + " · " + tr("line width = attention weight")
    if crowded:
        caption += " · " + tr("every head x every token: only weights >= {floor:.2f} drawn; pick a head or a token "
                              "to see all", floor=floor)
    hint = tr("Point at a token: only its lines stay lit.")
    height = top + row * T
    # the caption wraps at the drawing's width (a long one, every head x every token, made the view wider than a
    # laptop's screen and pushed the heatmap below)
    return (f'<div class="inferlab-lines-svg" style="font-family:sans-serif;font-size:13px;width:{width}px">'
            f"<style>#{uid} text{{cursor:default}} {' '.join(css)}</style>"
            f"<div><b>{html.escape(caption)}</b><br><small>{html.escape(hint)}</small></div>"
            f'<svg id="{uid}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'style="font-size:12px">{"".join(parts)}</svg></div>')


def ablation_figure(ablation: Ablation, pieces, *, k: int = 8) -> go.Figure:
    """The ``k`` most likely next tokens with every head on, and their probabilities with the heads off.

    ``pieces`` is ``m.decode`` (a token of part of a character then shows its bytes, ``'⟨e6⟩'``, not U+FFFD), or a
    dict token id -> text for at least those ids (e.g. ``{i: m.decode([i]) for i in ...}``). Each bar is named by
    its text and id (two byte tokens can print alike).
    """
    require(isinstance(ablation, Ablation), tr("ablation must come from heads.ablate(m, ids, heads)."))
    top = ablation.probs.topk(k).indices.tolist()
    if isinstance(pieces, Mapping):
        missing = [i for i in top if i not in pieces]
        require(not missing, tr("pieces has no text for ids {missing}. Fix: pass {{i: m.decode([i]) for i in ids}}.",
                                missing=missing))
    texts = [piece(pieces, i) for i in top]  # m.decode, a dict or a list
    names = [f"{show_token(t)!r} {i}" for t, i in zip(texts, top)]
    off = tr(", ").join(tr("layer {layer} (every head)", layer=a) if b is None
                        else tr("layer {layer} head {head}", layer=a, head=b) for a, b in ablation.heads)
    fig = go.Figure([
        go.Bar(x=names, y=[float(ablation.probs[i]) for i in top], name=tr("every head on"), marker_color=PALETTE[0]),
        go.Bar(x=names, y=[float(ablation.probs_off[i]) for i in top],
               name=tr("{heads} off", heads=off) if off else tr("nothing off"), marker_color=PALETTE[1])])
    fig.update_layout(barmode="group", legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"})
    fig = base_layout(fig, tr("Next token, on and off: loss {on:.2f} -> {off:.2f} nats/token", on=ablation.loss,
                              off=ablation.loss_off),
                      tr("next token (most likely with every head on)"), tr("probability"), height=400)
    return fig.update_layout(margin={"t": 90})


def flash_tiles_figure(tokens: int = 16, tile: int = 4) -> go.Figure:
    """Eager attention keeps the whole ``[query_pos, key_pos]`` matrix; Flash Attention one tile at a time.

    Left: every score of a ``tokens x tokens`` pattern held in memory at once (the causal half used).
    Right: query tile 2 meeting each key tile in turn; only the current tile of scores exists, on chip,
    while a running max and sum (the online softmax) carry what earlier tiles contributed.
    """
    require(isinstance(tokens, int) and isinstance(tile, int) and 1 <= tile <= tokens <= 64,
            tr("tokens={tokens!r}, tile={tile!r}: expected 1 <= tile <= tokens <= 64. Fix: e.g. tokens=16, tile=4.",
               tokens=tokens, tile=tile))
    n = math.ceil(tokens / tile)
    qt = min(2, n - 1)  # the query tile shown working
    eager = [[1.0 if k <= q else None for k in range(tokens)] for q in range(tokens)]
    flash = [[None] * tokens for _ in range(tokens)]
    for q in range(qt * tile, min((qt + 1) * tile, tokens)):
        for k in range(q + 1):
            flash[q][k] = 1.0 if k // tile == qt else 0.35  # the tile on chip now; tiles already folded in
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=[
        tr("eager: all {n} x {n} scores in memory", n=tokens), tr("flash: one {n} x {n} tile at a time", n=tile)])
    scale = [[0, "#cfe0f1"], [1, PALETTE[0]]]
    for c, z in enumerate((eager, flash)):
        fig.add_trace(go.Heatmap(z=z, zmin=0, zmax=1, colorscale=scale, showscale=False, xgap=1, ygap=1,
                                 hovertemplate=tr("query %{y}, key %{x}") + "<extra></extra>"), row=1, col=c + 1)
    for i in range(1, n):  # tile borders
        for axis in ("x", "y"):
            fig.add_shape(type="line", xref="x2", yref="y2", line={"color": "#444", "width": 1},
                          **({"x0": i * tile - 0.5, "x1": i * tile - 0.5, "y0": -0.5, "y1": tokens - 0.5}
                             if axis == "x" else {"y0": i * tile - 0.5, "y1": i * tile - 0.5, "x0": -0.5,
                                                  "x1": tokens - 0.5}))
    fig.update_yaxes(autorange="reversed", title_text=tr("query position"))
    fig.update_xaxes(title_text=tr("key position"))
    fig.add_annotation(text=tr("right: dark = the tile of scores on chip now; light = tiles already folded into the "
                               "running max and sum,<br>then dropped; blank = other query tiles, done one at a time"),
                       x=0.5, y=-0.3, xref="paper", yref="paper", showarrow=False)
    fig = base_layout(fig, tr("What is in memory at once: the whole matrix (eager) or one tile (Flash Attention)"),
                      height=450)
    return fig.update_layout(margin={"l": 60, "r": 20, "t": 80, "b": 110})


def head_scores_figure(scores: HeadScores) -> go.Figure:
    """Three ``[layers, heads]`` heatmaps: previous-token, first-token and induction scores."""
    require(isinstance(scores, HeadScores), tr("scores must come from heads.head_scores(m, patterns)."))
    names = {"previous": tr("previous token"), "first": tr("first token"),
             "induction": tr("induction (on BOS + R + R)")}
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07, subplot_titles=[
        tr("{name}<br>(even spread scores {score:.2f})", name=names[k], score=scores.baseline[k]) for k in names])
    for c, k in enumerate(names):
        z = getattr(scores, k)
        fig.add_trace(go.Heatmap(z=z.tolist(), zmin=0, zmax=1, colorscale=SCALE, showscale=c == 2,
                                 text=[[f"{v:.2f}" for v in r] for r in z.tolist()], texttemplate="%{text}",
                                 colorbar={"title": tr("score")},
                                 hovertemplate=tr("{name}: layer %{{y}}, head %{{x}}: %{{z:.3f}}", name=names[k])
                                 + "<extra></extra>"),
                      row=1, col=c + 1)
        fig.update_xaxes(title_text=tr("head"), dtick=1, row=1, col=c + 1)
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_yaxes(title_text=tr("layer"), col=1)
    fig = base_layout(fig, tr("Kinds of heads, by measurement (score = mean weight on the target key)"),
                      height=max(340, 40 * scores.previous.shape[0] + 220))
    return fig.update_layout(margin={"t": 110})


def entropy_figure(entropy: torch.Tensor, uniform_bits: float) -> go.Figure:
    """Attention entropy ``[layers, heads]`` (bits): one dot per head, the layer mean, and even spread."""
    require(isinstance(entropy, torch.Tensor) and entropy.dim() == 2,
            tr("entropy must be a [layers, heads] tensor. Fix: heads.attention_entropy(patterns.attention)."))
    L, H = entropy.shape
    fig = go.Figure()
    for h in range(H):
        fig.add_trace(go.Scatter(x=list(range(L)), y=entropy[:, h].tolist(), mode="markers",
                                 name=tr("head {head}", head=h), marker={"color": PALETTE[h % len(PALETTE)], "size": 8},
                                 hovertemplate=tr("layer %{{x}}, head {head}: %{{y:.3f}} bits", head=h)
                                 + "<extra></extra>"))
    fig.add_trace(go.Scatter(x=list(range(L)), y=entropy.mean(1).tolist(), mode="lines", name=tr("layer mean"),
                             line={"color": "black"}))
    fig.add_hline(y=uniform_bits, line_dash="dash", annotation_text=tr("evenly spread"))
    fig.add_hline(y=0, line_dash="dot", annotation_text=tr("one key only"))
    fig.update_xaxes(dtick=1)
    return base_layout(fig, tr("Attention entropy by layer (low: focused, high: spread out)"), tr("layer"),
                       tr("entropy of a query row (bits), mean over queries"), height=380)


def _stage_name(name: str) -> str:
    """A logit-lens stage in the reader's language: ``logit_lens`` names them "embeddings", "block 0", ..."""
    if name == "embeddings":
        return tr("embeddings")
    number = name.removeprefix("block ")
    return tr("block {i}", i=number) if number != name and number.isdigit() else name


def logit_lens_figure(lens: LogitLens) -> go.Figure:
    """Top-1 prediction after each layer (rows) at each position (columns); colour = its probability."""
    require(isinstance(lens, LogitLens), tr("lens must come from inferlab.logit_lens.logit_lens(m, residual, ids)."))
    n, T, _ = lens.top_ids.shape
    pieces = lens.pieces or [str(i) for i in range(T)]
    stages = [_stage_name(name) for name in lens.layer_names]
    text = [[show_token(lens.top_pieces[s][t][0]) for t in range(T)] for s in range(n)]
    hover = []
    for s in range(n):
        row = []
        for t in range(T):
            lines = [f"{show_token(p)!r} (id {int(i)}): {float(q):.3g}"
                     for p, i, q in zip(lens.top_pieces[s][t], lens.top_ids[s, t], lens.top_probs[s, t])]
            nxt = ("<br>" + tr("p(real next {token!r}) = {p:.3g}", token=show_token(pieces[t + 1]),
                                p=float(lens.next_prob[s, t])) if lens.pieces and t < T - 1 else "")
            row.append(tr("{stage}, after {token!r} (pos {pos}):", stage=stages[s], token=show_token(pieces[t]),
                          pos=t) + "<br>" + "<br>".join(lines) + nxt)
        hover.append(row)
    labels = axis_labels(pieces)
    fig = go.Figure(go.Heatmap(z=heat_z(lens.top_probs[..., 0]), x=labels, y=stages,
                               text=text, texttemplate="%{text}", textfont={"size": 9}, customdata=hover,
                               colorscale=SCALE,
                               zmin=0, zmax=1, colorbar={"title": tr("top-1 prob")},
                               hovertemplate="%{customdata}<extra></extra>"))
    fig.update_xaxes(**axis_ticks(labels), tickangle=-60)
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, tr("Logit lens: the top next-token guess if the model stopped after each layer"),
                       tr("input position (predicting the token after it)"), tr("residual stream after"),
                       height=max(320, 45 * n + 200))
