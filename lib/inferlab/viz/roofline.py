"""Figures for notebook 04: batch size, the counting table, prefill per token, the roofline, the myth check.

All take plain data: ``inferlab.measure.Sweep`` / ``RooflinePoint`` / ``MythCheck``, ``inferlab.cost.Cost``
and ``MachineProfile`` (measured ceilings). None takes a model. A sweep with its floors is drawn by
``inferlab.viz.latency.sweep_figure``.

    >>> fig = roofline(machine, measure.roofline_points(sweep, shape, machine))     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cost import Cost, MachineProfile
from ..i18n import tr
from ..measure.roofline import MythCheck, RooflinePoint
from ..measure.sweeps import Sweep
from . import PALETTE, base_layout, require
from .latency import JOB_COLORS, check_sweep, job_text, spread_band


def _bound_by(bound: str) -> str:
    """``Cost.bound`` as a table cell: what limits the forward."""
    return {"compute": tr("compute"), "memory": tr("memory")}.get(bound, bound)


def batch_figure(sweep: Sweep, turn: int | None = None) -> go.Figure:
    """A batch sweep: step time (left) and tokens per second with the ideal linear line (right).

    Each user waits one step per token, so the left panel is every user's TPOT (decode) or TTFT
    (prefill); the right one is what the machine makes for all users together.
    """
    check_sweep(sweep)
    require(sweep.job in ("decode-batch", "prefill-batch"),
            tr("expected a batch sweep, got job={job!r}. Fix: pass batch_sweep(...).", job=sweep.job))
    decode = sweep.job == "decode-batch"
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        tr("time of one decode step") if decode else tr("time of one prefill"), tr("tokens per second")))
    color = JOB_COLORS[sweep.job]
    spread_band(fig, sweep.xs, [t * 1e3 for t in sweep.lows], [t * 1e3 for t in sweep.highs], color, tr("step"),
                1, 1)
    fig.add_trace(go.Scatter(x=list(sweep.xs), y=[t * 1e3 for t in sweep.medians], mode="lines+markers",
                             name=tr("step time (median)"), line={"color": color},
                             hovertext=[tr("batch {batch}: {ms:.3f} ms per step", batch=b, ms=t * 1e3)
                                        for b, t in zip(sweep.xs, sweep.medians)],
                             hoverinfo="text"), row=1, col=1)
    tps = sweep.tokens_per_s
    ideal = [tps[0] * b / sweep.xs[0] for b in sweep.xs]
    fig.add_trace(go.Scatter(x=list(sweep.xs), y=ideal, mode="lines", name=tr("if the step time never grew"),
                             line={"color": "gray", "dash": "dot"}, hoverinfo="skip"), row=1, col=2)
    fig.add_trace(go.Scatter(x=list(sweep.xs), y=list(tps), mode="lines+markers", name=tr("tokens/s (measured)"),
                             line={"color": PALETTE[1]},
                             hovertext=[tr("batch {batch}: {rate:,.0f} tokens/s", batch=b, rate=v)
                                        for b, v in zip(sweep.xs, tps)],
                             hoverinfo="text"), row=1, col=2)
    if turn is not None:  # a 2-point trace: vline shapes are misplaced on log axes
        spans = ((0, max(sweep.highs) * 1e3), (min(min(ideal), min(tps)), max(max(ideal), max(tps))))
        for col, span in ((1, spans[0]), (2, spans[1])):
            fig.add_trace(go.Scatter(x=[turn, turn], y=list(span), mode="lines",
                                     name=tr("step time x2 at batch {batch}", batch=turn),
                                     line={"color": PALETTE[3], "dash": "dash"}, showlegend=col == 1,
                                     legendgroup="turn", hoverinfo="skip"), row=1, col=col)
    fig.update_xaxes(type="log", title_text=tr("batch size (sequences)"), tickvals=list(sweep.xs))
    fig.update_yaxes(title_text=tr("ms per step"), row=1, col=1, rangemode="tozero")
    # log-log: tokens/s growing in proportion to the batch is a straight line parallel to the ideal one
    fig.update_yaxes(title_text=tr("tokens per second (log)"), type="log", row=1, col=2)
    where = {"context": sweep.context, "model": sweep.model, "device": sweep.device, "dtype": sweep.dtype}
    title = (tr("Batch size moves decode (context {context} tokens; {model}, {device} {dtype})", **where) if decode
             else tr("Batch size moves prefill (context {context} tokens; {model}, {device} {dtype})", **where))
    return base_layout(fig, title, height=420)


def cost_table(costs: Sequence[Cost], labels: Sequence[str] | None = None) -> go.Figure:
    """A table of FLOPs, bytes moved, arithmetic intensity (and floors when a machine was given)."""
    require(len(costs) > 0 and all(isinstance(c, Cost) for c in costs),
            tr("costs must be a non-empty list of inferlab.cost.Cost. Fix: use prefill_cost / decode_cost."))
    labels = (list(labels) if labels is not None else
              [tr("{job} ({tokens} tokens)", job=job_text(c.job), tokens=c.tokens) for c in costs])
    has_floor = all(c.floor_s is not None for c in costs)
    header = [tr("forward"), "GFLOP", tr("MB moved"), tr("FLOP per byte")] + (
        [tr("floor (ms)"), tr("bound by")] if has_floor else [])
    cells = [labels, [f"{c.flops / 1e9:.4f}" for c in costs], [f"{c.bytes / 1e6:.2f}" for c in costs],
             [f"{c.intensity:.2f}" for c in costs]]
    if has_floor:
        cells += [[f"{c.floor_s * 1e3:.3f}" for c in costs], [_bound_by(c.bound) for c in costs]]
    fig = go.Figure(go.Table(header={"values": header, "fill_color": "#eee", "align": "left"},
                             cells={"values": cells, "align": "left"}))
    return base_layout(fig, tr("Counting: work and bytes of each forward (cost model)"),
                       height=120 + 28 * len(costs))


def prefill_per_token(sweeps: Sequence[Sweep], knee: int | None = None) -> go.Figure:
    """Milliseconds per prompt token against prompt length, one line per model (log-log; band: spread).

    ``knee``: the prompt length from which the first sweep's model is compute-bound on this machine
    (``measure.compute_bound_from``), drawn as a dashed line; None draws none.
    """
    require(len(sweeps) > 0,
            tr("sweeps must be a non-empty list of prefill sweeps. Fix: measure.prefill_sweep(...)."))
    fig = go.Figure()
    for i, sw in enumerate(sweeps):
        check_sweep(sw)
        require(sw.job == "prefill",
                tr("expected prefill sweeps, got job={job!r}. Fix: pass prefill_sweep(...).", job=sw.job))
        color = PALETTE[i % len(PALETTE)]
        per = [t * 1e3 / n for t, n in zip(sw.medians, sw.tokens)]
        spread_band(fig, sw.xs, [t * 1e3 / n for t, n in zip(sw.lows, sw.tokens)],
                    [t * 1e3 / n for t, n in zip(sw.highs, sw.tokens)], color, sw.model)
        fig.add_trace(go.Scatter(x=list(sw.xs), y=per, mode="lines+markers",
                                 name=tr("{model} (median)", model=sw.model), line={"color": color},
                                 hovertext=[tr("{model}: {tokens} tokens, {ms:.3f} ms per token", model=sw.model,
                                               tokens=n, ms=p) for n, p in zip(sw.xs, per)], hoverinfo="text"))
    if knee is not None:
        lows = [t * 1e3 / n for sw in sweeps for t, n in zip(sw.lows, sw.tokens)]
        highs = [t * 1e3 / n for sw in sweeps for t, n in zip(sw.highs, sw.tokens)]
        fig.add_trace(go.Scatter(x=[knee, knee], y=[min(lows), max(highs)], mode="lines",
                                 name=tr("{model}: compute-bound from {knee} tokens (cost model)",
                                         model=sweeps[0].model, knee=knee),
                                 line={"color": PALETTE[3], "dash": "dash"}, hoverinfo="skip"))
    ticks = sorted({x for sw in sweeps for x in sw.xs})
    fig.update_xaxes(type="log", title_text=tr("prompt length (tokens)"), tickvals=ticks)
    fig.update_yaxes(type="log", title_text=tr("ms per prompt token (log)"))
    fig.update_layout(legend={"orientation": "h", "y": -0.2, "yanchor": "top"})
    return base_layout(fig, tr("Prefill: time per prompt token against prompt length"), height=520)


def _roof(machine: MachineProfile, lo: float, hi: float, n: int = 60) -> tuple[list[float], list[float]]:
    xs = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)] + [machine.ridge]
    xs.sort()
    return xs, [min(machine.flops_per_s, machine.bytes_per_s * x) / 1e9 for x in xs]


def roofline(machine: MachineProfile, points: Sequence[RooflinePoint],
             what_if: Sequence[tuple[int, Cost, Cost]] | None = None) -> go.Figure:
    """The roofline of ``machine`` (measured ceilings) with measured points; a slider for predicted points.

    Args:
        machine: ``measure.machine_profile(...)`` on the device in use (measured once per session).
        points: ``measure.roofline_points(...)`` for prefill and decode sweeps.
        what_if: optional ``(n, prefill Cost of n tokens, decode Cost at batch n)`` rows; a slider moves
            the two predicted points (at the roof's height: the best the machine allows).
    """
    require(isinstance(machine, MachineProfile), tr(
        "machine must be a MachineProfile. Fix: machine = inferlab.measure.machine_profile(m.device, m.info.dtype)."))
    require(len(points) > 0 and all(isinstance(p, RooflinePoint) for p in points),
            tr("points must be a non-empty list of RooflinePoint. Fix: use inferlab.measure.roofline_points(...)."))
    xs_all = [p.intensity for p in points] + [machine.ridge]
    if what_if:
        xs_all += [c.intensity for row in what_if for c in row[1:]]
    lo, hi = min(xs_all) / 3, max(xs_all) * 3
    rx, ry = _roof(machine, lo, hi)
    fig = go.Figure(go.Scatter(
        x=rx, y=ry, mode="lines", name=tr("roof: min(peak, bandwidth x intensity)"), line={"color": "black"},
        hovertemplate=tr("%{x:.2f} FLOP/B: at most %{y:.1f} GFLOP/s") + f"<extra>{tr('roof')}</extra>"))
    fig.add_trace(go.Scatter(
        x=[machine.ridge], y=[machine.flops_per_s / 1e9], mode="markers", name=tr("ridge point"),
        marker={"symbol": "diamond", "size": 10, "color": "black"},
        hovertext=[tr("ridge: {ridge:.1f} FLOP/B<br>below it a forward is limited by memory bandwidth "
                      "({bandwidth:.1f} GB/s), above it by matmul speed ({peak:.1f} GFLOP/s)", ridge=machine.ridge,
                      bandwidth=machine.bytes_per_s / 1e9, peak=machine.flops_per_s / 1e9)], hoverinfo="text"))
    models = list(dict.fromkeys(p.model for p in points))
    for job, model in dict.fromkeys((p.job, p.model) for p in points):
        sel = [p for p in points if p.job == job and p.model == model]
        fig.add_trace(go.Scatter(
            x=[p.intensity for p in sel], y=[p.flops_per_s / 1e9 for p in sel], mode="markers",
            name=tr("{job}, {model} (measured)", job=job_text(job), model=model) if len(models) > 1
            else tr("{job} (measured)", job=job_text(job)),
            marker={"size": 11, "color": JOB_COLORS.get(job, PALETTE[3]),
                    "symbol": ("circle", "square-open", "triangle-up-open")[min(models.index(model), 2)]},
            hovertext=[f"{p.model} {_point_label(p.label)}<br>" + tr(
                "{intensity:.2f} FLOP/B, {gflops:.2f} GFLOP/s<br>measured {ms:.3f} ms, floor {floor:.3f} ms "
                "({times:.1f} x the floor)", intensity=p.intensity, gflops=p.flops_per_s / 1e9, ms=p.seconds * 1e3,
                floor=p.floor_s * 1e3, times=p.times_floor) for p in sel], hoverinfo="text"))
    if what_if:
        _add_what_if(fig, machine, what_if)
    fig.update_xaxes(type="log", title_text=tr("arithmetic intensity (FLOP per byte moved)"))
    fig.update_yaxes(type="log", title_text=tr("achieved GFLOP/s"))
    return base_layout(fig, tr("Roofline of this machine ({device} {dtype}): measured {bandwidth:.1f} GB/s and "
                               "{peak:.1f} GFLOP/s", device=machine.device, dtype=machine.dtype,
                               bandwidth=machine.bytes_per_s / 1e9, peak=machine.flops_per_s / 1e9),
                       height=560)


def _point_label(label: str) -> str:
    """A point's label ("prefill T=8", "decode ctx=256", stored in English) with its job in the reader's language."""
    job, _, rest = label.partition(" ")
    return f"{job_text(job)} {rest}".strip()


def _add_what_if(fig: go.Figure, machine: MachineProfile, rows: Sequence[tuple[int, Cost, Cost]]) -> None:
    """Two predicted points (prefill of n tokens, decode at batch n) and a plotly slider over n."""
    def at_roof(c: Cost) -> float:
        return min(machine.flops_per_s, machine.bytes_per_s * c.intensity) / 1e9

    first = len(fig.data)
    _, p0, d0 = rows[0]
    for name, c, color in ((tr("prefill (predicted)"), p0, PALETTE[0]), (tr("decode (predicted)"), d0, PALETTE[1])):
        fig.add_trace(go.Scatter(x=[c.intensity], y=[at_roof(c)], mode="markers", name=name,
                                 marker={"size": 16, "symbol": "circle-open", "color": color, "line": {"width": 3}},
                                 hovertemplate="%{x:.2f} FLOP/B<extra>" + name + "</extra>"))
    steps = [{"label": str(n), "method": "restyle",
              "args": [{"x": [[p.intensity], [d.intensity]], "y": [[at_roof(p)], [at_roof(d)]]},
                       [first, first + 1]]} for n, p, d in rows]
    fig.update_layout(sliders=[{"active": 0, "steps": steps, "pad": {"t": 60},
                                "currentvalue": {"prefix": tr("what if: prompt length = batch size = ")}}])


def myth_figure(check: MythCheck) -> go.Figure:
    """Bars: TPOT predicted from compute, predicted from bandwidth, and measured (log scale)."""
    require(isinstance(check, MythCheck), tr("expected a MythCheck. Fix: use inferlab.measure.myth_check(...)."))
    names = [tr("predicted from compute<br>(FLOPs / peak FLOP/s)"), tr("predicted from bandwidth<br>(bytes / GB/s)"),
             tr("measured")]
    values = [check.from_compute_s * 1e3, check.from_bandwidth_s * 1e3, check.measured_s * 1e3]
    fig = go.Figure(go.Bar(x=names, y=values, marker_color=[PALETTE[0], PALETTE[1], PALETTE[3]],
                           text=[f"{v:.3g} ms" for v in values], textposition="outside",
                           hovertemplate="%{x}: %{y:.4f} ms<extra></extra>"))
    fig.update_yaxes(type="log")
    return base_layout(fig, tr("The myth check: one decode step (TPOT) at context {context}", context=check.context),
                       y=tr("ms per token (log scale)"), height=420)
