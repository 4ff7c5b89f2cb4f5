"""Figures for choosing the next token: candidates, the long tail, each filter's effect, many samples.

All take plain data: a ``[vocab]`` probability vector, the ``FilterStages`` returned by
``inferlab.sampling.filter_stages`` (one ``[vocab]`` vector and one ``Stage`` per filter), or
``SettingResult``s from ``inferlab.diversity``. Token text comes from ``decode``: a function of a list of
ids (``m.decode``), or a list/dict mapping id -> text. The stages are computed in ``inferlab.sampling``
only; these functions draw them.

>>> work = filter_stages(logits[0], SamplingConfig(temperature=0.8, top_k=40, top_p=0.9))   # doctest: +SKIP
>>> stage_distributions(work, m.decode)                                                    # doctest: +SKIP

One piece (over 300 lines) on purpose: every figure of notebook 06, sharing one way to label tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import bpe, tokens
from ..diversity import SettingResult, ngrams
from ..i18n import tr
from ..sampling import STAGE_NAMES, FilterStages, Stage
from . import PALETTE, base_layout, character_at, clip, require, show_token, text_width

Decode = Callable[[list[int]], str] | Sequence[str] | Mapping[int, str]
SUBPLOT_TITLE_PX = 24  # a panel's one-line title (12 px text) above its plot


def stage_title(name: str) -> str:
    """What a stage's distribution is, in the reader's language ("after top-k", ...)."""
    return {"model": tr("the model (softmax of the logits)"), "temperature": tr("after temperature"),
            "top_k": tr("after top-k"), "top_p": tr("after top-p (what is sampled from)")}.get(name, name)


def stage_label(name: str) -> str:
    """A stage's short name on an axis: ``model``, ``temperature``, ``top_k``, ``top_p`` in English."""
    return {"model": tr("model"), "temperature": tr("temperature"), "top_k": tr("top_k"),
            "top_p": tr("top_p")}.get(name, name)


def piece(decode: Decode, token_id: int) -> str:
    """The text of one token id, from ``m.decode`` or a list/dict of pieces.

    With ``m.decode``, a token that is only part of a character shows its bytes (``tokens.piece_text``)
    instead of U+FFFD.
    """
    if not callable(decode):
        return decode[token_id]
    tokenizer = getattr(getattr(decode, "__self__", None), "tokenizer", None)
    return tokens.piece_text(tokenizer, token_id) if tokenizer is not None else decode([token_id])


def _raw_bytes(decode: Decode, token_id: int) -> bytes | None:
    """The bytes one token stands for, when ``decode`` is a model's (a byte-level vocabulary); else None."""
    tokenizer = getattr(getattr(decode, "__self__", None), "tokenizer", None)
    if tokenizer is None:
        return None
    try:
        return bpe.symbol_bytes(tokenizer.convert_ids_to_tokens(int(token_id)))
    except (KeyError, TypeError):
        return None


def character_parts(decode: Decode, ids: Sequence[int], context: Sequence[int] = ()) -> list[tuple[str, str]]:
    """(text, character) per token of a sequence: the character is ``""`` unless the token holds part of one.

    The bytes of ``context`` (the ids before, e.g. the prompt) and of the whole sequence tell which character
    a byte token belongs to; a character left unfinished at the end stays unnamed.

    >>> character_parts(m.decode, m.encode("床前"))   # doctest: +SKIP
    [('⟨e5⟩⟨ba⟩', '床'), ('⟨8a⟩', '床'), ('前', '')]
    """
    ids, context = [int(i) for i in ids], [int(i) for i in context]
    raws = [_raw_bytes(decode, i) for i in context + ids]
    texts = [piece(decode, i) for i in ids]
    if any(r is None for r in raws):
        return [(t, "") for t in texts]
    full, start = b"".join(raws), sum(len(r) for r in raws[:len(context)])
    out = []
    for text, raw in zip(texts, raws[len(context):]):
        a, b = start, start + len(raw)
        start = b
        out.append((text, character_at(full, a, b) if "⟨" in text else ""))
    return out


def character_pieces(decode: Decode, ids: Sequence[int], context: Sequence[int] = ()) -> list[str]:
    """Each token's text; a token holding part of a character also names it: ``'⟨e5⟩⟨ba⟩ of 床'`` (as 01's chips)."""
    return [f"{text} {tr('of {chars}', chars=chars)}" if chars else text
            for text, chars in character_parts(decode, ids, context)]


def _label(decode: Decode, token_id: int) -> str:
    return f"'{show_token(piece(decode, token_id))}' {token_id}"


def _as_probs(probs, name: str = "probs") -> torch.Tensor:
    p = torch.as_tensor(probs, dtype=torch.float64).detach().cpu()
    require(p.dim() == 1 and p.numel() > 0,
            tr("{name} must be a 1-D [vocab] vector, got shape {shape}. Fix: pass logits[0].softmax(-1).",
               name=name, shape=tuple(p.shape)))
    require(bool((p >= 0).all()) and abs(float(p.sum()) - 1.0) < 1e-3,
            tr("{name} must be probabilities (>= 0, summing to 1; sum is {total:.4g}). "
               "Fix: apply .softmax(-1) to the logits first.", name=name, total=float(p.sum())))
    return p


def _require_work(work) -> None:
    require(isinstance(work, FilterStages),
            tr("work must be the FilterStages from inferlab.sampling.filter_stages, got {kind}. "
               "Fix: work = filter_stages(logits[0], config).", kind=type(work).__name__))


# ----------------------------------------------------------------------------- one distribution
def candidate_bars(probs, decode: Decode, k: int = 15, title: str | None = None, *,
                   x_max: float | None = None) -> go.Figure:
    """Horizontal bars of the ``k`` most likely next tokens: visible token text + id, probability.

    Args:
        probs: ``[vocab]`` probabilities (softmax of one row of logits).
        decode: ``m.decode`` or a list/dict id -> text.
        k: how many candidates to draw.
        x_max: a fixed end for the probability axis (e.g. ``1.0``, so bars compare across temperatures);
            ``None`` fits the axis to the longest bar.
    """
    p = _as_probs(probs)
    require(isinstance(k, int) and k >= 1, tr("k={k!r} must be an integer >= 1. Fix: pass k=15.", k=k))
    top = torch.topk(p, min(k, p.numel()))
    ids = [int(i) for i in top.indices]
    vals = [float(v) for v in top.values]
    cum = torch.cumsum(top.values, 0).tolist()
    labels = [_label(decode, i) for i in ids]
    hover = [tr("token {token!r}<br>id {id}<br>rank {rank}<br>p = {p:.4f}<br>top {rank} together: {together:.3f}",
                token=piece(decode, i), id=i, rank=r + 1, p=v, together=c)
             for r, (i, v, c) in enumerate(zip(ids, vals, cum))]
    shown = [f"{v:.3g}" for v in vals]
    # a bar reaching a fixed axis end (x_max) puts its number past the axis: drawn there, in the right margin
    fig = go.Figure(go.Bar(x=vals, y=labels, orientation="h", marker_color=PALETTE[0], hovertext=hover,
                           hoverinfo="text", text=shown, textposition="outside", cliponaxis=False))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(tickformat=".2~g", range=[0, x_max if x_max is not None else 1.15 * max(vals)])
    fig = base_layout(fig, title or tr("The model's top candidates"), x=tr("probability of being the next token"),
                      y=tr("token (text, id)"), height=max(300, 28 * len(ids) + 120))
    return fig.update_layout(margin={"r": 12 + 7 * max(len(t) for t in shown)})  # 12 px text: about 7 px a digit


def tail_curve(probs, ks: Sequence[int] = (10, 100, 1000), title: str | None = None) -> go.Figure:
    """Cumulative probability of the top-r tokens against rank r (log axis), with the top 10/100/1000 marked."""
    p = _as_probs(probs)
    ordered = torch.sort(p, descending=True).values
    cum = torch.cumsum(ordered, 0)
    ranks = sorted({round(10 ** (e / 20)) for e in range(0, int(20 * math.log10(p.numel())) + 1)} | {p.numel()})
    ranks = [r for r in ranks if r <= p.numel()]
    fig = go.Figure(go.Scatter(x=ranks, y=[float(cum[r - 1]) for r in ranks], mode="lines",
                               line={"color": PALETTE[0]}, name=tr("top r together"),
                               hovertemplate=tr("top %{x} tokens hold %{y:.4f}") + "<extra></extra>"))
    marks = [k for k in ks if k <= p.numel()]
    fig.add_trace(go.Scatter(x=marks, y=[float(cum[k - 1]) for k in marks], mode="markers+text",
                             marker={"color": PALETTE[1], "size": 10}, name=tr("outside the top k"),
                             text=[tr("outside top {k}: {rest:.3f}", k=k, rest=1 - float(cum[k - 1])) for k in marks],
                             textposition="top center", hoverinfo="text"))
    fig.update_xaxes(type="log")
    fig.update_yaxes(range=[0, 1.12])
    return base_layout(fig, title or tr("How much probability the top candidates hold"),
                       x=tr("rank r (tokens sorted by probability, log scale)"),
                       y=tr("probability of the top r tokens together"), height=380)


# ----------------------------------------------------------------------------- the stages
def stage_distributions(work: FilterStages, decode: Decode, k: int = 12, title: str | None = None) -> go.Figure:
    """One row per stage (model -> temperature -> top-k -> top-p): the same ``k`` tokens in each row.

    The tokens are the model's ``k`` most likely (no stage changes their order). A grey cross at 0
    marks a token a filter removed. Each row's title gives tokens still possible, mass removed, entropy.

    Args:
        work: from ``inferlab.sampling.filter_stages(logits[0], config)``.
        decode: ``m.decode`` or a list/dict id -> text.
        k: how many of the model's most likely tokens to draw.
    """
    _require_work(work)
    probs = {name: work.probs[name].detach().double().cpu() for name in STAGE_NAMES}
    model = probs["model"]
    ids = [int(i) for i in torch.topk(model, min(k, model.numel())).indices]
    labels = [_label(decode, i) for i in ids]
    titles = [tr("{stage}: 1 token possible, removed {mass:.3f} of the mass, entropy {entropy:.2f} nats",
                 stage=stage_title(s.name), mass=s.removed_mass, entropy=s.entropy) if s.kept == 1 else
              tr("{stage}: {kept:,} tokens possible, removed {mass:.3f} of the mass, entropy {entropy:.2f} nats",
                 stage=stage_title(s.name), kept=s.kept, mass=s.removed_mass, entropy=s.entropy)
              for s in work.stages]
    fig = make_subplots(rows=len(STAGE_NAMES), cols=1, shared_xaxes=True, subplot_titles=titles,
                        vertical_spacing=0.07)
    for row, (name, color) in enumerate(zip(STAGE_NAMES, PALETTE), start=1):
        p = probs[name]
        vals = [float(p[i]) for i in ids]
        hover = [tr("token {token!r}<br>id {id}<br>{stage}: p = {p:.4f}<br>model: p = {model_p:.4f}",
                    token=piece(decode, i), id=i, stage=stage_label(name), p=v, model_p=float(model[i]))
                 for i, v in zip(ids, vals)]
        fig.add_trace(go.Bar(x=labels, y=vals, marker_color=color, name=stage_label(name), hovertext=hover,
                             hoverinfo="text", showlegend=False), row=row, col=1)
        gone = [(lab, i) for lab, i, v in zip(labels, ids, vals) if v == 0 and float(model[i]) > 0]
        if gone:
            by = [next(s for s in STAGE_NAMES if float(probs[s][i]) == 0) for _, i in gone]
            fig.add_trace(go.Scatter(x=[g[0] for g in gone], y=[0] * len(gone), mode="markers",
                                     marker={"symbol": "x", "color": "#999", "size": 9}, name=tr("removed"),
                                     hovertext=[tr("{token} removed by {stage}", token=g[0], stage=stage_label(b))
                                                for g, b in zip(gone, by)],
                                     hoverinfo="text", showlegend=False), row=row, col=1)
        top = max(1e-9, float(p.max()))
        fig.update_yaxes(title_text="p", tickformat=".2~g", range=[0, 1.05 * top], row=row, col=1)
    fig.update_xaxes(type="category", tickangle=-45)
    fig.update_xaxes(title_text=tr("the model's {n} most likely tokens (text, id)", n=len(ids)),
                     row=len(STAGE_NAMES), col=1)
    fig.update_annotations(font_size=12)
    fig = base_layout(fig, title or tr("The distribution after each stage"), height=190 * len(STAGE_NAMES) + 160)
    # Room set here, not left to plotly's automargin (in JupyterLab the labels were cut at the bottom): above, the
    # first panel's title under the figure's; below, the labels at 45 degrees (about 7 px a column at 12 px, times
    # sin 45) and the axis title.
    longest = max(text_width(label) for label in labels)
    return fig.update_layout(margin={"t": fig.layout.margin.t + SUBPLOT_TITLE_PX, "b": round(0.72 * 7 * longest) + 60})


def removed_mass(summary: Sequence[Stage], title: str | None = None) -> go.Figure:
    """Left: probability mass each stage removed. Right: tokens still possible after each stage (log).

    Args:
        summary: the ``Stage``s of ``filter_stages(...).stages`` or of a recorded ``SamplingStep``.
    """
    require(len(summary) > 0 and all(isinstance(s, Stage) for s in summary),
            tr("summary must be a sequence of Stage. Fix: pass filter_stages(logits[0], config).stages "
               "(or a recorded step's step.sampling.stages)."))
    names = [stage_label(s.name) for s in summary]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("probability mass removed"), tr("tokens still possible")))
    fig.add_trace(go.Bar(x=names, y=[s.removed_mass for s in summary], marker_color=PALETTE[3],
                         text=[f"{s.removed_mass:.3f}" for s in summary], textposition="outside",
                         hovertemplate=tr("%{x}: removed %{y:.4f} of the mass") + "<extra></extra>",
                         showlegend=False), 1, 1)
    fig.add_trace(go.Bar(x=names, y=[s.kept for s in summary], marker_color=PALETTE[0],
                         text=[f"{s.kept:,}" for s in summary], textposition="outside",
                         hovertemplate=tr("after %{x}: %{y} tokens possible") + "<extra></extra>",
                         showlegend=False), 1, 2)
    fig.update_yaxes(title_text=tr("mass removed (of the stage before)"), range=[0, 1.1], row=1, col=1)
    fig.update_yaxes(title_text=tr("tokens with p > 0 (log scale)"), type="log", row=1, col=2)
    fig.update_xaxes(title_text=tr("stage"))
    return base_layout(fig, title or tr("What each filter took away"), height=380)


# ----------------------------------------------------------------------------- one text, many texts
def _chip_text(text: str, limit: int = 12) -> str:
    """A token's visible text cut to ``limit`` columns (a Chinese character takes two)."""
    return clip(show_token(text), limit)


def repeated_tokens(ids: Sequence[int], decode: Decode, n: int = 3, per_row: int = 10,
                    title: str | None = None) -> go.Figure:
    """One generated text as token chips; chips inside an ``n``-gram seen earlier in the text are coloured."""
    require(len(ids) > 0, tr("ids is empty. Fix: pass trace.generated_ids of a run that made tokens."))
    ids = [int(i) for i in ids]
    in_repeat = [False] * len(ids)
    seen: set[tuple[int, ...]] = set()
    for start, g in enumerate(ngrams(ids, n)):
        if g in seen:
            in_repeat[start:start + n] = [True] * n
        seen.add(g)
    xs = [i % per_row for i in range(len(ids))]
    ys = [i // per_row for i in range(len(ids))]
    parts = character_parts(decode, ids)  # a byte token names its character, as 01's chips do
    shown = [f"{t} {tr('of {chars}', chars=c)}" if c else t for t, c in parts]
    fig = go.Figure()
    for flag, color, name in ((False, "#DDE6F0", tr("new")),
                              (True, PALETTE[1], tr("inside a repeated {n}-gram", n=n))):
        sel = [i for i in range(len(ids)) if in_repeat[i] == flag]
        fig.add_trace(go.Scatter(
            x=[xs[i] for i in sel], y=[ys[i] for i in sel], mode="markers+text", name=name,
            marker={"symbol": "square", "size": 30, "color": color},
            hovertext=[f"#{i}: {shown[i]!r} (id {ids[i]})" for i in sel], hoverinfo="text"))
        for i in sel:  # the text as an annotation with the chip's colour behind it: it widens, never truncates
            text, chars = parts[i]
            label = _chip_text(text) + (f"<br>{tr('of {chars}', chars=chars)}" if chars else "")
            fig.add_annotation(x=xs[i], y=ys[i], text=label, showarrow=False,
                               bgcolor=color, font={"size": 11}, borderpad=3)
    fig.update_yaxes(autorange="reversed", showticklabels=False, zeroline=False, showgrid=False)
    fig.update_xaxes(showticklabels=False, zeroline=False, showgrid=False)
    share = sum(in_repeat) / len(ids)
    return base_layout(fig, title or tr("Generated tokens in reading order ({share:.0%} inside a repeated {n}-gram)",
                                        share=share, n=n),
                       x=tr("tokens, {per_row} per row", per_row=per_row), height=46 * (max(ys) + 1) + 160)


def samples_table(results: Sequence[SettingResult], max_chars: int = 160, title: str | None = None) -> go.Figure:
    """A table: one column per setting, one row per sample (newlines shown as ⏎)."""
    require(len(results) > 0, tr("results is empty. Fix: pass diversity.sample_many(...)'s output."))
    rows = max(len(r.texts) for r in results)
    seeds = next((r.seeds for r in results if not r.config.greedy), tuple(range(rows)))
    cells = [[tr("seed {seed}", seed=sd) for sd in seeds]]
    for r in results:
        cells.append([(t.replace("\n", "⏎ ")[:max_chars] + ("…" if len(t) > max_chars else "")) for t in r.texts])
    header = [tr("sample")] + [f"{r.name}<br>({r.config!s})" if r.name != str(r.config) else r.name
                               for r in results]
    title = tr("{title}: {prompt!r} + {n} tokens",
               title=title or tr("The same prompt, sampled several times per setting"),
               prompt=results[0].prompt[:60], n=max(len(i) for i in results[0].ids))
    fig = go.Figure(go.Table(columnwidth=[1.4] + [4] * len(results),
                             header={"values": header, "fill_color": "#DDE6F0", "align": "left"},
                             cells={"values": cells, "align": "left", "font": {"size": 11}}))
    # Height from the text itself (a fixed height per row left a tall empty band under short samples): at a
    # laptop's width a column of 11 px text holds about 220 * its share of the width columns per line (a
    # Chinese character takes two columns: text_width, not len).
    per_line = max(8, int(220 * 4 / (4 * len(results) + 1.4)))
    lines = [max(math.ceil(text_width(col[i]) / per_line) for col in cells[1:] if i < len(col)) for i in range(rows)]
    return base_layout(fig, title, height=150 + sum(15 * n + 12 for n in lines))


def variety_vs_likelihood(results: Sequence[SettingResult], n: int = 2, title: str | None = None) -> go.Figure:
    """Scatter: x = mean log-probability per token under the model (nats), y = distinct-n across samples."""
    require(len(results) > 0 and all(isinstance(r, SettingResult) for r in results),
            tr("results must be a list of SettingResult. Fix: results = diversity.sample_many(m, prompt, settings)."))
    require(all(n in r.distinct for r in results),
            tr("distinct-{n} was not computed. Fix: sample_many(..., ns=(1, 2, 3)) includes n={n}.", n=n))
    hover = [f"<b>{r.name}</b> ({r.config!s})<br>"
             + "<br>".join(f"distinct-{k}: {v:.3f}" for k, v in r.distinct.items()) + "<br>"
             + tr("mean log-prob: {logprob:.3f} nats/token<br>first sample: {text}", logprob=r.mean_logprob,
                  text=r.texts[0].replace("\n", "⏎ ")[:80]) for r in results]
    fig = go.Figure()
    for i, (r, h) in enumerate(zip(results, hover)):
        fig.add_trace(go.Scatter(x=[r.mean_logprob], y=[r.distinct[n]], mode="markers", name=r.name,
                                 hovertext=[h], hoverinfo="text",
                                 marker={"size": 13, "color": PALETTE[i % len(PALETTE)]}))
    fig.update_yaxes(range=[0, 1.08])
    return base_layout(fig, title or tr("Varied or likely: one point per setting"),
                       x=tr("mean log-probability per token under the model (nats; right = more likely)"),
                       y=tr("distinct-{n} across samples (up = more varied)", n=n), height=420)
