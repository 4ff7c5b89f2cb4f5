"""Notebook 10's figures (speculative decoding): plain ``inferlab.speculative`` results in, a plotly ``Figure`` out.

    verify_curves     one forward of k tokens over one of 1, per path, beside the roofline's prediction
    rounds_figure     each verify round: guesses accepted, guesses rejected, the target's own token
    race_bars         tokens/s of each way of answering the same prompts
    speedup_surface   the predicted speed-up over k and alpha for one draft cost c, measured points on it
    tv_curve          the sampled distribution's distance from the target's, as draws grow: the rule and a wrong one
    server_gain       the predicted speed-up against k at two batch sizes, from each batch's verify cost
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..i18n import tr
from . import PALETTE, base_layout, clip, require, show_token
from .sampling import piece

ACCEPTED, REJECTED, OWN = PALETTE[2], "#BAB0AC", PALETTE[0]


def verify_curves(costs: Mapping[str, object]) -> go.Figure:
    """``{label: VerifyCost}``: each path's median time at k over its time at the first k, and the roofline's
    prediction (flat while reading the weights dominates) from the first one's floors."""
    require(len(costs) > 0, tr("costs is empty: pass {label: speculative.verify_cost(...)}"))
    fig = go.Figure()
    for i, (label, c) in enumerate(costs.items()):
        fig.add_trace(go.Scatter(x=list(c.sweep.xs), y=list(c.ratios), mode="lines+markers", name=label,
                                 line={"color": PALETTE[i % len(PALETTE)]},
                                 customdata=[t * 1e3 for t in c.sweep.medians],
                                 hovertemplate=tr("k=%{x}: %{y:.2f}x (%{customdata:.1f} ms)") + "<extra></extra>"))
    first = next(iter(costs.values()))
    fig.add_trace(go.Scatter(x=list(first.sweep.xs), y=list(first.predicted_ratios), mode="lines",
                             name=tr("roofline's prediction"), line={"color": "#555", "dash": "dot"}))
    fig.add_hline(y=1.0, line={"color": "#999", "width": 1})
    return base_layout(fig, tr("One forward of k new tokens, over one of 1"), tr("tokens verified at once (k)"),
                       tr("time over k = 1"), height=380)


def _label(model, token: int) -> str:  # a token of part of a character shows its bytes (⟨e6⟩), not U+FFFD
    return clip(show_token(piece(model.decode, token)), 12)


def rounds_figure(trace, model, max_rounds: int = 30) -> go.Figure:
    """One bar per verify round (up to ``max_rounds``): its accepted guesses (green), rejected guesses (grey) and
    the target's own token (blue), each guess's text in the hover."""
    require(hasattr(trace, "rounds"), tr("trace must come from speculative.generate(...)"))
    rounds = trace.rounds[:max_rounds]
    require(len(rounds) > 0, tr("this trace has no verify rounds (an answer of one token)"))
    xs = list(range(1, len(rounds) + 1))
    acc = [r.accepted for r in rounds]
    rej = [r.proposed - r.accepted for r in rounds]
    own = [1 if r.emitted > r.accepted else 0 for r in rounds]
    text_acc = [" ".join(_label(model, t) for t in r.guesses[:r.accepted]) for r in rounds]
    text_rej = [" ".join(_label(model, t) for t in r.guesses[r.accepted:]) for r in rounds]
    text_own = [_label(model, r.token) if r.token >= 0 else "" for r in rounds]
    fig = go.Figure([
        go.Bar(x=xs, y=acc, name=tr("guesses accepted"), marker_color=ACCEPTED, customdata=text_acc,
               hovertemplate=tr("round %{x}: %{y} accepted: %{customdata}") + "<extra></extra>"),
        go.Bar(x=xs, y=own, name=tr("the target's own token"), marker_color=OWN, customdata=text_own,
               hovertemplate=tr("round %{x}: the target's token %{customdata}") + "<extra></extra>"),
        go.Bar(x=xs, y=rej, name=tr("guesses rejected"), marker_color=REJECTED, customdata=text_rej,
               hovertemplate=tr("round %{x}: %{y} rejected: %{customdata}") + "<extra></extra>"),
    ])
    fig.update_layout(barmode="stack", legend={"orientation": "h", "y": -0.22})
    return base_layout(fig, tr("Each verify round: one forward of the target, {k} guesses at most", k=trace.k),
                       tr("round"), tr("tokens"), height=360)


def race_bars(rows: Sequence, variants: Sequence[str] | None = None) -> go.Figure:
    """``RaceRow``s: tokens/s of each variant (one colour each) for each prompt."""
    require(len(rows) > 0, tr("rows is empty: pass speculative.bench.race(...)"))
    variants = list(variants or rows[0].seconds)
    fig = go.Figure([go.Bar(x=[r.prompt for r in rows], y=[r.speed(v) for r in rows], name=v,
                            marker_color=PALETTE[i % len(PALETTE)],
                            hovertemplate=tr("%{x}: %{y:.1f} tokens/s") + "<extra></extra>")
                     for i, v in enumerate(variants)])
    fig.update_layout(barmode="group")
    return base_layout(fig, tr("The same answers, four ways"), tr("prompt"), tr("generated tokens/s"), height=380)


def speedup_surface(c: float, measured: Sequence[tuple[str, int, float, float]] = (), *, k_max: int = 12,
                    verify: float = 1.0, marker: tuple[int, float] | None = None) -> go.Figure:
    """The predicted speed-up E(alpha, k) / (k c + verify) as a heat map over k (1..``k_max``) and alpha, the line
    where it is 1 (no gain), ``measured`` points ``(label, k, alpha, measured speed-up)``, and a ``marker``."""
    from ..speculative.cost import predicted_speedup

    alphas = [i / 50 for i in range(50)]
    ks = list(range(1, k_max + 1))
    z = [[predicted_speedup(a, k, c, verify) for k in ks] for a in alphas]
    fig = go.Figure(go.Heatmap(x=ks, y=alphas, z=z, colorscale="RdBu", zmid=1.0,
                               colorbar={"title": tr("speed-up")},
                               hovertemplate=tr("k=%{x}, alpha=%{y:.2f}: %{z:.2f}x") + "<extra></extra>"))
    fig.add_trace(go.Contour(x=ks, y=alphas, z=z, contours={"start": 1, "end": 1, "coloring": "none"},
                             line={"color": "#222", "dash": "dash"}, showscale=False, name=tr("no gain (1x)"),
                             hoverinfo="skip"))
    for i, (label, k, alpha, x) in enumerate(measured):
        fig.add_trace(go.Scatter(x=[k], y=[alpha], mode="markers+text", name=label, text=[f"{x:.2f}x"],
                                 textposition="top center", marker={"size": 12, "color": PALETTE[(i + 3) % 10],
                                                                   "line": {"color": "white", "width": 1}}))
    if marker is not None:
        fig.add_trace(go.Scatter(x=[marker[0]], y=[marker[1]], mode="markers", name=tr("your choice"),
                                 marker={"size": 14, "symbol": "x", "color": "black"}))
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return base_layout(fig, tr("Predicted speed-up for a draft costing c = {c:.2f} target steps a token", c=c),
                       tr("guesses per round (k)"), tr("acceptance rate (alpha)"), height=420)


def tv_curve(ex) -> go.Figure:
    """An ``Exactness``: total-variation distance from the target's probabilities against draws, log-log."""
    fig = go.Figure([
        go.Scatter(x=list(ex.draws), y=list(ex.rule), mode="lines+markers", name=tr("the rejection rule"),
                   line={"color": PALETTE[0]}),
        go.Scatter(x=list(ex.draws), y=list(ex.accept_all), mode="lines+markers",
                   name=tr("accept every guess (wrong)"), line={"color": PALETTE[1]}),
    ])
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return base_layout(fig, tr("Distance of the sampled tokens from the target's distribution"), tr("draws"),
                       tr("total-variation distance"), height=360)


def server_gain(gains: Mapping[str, Sequence[float]], ks: Sequence[int]) -> go.Figure:
    """``{label: predicted speed-up at each k}`` (one line per batch size) against k, with the 1x line."""
    require(len(gains) > 0, tr("gains is empty"))
    fig = go.Figure([go.Scatter(x=list(ks), y=list(g), mode="lines+markers", name=label,
                                line={"color": PALETTE[i % len(PALETTE)]})
                     for i, (label, g) in enumerate(gains.items())])
    fig.add_hline(y=1.0, line={"color": "#999", "width": 1})
    return base_layout(fig, tr("Predicted speed-up from each batch's verify cost"), tr("guesses per round (k)"),
                       tr("speed-up over plain decoding"), height=360)
