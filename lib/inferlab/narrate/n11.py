"""Notebook 11 (long context): each finding as Markdown, from the numbers the notebook measured.

In the reader's language (``inferlab.i18n.tr``). Times are seconds, sizes bytes. The results come from
``inferlab.flash`` and ``inferlab.measure.long_context`` (``AttentionRun``, ``DecodeGrid``, ``KvRead``,
``StepProfile``s from ``profile_sides``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..i18n import tr
from ..units import format_bytes, ms
from . import join

EQUAL_TOL = 1e-5  # float32, T up to 4,096: the tiled output against SDPA's (issue 46's target)
MEMORY_TARGET = 0.1  # tiled peak / eager peak at the longest T
CROSS_TOL = 0.25  # measured crossover within 25% of the predicted one
DEPART = 0.25  # a step's ratio to its floor that moved this far from the sweep's first point has departed


def tiles_equal(diffs: Mapping[int, float], block: int) -> str:
    """The largest |tiled - SDPA| at each T (``diffs``: T -> max abs difference), tiles of ``block``."""
    worst_T = max(diffs, key=diffs.get)
    worst = diffs[worst_T]
    text = tr("With tiles of {block} x {block}, the tiled attention's output differs from "
              "`scaled_dot_product_attention`'s by at most **{worst:.1e}** (at T = {T:,}; lengths tried: {Ts}). ",
              block=block, worst=worst, T=worst_T, Ts=join(f"{t:,}" for t in diffs))
    if worst <= EQUAL_TOL:
        return text + tr("That is float32 rounding: the two compute the same function, in a different order. The "
                         "rescaling by exp(old max - new max) makes the partial sums of every tile add up exactly to "
                         "the softmax of the whole row.")
    return text + tr("That is **more than rounding** (the bar is {tol:.0e}): something in the tiles is off, such as a "
                     "rescale applied to the sum but not to the partial output, or a mask that hides the wrong keys. "
                     "Run `flash.tiled_attention` on a short row with `block_q=block_k=1` and compare it step by step "
                     "with section 1's online softmax.", tol=EQUAL_TOL)


def traffic(runs: Sequence) -> str:
    """Counted slow-memory bytes of eager and tiled attention at the shortest and longest T (``AttentionRun``s)."""
    first, last = runs[0], runs[-1]
    x = last.eager_traffic.bytes / last.tiled_traffic.bytes
    grew = last.eager_traffic.bytes / first.eager_traffic.bytes
    text = tr("Counted for one layer's {heads} heads: from T = {T0:,} to T = {T1:,} the eager version's traffic grew "
              "{grew:.0f}x, to **{eager}**, and the tiled version moves **{tiled}** at T = {T1:,}: {x:.1f}x less. ",
              heads=last.memory.heads, T0=first.T, T1=last.T, grew=grew, eager=format_bytes(last.eager_traffic.bytes),
              tiled=format_bytes(last.tiled_traffic.bytes), x=x)
    if x >= 2:
        return text + tr("The eager version writes the whole T x T score matrix out and reads it back twice (mask, "
                         "softmax); the tiled one never writes it. It re-reads K and V once per query tile instead, "
                         "which is why a bigger tile moves fewer bytes (try the slider below).")
    return text + tr("At these lengths the tiled version saves little traffic: it re-reads K and V once per query "
                     "tile, which costs about as much as the score matrix when tiles are small against the head "
                     "dimension. A bigger `block_q` re-reads less (try the slider below).")


def memory(runs: Sequence) -> str:
    """Peak memory of eager, SDPA and tiled at the longest T, against issue 46's bar (tiled <= 1/10 of eager)."""
    last = runs[-1].memory
    text = tr("At T = {T:,} eager attention needed **{eager}** at its peak, SDPA {sdpa} and the tiled version "
              "**{tiled}**: {share:.1%} of eager's. ", T=last.T, eager=format_bytes(last.eager_bytes),
              sdpa=format_bytes(last.sdpa_bytes), tiled=format_bytes(last.tiled_bytes), share=last.tiled_over_eager)
    if last.tiled_over_eager <= MEMORY_TARGET:
        return text + tr("The score matrix is the memory: [{heads}, T, T] floats grow 4x for every doubling of T, "
                         "while the tiles and the running max and sum stay the same size whatever T is. This, not "
                         "speed, is what FlashAttention gives a CPU.", heads=last.heads)
    return text + tr("More than a tenth of eager's: at this length the inputs and the output, which every version "
                     "needs, still weigh as much as the score matrix. The gap opens with T: the scores grow with "
                     "T x T, everything else with T.")


def times(runs: Sequence, device: str) -> str:
    """The time of one call of each version at the longest T, read for a CPU or a GPU."""
    last = runs[-1]
    s = last.seconds
    text = tr("At T = {T:,} one call took {eager} eager, {sdpa} with SDPA and {tiled} tiled. ", T=last.T,
              eager=ms(s["eager"]), sdpa=ms(s["sdpa"]), tiled=ms(s["tiled"]))
    if device.startswith("cuda"):
        if s["sdpa"] < s["eager"]:
            text += tr("On this GPU the fused kernel is **{x:.1f}x faster** than eager: its time, too, was mostly the "
                       "score matrix's trips to memory. ", x=s["eager"] / s["sdpa"])
        else:
            text += tr("On this GPU the fused kernel was not faster than eager at this length: the matrix still "
                       "fits in the GPU's caches, or the launch costs dominate. ")
    elif s["sdpa"] < s["eager"]:
        text += tr("On this CPU the flash kernel was **{x:.1f}x faster** than eager: it skips writing and re-reading "
                   "the T x T matrix and does all heads' tiles in compiled loops. ", x=s["eager"] / s["sdpa"])
    else:
        text += tr("On this CPU the flash kernel was not faster than eager: a CPU's caches are large and its "
                   "memory close, so the matrix's trips cost less than on a GPU. ")
    if s["tiled"] > s["eager"]:
        return text + tr("The readable tiled version is the slowest, {x:.1f}x eager: each tile is a few small Python "
                         "calls, and Python's cost per call outweighs the bytes it saves. It is there to be read; "
                         "its memory, not its time, is the lesson.", x=s["tiled"] / s["eager"])
    return text + tr("Even the readable tiled version beat eager here ({x:.1f}x faster), Python loop and all: at this "
                     "length the T x T matrix's memory traffic costs more than the tiles' calls.",
                     x=s["eager"] / s["tiled"])


def crossovers(grid, n_ctx: int) -> str:
    """Predicted and measured crossover context at each batch (``DecodeGrid.crossovers``), one sentence each."""
    parts = []
    for c in grid.crossovers:
        head = tr("Batch {b}: the KV cache equals the weights at context **{p:,.0f}** (predicted)", b=c.batch,
                  p=c.predicted_context)
        if c.predicted_context > n_ctx:
            head += tr(", beyond GPT-2's {n:,}-token window", n=n_ctx)
        if c.measured_context is None:
            parts.append(head + tr("; measured: the step did not grow with context, so no crossover."))
            continue
        r = c.measured_over_predicted
        text = head + tr("; measured **{m:,.0f}** ({r:.2f}x)", m=c.measured_context, r=r)
        if abs(r - 1) <= CROSS_TOL:
            parts.append(text + tr(": within {tol:.0%} of the prediction.", tol=CROSS_TOL))
        elif r > 1:
            parts.append(text + tr(": later than predicted. The part of the step that does not grow with context "
                                   "cost more than reading the weights at full speed would: arithmetic, or products "
                                   "that stream their weights below the copy bandwidth."))
        else:
            parts.append(text + tr(": earlier than predicted. Each cached token cost more than its bytes at the copy "
                                   "bandwidth: the attention reads the cache less efficiently than the products read "
                                   "the weights."))
    return "\n".join(f"- {p}" for p in parts)


def floor_ratio(grid) -> str:
    """Measured / floor along each batch's sweep, and where it departs from the sweep's first point."""
    parts = []
    for s in grid.sweeps:
        pts = [p for p in grid.points if p.batch == s.batch]
        ratios = [p.times_floor for p in pts]
        text = tr("Batch {b}: {lo:.2f}x to {hi:.2f}x the floor", b=s.batch, lo=min(ratios), hi=max(ratios))
        compute = [p.context for p in pts if p.bound == "compute"]
        away = next((p for p in pts if abs(p.times_floor / ratios[0] - 1) > DEPART), None)
        if away is None:
            text += tr("; it kept its distance along the sweep: the step grew with its bytes, as the floor does.")
        elif away.times_floor > ratios[0]:
            text += tr("; from context {c:,} it departs upward ({x:.2f}x): the cache read cost more per byte than the "
                       "weights.", c=away.context, x=away.times_floor)
        else:
            text += tr("; from context {c:,} it departs downward ({x:.2f}x): the part of the step a byte count leaves "
                       "out (arithmetic, fixed costs) became a smaller share as the cache grew.", c=away.context,
                       x=away.times_floor)
        if compute:
            text += tr(" At contexts {cs} the roofline puts its arithmetic above the bytes (compute-bound on this "
                       "machine): the bandwidth floor cannot be reached there.", cs=join(f"{c:,}" for c in compute))
        parts.append(text)
    return "\n".join(f"- {p}" for p in parts)


def attention_share(profiles: Mapping[int, object], predicted: float) -> str:
    """Attention's share of a profiled fast step below and above the predicted crossover (``profile_sides``)."""
    (c0, p0), (c1, p1) = min(profiles.items()), max(profiles.items())
    s0, s1 = p0.groups["attention"] / p0.step_s, p1.groups["attention"] / p1.step_s
    text = tr("Profiled at context {c0:,} attention took **{s0:.0%}** of the step ({t0}); at context {c1:,} "
              "**{s1:.0%}** ({t1}). ", c0=c0, s0=s0, t0=ms(p0.step_s), c1=c1, s1=s1, t1=ms(p1.step_s))
    sides = c0 < predicted < c1
    if s1 > s0 and sides:
        return text + tr("The two contexts lie either side of the predicted crossover ({p:,.0f}): below it the matrix "
                         "products (the weights) fill the step, above it the attention (the cache) takes a growing "
                         "share. That is where long-context serving spends its time.", p=predicted)
    if s1 > s0:
        return text + tr("Attention's share grew with the context, though both contexts lie on the same side of the "
                         "predicted crossover ({p:,.0f}).", p=predicted)
    return text + tr("Attention's share did not grow with the context here: something else in the step grew as fast "
                     "(or the run was disturbed). Re-run the cell; on a quiet machine the share of reading the cache "
                     "grows with it.")


def kv_heads(reads: Sequence, n_ctx: int) -> str:
    """What fewer KV heads did to the bytes a step reads, the time the readable attention took, and the crossover."""
    mha, fewest = reads[0], reads[-1]
    bytes_x = mha.cache_bytes / fewest.cache_bytes
    time_x = mha.seconds / fewest.seconds
    text = tr("With {h1} KV head(s) instead of {h0} the cache a step reads shrank {bx:.0f}x ({b0} -> {b1}) and the "
              "readable attention's time {tx:.1f}x ({t0} -> {t1}). ", h1=fewest.heads.kv_heads, h0=mha.heads.kv_heads,
              bx=bytes_x, b0=format_bytes(mha.cache_bytes), b1=format_bytes(fewest.cache_bytes), tx=time_x,
              t0=ms(mha.seconds), t1=ms(fewest.seconds))
    if time_x >= bytes_x / 2:
        text += tr("The time followed the bytes: at decode, attention is reading the cache. ")
    else:
        text += tr("The time fell less than the bytes: with so little to read, the fixed cost of each call (the query "
                   "heads' products, the softmax, launching) is most of what is left. ")
    moved = [r for r in reads if r.crossover > n_ctx]
    if moved:
        text += tr("At batch {b} the crossover moves from context {c0:,.0f} to {cs}: with {h} KV heads a batch of {b} "
                   "never reaches it inside GPT-2's {n:,}-token window, so the weights stay the bigger read.",
                   b=mha.batch, c0=mha.crossover, cs=join(f"{r.crossover:,.0f}" for r in reads[1:]),
                   h=join(str(r.heads.kv_heads) for r in moved), n=n_ctx)
    else:
        text += tr("At batch {b} the crossover moves from context {c0:,.0f} to {cs}: later, but still inside the "
                   "window.", b=mha.batch, c0=mha.crossover, cs=join(f"{r.crossover:,.0f}" for r in reads[1:]))
    return text
