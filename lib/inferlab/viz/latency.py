"""Figures of measured time: a per-token timeline, sweeps with their spread, batching, comparisons, thinking.

Input is plain data: a ``Trace``, ``Latency`` lists, or the dataclasses of ``inferlab.measure``
(``Sweep``, ``Measurement``, ``Prediction``, ``ThinkingPoint``) and ``inferlab.cost.Cost`` floors.
Times are seconds in, milliseconds on the axes. It is one piece (over 300 lines) on purpose: every figure of time
shares one axis vocabulary and one look, and the notebooks 00, 04, 05, 07 and 08 draw from it.

    >>> sweep_figure(measure.prefill_sweep(m, [8, 64, 256]))       # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cost import Cost
from ..i18n import by_language, tr
from ..measure.sweeps import Sweep
from ..timing import summarize
from ..units import bound_text
from . import PALETTE, base_layout, name_character, piece_characters, require, rgba, show_token

MS = 1e3
JOB_COLORS = {"prefill": PALETTE[0], "TTFT": PALETTE[0], "decode": PALETTE[1], "decode step": PALETTE[1],
              "decode-batch": PALETTE[2], "prefill-batch": PALETTE[2]}


def _job_text(job: str) -> tuple[str, str] | None:
    """(title, y axis) of a known job's sweep figure, in the reader's language."""
    return {"prefill": (tr("Prefill: time to read the whole prompt"), tr("time per forward (ms)")),
            "decode": (tr("Decode: time of one step"), tr("time per forward (ms)")),
            "TTFT": (tr("TTFT against prompt length"), tr("TTFT (ms)")),
            "decode step": (tr("Time per decode step against context length"), tr("time per decode step (ms)"))
            }.get(job)


def axis_title(x_name: str) -> str:
    """A sweep's ``x_name`` (stored in English with the data) in the reader's language; unknown names unchanged."""
    return {"prompt length (tokens)": tr("prompt length (tokens)"),
            "context (tokens in the cache)": tr("context (tokens in the cache)"),
            "context length (tokens)": tr("context length (tokens)"),
            "batch size (sequences)": tr("batch size (sequences)")}.get(x_name, x_name)


def job_text(job: str) -> str:
    """A job's name (stored in English with the data: "prefill", "decode", ...) in the reader's language."""
    return {"prefill": tr("prefill"), "decode": tr("decode"), "decode step": tr("decode step"),
            "decode-batch": tr("decode (batch)"), "prefill-batch": tr("prefill (batch)")}.get(job, job)


def _finite(xs) -> list[float]:
    return [x for x in xs if x is not None and math.isfinite(x)]


def _job_name(kind: str) -> str:
    """A step's job as a short label: the identifier in English, the course's term (Prefill, Decode) in Chinese,
    where the gloss (预填充, 解码) would repeat on every row."""
    return by_language(en=kind, zh={"prefill": "Prefill", "decode": "Decode"}.get(kind, kind))


def _pieces_with_characters(pieces: Sequence[str]) -> list[str]:
    """Each piece made visible; one holding bytes of a character (``⟨e7⟩``) also names it, as 01's chips and 06's
    labels do: ``⟨e7⟩ 属于 知``. A Chinese answer's timeline is otherwise all bytes (a character is 2-3 tokens)."""
    return [name_character(show_token(p), c) for p, c in zip(pieces, piece_characters(pieces))]


def timeline(trace, max_tokens: int = 40) -> go.Figure:
    """A Gantt-like view of one streamed answer: tokenization, prefill, each decode step, each token's arrival.

    Rows from the top: tokenization, then one row per generated token (the forward pass that chose it).
    TTFT, E2E and TPOT = (E2E - TTFT) / (N - 1) are drawn on the time axis (ms since the request).
    """
    require(getattr(trace, "steps", None) and getattr(trace, "token_times", None),
            tr("timeline needs a Trace with at least one generated token. Fix: pass il.generate(...) output."))
    lat = trace.latency
    steps = trace.steps[:max_tokens]
    rows = [tr("tokenize"), *by_language(
        en=[f"{i}: {s.kind} → {show_token(trace.generated_pieces[i])!r}" for i, s in enumerate(steps)],
        zh=[f"{i}：{_job_name(s.kind)} → {label}" for (i, s), label in
            zip(enumerate(steps), _pieces_with_characters(trace.generated_pieces[:len(steps)]))])]
    fig = go.Figure()
    fig.add_bar(y=[rows[0]], x=[trace.tokenize_seconds * MS], base=[0.0], orientation="h", name=tr("tokenize"),
                marker_color=PALETTE[5], text=[tr("tokenize {ms:.2f} ms", ms=trace.tokenize_seconds * MS)],
                textposition="outside", hovertemplate=tr("tokenize + checks: %{x:.3f} ms") + "<extra></extra>")
    for kind, color in (("prefill", PALETTE[1]), ("decode", PALETTE[0])):
        chosen = [(i, s) for i, s in enumerate(steps) if s.kind == kind]
        if not chosen:
            continue
        fig.add_bar(
            y=[rows[i + 1] for i, _ in chosen], x=[s.seconds * MS for _, s in chosen],
            base=[s.t_start * MS for _, s in chosen], orientation="h", name=_job_name(kind), marker_color=color,
            customdata=[[s.token_id, show_token(trace.generated_pieces[i]), len(s.input_ids), s.t_end * MS]
                        for i, s in chosen],
            hovertemplate=tr("%{y}<br>token id %{customdata[0]} %{customdata[1]}<br>input tokens "
                             "%{customdata[2]}<br>step %{x:.3f} ms, id on host at %{customdata[3]:.3f} ms")
            + "<extra></extra>")
    fig.add_scatter(y=rows[1:], x=[t * MS for t in trace.token_times[:len(steps)]], mode="markers",
                    name=tr("token id on the host"), marker={"color": "black", "size": 6, "symbol": "diamond"},
                    hovertemplate=tr("arrived at %{x:.3f} ms") + "<extra></extra>")
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
    title = (tr("One streamed answer, token by token (first {n} of {total} tokens)", n=len(steps),
                total=len(trace.steps)) if len(trace.steps) > len(steps) else tr("One streamed answer, token by token"))
    base_layout(fig, title, x=tr("time since the request (ms)"), height=max(360, 22 * len(rows) + 200))
    fig.update_yaxes(autorange="reversed", type="category")
    # The legend sits at the figure's bottom edge, below the axis title whatever the figure's height (a legend placed
    # in the plot's units rode up into a long axis title, as Chinese's "从发出请求起的时间（ms）")
    fig.update_layout(barmode="overlay", margin={"t": 110, "b": 110},
                      legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0})
    return fig


def warmup(latencies: Sequence, title: str | None = None) -> go.Figure:
    """TTFT and TPOT of consecutive calls (call 1 first): the cold first call against the steady state."""
    require(len(latencies) >= 2,
            tr("warmup needs at least 2 consecutive calls. Fix: measure(..., warmup=0, repeats=5)."))
    xs = [tr("call {n} (cold)", n=i + 1) if i == 0 else tr("call {n}", n=i + 1) for i in range(len(latencies))]
    fig = go.Figure()
    fig.add_bar(x=xs, y=[lat.ttft * MS for lat in latencies], name="TTFT", marker_color=PALETTE[1],
                hovertemplate="%{x}: TTFT %{y:.2f} ms<extra></extra>")
    fig.add_bar(x=xs, y=[lat.tpot * MS for lat in latencies], name="TPOT", marker_color=PALETTE[0],
                hovertemplate="%{x}: TPOT %{y:.2f} ms<extra></extra>")
    return base_layout(fig, title or tr("The same request, called again and again"), x=tr("call, in order"),
                       y=tr("time (ms)"))


def check_sweep(sweep) -> None:
    """Raise a clear error unless ``sweep`` is a ``measure.Sweep`` with at least one point."""
    require(isinstance(sweep, Sweep), tr(
        "expected an inferlab.measure.Sweep, got {kind}. "
        "Fix: pass the result of a sweep (prefill_sweep, decode_sweep, batch_sweep, ttft_sweep ...).",
        kind=type(sweep).__name__))
    require(len(sweep.xs) > 0, tr("the sweep has no points. Fix: run the sweep with at least one size."))


def spread_band(fig: go.Figure, xs, lows, highs, color: str, name: str, row=None, col=None) -> None:
    """Add a filled band from the fastest to the slowest repeat (drawn before the median line)."""
    kw = {} if row is None else {"row": row, "col": col}
    fig.add_trace(go.Scatter(x=list(xs), y=list(highs), mode="lines", line={"width": 0}, showlegend=False,
                             hoverinfo="skip", legendgroup=name), **kw)
    fig.add_trace(go.Scatter(x=list(xs), y=list(lows), mode="lines", line={"width": 0}, fill="tonexty",
                             fillcolor=rgba(color, 0.2), name=tr("{name}: fastest-slowest repeat", name=name),
                             hoverinfo="skip", legendgroup=name), **kw)


def sweep_figure(sweep: Sweep, floors: Sequence[Cost] | None = None, *, style: str = "band",
                 title: str | None = None) -> go.Figure:
    """Median time against the sweep's size, every repeat shown, and (optionally) the roofline floor.

    Args:
        sweep: any ``inferlab.measure.Sweep`` (prefill, decode, TTFT, time per decode step ...).
        floors: optional ``Cost`` per point with floors (``measure.sweep_costs(sweep, shape, machine)``).
        style: ``"band"`` (a band from the fastest to the slowest repeat) or ``"box"`` (a box per size).
    """
    check_sweep(sweep)
    require(style in ("box", "band"), tr("style={style!r} is not allowed: use 'box' or 'band'.", style=style))
    color = JOB_COLORS.get(sweep.job, PALETTE[3])
    x_name = axis_title(sweep.x_name)
    medians = [t * MS for t in sweep.medians]
    fig = go.Figure()
    if style == "band":
        spread_band(fig, sweep.xs, [t * MS for t in sweep.lows], [t * MS for t in sweep.highs], color,
                    job_text(sweep.job))
    else:
        for i, (x, vals) in enumerate(zip(sweep.xs, sweep.times)):
            fig.add_box(x=[x] * len(vals), y=[v * MS for v in vals], name=str(x), marker_color=PALETTE[i % 2],
                        boxmean=True, showlegend=False,
                        hovertemplate=f"{x_name}: {x}<br>%{{y:.3f}} ms<extra></extra>")
    hover = [tr("{x_name}: {x}<br>median {median:.3f} ms ({n} repeats)<br>fastest {fastest:.3f} ms, "
                "slowest {slowest:.3f} ms", x_name=x_name, x=x, median=m, n=s.n, fastest=s.min * MS,
                slowest=s.max * MS) for x, m, s in zip(sweep.xs, medians, sweep.summaries)]
    fig.add_trace(go.Scatter(x=list(sweep.xs), y=medians, mode="lines+markers",
                             name=tr("{job}: measured median", job=job_text(sweep.job)),
                             line={"color": color}, hovertext=hover, hoverinfo="text"))
    if floors is not None:
        require(len(floors) == len(sweep.xs) and all(c.floor_s is not None for c in floors),
                tr("floors must be one Cost with floors per sweep point. Fix: pass "
                   "inferlab.measure.sweep_costs(sweep, shape, machine) (with the measured machine)."))
        fig.add_trace(go.Scatter(
            x=list(sweep.xs), y=[c.floor_s * MS for c in floors], mode="lines", name=tr("floor (roofline)"),
            line={"color": "black", "dash": "dash"},
            hovertext=[tr("{x_name}: {x}<br>floor {floor:.3f} ms ({bound})<br>compute {compute:.3f} ms, "
                          "memory {memory:.3f} ms", x_name=x_name, x=x, floor=c.floor_s * MS, bound=bound_text(c.bound),
                          compute=c.floor_compute_s * MS, memory=c.floor_memory_s * MS)
                       for x, c in zip(sweep.xs, floors)], hoverinfo="text"))
    default, y = _job_text(sweep.job) or (tr("{job} against {x}", job=job_text(sweep.job), x=x_name.split(" (")[0]
                                             .split("（")[0]), tr("time (ms)"))
    where = (tr(" ({model}, {device} {dtype})", model=sweep.model, device=sweep.device, dtype=sweep.dtype)
             if sweep.model else "")
    return base_layout(fig, title or default + where, x=x_name, y=y)


def batch(sweep: Sweep) -> go.Figure:
    """A decode batch sweep: total tokens per second (bars, left axis) and each user's TPOT (line, right axis)."""
    check_sweep(sweep)
    require(sweep.job == "decode-batch", tr("expected a decode batch sweep, got job={job!r}. "
                                            "Fix: pass inferlab.measure.batch_sweep(...).", job=sweep.job))
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    xs, sums = [str(b) for b in sweep.xs], sweep.summaries
    fig.add_bar(x=xs, y=list(sweep.tokens_per_s), name=tr("total tokens/s (all users)"),
                marker_color="rgba(84,162,75,0.55)", secondary_y=False,
                hovertemplate=tr("batch %{x}: %{y:.0f} tokens/s in total") + "<extra></extra>")
    fig.add_scatter(x=xs, y=[s.median * MS for s in sums], mode="lines+markers", secondary_y=True,
                    name=tr("per-user TPOT (median ms)"), line={"color": PALETTE[0]},
                    error_y={"type": "data", "symmetric": False, "array": [(s.p90 - s.median) * MS for s in sums],
                             "arrayminus": [(s.median - s.min) * MS for s in sums]},
                    hovertemplate=tr("batch %{x}: each user waits %{y:.3f} ms per token") + "<extra></extra>")
    fig.update_yaxes(title_text=tr("total tokens per second"), secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text=tr("per-user TPOT (ms), whisker min..p90"), secondary_y=True, rangemode="tozero",
                     showgrid=False)
    base_layout(fig, tr("Batching: each user's TPOT against the machine's total throughput"),
                x=tr("batch size (sequences)"))
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    return fig


def compare(measurements: Mapping) -> go.Figure:
    """Median TTFT and TPOT per variant (dtype, device, ...); whiskers from the fastest run to p90."""
    require(len(measurements) > 0,
            tr("compare needs at least one Measurement. Fix: pass inferlab.measure.compare(...)."))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"))
    labels = list(measurements)
    for col, metric in ((1, "ttft"), (2, "tpot")):
        sums = [getattr(measurements[k], metric) for k in labels]
        fig.add_bar(x=labels, y=[s.median * MS for s in sums], row=1, col=col, showlegend=False,
                    marker_color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))],
                    error_y={"type": "data", "symmetric": False, "array": [(s.p90 - s.median) * MS for s in sums],
                             "arrayminus": [(s.median - s.min) * MS for s in sums]},
                    text=[f"{s.median * MS:.2f}" for s in sums], textposition="inside", insidetextanchor="start",
                    hovertemplate=tr("%{{x}}: median {metric} %{{y:.3f}} ms", metric=metric.upper())
                    + "<extra></extra>")
        fig.update_yaxes(title_text=tr("{metric} median (ms); whisker min..p90", metric=metric.upper()),
                         row=1, col=col)
    return base_layout(fig, tr("What moves each number: same request, different variants"))


def model_sizes(predictions: Sequence) -> go.Figure:
    """TTFT and TPOT by model size: the loaded model measured, the others PREDICTED (hatched), floors as markers."""
    require(len(predictions) > 0,
            tr("model_sizes needs Predictions. Fix: pass inferlab.measure.predict_sizes(...)."))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"))
    names = [f"{p.name}<br>{p.params / 1e6:.0f}M" for p in predictions]
    for col, metric in ((1, "ttft"), (2, "tpot")):
        for measured in (True, False):
            sel = [i for i, p in enumerate(predictions) if p.measured == measured]
            if not sel:
                continue
            fig.add_bar(x=[names[i] for i in sel], y=[getattr(predictions[i], f"{metric}_s") * MS for i in sel],
                        name=tr("measured here") if measured else tr("PREDICTED (roofline floor + overhead)"),
                        marker={"color": PALETTE[0] if measured else "rgba(245,133,24,0.45)",
                                "pattern": {"shape": "" if measured else "/"}},
                        legendgroup=str(measured), showlegend=col == 1, row=1, col=col,
                        hovertemplate=(tr("%{{x}}: {metric} %{{y:.2f}} ms (measured)", metric=metric.upper())
                                       if measured else
                                       tr("%{{x}}: {metric} %{{y:.2f}} ms (predicted)", metric=metric.upper()))
                        + "<extra></extra>")
        fig.add_scatter(x=names, y=[getattr(p, f"{metric}_floor_s") * MS for p in predictions], mode="markers",
                        marker={"symbol": "line-ew-open", "size": 26, "color": "black"},
                        name=tr("roofline floor (lower bound)"), legendgroup="floor", showlegend=col == 1,
                        row=1, col=col, hovertemplate=tr("floor %{y:.3f} ms") + "<extra></extra>")
        fig.update_yaxes(type="log", dtick=1, title_text=tr("{metric} (ms, log scale)", metric=metric.upper()),
                         row=1, col=col)
    base_layout(fig, tr("Model size: measured where the model is here (solid), predicted for the rest (hatched)"))
    fig.update_layout(barmode="overlay", legend={"orientation": "h", "y": -0.25})
    return fig


def thinking(points: Sequence) -> go.Figure:
    """Time to the first VISIBLE token against the thinking budget, with the line TTFT + budget x TPOT."""
    require(len(points) > 0, tr("thinking needs ThinkingPoints. Fix: pass inferlab.measure.thinking_sweep(...)."))
    fig = go.Figure()
    for p in points:
        fig.add_box(x=[p.budget] * len(p.first_visible), y=[v * MS for v in p.first_visible], showlegend=False,
                    marker_color=PALETTE[1], name=str(p.budget),
                    hovertemplate=tr("{budget} hidden tokens: first visible token after %{{y:.2f}} ms",
                                     budget=p.budget) + "<extra></extra>")
    ttft = summarize([t for p in points for t in p.first_token]).median
    tpot = summarize(_finite(t for p in points for t in p.visible_tpot)).median
    xs = [p.budget for p in points]
    fig.add_scatter(x=xs, y=[(ttft + b * tpot) * MS for b in xs], mode="lines", line={"dash": "dash"},
                    name=tr("TTFT + budget × TPOT ({ttft:.1f} ms + budget × {tpot:.2f} ms)", ttft=ttft * MS,
                            tpot=tpot * MS), marker_color=PALETTE[3])
    base_layout(fig, tr("Thinking first: the user waits for every hidden token"),
                x=tr("thinking budget (hidden tokens before the answer)"), y=tr("time to first visible token (ms)"))
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    return fig
