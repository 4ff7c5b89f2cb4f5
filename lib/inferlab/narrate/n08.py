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

from .. import gate
from ..cost import Cost
from ..fast.choice import Choice
from ..i18n import tr
from ..measure.kernels import KernelComparison
from ..measure.profiling import ProductRate, StepProfile, group_label
from ..measure.speedups import PathRow, PrefillTimes, QuantRow
from ..measure.sweeps import Sweep
from ..units import ms
from . import join
from .n04 import batch_curve

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


def _static_cache(rows: Sequence[PathRow]) -> float | None:
    """StaticCache's TPOT over DynamicCache's on the engine (``None`` when either path is missing)."""
    tpot = {r.label: r.tpot_s for r in rows}
    dynamic, static = tpot.get("engine (DynamicCache)"), tpot.get("engine + StaticCache")
    return None if dynamic is None or static is None else static / dynamic


def _saving(profiles: Mapping[str, StepProfile], model: str) -> str:
    """Which profile group the eager fast step saved most in against the engine's step (``profile_paths``)."""
    engine, fast = profiles.get("engine"), profiles.get("fast")
    if engine is None or fast is None:
        return ""
    saved = engine.step_s - fast.step_s
    if saved <= 0:
        return tr("On {model} the profiled fast step was not faster than the engine's ({fast} against {engine}): "
                  "section 2's profiles have no saving to split. ", model=model, fast=ms(fast.step_s),
                  engine=ms(engine.step_s))
    by_group = {g: engine.groups.get(g, 0.0) - fast.groups.get(g, 0.0) for g in engine.groups}
    top = max(by_group, key=by_group.get)
    fields = {"model": model, "engine": ms(engine.step_s), "fast": ms(fast.step_s), "share": by_group[top] / saved,
              "python": ms(by_group.get("Python & dispatch", 0.0)), "mm": ms(by_group.get("matmuls", 0.0))}
    if top == "matmuls":
        return tr("On {model} the profiles of section 2 (engine {engine}, eager fast step {fast}) put **{share:.0%}** "
                  "of the saving in the matrix products ({mm}) and {python} in Python and dispatch: the gain is mostly "
                  "the fast path's weight layout streaming the same products faster, not removed overhead. ", **fields)
    if top == "Python & dispatch":
        return tr("On {model} the profiles of section 2 (engine {engine}, eager fast step {fast}) put **{share:.0%}** "
                  "of the saving in Python and dispatch ({python}) and {mm} in the matrix products: here removing "
                  "overhead is what paid. ", **fields)
    return tr("On {model} the profiles of section 2 (engine {engine}, eager fast step {fast}) put the largest part of "
              "the saving, **{share:.0%}**, in *{group}*; the matrix products saved {mm}, Python and dispatch "
              "{python}. ", group=group_label(top), **fields)


def ladders(full_size: Sequence[PathRow], full_floor_s: float, bundled: Sequence[PathRow],
            bundled_floor_s: float, *, profiles: Mapping[str, Mapping[str, StepProfile]] | None = None) -> str:
    """The decode paths (``measure.speedups.decode_paths``) on GPT-2's shape and on the bundled model, each against
    its floor; whether the eager StaticCache paid; and, from ``profiles`` (model name -> section 2's
    ``profile_paths``), where each model's saving went: the matrix products or the overhead around them."""
    text = tr("On the full-size GPT-2 shape {gpt2}. On the bundled model {bundled}. ",
              gpt2=_ladder(full_size, full_floor_s), bundled=_ladder(bundled, bundled_floor_s))
    ratios = {name: x for name, x in ((tr("GPT-2's shape"), _static_cache(full_size)),
                                      (tr("the bundled model"), _static_cache(bundled))) if x is not None}
    slower = {name: x for name, x in ratios.items() if x > gate.FAST_SLACK}  # within 5%: a tie, not slower

    def listed(items) -> str:
        return join(tr("{x:.2f}x DynamicCache's on {name}", x=x, name=name) for name, x in items)
    if slower:
        text += tr("*engine + StaticCache* was slower than the default DynamicCache (its TPOT {listed}): run eagerly, "
                   "a pre-allocated cache attends over every slot it holds, the empty ones masked, and saves nothing. "
                   "It pays only where the step is compiled or captured in a CUDA graph, which need the fixed shapes "
                   "it gives. ", listed=listed(slower.items()))
        if tied := [(n, x) for n, x in ratios.items() if n not in slower]:
            text += tr("Elsewhere it tied (its TPOT {listed}: within 5%). ", listed=listed(tied))
    elif ratios:
        text += tr("*engine + StaticCache* was not slower than the default DynamicCache here (its TPOT {listed}), "
                   "even run eagerly; its fixed shapes pay most where the step is compiled or captured in a CUDA "
                   "graph. ", listed=listed(ratios.items()))
    for model, paths in (profiles or {}).items():
        text += _saving(paths, model)
    return text.rstrip()


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


def layout_choice(choice: Choice, now_s: float | None = None) -> str:
    """Which weight layout the fast path measured fastest on this machine, by how much, and what that means.

    ``now_s``: this run's step of the chosen decoder (e.g. its profiled step in section 2), printed beside a
    remembered choice's times, labelled, so a learner never reads two unlabelled times for one step."""
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
        when = choice.measured_at or tr("a date not recorded")
        text += tr(" The times above are **remembered from the choice run on {when}** on this machine, not measured "
                   "now; `inferlab.fast.choice.forget()` measures again, e.g. after the machine was busy.", when=when)
        if now_s is not None:
            then = choice.step_s[choice.winner]
            text += tr(" **This run**: the {winner} step took {now:.2f} ms ({x:.2f}x the remembered {then:.2f} ms). ",
                       winner=choice.winner, now=now_s * 1e3, x=now_s / then, then=then * 1e3)
            text += (tr("The machine was slower now than then: compare the layouts by their ratios, which hold "
                        "better than their times.") if now_s > 1.15 * then else
                     tr("The machine ran at about its remembered speed.") if now_s > then / 1.15 else
                     tr("The machine was faster now than then: compare the layouts by their ratios, which hold "
                        "better than their times."))
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
    text = tr("From batch {b0} to {b1}, total throughput went from **{r0:.0f}** to **{r1:.0f} tokens/s** "
              "({r_ratio:.1f}x) while each user's TPOT went from {s0:.2f} to {s1:.2f} ms ({s_ratio:.1f}x). While the "
              "weights dominate the bytes, extra users ride along almost free; once the arithmetic catches up with "
              "the bandwidth (the ridge of notebook 04), each user's TPOT grows with the batch.",
              b0=b0, b1=b1, r0=r0, r1=r1, r_ratio=r1 / r0, s0=s0 * 1e3, s1=s1 * 1e3, s_ratio=s1 / s0)
    dip = batch_curve(sweep.xs, sweep.medians)  # the ends alone would hide a dip between them
    return text + (" " + dip if dip else "")


def batch_products(by_batch: Mapping[int, tuple[str, list[ProductRate]]]) -> str:
    """Each product's weight streaming rate (its weight bytes over its time) at each batch size, as a Markdown table,
    and whether the few-row products read the weights faster than the one-row ones.

    ``by_batch``: batch size -> (the layout the fast path chose at that batch, ``profiling.product_rates`` of a
    decoder of that batch), the smallest batch first. A product's weights are read once whatever the batch, so its
    GB/s is comparable across batches: a higher rate at a bigger batch is the kernels, not fewer bytes.
    """
    batches = sorted(by_batch)
    names = [r.name for r in by_batch[batches[0]][1]]
    rate = {b: {r.name: r.product_bytes_per_s for r in by_batch[b][1]} for b in batches}
    total = {b: sum(r.nbytes for r in by_batch[b][1]) / sum(r.product_s for r in by_batch[b][1]) for b in batches}
    head = "| " + tr("product") + " | " + " | ".join(tr("GB/s at batch {b} ({layout})", b=b, layout=by_batch[b][0])
                                                      for b in batches) + " |"
    rows = [f"| {n} | " + " | ".join(f"{rate[b].get(n, math.nan) / 1e9:.1f}" for b in batches) + " |" for n in names]
    rows.append(f"| **{tr('all products')}** | " + " | ".join(f"**{total[b] / 1e9:.1f}**" for b in batches) + " |")
    table = head + "\n|---|" + "---|" * len(batches) + "\n" + "\n".join(rows) + "\n\n"
    b0, b1 = batches[0], batches[-1]
    x = total[b1] / total[b0]
    fields = {"b0": b0, "b1": b1, "x": x, "r0": total[b0] / 1e9, "r1": total[b1] / 1e9}
    if "(" in by_batch[b0][0] and tr("no product padded") not in by_batch[b0][0]:  # FastDecoder.layout's words
        table += tr("At batch {b0} the packed products ran padded to the row count measured fastest here ({layout}): "
                    "one sequence then reads the weights with the kernels of a few rows, and the padded rows' "
                    "results are dropped (the logits are the unpadded ones).", b0=b0, layout=by_batch[b0][0]) + " "
    if x > 1.1:
        return table + tr("At batch {b1} the products streamed the weights at **{r1:.1f} GB/s**, {x:.2f}x batch {b0}'s "
                          "{r0:.1f} GB/s: a kernel for a few rows keeps the memory busier than one for a single row, "
                          "so a small batch can step faster than one sequence alone (notebook 04, section 7).",
                          **fields)
    if x < 1 / 1.1:
        return table + tr("At batch {b1} the products streamed the weights at {r1:.1f} GB/s, slower than batch {b0}'s "
                          "{r0:.1f} GB/s ({x:.2f}x): on this machine the extra rows cost time of their own, so a batch "
                          "step faster than batch {b0}'s would not come from the products.", **fields)
    return table + tr("At batch {b1} the products streamed the weights at {r1:.1f} GB/s, about as fast as at batch "
                      "{b0} ({r0:.1f} GB/s): here the kernels read the weights alike for one row and a few, and a "
                      "batch step faster than batch {b0}'s would not come from them.", **fields)
