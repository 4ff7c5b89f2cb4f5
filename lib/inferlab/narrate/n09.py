"""Notebook 09 (serving many users): each finding as Markdown, from the numbers the notebook measured.

In the reader's language (``inferlab.i18n.tr``). Times are seconds. The runs come from ``inferlab.measure.serve_runs``
(``ServeSummary``, ``BatchingSpread``, ``LoadPoint``, ``GapPhases``, ``PeerComparison``), the batch sweep from
``measure.serve_step_sweep`` (the paged forward ``serve.run`` serves with).
"""

from __future__ import annotations

import math

from .. import gate
from ..i18n import by_language, tr
from ..serve.report import policy_text
from ..units import ms


def why_batch(batches, medians) -> str:
    """One decode step of serve's forward at each batch size (``Sweep.xs``, ``Sweep.medians``): what a token costs as
    the batch grows."""
    b0, t0, b1, t1 = batches[0], medians[0], batches[-1], medians[-1]
    text = tr("One decode step of the forward this notebook serves with took {t0} at batch {b0} and {t1} at batch "
              "{b1}: {b1} users each got a token for {x:.1f}x the time of one. ", t0=ms(t0), b0=b0, t1=ms(t1), b1=b1,
              x=t1 / t0)
    if t1 / t0 < (b1 / b0) / 2:
        return text + tr("Per token that is **{gain:.1f}x cheaper**. Every step reads all the weights once, whatever "
                         "the batch (notebook 04: decode is limited by that read), so a server that runs many "
                         "requests in one step shares the read among them. This is why servers batch.",
                         gain=(b1 / b0) / (t1 / t0))
    return text + tr("Per token only **{gain:.1f}x cheaper** on this run: the step grew almost as fast as the batch, "
                     "so the arithmetic, not the read of the weights, set its time here (or something else used the "
                     "machine). On most machines a decode step is limited by reading the weights, and batching "
                     "shares that read.", gain=(b1 / b0) / (t1 / t0))


def static_vs_continuous(static, continuous) -> str:
    """Two ``ServeSummary``s of the same workload: throughput and latency percentiles side by side."""
    x = continuous.tokens_per_s / static.tokens_per_s
    text = tr("On the same {n} requests, static batching made {s:.1f} tokens/s and continuous batching {c:.1f} "
              "tokens/s (**{x:.2f}x**). Half the users waited for their first token up to {ts} under static batching "
              "and {tc} under continuous; the slowest 1% up to {ts99} and {tc99}. ", n=continuous.requests,
              s=static.tokens_per_s, c=continuous.tokens_per_s, x=x, ts=ms(static.ttft.p50),
              tc=ms(continuous.ttft.p50), ts99=ms(static.ttft.p99), tc99=ms(continuous.ttft.p99))
    if x >= 1.2:
        text += tr("A static batch holds its slots until its longest answer ends, and a new request waits for "
                   "the whole batch; continuous batching refills a slot the moment it frees. ")
        tpc, tps = continuous.tpot.p50, static.tpot.p50
        if tpc > 1.05 * tps:
            return text + tr("Its TPOT is a little higher (p50 {tpc} against {tps}): each step also runs the "
                             "newcomers' prefills.", tpc=ms(tpc), tps=ms(tps))
        return text + tr("Its TPOT is no higher here (p50 {tpc} against {tps}): the newcomers' prefills it runs beside "
                         "the decodes are short, and a static batch's finished rows still cost each of its steps.",
                         tpc=ms(tpc), tps=ms(tps))
    return text + tr("Continuous batching gained little on this run. An idle slot costs little where a step's time "
                     "grows almost as fast as the requests in it (section 1 measured how fast it grew here: on a "
                     "CPU's few cores a decode step soon becomes arithmetic), and static batches waste few slots when "
                     "the answers are about equally long or the requests arrive too slowly to fill a batch.")


def spread(sp) -> str:
    """A ``BatchingSpread``: continuous / static on several workloads, both orders, each one's ratio and the pooled."""
    lo, hi, n = min(sp.ratios), max(sp.ratios), len(sp.ratios)
    text = tr("Over {n} workloads (different seeds, each policy run first in half of them), continuous batching made "
              "{lo:.2f}x to {hi:.2f}x static's tokens/s; pooled (each policy's tokens over its seconds) **{x:.2f}x**. ",
              n=n, lo=lo, hi=hi, x=sp.pooled)
    if sp.pooled < 1.2:
        return text + tr("Pooled, continuous batching gained little on this machine: the single run above is one "
                         "sample of a small effect.")
    if lo < 1.2:
        return text + tr("Pooled, continuous batching wins, yet some workload showed it gaining little: one run of a "
                         "dozen requests can mislead, which is why a benchmark pools several.")
    return text + tr("Every workload favoured continuous batching; how much moved with the seed and the order, so one "
                     "run's ratio is a sample, not the server's number.")


def paging(usage, fit_paged: float, fit_contiguous: float, longest: int) -> str:
    """``kv_usage``'s ``{layout: (reserved, used)}`` and the requests in flight under each layout."""
    (c_res, c_used), (p_res, p_used) = usage["contiguous max-length"], usage["paged"]
    text = tr("Reserving {longest} positions for every request (the longest one this workload allows) left "
              "**{cw:.0%}** of the reserved KV memory empty; blocks of 16 left **{pw:.0%}** empty (at most one "
              "partly filled block per request). In the same memory, {p:.1f} requests ran at once with paging "
              "against {c:.1f} with contiguous reservations: **{x:.1f}x**. ", longest=longest,
              cw=1 - c_used / c_res, pw=1 - p_used / p_res, p=fit_paged, c=fit_contiguous, x=fit_paged / fit_contiguous)
    if fit_paged / fit_contiguous >= 1.5:
        return text + tr("More requests in flight means bigger batches, and (section 1) a bigger batch costs little "
                         "more per step: paging turns saved memory into throughput. vLLM's paper measured 60-80% of "
                         "KV memory wasted by earlier servers, under 4% with paging.")
    return text + tr("Paging fitted few more requests here: the answers used most of their reservation, or the "
                     "memory held so few requests that one partly empty block each was a large share. The longer "
                     "and more varied the answers, the more paging saves.")


def knee(points, slo_s: float) -> str:
    """``LoadPoint``s over arrival rates: where TTFT p99 takes off, which rates the server sustained (finished as fast
    as they arrived, ``SteadyState``), and the most throughput it sustains within ``slo_s`` (its goodput).

    More requests never get answered sooner: where TTFT p99 fell by more than ``gate.SPIKE_X`` as the rate grew
    (``gate.falls``), the slower point was disturbed and no knee or goodput is read from the curve. Below that, the
    baseline is the lower of the first two rates' p99, so one slow first point does not hide the knee."""
    p99 = [p.summary.ttft.p99 for p in points]
    if fell := gate.falls(p99):
        hi, lo = (points[k] for k in fell)
        return tr("At {r0:.1f} requests/s the slowest 1% waited {t0} for a first token, yet at {r1:.1f} requests/s, "
                  "with more requests arriving, only {t1}: more requests never get answered sooner, so the slower "
                  "rate was disturbed. ", r0=hi.rate, t0=ms(hi.summary.ttft.p99), r1=lo.rate,
                  t1=ms(lo.summary.ttft.p99)) + gate.rerun_cell()
    first = min(range(min(2, len(points))), key=lambda k: p99[k])
    base = p99[first]
    bent = next((p for p in points[first + 1:] if p.summary.ttft.p99 > 3 * base), None)
    over = [p for p in points if not p.steady.sustained]
    service = max((p.steady.finished_per_s for p in over), default=math.inf)  # what it finished when it could not
    within = [p for p in points if p.summary.ttft.p99 <= slo_s]
    ok = [p for p in within if p.steady.sustained and p.rate <= service]
    text = tr("At {r0:.1f} requests/s the slowest 1% waited {t0} for a first token. ", r0=points[first].rate,
              t0=ms(base))
    if bent is None:
        text += tr("Up to {r:.1f} requests/s it never tripled. ", r=points[-1].rate)
    else:
        text += tr("From {r:.1f} requests/s it jumped to {t}: the **knee**. ", r=bent.rate, t=ms(bent.summary.ttft.p99))
    if over:
        first = over[0]
        text += tr("From {r:.1f} requests/s on, requests arrived faster than the server finished them: in the measured "
                   "window {a:.1f} arrived and {f:.1f} finished per second, and the queue grew from {q0} to {q1}. "
                   "Offered for longer, its TTFT would grow without bound. ", r=first.rate,
                   a=first.steady.offered_per_s, f=first.steady.finished_per_s, q0=first.steady.queue[0],
                   q1=first.steady.queue[1])
    else:
        text += tr("At every rate tried the server finished requests as fast as they arrived (the queue did not "
                   "grow): it kept up. ")
    if ok:
        best = max(ok, key=lambda p: p.steady.tokens_per_s)
        return text + tr("With an SLO of TTFT p99 within {slo}, the most this server sustains is {tps:.1f} tokens/s "
                         "(at {r:.1f} requests/s, where it finished {share:.0%} as many requests as arrived in the "
                         "measured window): that **goodput**, not the peak, is what it can promise.", slo=_slo(slo_s),
                         tps=best.steady.tokens_per_s, r=best.rate,
                         share=best.steady.finished_per_s / best.steady.offered_per_s)
    if within:
        return text + tr("Some rate met an SLO of TTFT p99 within {slo} only while its queue was growing (the "
                         "arrivals stopped first): no rate tried is one the server could sustain within it. Loosen "
                         "the SLO, or offer fewer requests per second.", slo=_slo(slo_s))
    return text + tr("No rate tried met an SLO of TTFT p99 within {slo}: loosen it, or serve fewer requests per "
                     "second.", slo=_slo(slo_s))


def _slo(seconds: float) -> str:
    """A latency target as the reader chose it: whole milliseconds with separators (``1.0`` -> ``'1,000 ms'``)."""
    return f"{seconds * 1e3:,.0f} ms" if seconds >= 0.01 else ms(seconds)


def chunks(whole_p99: float, chunked_p99: float, ttft_whole: float, ttft_chunked: float, chunk: int,
           long_prompt: int, before: float, during: float) -> str:
    """The decoding requests' p99 time between tokens with and without chunked prefill, the long prompt's TTFT, and
    (chunked run, ``compare.gap_phases``) the decodes' median gap ``before`` the long prompt arrived and ``during``
    its chunks.

    Neither run can make a decode wait longer than the prompt's own reading does: read whole, the stall is the one
    step that reads it (within its TTFT); in chunks, every step of the chunks costs about their median gap. A p99
    beyond ``gate.SPIKE_X`` times that was another program's doing, and the finding says so instead of blaming the
    prompt."""
    text = tr("While a {n}-token prompt was read, the requests already decoding waited up to {w} between two tokens "
              "(p99) when it was read whole, and {c} when it was read in chunks of {k} (**{x:.2f}x**). ", n=long_prompt,
              w=ms(whole_p99), c=ms(chunked_p99), k=chunk, x=chunked_p99 / whole_p99)
    cost = (tr("The long prompt paid for it: its TTFT went from {a} to {b}, since its prefill now shares several "
               "steps with the others' decodes.", a=ms(ttft_whole), b=ms(ttft_chunked)) if ttft_chunked > ttft_whole
            else tr("The long prompt lost nothing on this run (TTFT {a} whole, {b} in chunks): the decodes beside its "
                    "chunks are short.", a=ms(ttft_whole), b=ms(ttft_chunked)))
    stalls = []
    if whole_p99 > gate.SPIKE_X * ttft_whole:
        stalls.append(tr("read whole, a decode waited {w}, over {x:g}x the {t} the long prompt took to its first "
                         "token", w=ms(whole_p99), x=gate.SPIKE_X, t=ms(ttft_whole)))
    if chunked_p99 > gate.SPIKE_X * during:
        stalls.append(tr("in chunks, a decode waited {c}, over {x:g}x the decodes' median gap of {d} while the "
                         "chunks ran", c=ms(chunked_p99), x=gate.SPIKE_X, d=ms(during)))
    if stalls:
        return text + tr("Those waits were longer than reading the prompt can make them ({why}). ",
                         why=by_language(en="; ", zh="；").join(stalls)) + gate.rerun_cell()
    if chunked_p99 > 0.7 * whole_p99 and long_prompt >= 4 * chunk:
        return text + tr("Chunks did not smooth the decodes much here, although reading the prompt whole put "
                         "{parts:.0f} chunks' worth of tokens into one step: that step was not much longer than a "
                         "chunked one. A step's fixed cost can hide its tokens (a fast accelerator, a small model); "
                         "on a CPU this usually means other programs were using it: re-run this cell. ",
                         parts=long_prompt / chunk) + cost
    if chunked_p99 > 0.7 * whole_p99:
        return text + tr("Chunks did not smooth the decodes much here: the prompt was short enough that a whole "
                         "prefill step was not much longer than a chunked one. ") + cost
    text += tr("A whole prompt is one long step that every running request waits through; chunks cap each step's "
               "prompt tokens, so the stall becomes a bounded slowdown. ")
    if during <= 1.25 * before:
        return text + tr("While the chunks ran, the decodes kept their pace (median gap {d} against {b} before the "
                         "long prompt arrived). ", d=ms(during), b=ms(before)) + cost
    return text + tr("While the chunks ran, the decodes' median gap was {d} against {b} before the long prompt arrived "
                     "(**{x:.1f}x**): they slow down instead of stopping, and the chunk size sets how much. ",
                     d=ms(during), b=ms(before), x=during / before) + cost


def prefix(ttft_without: float, ttft_with: float, shared: int, reused: int) -> str:
    """TTFT p50 of requests sharing a ``shared``-token opening, without and with prefix caching."""
    x = ttft_with / ttft_without
    text = tr("Requests opening with the same {n}-token system prompt: TTFT p50 {a} without prefix caching, {b} with "
              "(**{x:.2f}x**); {r:,} prompt positions came from cached blocks instead of a prefill. ", n=shared,
              a=ms(ttft_without), b=ms(ttft_with), x=x, r=reused)
    if x <= 0.5:
        return text + tr("A cached block holds exactly the keys and values a prefill would compute for the same "
                         "tokens after the same tokens, so each request only computes its own part.")
    return text + tr("Caching saved less here than the shared share of the prompt suggests: at this size a prefill "
                     "step costs about as much for few tokens as for many (the read of the weights dominates), so "
                     "skipping tokens saves little time.")


def peer(cmp) -> str:
    """A ``PeerComparison``: inferlab.serve (and, where measured, serve on the model's own layout) against
    transformers' engines, tokens/s and equal answers, on requests that all arrive at once."""
    from ..measure.serve_runs import SERVE_MODEL_LAYOUT

    ours = cmp.tokens_per_s["inferlab.serve"]
    parts = [tr("{name}: {tps:.1f} tokens/s ({x:.2f}x ours), {same}/{n} answers equal to ours", name=policy_text(k),
                tps=v, x=v / ours, same=cmp.same_as_serve[k], n=cmp.requests)
             for k, v in cmp.tokens_per_s.items() if k != "inferlab.serve"]
    text = tr("The same {n} requests of {t} tokens each: inferlab.serve made {tps:.1f} tokens/s; ", n=cmp.requests,
              t=cmp.new_tokens, tps=ours) + by_language(en="; ", zh="；").join(parts) + by_language(en=". ", zh="。")
    text += tr("Every request arrived at once and every answer had the same length, so every engine did the same "
               "work: this comparison measures each engine's step, its kernels and weight layout, not its scheduling "
               "(section 2 measured that). ")
    layout = cmp.tokens_per_s.get(SERVE_MODEL_LAYOUT, math.nan)
    if not math.isnan(layout):
        text += (tr("On the model's own layout ours made {m:.1f} tokens/s: the weights pre-packed for oneDNN "
                    "(notebook 08's *packed* layout) made it **{x:.1f}x** faster. ", m=layout, x=ours / layout)
                 if ours >= 1.3 * layout else
                 tr("On the model's own layout ours made {m:.1f} tokens/s ({x:.2f}x): the weight layout made little "
                    "difference on this machine. ", m=layout, x=ours / layout))
    others = [v for k, v in cmp.tokens_per_s.items() if k not in ("inferlab.serve", SERVE_MODEL_LAYOUT)
              and not math.isnan(v)]
    if others and max(others) * 1.3 <= ours:
        return text + tr("Ours, a few hundred readable lines, beat transformers' own engines here because its steps "
                         "ran faster kernels on a better layout for this CPU, not because it scheduled better.")
    if all(v <= ours * 1.2 for v in others):
        return text + tr("A few hundred readable lines keep up with the library's own engine here: the time goes "
                         "into the same matrix products, whoever schedules them.")
    return text + tr("transformers was faster on this run: its engine batches the attention of all requests in fewer "
                     "operator calls, where ours gathers each request's blocks in Python (the price of readability).")
