"""Notebook 08's findings (making decoding faster), told from its own numbers; each with its other-outcome branch.

In the reader's language (``inferlab.i18n.tr``).

>>> from inferlab.fast.choice import Choice
>>> layout_choice(Choice("packed", False, {"packed": 0.040, "tied": 0.048}))[:45]
'`FastDecoder(weights="auto")` timed 2 layouts'
"""

from __future__ import annotations

from ..fast.choice import Choice
from ..i18n import tr
from ..measure.profiling import ProductRate, StepProfile, group_label
from ..measure.speedups import PrefillTimes
from . import join

NEAR = 1.2  # "near the floor": within 20% of it
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
