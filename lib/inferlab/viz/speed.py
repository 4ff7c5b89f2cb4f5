"""Figures for notebook 08 (making it faster): profiles, kernels, quantization, overhead, batching.

Each takes plain data (dataclasses from ``inferlab.measure``: ``StepProfile``, ``KernelComparison``,
``QuantRow``, or lists) and returns a ``plotly.graph_objects.Figure``. Times are plotted in milliseconds.
Batching is drawn by ``inferlab.viz.latency.batch_figure``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import tr
from ..measure.profiling import group_label, op_group
from ..measure.speedups import ScoreRow
from . import FONT, PALETTE, base_layout, require

GROUP_COLORS = {"matmuls": PALETTE[0], "attention": PALETTE[1], "norms & activations": PALETTE[2],
                "other ops": PALETTE[9], "compiled graph (fused)": PALETTE[4], "Python & dispatch": PALETTE[3]}


def _floor_line(fig: go.Figure, floor_s: float | None, text: str, *, vertical: bool) -> None:
    if floor_s is None:
        return
    kwargs = {"line_dash": "dash", "line_color": "black", "annotation_text": text}
    if vertical:
        fig.add_vline(x=floor_s * 1e3, annotation_position="top", **kwargs)
    else:
        fig.add_hline(y=floor_s * 1e3, annotation_position="top left", **kwargs)


def profile_bars(profiles: Sequence, floor_s: float | None = None) -> go.Figure:
    """Stacked bars: one decode step's milliseconds by group, per path, against the memory floor.

    Args:
        profiles: ``inferlab.measure.StepProfile`` objects (``profile_step``), one bar each.
        floor_s: the roofline floor of one step (seconds), drawn as a dashed line.
    """
    require(len(profiles) > 0,
            tr("profiles is empty: pass at least one StepProfile from inferlab.measure.profile_step"))
    require(all(hasattr(p, "groups") and hasattr(p, "label") for p in profiles),
            tr("profiles must be StepProfile objects (inferlab.measure.profile_step(...))"))
    labels = [p.label for p in profiles]
    fig = go.Figure()
    for group in profiles[0].groups:
        ms = [p.groups.get(group, 0.0) * 1e3 for p in profiles]
        hover = [f"{lab}<br>" + tr("{group}: {ms:.3f} ms ({share:.0%} of the step)", group=group_label(group), ms=v,
                                   share=v / (p.step_s * 1e3)) for lab, v, p in zip(labels, ms, profiles)]
        fig.add_bar(y=labels, x=ms, name=group_label(group), orientation="h", marker_color=GROUP_COLORS.get(group),
                    hovertext=hover, hoverinfo="text")
    fig.update_layout(barmode="stack")  # legend at the right: below the bars it covered the axis title
    _floor_line(fig, floor_s, tr("memory floor"), vertical=True)
    return base_layout(fig, tr("Where one decode step's time goes"), x=tr("time per decode step (ms)"), y=tr("path"),
                       height=max(260, 180 + 60 * len(profiles)))


def top_ops_chart(profile) -> go.Figure:
    """The operators that took the most time in one profiled step (``StepProfile.top_ops``)."""
    require(hasattr(profile, "top_ops") and len(profile.top_ops) > 0,
            tr("profile must be a StepProfile with top_ops (inferlab.measure.profile_step(...))"))
    names = [n for n, _, _ in profile.top_ops][::-1]
    ms = [t * 1e3 for _, t, _ in profile.top_ops][::-1]
    calls = [c for _, _, c in profile.top_ops][::-1]
    fig = go.Figure(go.Bar(y=names, x=ms, orientation="h",
                           marker_color=[GROUP_COLORS.get(op_group(n), PALETTE[9]) for n in names],
                           hovertext=[tr("{op}: {ms:.3f} ms per step, {calls} calls per step", op=n, ms=v, calls=c)
                                      for n, v, c in zip(names, ms, calls)],
                           hoverinfo="text"))
    return base_layout(fig, tr("Biggest operators in one step: {label}", label=profile.label),
                       x=tr("self time per step (ms)"), y=tr("operator"), height=420)


def prefill_chart(kernels) -> go.Figure:
    """Prefill time and peak memory against prompt length, one line per attention kernel.

    Args:
        kernels: an ``inferlab.measure.KernelComparison`` (``measure.kernel_sweep(model, lengths)``).
    """
    require(hasattr(kernels, "sweeps") and hasattr(kernels, "peak_bytes") and kernels.sweeps,
            tr("kernels must come from inferlab.measure.kernel_sweep(model, lengths)"))
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("prefill time"), tr("peak memory allocated during prefill")))
    for i, kernel in enumerate(kernels.kernels):
        sweep, peaks = kernels.sweeps[kernel], kernels.peak_bytes[kernel]
        color = PALETTE[i % len(PALETTE)]
        fig.add_scatter(x=list(sweep.xs), y=[t * 1e3 for t in sweep.medians], name=tr("{kernel} time", kernel=kernel),
                        mode="lines+markers", line_color=color, row=1, col=1,
                        hovertemplate=f"{kernel}<br>" + tr("%{x} tokens: %{y:.2f} ms") + "<extra></extra>")
        if peaks:
            fig.add_scatter(x=list(sweep.xs), y=[b / 2**20 for b in peaks], name=tr("{kernel} memory", kernel=kernel),
                            mode="lines+markers", line_color=color, line_dash="dot", row=1, col=2,
                            hovertemplate=f"{kernel}<br>" + tr("%{x} tokens: %{y:.2f} MiB") + "<extra></extra>")
    fig.update_xaxes(title_text=tr("prompt length (tokens)"))
    fig.update_yaxes(title_text=tr("time (ms)"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=tr("peak extra memory (MiB)"), row=1, col=2)
    return base_layout(fig, tr("Eager vs fused (SDPA) attention during prefill"), height=420)


def quant_chart(rows: Sequence, bytes_per_s: float | None = None) -> go.Figure:
    """Bytes read per step vs measured TPOT for each weight format; perplexity on hover.

    Args:
        rows: ``inferlab.measure.QuantRow`` objects (``measure.quant_rows``).
        bytes_per_s: measured bandwidth; draws the prediction ``TPOT = bytes / bandwidth``.
    """
    require(len(rows) > 0 and all(hasattr(r, "step_bytes") and hasattr(r, "tpot_s") for r in rows),
            tr("rows must be QuantRow objects from inferlab.measure.quant_rows(...) (see notebook 08)"))
    fig = go.Figure()
    mb = [r.step_bytes / 1e6 for r in rows]
    fig.add_scatter(x=mb, y=[r.tpot_s * 1e3 for r in rows], mode="markers+text", name=tr("measured TPOT"),
                    text=[r.kind for r in rows], marker={"size": 12},
                    textposition=["top center" if i % 2 == 0 else "bottom center" for i in range(len(rows))],
                    hovertext=[tr("{kind}: {mb:.1f} MB read per step, TPOT {ms:.2f} ms, perplexity {perplexity:.2f}",
                                  kind=r.kind, mb=m, ms=r.tpot_s * 1e3, perplexity=r.perplexity)
                               for r, m in zip(rows, mb)], hoverinfo="text")
    if bytes_per_s:
        top = max(mb) * 1.1
        fig.add_scatter(x=[0, top], y=[0, top * 1e6 / bytes_per_s * 1e3], mode="lines", name=tr("bytes / bandwidth"),
                        line={"dash": "dash", "color": "black"})
    return base_layout(fig, tr("Fewer bytes per weight: predicted and measured decode time"),
                       x=tr("bytes read per decode step (MB)"), y="TPOT (ms)", height=420)


def ladder_chart(labels: Sequence[str], tpot_s: Sequence[float], floor_s: float | None = None) -> go.Figure:
    """TPOT of each path, with its ratio to the floor written on the bar."""
    require(len(labels) == len(tpot_s) > 0, tr("labels and tpot_s must be non-empty and the same length"))
    ms = [t * 1e3 for t in tpot_s]
    text = [tr("{ms:.2f} ms ({ratio:.2f}x floor)", ms=v, ratio=t / floor_s) if floor_s else f"{v:.2f} ms"
            for v, t in zip(ms, tpot_s)]
    fig = go.Figure(go.Bar(x=list(labels), y=ms, text=text, textposition="outside", marker_color=PALETTE[0],
                           hovertext=text, hoverinfo="text"))
    _floor_line(fig, floor_s, tr("memory floor"), vertical=False)
    return base_layout(fig, tr("Removing overhead: time per output token"), x=tr("decode path"), y="TPOT (ms)",
                       height=420)


def scoreboard(rows: Sequence[ScoreRow]) -> go.Figure:
    """A table: each technique and its effect on TTFT, TPOT, memory and quality (``measure.scoreboard_rows``)."""
    require(len(rows) > 0 and all(isinstance(r, ScoreRow) for r in rows),
            tr("rows must be a non-empty list of ScoreRows: pass inferlab.measure.scoreboard_rows(...)"))
    cols = [f.name for f in dataclasses.fields(ScoreRow)]
    names = {"technique": tr("technique"), "ttft": "TTFT", "tpot": "TPOT", "memory": tr("memory"),
             "quality": tr("quality")}
    fig = go.Figure(go.Table(header={"values": [f"<b>{names[c]}</b>" for c in cols], "align": "left", "height": 30},
                             cells={"values": [[getattr(r, c) for r in rows] for c in cols], "align": "left",
                                    "height": 24}))
    fig.update_layout(title=tr("Scoreboard: every technique on this machine"), font={"family": FONT},
                      margin={"l": 10, "r": 10, "t": 64, "b": 10},  # the title sits below the toolbar
                      height=114 + 30 + 24 * len(rows))  # title and margins, header, rows: no empty band below
    return fig
