"""Notebook 09's figures (serving many users): plain ``inferlab.serve`` results in, a plotly ``Figure`` out.

    gantt            one row per request: waiting, prefill, decode, on the server's clock
    block_map        which request holds each KV block, iteration by iteration
    kv_waste_bars    KV memory reserved against used: a contiguous max-length reservation against paging
    load_curve       TTFT p99 against throughput over arrival rates, with an SLO line
    gap_timeline     the decoding requests' time between tokens, with and without chunked prefill
    compare_bars     one measure side by side for a few named runs
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..i18n import tr
from ..serve.report import policy_text
from . import PALETTE, base_layout, require

PHASE_COLORS = {"waiting": "#BAB0AC", "prefill": PALETTE[1], "decode": PALETTE[0]}


def _check_result(result, name: str = "result") -> None:
    require(hasattr(result, "requests") and hasattr(result, "iterations"),
            tr("{name} must be a ServeResult from inferlab.serve.run(model, requests, ...)", name=name))


def first_runs(result) -> dict[int, float]:
    """Each request's first scheduled iteration start (seconds): the end of its wait in the queue."""
    out: dict[int, float] = {}
    for it in result.iterations:
        for rid in it.requests:
            out.setdefault(rid, it.start)
    return out


def gantt(result, title: str | None = None) -> go.Figure:
    """One horizontal row per request: grey while it waits, orange from its first iteration to its first token
    (prefill), blue while it decodes. Idle slots show as the gaps between a batch's rows."""
    _check_result(result)
    start = first_runs(result)
    label = {"waiting": tr("waiting"), "prefill": tr("prefill"), "decode": tr("decode")}  # in the reader's language
    fig = go.Figure()
    for phase in ("waiting", "prefill", "decode"):
        ys, bases, widths, hover = [], [], [], []
        for s in result.requests:
            rid = s.request.id
            a, b = {"waiting": (s.arrival, start[rid]), "prefill": (start[rid], s.first_token),
                    "decode": (s.first_token, s.finish)}[phase]
            ys.append(f"#{rid}")
            bases.append(a * 1e3)
            widths.append(max(b - a, 0.0) * 1e3)
            hover.append(tr("request #{id}: {phase} {ms:.0f} ms ({n} prompt tokens, {new} new)", id=rid,
                            phase=label[phase], ms=(b - a) * 1e3, n=len(s.request.prompt_ids), new=len(s.tokens)))
        fig.add_bar(y=ys, x=widths, base=bases, orientation="h", name=label[phase], marker_color=PHASE_COLORS[phase],
                    hovertext=hover, hoverinfo="text")
    fig.update_layout(barmode="overlay", yaxis={"autorange": "reversed", "type": "category"})
    return base_layout(fig, title or tr("Each request over time ({policy})", policy=policy_text(result.summary.policy)),
                       x=tr("time since the server started (ms)"), y=tr("request"),
                       height=max(260, 120 + 18 * len(result.requests)))


def block_map(result, max_iterations: int = 400) -> go.Figure:
    """A heatmap: x the iteration, y the KV block, colour the request holding it (blank: free)."""
    _check_result(result)
    its = result.iterations[:max_iterations]
    n = result.pool.num_blocks
    z = [[math.nan] * len(its) for _ in range(n)]
    text = [[tr("free") for _ in its] for _ in range(n)]
    for j, it in enumerate(its):
        for rid, table in it.tables:
            for pos, block in enumerate(table):
                z[block][j] = rid
                text[block][j] = tr("block {block}: request #{id}, its block {pos}", block=block, id=rid, pos=pos)
    fig = go.Figure(go.Heatmap(z=z, text=text, hoverinfo="text+x", colorscale="Turbo", showscale=True,
                               colorbar={"title": tr("request")}))
    return base_layout(fig, tr("Which request holds each KV block ({used} of {n} at the peak)",
                               used=result.summary.peak_blocks, n=n),
                       x=tr("iteration"), y=tr("KV block"), height=420)


def kv_waste_bars(usage: Mapping[str, tuple[float, float]]) -> go.Figure:
    """Bars of KV positions per layout: ``{name: (reserved, used)}`` (means over the iterations)."""
    require(len(usage) > 0 and all(isinstance(v, (tuple, list)) and len(v) == 2 for v in usage.values()),
            tr("usage must map a layout's name to (positions reserved, positions used), "
               "e.g. measure.serve_runs.kv_usage"))
    names = [policy_text(k) for k in usage]
    keys = list(usage)
    used = [usage[k][1] for k in keys]
    wasted = [usage[k][0] - usage[k][1] for k in keys]
    fig = go.Figure()
    fig.add_bar(x=names, y=used, name=tr("holding keys and values"), marker_color=PALETTE[0])
    fig.add_bar(x=names, y=wasted, name=tr("reserved, empty"), marker_color=PALETTE[3],
                text=[tr("{share:.0%} wasted", share=w / (w + u)) if w + u else ""
                      for w, u in zip(wasted, used, strict=True)],
                textposition="outside")
    fig.update_layout(barmode="stack")
    return base_layout(fig, tr("KV memory reserved for the running requests (mean per iteration)"),
                       y=tr("token positions"), height=380)


def load_curve(points: Sequence, slo_s: float | None = None) -> go.Figure:
    """TTFT p99 (and p50) against throughput, one point per arrival rate; ``slo_s`` a dashed SLO line.

    Args:
        points: ``LoadPoint``s (``serve.load.load_sweep``, also ``measure.serve_runs.load_sweep``): an arrival rate
            and its run's ``ServeSummary``.
    """
    require(len(points) > 0 and all(hasattr(p, "summary") and hasattr(p, "rate") for p in points),
            tr("points must be LoadPoints, e.g. inferlab.measure.serve_runs.load_sweep(model, rates, sizes)"))
    xs = [p.summary.tokens_per_s for p in points]
    # a rate whose queue was still growing (``LoadPoint.steady``) is drawn open: its throughput is not sustained
    growing = [not getattr(getattr(p, "steady", None), "sustained", True) for p in points]
    fig = go.Figure()
    for q, dash in (("p50", "dot"), ("p99", "solid")):
        ys = [getattr(p.summary.ttft, q) * 1e3 for p in points]
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=tr("TTFT {q}", q=q), line_dash=dash,
                        marker={"symbol": ["circle-open" if g else "circle" for g in growing], "size": 9},
                        hovertext=[tr("{rate:.2f} requests/s: {tps:.1f} tokens/s, TTFT {q} {ms:.0f} ms", rate=p.rate,
                                      tps=x, q=q, ms=y) + (tr(" (queue growing: not sustained)") if g else "")
                                   for p, x, y, g in zip(points, xs, ys, growing, strict=True)],
                        hoverinfo="text")
    if slo_s is not None:
        fig.add_hline(y=slo_s * 1e3, line_dash="dash", line_color="black")
        # On a log axis plotly places a shape at the value but an annotation at 10**y (plotly.py #2580): the label
        # takes log10, or "SLO 30 ms" sits at 10**30 ms and the axis stretches to reach it.
        fig.add_annotation(y=math.log10(slo_s * 1e3), yref="y", x=1, xref="paper", xanchor="right",
                           yanchor="bottom", text=tr("SLO"), showarrow=False)
    fig.update_yaxes(type="log")
    return base_layout(fig, tr("Latency against throughput as the arrival rate grows"),
                       x=tr("throughput (generated tokens/s)"), y=tr("time to first token (ms, log)"), height=400)


def gap_timeline(runs: Mapping[str, object], ids) -> go.Figure:
    """Each decoding request's time between tokens over the run, one colour per run (``{label: ServeResult}``)."""
    require(len(runs) > 0, tr("runs is empty: pass {label: ServeResult}"))
    fig = go.Figure()
    for color, (label, result) in zip(PALETTE, runs.items()):
        _check_result(result, "runs[...]")
        xs, ys = [], []
        for s in result.requests:
            if s.request.id in ids:
                xs += [t * 1e3 for t in s.token_times[1:]] + [None]
                ys += [(b - a) * 1e3 for a, b in zip(s.token_times, s.token_times[1:], strict=False)] + [None]
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=label, line_color=color, marker_size=4)
    return base_layout(fig, tr("Time between tokens of the requests already decoding"),
                       x=tr("time since the server started (ms)"), y=tr("time between tokens (ms)"), height=380)


def compare_bars(values: Mapping[str, float], title: str, y: str) -> go.Figure:
    """One bar per named run (``{label: value}``), the value printed on it."""
    require(len(values) > 0, tr("values is empty: pass {label: number}"))
    fig = go.Figure(go.Bar(x=[policy_text(k) for k in values], y=list(values.values()),
                           marker_color=PALETTE[: len(values)], text=[f"{v:.3g}" for v in values.values()],
                           textposition="outside"))
    return base_layout(fig, title, y=y, height=340)
