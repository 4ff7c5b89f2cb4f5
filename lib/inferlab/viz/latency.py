"""Figures for TTFT and TPOT: a per-token timeline, sweeps with their spread, comparisons, thinking budgets.

Input is plain data: a ``Trace``, ``Latency`` lists, or the dataclasses of ``inferlab.latency``
(``Sweep``, ``Measurement``, ``BatchPoint``, ``Prediction``, ``ThinkingPoint``). Times are seconds in,
milliseconds on the axes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..timing import summarize
from . import PALETTE, base_layout, require, show_token

MS = 1e3


def _finite(xs) -> list[float]:
    return [x for x in xs if x is not None and math.isfinite(x)]


def timeline(trace, max_tokens: int = 40) -> go.Figure:
    """A Gantt-like view of one streamed answer: tokenization, prefill, each decode step, each token's arrival.

    Rows from the top: tokenization, then one row per generated token (the forward pass that chose it).
    TTFT, E2E and TPOT = (E2E - TTFT) / (N - 1) are drawn on the time axis (ms since the request).
    """
    require(getattr(trace, "steps", None) and getattr(trace, "token_times", None),
            "timeline needs a Trace with at least one generated token. Fix: pass il.generate(...) output.")
    lat = trace.latency
    steps = trace.steps[:max_tokens]
    rows = ["tokenize"] + [f"{i}: {s.kind} → {show_token(trace.generated_pieces[i])!r}" for i, s in enumerate(steps)]
    fig = go.Figure()
    fig.add_bar(y=[rows[0]], x=[trace.tokenize_seconds * MS], base=[0.0], orientation="h", name="tokenize",
                marker_color=PALETTE[5], text=[f"tokenize {trace.tokenize_seconds * MS:.2f} ms"],
                textposition="outside", hovertemplate="tokenize + checks: %{x:.3f} ms<extra></extra>")
    for kind, color in (("prefill", PALETTE[1]), ("decode", PALETTE[0])):
        chosen = [(i, s) for i, s in enumerate(steps) if s.kind == kind]
        if not chosen:
            continue
        fig.add_bar(
            y=[rows[i + 1] for i, _ in chosen], x=[s.seconds * MS for _, s in chosen],
            base=[s.t_start * MS for _, s in chosen], orientation="h", name=kind, marker_color=color,
            customdata=[[s.token_id, show_token(trace.generated_pieces[i]), len(s.input_ids), s.t_end * MS]
                        for i, s in chosen],
            hovertemplate=("%{y}<br>token id %{customdata[0]} %{customdata[1]}<br>input tokens "
                           "%{customdata[2]}<br>step %{x:.3f} ms, id on host at %{customdata[3]:.3f} ms"
                           "<extra></extra>"))
    fig.add_scatter(y=rows[1:], x=[t * MS for t in trace.token_times[:len(steps)]], mode="markers",
                    name="token id on the host", marker={"color": "black", "size": 6, "symbol": "diamond"},
                    hovertemplate="arrived at %{x:.3f} ms<extra></extra>")
    ttft, e2e = lat.ttft * MS, lat.e2e * MS
    fig.add_vline(x=ttft, line_dash="dash", line_color=PALETTE[3])
    fig.add_vline(x=e2e, line_dash="dot", line_color="gray")
    fig.add_annotation(x=ttft, y=1.0, yref="paper", yanchor="bottom", xanchor="right", showarrow=False,
                       text=f"TTFT {ttft:.1f} ms", font={"color": PALETTE[3]})
    fig.add_annotation(x=e2e, y=1.0, yref="paper", yanchor="bottom", xanchor="right", showarrow=False,
                       text=f"E2E {e2e:.1f} ms", font={"color": "gray"})
    if lat.n_tokens > 1:
        fig.add_annotation(x=e2e, ax=ttft, axref="x", y=1.07, ay=0, yref="paper", ayref="pixel",
                           showarrow=True, arrowhead=2, arrowside="end+start", text="")
        fig.add_annotation(x=(ttft + e2e) / 2, y=1.08, yref="paper", yanchor="bottom", showarrow=False,
                           text=f"(N−1) × TPOT = {lat.n_tokens - 1} × {lat.tpot * MS:.2f} ms")
    more = f" (first {len(steps)} of {len(trace.steps)} tokens)" if len(trace.steps) > len(steps) else ""
    base_layout(fig, f"One streamed answer, token by token{more}", x="time since the request (ms)",
                height=max(360, 22 * len(rows) + 200))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(barmode="overlay", legend={"orientation": "h", "y": -0.12}, margin={"t": 110, "b": 90})
    return fig


def warmup(latencies: Sequence, title: str = "The same request, called again and again") -> go.Figure:
    """TTFT and TPOT of consecutive calls (call 1 first): the cold first call against the steady state."""
    require(len(latencies) >= 2, "warmup needs at least 2 consecutive calls. Fix: measure(..., warmup=0, repeats=5).")
    xs = [f"call {i + 1}" + (" (cold)" if i == 0 else "") for i in range(len(latencies))]
    fig = go.Figure()
    fig.add_bar(x=xs, y=[lat.ttft * MS for lat in latencies], name="TTFT", marker_color=PALETTE[1],
                hovertemplate="%{x}: TTFT %{y:.2f} ms<extra></extra>")
    fig.add_bar(x=xs, y=[lat.tpot * MS for lat in latencies], name="TPOT", marker_color=PALETTE[0],
                hovertemplate="%{x}: TPOT %{y:.2f} ms<extra></extra>")
    return base_layout(fig, title, x="call, in order", y="time (ms)")


def sweep(data, style: str = "box") -> go.Figure:
    """Every repeat at every x: box plots (``style="box"``) or median line + min-max band + p90 (``"band"``)."""
    require(style in ("box", "band"), f"style={style!r} is not allowed: use 'box' or 'band'.")
    require(len(data.xs) == len(data.values) and len(data.xs) > 0,
            "sweep needs a Sweep with one tuple of values per x. Fix: pass ttft_sweep(...) or tpot_sweep(...).")
    fig = go.Figure()
    sums = [summarize(v) for v in data.values]
    if style == "box":
        for i, (x, vals) in enumerate(zip(data.xs, data.values)):
            fig.add_box(x=[x] * len(vals), y=[v * MS for v in vals], name=str(x), marker_color=PALETTE[i % 2],
                        boxmean=True, showlegend=False, hovertemplate=f"{data.x_label}: {x}<br>%{{y:.3f}} ms"
                        "<extra></extra>")
    else:
        fig.add_scatter(x=list(data.xs) + list(data.xs)[::-1], y=[s.max * MS for s in sums] +
                        [s.min * MS for s in sums][::-1], fill="toself", fillcolor="rgba(76,120,168,0.2)",
                        line={"width": 0}, name="min to max of repeats", hoverinfo="skip")
        fig.add_scatter(x=list(data.xs), y=[s.p90 * MS for s in sums], mode="lines", name="p90",
                        line={"dash": "dot", "color": PALETTE[3]}, hovertemplate="p90 %{y:.3f} ms<extra></extra>")
    fig.add_scatter(x=list(data.xs), y=[s.median * MS for s in sums], mode="lines+markers", name="median",
                    line={"color": PALETTE[1]}, customdata=[[s.n, s.mean * MS, s.p99 * MS] for s in sums],
                    hovertemplate=("%{x}: median %{y:.3f} ms<br>mean %{customdata[1]:.3f}, p99 "
                                   "%{customdata[2]:.3f} ms over %{customdata[0]} values<extra></extra>"))
    return base_layout(fig, f"{data.name} against {data.x_label.split(' (')[0]}", x=data.x_label,
                       y=f"{data.name} (ms)")


def compare(measurements: Mapping) -> go.Figure:
    """Median TTFT and TPOT per variant (dtype, device, ...); whiskers from the fastest run to p90."""
    require(len(measurements) > 0, "compare needs at least one Measurement. Fix: pass il.latency.compare(...).")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"))
    labels = list(measurements)
    for col, metric in ((1, "ttft"), (2, "tpot")):
        sums = [getattr(measurements[k], metric) for k in labels]
        fig.add_bar(x=labels, y=[s.median * MS for s in sums], row=1, col=col, showlegend=False,
                    marker_color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))],
                    error_y={"type": "data", "symmetric": False, "array": [(s.p90 - s.median) * MS for s in sums],
                             "arrayminus": [(s.median - s.min) * MS for s in sums]},
                    text=[f"{s.median * MS:.2f}" for s in sums], textposition="inside", insidetextanchor="start",
                    hovertemplate=f"%{{x}}: median {metric.upper()} %{{y:.3f}} ms<extra></extra>")
        fig.update_yaxes(title_text=f"{metric.upper()} median (ms); whisker min..p90", row=1, col=col)
    return base_layout(fig, "What moves each number: same request, different variants")


def batch(points: Sequence) -> go.Figure:
    """Per-user TPOT (line, left axis) and total tokens per second (bars, right axis) against batch size."""
    require(len(points) > 0, "batch needs BatchPoints. Fix: pass il.latency.batch_sweep(...).")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    xs = [str(p.batch) for p in points]
    fig.add_bar(x=xs, y=[p.tokens_per_second for p in points], name="total tokens/s (all users)",
                marker_color="rgba(84,162,75,0.55)", secondary_y=True,
                hovertemplate="batch %{x}: %{y:.0f} tokens/s in total<extra></extra>")
    fig.add_scatter(x=xs, y=[p.step.median * MS for p in points], mode="lines+markers", secondary_y=False,
                    name="per-user TPOT (median ms)", line={"color": PALETTE[0]},
                    error_y={"type": "data", "symmetric": False,
                             "array": [(p.step.p90 - p.step.median) * MS for p in points],
                             "arrayminus": [(p.step.median - p.step.min) * MS for p in points]},
                    hovertemplate="batch %{x}: each user waits %{y:.3f} ms per token<extra></extra>")
    fig.update_yaxes(title_text="per-user TPOT (ms), whisker min..p90", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="total tokens per second", secondary_y=True, rangemode="tozero", showgrid=False)
    base_layout(fig, "Batching: each user's TPOT against the machine's total throughput", x="batch size (sequences)")
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    return fig


def model_sizes(predictions: Sequence) -> go.Figure:
    """TTFT and TPOT by model size: the loaded model measured, the others PREDICTED (hatched), floors as markers."""
    require(len(predictions) > 0, "model_sizes needs Predictions. Fix: pass il.latency.predict_sizes(...).")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"))
    names = [f"{p.name}<br>{p.params / 1e6:.0f}M" for p in predictions]
    for col, metric in ((1, "ttft"), (2, "tpot")):
        for measured in (True, False):
            sel = [i for i, p in enumerate(predictions) if p.measured == measured]
            if not sel:
                continue
            fig.add_bar(x=[names[i] for i in sel], y=[getattr(predictions[i], f"{metric}_s") * MS for i in sel],
                        name="measured here" if measured else "PREDICTED (roofline floor + overhead)",
                        marker={"color": PALETTE[0] if measured else "rgba(245,133,24,0.45)",
                                "pattern": {"shape": "" if measured else "/"}},
                        legendgroup=str(measured), showlegend=col == 1, row=1, col=col,
                        hovertemplate=f"%{{x}}: {metric.upper()} %{{y:.2f}} ms"
                        f" ({'measured' if measured else 'predicted'})<extra></extra>")
        fig.add_scatter(x=names, y=[getattr(p, f"{metric}_floor_s") * MS for p in predictions], mode="markers",
                        marker={"symbol": "line-ew-open", "size": 26, "color": "black"},
                        name="roofline floor (lower bound)", legendgroup="floor", showlegend=col == 1,
                        row=1, col=col, hovertemplate="floor %{y:.3f} ms<extra></extra>")
        fig.update_yaxes(type="log", dtick=1, title_text=f"{metric.upper()} (ms, log scale)", row=1, col=col)
    base_layout(fig, "Model size: measured where the model is here (solid), predicted for the rest (hatched)")
    fig.update_layout(barmode="overlay", legend={"orientation": "h", "y": -0.25})
    return fig


def thinking(points: Sequence) -> go.Figure:
    """Time to the first VISIBLE token against the thinking budget, with the line TTFT + budget x TPOT."""
    require(len(points) > 0, "thinking needs ThinkingPoints. Fix: pass il.latency.thinking_sweep(...).")
    fig = go.Figure()
    for p in points:
        fig.add_box(x=[p.budget] * len(p.first_visible), y=[v * MS for v in p.first_visible], showlegend=False,
                    marker_color=PALETTE[1], name=str(p.budget),
                    hovertemplate=f"{p.budget} hidden tokens: first visible token after %{{y:.2f}} ms<extra></extra>")
    ttft = summarize([t for p in points for t in p.first_token]).median
    tpot = summarize(_finite(t for p in points for t in p.visible_tpot)).median
    xs = [p.budget for p in points]
    fig.add_scatter(x=xs, y=[(ttft + b * tpot) * MS for b in xs], mode="lines", line={"dash": "dash"},
                    name=f"TTFT + budget × TPOT ({ttft * MS:.1f} ms + budget × {tpot * MS:.2f} ms)",
                    marker_color=PALETTE[3])
    base_layout(fig, "Thinking first: the user waits for every hidden token",
                x="thinking budget (hidden tokens before the answer)", y="time to first visible token (ms)")
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    return fig
