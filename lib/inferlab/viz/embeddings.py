"""Embedding figures: heat strips of rows, the position table, cosine maps, neighbours, PCA scatter.

Inputs are tensors and the small dataclasses of ``inferlab.embeddings``; no figure takes a model.

    >>> fig = heat_strip(vectors, labels=["How", " does"])   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..embeddings import FirstResidual
from ..i18n import tr
from ..tokens import visible
from ..vocab_space import Neighbours, Projection, group_name
from . import PALETTE, base_layout, require, text_width

_DIVERGING = "RdBu_r"


def _matrix(x, name: str) -> torch.Tensor:
    require(isinstance(x, torch.Tensor), tr("{name} must be a torch tensor, got {kind}", name=name,
                                            kind=type(x).__name__))
    x = x.detach().float().cpu()
    if x.dim() == 1:
        x = x.unsqueeze(0)
    require(x.dim() == 2 and x.numel() > 0,
            tr("{name} must be [d_model] or [rows, d_model], got {shape}", name=name, shape=list(x.shape)))
    return x


def _z(x: torch.Tensor) -> np.ndarray:
    """float32 numpy: plotly stores it as compact base64 (a notebook keeps every figure's numbers)."""
    return x.detach().cpu().float().numpy()


def _thin(x: torch.Tensor, max_rows: int, max_cols: int) -> tuple[np.ndarray, list[int], list[int]]:
    """Every k-th row/column so a big table stays a small figure."""
    rs = max(1, -(-x.shape[0] // max_rows))
    cs = max(1, -(-x.shape[1] // max_cols))
    rows, cols = list(range(0, x.shape[0], rs)), list(range(0, x.shape[1], cs))
    z = _z(x[::rs, ::cs])
    return z, rows, cols


def _hover_value(place: str) -> str:
    """Hover of one cell of a ``[rows, d_model]`` heatmap; ``place`` names the rows ("token" or "position")."""
    text = (tr("token %{y}<br>dimension %{x}<br>value %{z:.3f}") if place == "token"
            else tr("position %{y}<br>dimension %{x}<br>value %{z:.3f}"))
    return text + "<extra></extra>"


def _shape_note(rows: int, cols: int, step: int, *, positions: bool) -> str:
    """`` ([rows, cols])`` for a title, and which rows are shown when only every ``step``-th one is."""
    shape = f"[{rows}, {cols}]"
    if step <= 1:
        return f" ({shape})"
    return (tr(" ({shape}, every {k}th position shown)", shape=shape, k=step) if positions
            else tr(" ({shape}, every {k}th shown)", shape=shape, k=step))


def heat_strip(vectors: torch.Tensor, labels: Sequence[str] | None = None, *, title: str | None = None) -> go.Figure:
    """Rows of numbers as coloured strips: ``[d_model]`` (one token) or ``[tokens, d_model]`` (one row per token).

    Red is positive, blue negative, white zero; hover shows the token, the dimension and the value.
    """
    x = _matrix(vectors, "vectors")
    labels = [visible(s) for s in labels] if labels is not None else [tr("row {i}", i=i) for i in range(len(x))]
    require(len(labels) == len(x), tr("got {n} labels for {rows} rows: pass one label per row",
                                      n=len(labels), rows=len(x)))
    lim = float(x.abs().max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=_z(x), y=[f"{i}: {s}" for i, s in enumerate(labels)], colorscale=_DIVERGING,
        zmin=-lim, zmax=lim, colorbar={"title": tr("value")}, hovertemplate=_hover_value("token")))
    fig.update_yaxes(autorange="reversed", type="category")
    return base_layout(fig, title or tr("{rows} x {cols} numbers ([tokens, d_model])", rows=len(x), cols=x.shape[1]),
                       x=tr("dimension (0..{last} of d_model)", last=x.shape[1] - 1), y="token",  # same in Chinese
                       height=max(180, 90 + 28 * len(x)))


def position_heatmap(wpe: torch.Tensor, *, title: str | None = None, max_rows: int = 128,
                     max_cols: int = 160) -> go.Figure:
    """The position table ``[n_ctx, d_model]`` as a heatmap (positions down, dimensions across).

    Tables larger than ``max_rows`` x ``max_cols`` show every k-th position/dimension (the title says so).
    """
    x = _matrix(wpe, "wpe")
    lim = float(x.abs().max()) or 1.0
    z, rows, cols = _thin(x, max_rows, max_cols)
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=rows, colorscale=_DIVERGING, zmin=-lim, zmax=lim,
                               colorbar={"title": tr("value")}, hovertemplate=_hover_value("position")))
    fig.update_yaxes(autorange="reversed")
    title = title or tr("Position table wpe: one row per position")
    note = _shape_note(x.shape[0], x.shape[1], rows[1] - rows[0] if len(rows) > 1 else 1, positions=True)
    return base_layout(fig, title + note, x=tr("dimension of d_model"), y=tr("position (token index)"),
                       height=460)


def similarity_heatmap(sim: torch.Tensor, *, title: str | None = None, axis: str | None = None,
                       labels: Sequence[str] | None = None, max_rows: int = 128) -> go.Figure:
    """A square ``[n, n]`` cosine-similarity matrix (from ``inferlab.embeddings.cosine_matrix``).

    ``title`` and ``axis`` (what a row is) default to "Cosine similarity between positions" and "position".
    """
    x = _matrix(sim, "sim")
    require(x.shape[0] == x.shape[1], tr("sim must be square [n, n], got {shape}", shape=list(x.shape)))
    title = title or tr("Cosine similarity between positions")
    axis = axis or tr("position")
    z, rows, _ = _thin(x, max_rows, max_rows)
    ticks = rows
    if labels is not None:
        require(len(labels) == len(x), tr("got {n} labels for a {rows} x {rows} matrix", n=len(labels), rows=len(x)))
        ticks = [f"{i}: {visible(labels[i])}" for i in rows]
    fig = go.Figure(go.Heatmap(z=z, x=ticks, y=ticks, zmin=-1, zmax=1, colorscale=_DIVERGING,
                               colorbar={"title": tr("cosine")},
                               hovertemplate=tr("{axis} %{{y}} vs {axis} %{{x}}<br>cosine %{{z:.3f}}", axis=axis)
                               + "<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    note = _shape_note(len(x), len(x), rows[1] if len(rows) > 1 else 1, positions=False)
    return base_layout(fig, title + note, x=axis, y=axis, height=460)


def residual_sum(res: FirstResidual, labels: Sequence[str]) -> go.Figure:
    """Three heatmaps side by side: ``wte[ids]`` + ``wpe[positions]`` = first residual, each ``[tokens, d_model]``."""
    require(isinstance(res, FirstResidual), tr("residual_sum needs inferlab.embeddings.first_residual(model, ids)"))
    require(len(labels) == len(res.ids), tr("got {n} labels for {tokens} tokens", n=len(labels), tokens=len(res.ids)))
    names = [tr("token: wte[ids]"), tr("position: wpe[0..T-1]"), tr("sum: input to block 0")]
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, subplot_titles=names, horizontal_spacing=0.03)
    lim = float(torch.stack([res.tok, res.pos, res.sum]).abs().max()) or 1.0
    y = [f"{i}: {visible(s)}" for i, s in enumerate(labels)]
    for col, (name, x) in enumerate(zip(names, (res.tok, res.pos, res.sum)), 1):
        z = _z(x)
        fig.add_trace(go.Heatmap(z=z, y=y, zmin=-lim, zmax=lim, colorscale=_DIVERGING, showscale=col == 3, name=name,
                                 colorbar={"title": tr("value")},
                                 hovertemplate=f"{name}<br>" + _hover_value("token")), row=1, col=col)
        fig.update_xaxes(title_text=tr("dimension of d_model"), row=1, col=col)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_yaxes(title_text=tr("token (position: text)"), row=1, col=1)
    return base_layout(fig, tr("First residual vectors = token + position, each [{tokens}, {d_model}]",
                               tokens=len(y), d_model=res.sum.shape[1]),
                       height=max(240, 120 + 30 * len(y)))


def neighbour_bars(nb: Neighbours, *, show_chance: bool = True, lines: dict[str, float] | None = None) -> go.Figure:
    """Horizontal bars: the query's nearest tokens by cosine.

    With ``show_chance`` a black tick marks, for each rank, what the query scores against a random table
    (``nb.chance``): a bar that does not pass its tick says nothing. ``lines`` (label -> cosine) draws dashed
    reference lines, e.g. the median and 99th percentile of random pairs (``VocabSpace.typical_cosine()``).
    """
    require(isinstance(nb, Neighbours), tr("neighbour_bars needs VocabSpace.nearest(word)"))
    require(len(nb.items) > 0, tr("no neighbours to draw for {query!r}.", query=nb.query) + f" {nb.note}")
    y = [f"{visible(n.token)!r} ({n.id})" for n in nb.items]
    fig = go.Figure(go.Bar(
        x=[n.cosine for n in nb.items], y=y, orientation="h", name=tr("cosine with the query"),
        marker_color=PALETTE[0], text=[f"{n.cosine:.2f}" for n in nb.items], textposition="outside",
        hovertext=[tr("{token!r}, id {id}<br>cosine {cosine:.3f}", token=n.token, id=n.id, cosine=n.cosine)
                   for n in nb.items], hoverinfo="text"))
    if show_chance and nb.chance:
        fig.add_trace(go.Scatter(x=list(nb.chance[:len(y)]), y=y, mode="markers", name=tr("same rank, random table"),
                                 marker={"symbol": "line-ns-open", "size": 18, "color": "#333", "line": {"width": 2}},
                                 hovertemplate=tr("by chance: %{x:.3f}") + "<extra></extra>"))
    for (label, value), color in zip((lines or {}).items(), PALETTE[1:]):
        fig.add_trace(go.Scatter(x=[value, value], y=[y[0], y[-1]], mode="lines", name=label,
                                 line={"dash": "dash", "color": color, "width": 2},
                                 hovertemplate=f"{label}: {value:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    return base_layout(fig, tr("Nearest tokens to {query!r} (id {id}) by cosine similarity", query=visible(nb.query),
                               id=nb.query_id),
                       x=tr("cosine similarity with the query's row of wte"), y=tr("token (id)"),
                       height=max(300, 120 + 26 * len(nb.items)))


# Where a word's label may sit around its point, in order of preference, and the offset of the label's box
# centre from the point (in label heights / label widths).
_LABEL_SPOTS = {"top center": (0.0, 0.75), "bottom center": (0.0, -0.75), "middle right": (0.6, 0.0),
                "middle left": (-0.6, 0.0), "top right": (0.55, 0.7), "bottom left": (-0.55, -0.7),
                "top left": (-0.55, 0.7), "bottom right": (0.55, -0.7)}


def label_positions(xy: list[tuple[float, float]], words: list[str], *, width_px: float = 900,
                    height_px: float = 440, font_px: float = 12) -> list[str]:
    """A plotly ``textposition`` per point so that word labels overlap each other as little as possible.

    Greedy: each label takes the first spot around its point whose box (measured in pixels of a figure of
    ``width_px`` x ``height_px``) overlaps no label placed before it, else the spot that overlaps least.
    """
    if not xy:
        return []
    xs, ys = [p[0] for p in xy], [p[1] for p in xy]
    sx = width_px / ((max(xs) - min(xs)) or 1.0)
    sy = height_px / ((max(ys) - min(ys)) or 1.0)
    placed: list[tuple[float, float, float, float]] = []  # label boxes: x0, y0, x1, y1 in pixels
    out = []
    for (x, y), word in zip(xy, words, strict=True):
        w, h = font_px * 0.6 * max(1, text_width(word)) + 4, font_px * 1.3
        best, best_overlap = "top center", None
        for spot, (dx, dy) in _LABEL_SPOTS.items():
            cx, cy = x * sx + dx * w, y * sy + dy * h * 1.4
            box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            overlap = sum(max(0.0, min(box[2], b[2]) - max(box[0], b[0]))
                          * max(0.0, min(box[3], b[3]) - max(box[1], b[1])) for b in placed)
            if best_overlap is None or overlap < best_overlap:
                best, best_overlap, best_box = spot, overlap, box
            if overlap == 0:
                break
        placed.append(best_box)
        out.append(best)
    return out


def pca_scatter(p: Projection, *, title: str | None = None) -> go.Figure:
    """Words on their top principal components (2-D or 3-D), one colour per group; hover shows the word."""
    require(isinstance(p, Projection), tr("pca_scatter needs VocabSpace.project(groups, dims)"))
    dims = p.coords.shape[1]
    require(dims in (2, 3), tr("the projection has {dims} axes; pca_scatter draws 2 or 3", dims=dims))
    axes = [tr("PC{n} ({share:.0%} of variance)", n=i + 1, share=e) for i, e in enumerate(p.explained)]
    fig = go.Figure()
    spots = label_positions([tuple(c[:2]) for c in p.coords.tolist()], list(p.words)) if dims == 2 else None
    for gi, group in enumerate(dict.fromkeys(p.groups)):
        idx = [i for i, g in enumerate(p.groups) if g == group]
        xyz = p.coords[idx].tolist()
        common = {"name": group_name(group), "text": [p.words[i] for i in idx], "mode": "markers+text",
                  "textposition": [spots[i] for i in idx] if spots else "top center",
                  "marker": {"color": PALETTE[gi % len(PALETTE)], "size": 7},
                  "hovertemplate": f"%{{text}} ({group_name(group)})<extra></extra>"}
        if dims == 2:
            fig.add_trace(go.Scatter(x=[c[0] for c in xyz], y=[c[1] for c in xyz], **common))
        else:
            fig.add_trace(go.Scatter3d(x=[c[0] for c in xyz], y=[c[1] for c in xyz], z=[c[2] for c in xyz], **common))
    kept = sum(p.explained)
    fig = base_layout(fig, title or tr("{n} words, PCA to {dims}-D (keeps {kept:.0%} of their variance)",
                                       n=len(p.words), dims=dims, kept=kept), height=520)
    if dims == 2:
        fig.update_xaxes(title_text=axes[0])
        fig.update_yaxes(title_text=axes[1])
    else:
        fig.update_layout(scene={"xaxis_title": axes[0], "yaxis_title": axes[1], "zaxis_title": axes[2]})
    return fig
