"""Figures for notebook 11 (long context): the online softmax's steps, attention's bytes and memory, the decode grid.

Each takes plain data (``flash.OnlineSoftmax``, ``Traffic``; ``measure.long_context``'s ``AttentionRun``,
``DecodeGrid``, ``KvRead``) and returns a ``plotly.graph_objects.Figure``. Times in milliseconds, bytes in MiB.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import tr
from . import PALETTE, base_layout, require

VERSIONS = {"eager": PALETTE[3], "sdpa": PALETTE[0], "tiled": PALETTE[2]}
MIB = 2**20


def version_label(version: str) -> str:
    """``"eager"``, ``"sdpa"``, ``"tiled"`` as a legend names them, in the reader's language."""
    return {"eager": tr("eager (T x T scores)"), "sdpa": tr("SDPA (PyTorch's flash kernel)"),
            "tiled": tr("tiled (flash.tiled_attention)")}.get(version, version)


def softmax_steps(result) -> go.Figure:
    """One row's online softmax (``flash.online_softmax_steps``): each score read, the running max after it, and
    the running sum (right axis), with the rescale factor in the hover text."""
    require(hasattr(result, "steps") and len(result.steps) > 0,
            tr("result must be an OnlineSoftmax (flash.online_softmax_steps(scores))"))
    steps = result.steps
    x = [s.start for s in steps]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_bar(x=x, y=[max(s.scores) for s in steps], name=tr("score read"), marker_color=PALETTE[9])
    fig.add_scatter(x=x, y=[s.max_after for s in steps], name=tr("running max"), mode="lines+markers",
                    line={"shape": "hv", "color": PALETTE[3]})
    fig.add_scatter(x=x, y=[s.sum_after for s in steps], name=tr("running sum"), mode="lines+markers",
                    line={"color": PALETTE[0]}, secondary_y=True,
                    hovertext=[tr("rescale {r:.3f}: the sum so far times exp(old max - new max)", r=s.rescale)
                               for s in steps], hoverinfo="text+y")
    fig.update_yaxes(title_text=tr("running sum of exp(score - max)"), secondary_y=True)
    return base_layout(fig, tr("The online softmax, one score at a time"), x=tr("position in the row"),
                       y=tr("score / running max"), height=340)


def attention_costs(runs: Sequence) -> go.Figure:
    """Three panels against T: the bytes counted through slow memory, the peak memory measured, and the time of one
    call, for eager, SDPA and tiled attention (``measure.long_context.attention_runs``). Log-log axes."""
    require(len(runs) > 0 and all(hasattr(r, "memory") for r in runs),
            tr("runs must be AttentionRun objects (measure.long_context.attention_runs(...))"))
    Ts = [r.T for r in runs]
    fig = make_subplots(rows=1, cols=3, subplot_titles=(tr("bytes through slow memory (counted)"),
                                                        tr("peak memory (measured)"), tr("time of one call")))
    counted = {"eager": [r.eager_traffic.bytes / MIB for r in runs],
               "tiled": [r.tiled_traffic.bytes / MIB for r in runs]}
    peaks = {"eager": [r.memory.eager_bytes / MIB for r in runs], "sdpa": [r.memory.sdpa_bytes / MIB for r in runs],
             "tiled": [r.memory.tiled_bytes / MIB for r in runs]}
    times = {v: [r.seconds[v] * 1e3 for r in runs] for v in VERSIONS}
    for col, values in enumerate((counted, peaks, times), start=1):
        for version, ys in values.items():
            fig.add_scatter(x=Ts, y=ys, mode="lines+markers", name=version_label(version), legendgroup=version,
                            showlegend=col == 2, line={"color": VERSIONS[version]}, row=1, col=col)
    fig.update_xaxes(type="log", title_text="T", tickvals=Ts)
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="MiB", row=1, col=1)
    fig.update_yaxes(title_text="MiB", row=1, col=2)
    fig.update_yaxes(title_text="ms", row=1, col=3)
    heads, d = runs[0].memory.heads, runs[0].memory.head_dim
    return base_layout(fig, tr("Causal attention over [1, {heads}, T, {d}]: bytes, memory, time", heads=heads, d=d),
                       height=380)


def decode_grid(grid) -> go.Figure:
    """Left: one decode step's time against context, a line per batch, with its weights-plus-KV floor dashed and the
    context where the KV bytes equal the weight bytes marked. Right: measured / floor along each sweep."""
    require(hasattr(grid, "points") and len(grid.sweeps) > 0,
            tr("grid must be a DecodeGrid (measure.long_context.decode_grid(...))"))
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("step time and its floor"), tr("measured / floor")))
    top = max(s.xs[-1] for s in grid.sweeps)
    for i, (sweep, cross) in enumerate(zip(grid.sweeps, grid.crossovers)):
        color = PALETTE[i % len(PALETTE)]
        pts = [p for p in grid.points if p.batch == sweep.batch]
        name = tr("batch {b}", b=sweep.batch)
        hover = [tr("context {c}: {ms:.1f} ms, floor {floor:.1f} ms ({x:.2f}x), KV {kv:.0f} MiB / weights {w:.0f} MiB, "
                    "{bound}", c=p.context, ms=p.median_s * 1e3, floor=p.floor_s * 1e3, x=p.times_floor,
                    kv=p.kv_bytes / MIB, w=p.weight_bytes / MIB,
                    bound=tr("memory-bound") if p.bound == "memory" else tr("compute-bound")) for p in pts]
        fig.add_scatter(x=[p.context for p in pts], y=[p.median_s * 1e3 for p in pts], mode="lines+markers",
                        name=name, legendgroup=name, line={"color": color}, hovertext=hover, hoverinfo="text",
                        row=1, col=1)
        fig.add_scatter(x=[p.context for p in pts], y=[p.floor_s * 1e3 for p in pts], mode="lines",
                        name=tr("floor, batch {b}", b=sweep.batch), legendgroup=name, showlegend=False,
                        line={"color": color, "dash": "dash"}, hoverinfo="skip", row=1, col=1)
        fig.add_scatter(x=[p.context for p in pts], y=[p.times_floor for p in pts], mode="lines+markers",
                        name=name, legendgroup=name, showlegend=False, line={"color": color}, row=1, col=2)
        if cross.predicted_context <= top:
            fig.add_vline(x=cross.predicted_context, line_dash="dot", line_color=color, row=1, col=1,
                          annotation_text=tr("KV = weights, batch {b}", b=sweep.batch), annotation_position="top")
    fig.add_hline(y=1.0, line_dash="dash", line_color="black", row=1, col=2)
    fig.update_xaxes(title_text=tr("context (tokens in the cache)"))
    fig.update_yaxes(title_text=tr("time per decode step (ms)"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=tr("x the floor"), rangemode="tozero", row=1, col=2)
    return base_layout(fig, tr("Decode steps of {model} against context, with their weights-plus-KV floor",
                               model=grid.shape.name), height=420)


def kv_heads_bars(reads: Sequence) -> go.Figure:
    """Bars per count of KV heads (``measure.long_context.kv_heads_reads``): the cache one step reads, and the time
    the readable attention took to read it."""
    require(len(reads) > 0 and all(hasattr(r, "cache_bytes") for r in reads),
            tr("reads must be KvRead objects (measure.long_context.kv_heads_reads(...))"))
    names = [tr("{kind}: {n} KV heads", kind=r.heads.kind, n=r.heads.kv_heads) for r in reads]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("KV cache read per step (MiB)"),
                                                        tr("attention over every layer (ms)")))
    colors = [PALETTE[i] for i in range(len(reads))]
    fig.add_bar(x=names, y=[r.cache_bytes / MIB for r in reads], marker_color=colors, showlegend=False, row=1, col=1)
    fig.add_bar(x=names, y=[r.seconds * 1e3 for r in reads], marker_color=colors, showlegend=False, row=1, col=2)
    r = reads[0]
    return base_layout(fig, tr("Fewer KV heads: batch {b}, context {c}", b=r.batch, c=r.context), height=360)
