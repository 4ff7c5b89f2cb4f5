"""Notebook 08's findings (making decoding faster), told from its own numbers; each with its other-outcome branch.

In the order of the notebook: the step's floor (``step_floor``), where a step's time goes (``step_paths``,
``full_size_steps``), attention's memory (``attention_memory``), weight formats (``quant_table``,
``quant_models``), the decode paths (``ladders``), the layout the fast path chose and why (``layout_choice``,
``product_table``, ``where_the_rest_goes``), the prompt (``prefill_limit``) and batching (``batching``). In the
reader's language (``inferlab.i18n.tr``). One piece: one notebook's narration, each finding a short function
beside the others it is read with.

>>> from inferlab.fast.choice import Choice
>>> layout_choice(Choice("packed", False, {"packed": 0.040, "tied": 0.048}))[:45]
'`FastDecoder(weights="auto")` timed 2 layouts'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..cost import Cost
from ..fast.choice import Choice
from ..i18n import tr
from ..measure.kernels import KernelComparison
from ..measure.profiling import ProductRate, StepProfile, group_label
from ..measure.speedups import PathRow, PrefillTimes, QuantRow
from ..measure.sweeps import Sweep
from . import join

NEAR = 1.2  # "near the floor": within 20% of it


def step_floor(floor: Cost, ridge: float) -> str:
    """What one decode step of the loaded model moves and computes, whether that is memory- or compute-bound, and
    its floor (``floor``: ``cost.decode_cost`` on the measured machine, ``ridge`` its FLOP/byte)."""
    numbers = {"mb": floor.bytes / 1e6, "mflop": floor.flops / 1e6, "intensity": floor.intensity, "ridge": ridge,
               "floor_ms": floor.floor_s * 1e3}
    if floor.bound == "memory":
        text = tr("One decode step of the loaded model moves about **{mb:.1f} MB** and does {mflop:.0f} MFLOP "
                  "({intensity:.2f} FLOP/byte, below this machine's ridge of {ridge:.1f}), so it is **memory-bound**: "
                  "its floor is **{floor_ms:.3f} ms**. ", **numbers)
    else:
        text = tr("One decode step of the loaded model moves about **{mb:.1f} MB** and does {mflop:.0f} MFLOP "
                  "({intensity:.2f} FLOP/byte, above this machine's ridge of {ridge:.1f}), so it is **compute-bound**: "
                  "its floor is **{floor_ms:.3f} ms**. ", **numbers)
    return text + tr("Everything above that line is what this notebook tries to remove.")


def _path_lines(profiles: Mapping[str, StepProfile], floor_s: float) -> str:
    """One bullet per profiled step: its time against the floor, its largest group, its Python & dispatch share."""
    lines = []
    for p in profiles.values():
        top, total = max(p.groups, key=p.groups.get), sum(p.groups.values())
        lines.append("- " + tr("**{label}**: {ms:.2f} ms, {ratio:.2f}x the floor; its largest part is *{top}* "
                               "({share:.0%}), Python & dispatch {python:.0%}", label=p.label, ms=p.step_s * 1e3,
                               ratio=p.step_s / floor_s, top=group_label(top), share=p.groups[top] / total,
                               python=p.groups["Python & dispatch"] / total))
    return "\n".join(lines)


def step_paths(profiles: Mapping[str, StepProfile], floor_s: float) -> str:
    """Each path's profiled step (``measure.profiling.profile_paths``) against the floor, as a list."""
    return _path_lines(profiles, floor_s) + "\n\n" + tr(
        "The paths do the same arithmetic; their bars differ in how the matrix products are run (section 5) and in "
        "everything *around* them.")


def full_size_steps(profiles: Mapping[str, StepProfile], floor: Cost, copy_bytes_per_s: float, *,
                    compiled: bool) -> str:
    """GPT-2 small's profiled steps against its floor: how fast the eager fast step's products read the weights
    and, when the ``"fast+compile"`` decoder really ``compiled``, how fast the compiled step read them."""
    fp = profiles["fast"]
    top = max(fp.groups, key=fp.groups.get)
    text = (tr("GPT-2 small reads about **{mb:.0f} MB** per step: floor **{floor_ms:.1f} ms**, at the {gbs:.1f} GB/s "
               "of a plain copy.", mb=floor.bytes / 1e6, floor_ms=floor.floor_s * 1e3, gbs=copy_bytes_per_s / 1e9)
            + "\n\n" + _path_lines(profiles, floor.floor_s) + "\n\n"
            + tr("In the eager fast step *{top}* take the largest share. When that is the matrix products, what is "
                 "left between the step and the floor is how well those kernels use the memory bandwidth: they read "
                 "the weights at about {gbs:.1f} GB/s. ", top=group_label(top),
                 gbs=floor.bytes / max(fp.groups["matmuls"], 1e-12) / 1e9))
    cp = profiles.get("fast+compile")
    if compiled and cp is not None:
        text += tr("The compiled step writes each product as a sum that the compiler turns into a plain streaming "
                   "loop (section 5): the whole step took **{ms:.1f} ms**, weights read at {gbs:.1f} GB/s counting "
                   "*everything* in the step as reading.", ms=cp.step_s * 1e3, gbs=floor.bytes / cp.step_s / 1e9)
    return text


def attention_memory(kernels: KernelComparison, layer_bytes: int) -> str:
    """Eager against fused attention at the longest prompt of ``kernels``: peak memory and time
    (``layer_bytes``: one layer's ``[1, heads, T, T]`` float32 scores)."""
    e, s = (kernels.sweeps[k].medians[-1] for k in ("eager", "sdpa"))
    e_mem, s_mem = (kernels.peak_bytes[k][-1] for k in ("eager", "sdpa"))
    return tr("At T = {T}, eager prefill allocated up to **{e_mib:.1f} MiB** against SDPA's **{s_mib:.1f} MiB** "
              "({ratio:.1f}x), and took {e_ms:.1f} ms against {s_ms:.1f} ms. Eager's extra memory grows with T^2 (one "
              "{layer_mib:.1f} MiB matrix per layer, plus its softmax copy); the fused kernel's stays close to the "
              "activations it must keep anyway. On long prompts and on GPUs, where the T x T traffic dominates, that "
              "is also where fused attention saves the most time. In decode the query is a single row, so the matrix "
              "is only `[heads, 1, T]` and the kernel choice matters much less.", T=kernels.lengths[-1],
              e_mib=e_mem / 2**20, s_mib=s_mem / 2**20, ratio=e_mem / max(s_mem, 1), e_ms=e * 1e3, s_ms=s * 1e3,
              layer_mib=layer_bytes / 2**20)


def _ppl(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def quant_table(rows: Sequence[QuantRow]) -> str:
    """Each weight format's bytes, predicted and measured speed-up and perplexity (``measure.speedups.quant_rows``,
    fp32 first), as a Markdown table, then the fastest format, any that fell short of the bytes' prediction (a
    cause only as a hypothesis: this table does not profile the kernels), and the least accurate format.
    Perplexity ``nan`` (``quant_rows(quality=False)``, random weights) shows as "-" and is not judged."""
    lines = [f"| {r.kind} | {r.step_bytes / 1e6:.1f} | {r.predicted_speedup:.1f}x | "
             f"{r.measured_speedup:.2f}x | {r.tpot_s * 1e3:.2f} | {_ppl(r.perplexity)} |" for r in rows]
    best = max(rows, key=lambda r: r.measured_speedup)
    text = (tr("| weights | MB read per step | predicted speed-up | measured speed-up | TPOT (ms) | perplexity |")
            + "\n|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n")
    text += (tr("No format was faster than fp32 here. ") if best is rows[0] else
             tr("The fastest format here was **{best}** ({measured:.2f}x fp32's speed, {predicted:.1f}x predicted "
                "from the bytes). ", best=best.kind, measured=best.measured_speedup, predicted=best.predicted_speedup))
    slower = [r.kind for r in rows[1:] if r.measured_speedup < 1]
    short = [r.kind for r in rows[1:] if r.measured_speedup >= 1 and r.measured_speedup < 0.8 * r.predicted_speedup]
    if slower:
        text += tr("Slower than fp32 although they read fewer bytes: **{kinds}**. ", kinds=join(slower))
    if short:
        text += tr("Faster, but short of the bytes' prediction by more than 20%: **{kinds}**. ", kinds=join(short))
    if slower or short:
        text += tr("For those, the bytes did not set the step's time. A hypothesis, not measured here: their matrix "
                   "kernels convert or unpack each weight, work the byte count ignores; profiling one decode step "
                   "of each (`measure.profile_step`) would show it in the *matmuls* group. ")
    else:
        text += tr("Every format reached at least 80% of the speed-up its bytes predict: here the bytes set the time. ")
    scored = [r for r in rows if not math.isnan(r.perplexity)]
    if len(scored) < 2 or math.isnan(rows[0].perplexity):
        return text.rstrip()
    worst, base_ppl = max(scored, key=lambda r: r.perplexity), rows[0].perplexity
    return text + tr("Quality: the largest perplexity was **{worst}**'s ({ppl:.2f} against fp32's {base:.2f}, "
                     "{change:+.1%}).", worst=worst.kind, ppl=worst.perplexity, base=base_ppl,
                     change=worst.perplexity / base_ppl - 1)


def quant_models(full_size: Sequence[QuantRow], full_name: str, bundled: Sequence[QuantRow],
                 bundled_name: str) -> str:
    """The same weight formats on two models (``quant_rows`` of each, fp32 first): where a format's measured
    speed-up differs between them, the outcome belongs to the model's shapes on this machine, not to the format."""
    small = {r.kind: r for r in bundled}
    pairs = [(r, small[r.kind]) for r in full_size[1:] if r.kind in small]
    if not pairs:
        return tr("No weight format was timed on both models.")
    rows = join(tr("{kind} {full:.2f}x on {full_name} and {small:.2f}x on {bundled_name}", kind=a.kind,
                   full=a.measured_speedup, small=b.measured_speedup, full_name=full_name, bundled_name=bundled_name)
                for a, b in pairs)
    text = tr("Speed against fp32, the same formats on both models: {rows}. ", rows=rows)
    split = [a.kind for a, b in pairs if (a.measured_speedup < 1) != (b.measured_speedup < 1)]
    if split:
        text += tr("**{kinds}** won on one model and lost on the other, on the same machine: whether a format pays "
                   "off depends on the model (its matrix shapes), not on the format alone. ", kinds=join(split))
    else:
        text += tr("Each format won or lost on both models alike. ")
    return text + tr("Notebook 07 (section 7.1) timed 16-bit copies of {full_name}: its result is to be compared "
                     "with this notebook's {full_name} rows, not with the bundled model's.", full_name=full_name)


def _ladder(rows: Sequence[PathRow], floor_s: float) -> str:
    """The default engine's TPOT against the floor and, when another path beat it, the best path's."""
    base, best = rows[0], min(rows, key=lambda r: r.tpot_s)
    if best is base:
        return tr("the default engine's TPOT was {ms:.2f} ms ({ratio:.2f}x the floor), and no other path beat it in "
                  "this run (on a busy machine, re-run the cell)", ms=base.tpot_s * 1e3, ratio=base.tpot_s / floor_s)
    return tr("the default engine's TPOT was {ms:.2f} ms ({ratio:.2f}x the floor); the best path, *{best}*, reached "
              "**{best_ms:.2f} ms ({best_ratio:.2f}x the floor)**, {speedup:.2f}x faster", ms=base.tpot_s * 1e3,
              ratio=base.tpot_s / floor_s, best=best.shown, best_ms=best.tpot_s * 1e3, best_ratio=best.tpot_s / floor_s,
              speedup=base.tpot_s / best.tpot_s)


def ladders(full_size: Sequence[PathRow], full_floor_s: float, bundled: Sequence[PathRow],
            bundled_floor_s: float) -> str:
    """The decode paths (``measure.speedups.decode_paths``) on GPT-2's shape and on the bundled model, each against
    its floor, and why removing overhead matters most for small models."""
    return tr("On the full-size GPT-2 shape {gpt2}. On the bundled model {bundled}. The smaller the model, the larger "
              "the share of fixed per-step costs (Python, launching operators), so removing overhead matters most for "
              "small models and fast hardware; for a large model on a CPU the remaining gap is mostly the matrix "
              "kernels' use of the memory bandwidth.", gpt2=_ladder(full_size, full_floor_s),
              bundled=_ladder(bundled, bundled_floor_s))
def _why(winner: str) -> str:
    """Why the layout ``winner`` streamed the weights fastest, in the reader's language."""
    why = {"rows+compile": tr("the compiler's loops (each product a plain reduction over the weight rows, fused with "
                              "what surrounds it) streamed the weights fastest"),
           "packed": tr("oneDNN's pre-packed matrix-vector kernels, each spread over every core, streamed the weights "
                        "fastest"),
           "transposed": tr("the plain library kernels won, helped by the LM head's `[d_model, vocab]` copy, which "
                            "this CPU's matrix library reads faster than the tied `[vocab, d_model]` layout"),
           "tied": tr("the plain path won: the model's own tensors through the same `F.linear`/`addmm` calls as "
                      "Hugging Face's forward, so this CPU's matrix library already streams the weights as well as "
                      "any trick here; the fast path then only saves the work *around* the products")}
    return why.get(winner, tr("it streamed the weights fastest"))


def _source(source: str) -> str:
    """Where a ``Choice`` came from ("measured", "cached", "only candidate"), in the reader's language."""
    return {"measured": tr("measured"), "cached": tr("cached"), "only candidate": tr("only candidate")}.get(source,
                                                                                                          source)


def layout_choice(choice: Choice) -> str:
    """Which weight layout the fast path measured fastest on this machine, by how much, and what that means."""
    times = join(f"{k} {s * 1e3:.2f} ms" for k, s in sorted(choice.step_s.items(), key=lambda kv: kv[1]))
    if choice.runner_up is None:
        return tr("`FastDecoder(weights=\"auto\")` had one layout to offer here, **{winner}** ({source}): nothing "
                  "to compare on this device.", winner=choice.winner, source=_source(choice.source))
    text = tr("`FastDecoder(weights=\"auto\")` timed {n} layouts for this model's shapes on this machine ({times} "
              "per decode step) and kept **{winner}**, {margin:.2f}x faster than the runner-up, *{runner_up}*: "
              "{why}.", n=len(choice.step_s), times=times, winner=choice.winner, margin=choice.margin,
              runner_up=choice.runner_up, why=_why(choice.winner))
    if choice.margin < 1.05:
        text += tr(" The margin is within the noise of a few steps: on this CPU the layouts stream about alike, and "
                   "another run could pick the other one at no real cost.")
    if choice.source == "cached":
        text += tr(" (This choice was measured in an earlier run on this machine and remembered; "
                   "`inferlab.fast.choice.forget()` measures again, e.g. after the machine was busy.)")
    for name, why in choice.left_out.items():
        text += tr(" *{name}* could not run here ({why}).", name=name, why=why)
    return text


def product_table(rates: list[ProductRate]) -> str:
    """Each product's streaming rate against a plain read of the same bytes, as a Markdown table."""
    rows = [f"| {r.name} | [{r.shape[0]}, {r.shape[1]}] x {r.per_step} | {r.nbytes / 1e6:.1f} | "
            f"{r.product_s * 1e3:.2f} | {r.product_bytes_per_s / 1e9:.1f} | {r.read_bytes_per_s / 1e9:.1f} | "
            f"{r.efficiency:.0%} |" for r in rates]
    return (tr("| product | weight [out, in] x per step | MB per step | ms per step | GB/s | plain read GB/s | share "
               "of read |") + "\n|---|---|---|---|---|---|---|\n" + "\n".join(rows))


def where_the_rest_goes(rates: list[ProductRate], step_s: float, read_floor_s: float) -> str:
    """Where a decode step's time goes beyond the read floor: the products' streaming and everything around them."""
    products_s = sum(r.product_s for r in rates)
    ratio = step_s / read_floor_s
    text = tr("The step took **{step:.2f} ms, {ratio:.2f}x its read floor** ({floor:.2f} ms).", step=step_s * 1e3,
              ratio=ratio, floor=read_floor_s * 1e3)
    if ratio <= NEAR:
        return text + tr(" That is within {near:.0%} of reading the weights once at this CPU's plain-read speed: "
                         "nothing large is left to win at batch 1 without reading fewer bytes (quantization, section "
                         "4).", near=NEAR - 1)
    worst = min(rates, key=lambda r: r.efficiency)
    if products_s > step_s:
        return text + tr(" Timed one by one, its products add up to more than the whole step ({products:.2f} ms): "
                         "each separate call pays its own start-up, and on a busy machine the timings disagree. Re-run "
                         "this cell when the machine is quiet.", products=products_s * 1e3)
    rest = step_s - products_s
    text += tr(" Its products alone, timed one by one, add up to {products:.2f} ms; the rest, {rest:.2f} ms, is "
               "attention over the cache, norms, activations and the step's own overhead.", products=products_s * 1e3,
               rest=rest * 1e3)
    if products_s >= rest:
        text += tr(" So most of the gap is in the products: the slowest to stream is *{name}*, at {eff:.0%} of a plain "
                   "read of the same bytes ({rate:.1f} against {read:.1f} GB/s). A product also does arithmetic and "
                   "writes its output, and small matrices pay a fixed start-up cost: on this CPU its kernels do not "
                   "keep the memory as busy as a plain sum does.", name=worst.name, eff=worst.efficiency,
                   rate=worst.product_bytes_per_s / 1e9, read=worst.read_bytes_per_s / 1e9)
    else:
        text += tr(" So most of the gap is *around* the products, not in them: fewer, fused operators (the compiled "
                   "step) are what would close it here.")
    return text


def prefill_limit(pre: PrefillTimes, engine_profile: StepProfile, fast_profile: StepProfile) -> str:
    """TTFT of a long prompt on the engine and on the fast path against its roofline floor, and what limits it."""
    groups = {k: v for k, v in engine_profile.groups.items() if v > 0}
    top = max(groups, key=groups.get)
    share = groups[top] / sum(groups.values())
    text = tr("A {tokens}-token prompt: the engine's prefill took **{engine:.0f} ms ({engine_x:.2f}x its floor)**, the "
              "fast path's **{fast:.0f} ms ({fast_x:.2f}x)**. The floor is {floor:.0f} ms at this CPU's matmul rate "
              "({gflops:.0f} GFLOP/s, the median of the rates measured just before each run), and each run is judged "
              "against the floor at the rate measured just before it: a machine that speeds up or slows down between "
              "runs moves the ratios far less than it moves the times. ", tokens=pre.tokens, engine=pre.engine_s * 1e3,
              engine_x=pre.engine_x_floor, fast=pre.fast_s * 1e3, fast_x=pre.fast_x_floor, floor=pre.floor_s * 1e3,
              gflops=pre.flops_per_s / 1e9)
    if top == "matmuls":
        fast_groups = {k: v for k, v in fast_profile.groups.items() if v > 0}
        fast_share = fast_groups.get("matmuls", 0.0) / sum(fast_groups.values())
        products_x = fast_share * pre.fast_x_floor  # the products' time against the whole floor
        text += tr("The profiles put {share:.0%} of the engine's prefill and {fast_share:.0%} of the fast path's in "
                   "the matrix products: a prompt is compute-bound, so what limits it is how close the matrix "
                   "library's kernels run to this CPU's measured matmul rate (the floor's FLOP/s), not Python around "
                   "them. The fast path runs the same products and trims the work around them (each product writes "
                   "into a buffer reused by every block, the GELU and the residual adds work in place).", share=share,
                   fast_share=fast_share)
        text += tr(" Its products alone come to about {products_x:.2f}x the floor ({fast_share:.0%} of {fast_x:.2f}x): "
                   "on the prompt's shapes ({tokens} rows) the matrix library reaches about {eff:.0%} of the rate it "
                   "reaches on the 1024 x 1024 product the floor is measured with, and the other {rest:.2f}x is "
                   "attention, the GELU, the norms and copies.", products_x=products_x, fast_share=fast_share,
                   fast_x=pre.fast_x_floor, tokens=pre.tokens, eff=1 / products_x if products_x else 0.0,
                   rest=pre.fast_x_floor - products_x)
    else:
        text += tr("The profile of the engine's prefill puts the largest share, {share:.0%}, in *{top}*, not in the "
                   "matrix products: on this machine the work around the products limits the prompt.", share=share,
                   top=group_label(top))
    if min(pre.engine_x_floor, pre.fast_x_floor) > 1.5:
        text += tr(" Neither path came within 1.5x of the floor in this run; on a busy machine (other programs using "
                   "the cores) compute-bound work suffers most: re-run the cell when the machine is quiet.")
    return text


def batching(sweep: Sweep) -> str:
    """Throughput for everybody against each user's TPOT, from the smallest batch of a decode ``batch_sweep`` to the
    largest."""
    (b0, b1), (r0, r1) = (sweep.xs[0], sweep.xs[-1]), (sweep.tokens_per_s[0], sweep.tokens_per_s[-1])
    s0, s1 = sweep.medians[0], sweep.medians[-1]  # seconds per step: each user's TPOT
    return tr("From batch {b0} to {b1}, total throughput went from **{r0:.0f}** to **{r1:.0f} tokens/s** "
              "({r_ratio:.1f}x) while each user's TPOT went from {s0:.2f} to {s1:.2f} ms ({s_ratio:.1f}x). While the "
              "weights dominate the bytes, extra users ride along almost free; once the arithmetic catches up with "
              "the bandwidth (the ridge of notebook 04), each user's TPOT grows with the batch.",
              b0=b0, b1=b1, r0=r0, r1=r1, r_ratio=r1 / r0, s0=s0 * 1e3, s1=s1 * 1e3, s_ratio=s1 / s0)
