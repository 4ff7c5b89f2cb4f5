"""Notebook 04 (prefill and decode): each finding as Markdown, from the numbers the notebook measured.

Every function returns the text for the outcome the numbers show, including the outcome the articles
do not predict, in the reader's language (``inferlab.i18n.tr``). Times are seconds, sizes bytes,
intensities FLOP/byte. It is one piece (over 300 lines) on purpose: one notebook's findings, in the order the
notebook meets them, as every ``narrate`` module is.
"""

from __future__ import annotations

import math

from ..cost import MachineProfile
from ..i18n import tr
from ..measure.profiling import group_label
from ..measure.roofline import TpotVerdict
from ..units import ms


def two_models(loaded: str, loaded_params: int, timed: str, timed_params: int) -> str:
    """Why the notebook times a second model, and why its random weights time like trained ones."""
    if loaded == timed and loaded_params == timed_params:
        return tr("The loaded model, **{loaded}** ({params:.0f}M parameters), is already full-size: every measurement "
                  "below is made on it.", loaded=loaded, params=loaded_params / 1e6)
    return tr("Two models from here on. **{loaded}** ({loaded_params:.1f}M parameters) writes the text. For the "
              "**time**, the notebook also loads **{timed}**'s real shape with random weights ({timed_params:.0f}M "
              "parameters). A forward does the same multiplications on the same number of bytes whatever values the "
              "weights hold, so random weights take the same time as trained ones (only the text they write is "
              "noise). A small model hides the lesson: little of its step is spent streaming the weights of its "
              "blocks, which is most of a real model's step (section 6 profiles both).",
              loaded=loaded, loaded_params=loaded_params / 1e6, timed=timed, timed_params=timed_params / 1e6)


def intensity(decode_intensity: float, prefill_intensity: float, prompt_len: int, bytes_per_element: int,
              head_share: float) -> str:
    """The counted arithmetic intensity of one decode step against a prefill of ``prompt_len`` tokens."""
    return tr("A decode step does about **{decode:.2f} FLOP per byte**: each weight ({nbytes} bytes) is used for one "
              "multiply-add. Prefill of {n} tokens does **{prefill:.1f} FLOP/B**, {x:.0f}x more, because each weight "
              "read is reused for every prompt token. (The LM head is {head:.0%} of one token's FLOPs in this model; "
              "counting it for every prompt position would overstate prefill's work.)",
              decode=decode_intensity, nbytes=bytes_per_element, n=prompt_len, prefill=prefill_intensity,
              x=prefill_intensity / decode_intensity, head=head_share)


def _runs(machine: MachineProfile) -> str:
    """How many runs the ceilings are the best of, and how far they spread (empty for a single run)."""
    if machine.runs <= 1:
        return ""
    spread = machine.spread
    fields = {"runs": machine.runs, "bw": spread["bandwidth"], "mm": spread["matmul"]}
    if max(spread.values()) > 0.2:
        return tr(" (best of {runs} runs, which differed by up to {bw:.0%} and {mm:.0%}; a spread that large means "
                  "other programs were using the machine, so read every time below as rough)", **fields)
    return tr(" (best of {runs} runs, which differed by up to {bw:.0%} and {mm:.0%})", **fields)


def ceilings(machine: MachineProfile, decode_intensity: float, prefill_intensity: float, prompt_len: int) -> str:
    """This machine's two ceilings, their spread, and which side of the ridge each job lies on."""
    text = tr("This {device} moves about **{gbs:.1f} GB/s** and multiplies at about **{gflops:.1f} GFLOP/s** "
              "({dtype}){runs}. Their ratio, the *ridge point*, is **{ridge:.1f} FLOP/B**: a forward that does fewer "
              "FLOPs per byte than that cannot keep the arithmetic busy, so memory sets its floor. ",
              device=machine.device, gbs=machine.bytes_per_s / 1e9, gflops=machine.flops_per_s / 1e9,
              dtype=machine.dtype, runs=_runs(machine), ridge=machine.ridge)
    text += (tr("Decode ({x:.2f} FLOP/B) is below the ridge; ", x=decode_intensity)
             if decode_intensity < machine.ridge else tr("Decode ({x:.2f} FLOP/B) is above the ridge; ",
                                                         x=decode_intensity))
    text += (tr("prefill of {n} tokens ({x:.1f} FLOP/B) is above it. ", n=prompt_len, x=prefill_intensity)
             if prefill_intensity > machine.ridge else
             tr("prefill of {n} tokens ({x:.1f} FLOP/B) is below it. ", n=prompt_len, x=prefill_intensity))
    return text + tr("Every floor in this notebook uses these two numbers, measured once on this machine and kept "
                     "(`machine_profile(refresh=True)` measures them again).")


FLAT_FALL = 0.15  # "stopped falling": per-token time fell less than this share per doubling of the prompt


def flattening_length(lengths, medians, fall: float = FLAT_FALL) -> int | None:
    """The first timed prompt length past which prefill's time per token fell less than ``fall`` per doubling.

    Between two timed lengths ``n0 < n1`` the fall per doubling is ``1 - (p1 / p0) ** (1 / log2(n1 / n0))``
    (``p``: median seconds per prompt token), so sweeps with uneven steps compare alike. ``None``: it still
    fell faster than that between the two longest lengths timed (or fewer than two lengths).
    """
    per = [t / n for n, t in zip(lengths, medians)]
    for (n0, p0), (n1, p1) in zip(zip(lengths, per), zip(lengths[1:], per[1:])):
        if 1 - (p1 / p0) ** (1 / math.log2(n1 / n0)) < fall:
            return n0
    return None


def prefill_knee(lengths, medians, knee: int | None, model: str) -> str:
    """Time per prompt token against prompt length, the length where the cost model turns prefill compute-bound,
    and the length where the measured time per token stopped falling (``flattening_length``).

    ``knee``: the shortest prompt whose prefill the cost model puts on the compute side of the roofline
    on this machine (``measure.compute_bound_from``), or None if none up to the context window.
    """
    (n0, n1), (t0, t1) = (lengths[0], lengths[-1]), (medians[0], medians[-1])
    per0, per1 = t0 / n0, t1 / n1
    text = tr("On {model}, going from {n0} to {n1} prompt tokens ({nx:.0f}x the tokens), prefill took **{tx:.1f}x** "
              "as long ({t0} -> {t1}). Per prompt token that is {per0} at {n0} tokens and {per1} at {n1}: ",
              model=model, n0=n0, n1=n1, nx=n1 / n0, tx=t1 / t0, t0=ms(t0), t1=ms(t1), per0=ms(per0),
              per1=ms(per1))
    text += (tr("reading tokens together is cheaper per token, because the weights are read once and reused for every "
                "token of the prompt. ") if per1 < per0 else
             tr("NOT cheaper per token on this run (look at the spread band: other work on the machine may have "
                "disturbed it). "))
    if knee is None:
        return text + tr("On this machine no prompt that fits the context window does enough arithmetic per byte to "
                         "reach the ridge: prefill here stays memory-bound, it never turns compute-bound.")
    text += tr("The cost model, with this machine's two ceilings, puts the turn at **{knee} prompt tokens**: prefill "
               "of fewer tokens is memory-bound here, of {knee} or more compute-bound. ", knee=knee)
    if knee > n1:
        return text + tr("That is beyond the lengths timed here.")
    flat = flattening_length(lengths, medians)
    if flat is None:
        return text + tr("The measured time per token had not stopped falling by {n1} tokens, the longest prompt "
                         "timed (it still fell more than {fall:.0%} per doubling): ", n1=n1,
                         fall=FLAT_FALL) + _few_rows()
    text += tr("The measured time per token stopped falling (less than {fall:.0%} per doubling of the prompt) from "
               "**{flat} prompt tokens** on. ", fall=FLAT_FALL, flat=flat)
    if flat <= 2 * knee:
        return text + tr("That agrees with the cost model: past the turn each extra token costs its own arithmetic, "
                         "so the time per token no longer falls much.")
    return text + tr("That is later than the cost model's {knee}: ", knee=knee) + _few_rows()


def _few_rows() -> str:
    """Why prefill keeps getting cheaper per token past the cost model's turn (the roofline of section 6 shows it)."""
    return tr("the cost model assumes every matrix product runs at the matmul peak, measured on a large square "
              "product, but products with only a few rows (a short prompt's) run well below that peak here. "
              "Longer prompts keep the matrix kernels busier, so each token keeps getting cheaper past the turn; on "
              "the roofline of section 6 the shorter prompts' points sit far below the flat roof.")


def decode_floor(times_floor: float, floor_s: float, compute_floor_s: float, step_s: float, weight_mb: float,
                 model: str, small: tuple[str, float] | None = None) -> str:
    """How close a batch-1 decode step came to its bandwidth floor, and how far above its compute floor.

    ``small``: (name, times its floor) of the loaded small model, when it is not the timed one.
    """
    step = ""
    if small is not None:
        name, x = small
        step = (tr("The loaded model, {name}, sat at {x:.1f}x its own floor: most of its step is not spent reading "
                   "weights (the profile below shows where it goes), which is why the lesson is timed on the full "
                   "shape. ", name=name, x=x) if x > 1.5 * times_floor else
                tr("The loaded model, {name}, sat at {x:.1f}x its own floor: about as near as the full shape. ",
                   name=name, x=x))
    head = tr("On {model} a decode step took {step}: **{times:.1f}x** its bandwidth floor ({floor}, the time to read "
              "{mb:.0f} MB of weights once) and **{above:.0f}x** its compute floor ({compute}). ", model=model,
              step=ms(step_s), times=times_floor, floor=ms(floor_s), mb=weight_mb, above=step_s / compute_floor_s,
              compute=ms(compute_floor_s))
    if times_floor < 2.5:
        return head + tr("It sits near the memory floor and far from the compute floor: decode is limited by reading "
                         "the weights, as the articles say. The profile below measures what the rest of the step "
                         "is. ") + step
    return head + tr("On this machine decode did NOT come near its memory floor. The bandwidth still sets the floor "
                     "(it is the larger of the two), but something else took most of the time: the profile below "
                     "measures what. ") + step


def decode_gap(groups: dict[str, float], step_s: float, floor_s: float, weight_bytes: float, model: str,
               small: tuple[str, dict[str, float], float] | None = None) -> str:
    """Where one decode step's time went, measured by the profiler (``measure.profile_step`` groups).

    ``small``: (name, groups, step seconds) of the loaded small model's profile, when it is not the timed one.
    """
    tail = ""
    if small is not None:
        name, sgroups, sstep = small
        share = sgroups.get("Python & dispatch", 0.0) / sstep
        tail = (tr(" For {name}, Python and dispatch took **{share:.0%}** of its {step} step: with so few bytes per "
                   "operator, the fixed cost of running each operator weighs more.", name=name, share=share,
                   step=ms(sstep))
                if share > python_share(groups, step_s) else
                tr(" For {name}, Python and dispatch took **{share:.0%}** of its {step} step.", name=name, share=share,
                   step=ms(sstep)))
    python = groups.get("Python & dispatch", 0.0)
    # shares of the larger of the wall time and the profiler's sum (on a busy machine the profiler can see more)
    total = max(step_s, sum(groups.values()))
    kernels = max(total - python, 1e-12)
    matmul = groups.get("matmuls", 0.0)
    stream = weight_bytes / matmul if matmul > 0 else 0.0
    text = tr("The profiler split one decode step of {model} ({step}) into operator time and the rest: **{ops:.0%}** "
              "inside PyTorch's operators (matrix products alone {mm}, {mm_share:.0%}) and **{py:.0%}** in Python and "
              "dispatch between them. ", model=model, step=ms(step_s), ops=kernels / total, mm=ms(matmul),
              mm_share=matmul / total, py=python / total)
    if stream:
        text += tr("Reading the weights in the matrix products' time is {gbs:.1f} GB/s. ", gbs=stream / 1e9)
    if python < 0.25 * total:
        ops = {k: v for k, v in groups.items() if k != "Python & dispatch"}
        top = max(ops, key=ops.get) if ops else "matmuls"
        if top == "matmuls":
            return text + tr("So the distance from the floor ({x:.1f}x) is mostly the matrix products streaming the "
                             "weights slower than a plain copy does, not Python overhead.", x=step_s / floor_s) + tail
        return text + tr("So the distance from the floor ({x:.1f}x) is spent inside operators, not in Python: the "
                         "largest group was {top} ({share:.0%}), which reads few bytes but cost more here than the "
                         "matrix products that read nearly all of them (on a busy machine, threads waiting for a core "
                         "count as operator time too).", x=step_s / floor_s, top=group_label(top),
                         share=ops[top] / total) + tail
    return text + tr("Here Python and dispatch are a large share: {python} of every step goes to running the operators "
                     "one by one, not to moving bytes. That is what the fast path of notebook 08 removes.",
                     python=ms(python)) + tail


def python_share(groups: dict[str, float], step_s: float) -> float:
    """The share of a profiled step spent in Python and dispatch (0 to 1)."""
    return groups.get("Python & dispatch", 0.0) / step_s


def context_effect(contexts, medians, floors, kv_bytes_last: float, weight_bytes: float, prefill_growth: float) -> str:
    """What a longer context did to one decode step's time, against what it did to prefill."""
    (c0, c1), (d0, d1), (f0, f1) = (contexts[0], contexts[-1]), (medians[0], medians[-1]), (floors[0], floors[-1])
    text = tr("With {c0} cached positions a step took {d0}; with {c1}, {d1} ({dx:.2f}x). The floor moved from {f0} to "
              "{f1} ({fx:.2f}x): the KV cache read ({kv:.1f} MB at {c1} tokens) is small next to the {w:.0f} MB of "
              "weights every step must read. ", c0=c0, d0=ms(d0), c1=c1, d1=ms(d1), dx=d1 / d0, f0=ms(f0),
              f1=ms(f1), fx=f1 / f0, kv=kv_bytes_last / 1e6, w=weight_bytes / 1e6)
    if d1 / d0 < 1.5:
        return text + tr("Compare with prefill, whose time changed {x:.1f}x over its sweep.", x=prefill_growth)
    return text + tr("The measured step grew more than its floor: something in the step costs more than its bytes "
                     "predict as the context grows. A hypothesis, not measured here: attention over a long cache runs "
                     "below streaming speed on this machine. Profiling one step at each context "
                     "(`measure.profile_step`) would show which operators grew.")


CHEAP_X = 1.5  # a batch whose step grew less than this (and never stayed at 2x) was nearly free


def batch(b_max: int, grow: float, gain: float, turn: int | None, predicted_turn: int | None,
          times: dict[int, float] | None = None) -> str:
    """What decoding ``b_max`` sequences at once did to the step time and to tokens per second. ``times`` (batch ->
    median step seconds, batch 1 among them): a bigger batch whose step was at least 10% faster than batch 1's is
    named, with why that can happen."""
    text = tr("From batch 1 to {b} ({b}x the tokens per step) the step time grew **{grow:.1f}x** and tokens per second "
              "grew **{gain:.1f}x**. ", b=b_max, grow=grow, gain=gain)
    faster = min(((t, b) for b, t in (times or {}).items() if b > 1), default=None)
    if faster is not None and 1 in times and faster[0] < 0.9 * times[1]:
        text += tr("Batch {b}'s step ({fast:.1f} ms) was even faster than batch 1's ({one:.1f} ms): more work in less "
                   "time is the kernels, not the arithmetic. The matrix products for a single row can read the "
                   "weights more slowly than those for a few rows; the fast path pads a single row to the row count "
                   "it measured fastest on this machine (notebook 08, section 5), which should close most of that "
                   "gap, so a dip this large means that measurement and this sweep disagreed. If it does not come "
                   "back when you re-run the cell, it was a disturbance. ", b=faster[1],
                   fast=faster[0] * 1e3, one=times[1] * 1e3)
    if turn:
        text += tr("From batch **{turn}** on, every step took at least twice the batch-1 time: from there, more "
                   "sequences cost real time. ", turn=turn)
    elif grow < CHEAP_X:
        text += tr("The step time stayed under {x}x the batch-1 time: batching was nearly free up to {b}. ", x=CHEAP_X,
                   b=b_max)
    else:  # the step grew a lot without staying at 2x: cheap per token, not free
        text += tr("The step time never stayed at twice the batch-1 time, yet it grew {grow:.1f}x: batching was cheap "
                   "per token up to {b}, not free. ", grow=grow, b=b_max)
    if predicted_turn is None:
        return text + tr("The cost model finds no batch size that turns this step compute-bound on this machine.")
    if predicted_turn > b_max:
        return text + tr("The cost model puts the turn to compute-bound (FLOPs / peak overtakes bytes / bandwidth) at "
                         "batch **{turn}** on this machine, beyond this sweep.", turn=predicted_turn)
    return text + tr("The cost model puts the turn to compute-bound (FLOPs / peak overtakes bytes / bandwidth) at "
                     "batch **{turn}** on this machine.", turn=predicted_turn)


DIP = 0.10  # a step at least this much faster than a smaller batch's is a dip, not noise


def batch_curve(batches, step_s) -> str:
    """Name the fastest batch and the largest dip when a batch sweep's step time did not grow with the batch.

    ``batches``: the batch sizes, ascending; ``step_s``: median seconds per step at each (each user's TPOT).
    Empty when every step took at least ``1 - DIP`` of the step before it (the curve grew, within noise).
    Notebooks 04, 07 and 08 read their batch sweeps with it.
    """
    drops = [(1 - t1 / t0, b0, b1) for b0, b1, t0, t1 in zip(batches, batches[1:], step_s, step_s[1:])]
    drop, b0, b1 = max(drops, default=(0.0, None, None))
    if drop < DIP:
        return ""
    best = min(range(len(batches)), key=lambda i: step_s[i])
    text = tr("The curve is not monotone: the step got **{drop:.0%} faster** from batch {b0} to batch {b1}. ",
              drop=drop, b0=b0, b1=b1)
    if best > 0:
        text += tr("Each user's step was fastest at **batch {b}** ({t}, {x:.2f}x batch {first}'s {t0}): there more "
                   "users made every user faster. ", b=batches[best], t=ms(step_s[best]),
                   x=step_s[best] / step_s[0], first=batches[0], t0=ms(step_s[0]))
    else:
        text += tr("The smallest batch was still the fastest ({t}), so the dip is a slow point before it, not a "
                   "gain. ", t=ms(step_s[0]))
    return text + tr("More work in less time is the matrix kernels, not the arithmetic: those for a few rows can "
                     "stream the weights faster than those for one. The fast path pads a single row to the row count "
                     "each product streams fastest at on this machine (notebook 08, section 5, times each product at "
                     "batch 1 and 4), so a dip left after that is that measurement and this sweep disagreeing. A dip "
                     "that does not come back when you re-run the cell was a disturbance.")


def tpot_verdict(v: TpotVerdict) -> str:
    """The articles' disagreement about TPOT, settled by three measurements (see ``TpotVerdict``)."""
    table = "\n".join([
        tr("| measurement | result |"), "|---|---|",
        tr("| batch x{b} (x{b} the FLOPs, about the same bytes) | step time **x{x:.1f}** |", b=v.batch,
           x=v.batch_time_x),
        tr("| x{bytes_x:.2f} the bytes per step ({label}) | TPOT **x{x:.2f}** |", bytes_x=v.bytes_x,
           label=v.bytes_label, x=v.bytes_time_x),
        tr("| {label} | **{bw:.1f}x** the bandwidth floor, **{compute:.0f}x** the compute floor |",
           label=v.fast_label, bw=v.fast_s / v.bandwidth_floor_s, compute=v.fast_s / v.compute_floor_s),
    ]) + "\n\n"  # a blank line ends the table
    votes = [v.batch_time_x < v.batch / 4, v.bytes_time_x < 0.85, v.fast_s / v.bandwidth_floor_s < 3]
    if all(votes):
        verdict = tr("**Verdict: memory, as article 000 says.** {b} times the arithmetic cost only x{x:.1f} the step "
                     "time, fewer bytes per weight made each token faster, and the fastest step sits close to the "
                     "bandwidth floor and far above the compute floor. Article 004's \"TPOT mainly depends on the "
                     "GPU's compute\" does not hold for batch-1 decoding.", b=v.batch, x=v.batch_time_x)
    elif not votes[0]:
        verdict = tr("**Verdict: not memory alone on this machine.** {b} times the arithmetic cost x{x:.1f} the time, "
                     "so the step is not waiting on bytes only; this machine's arithmetic is slow next to its "
                     "bandwidth (a low ridge point) or other work shared it.", b=v.batch, x=v.batch_time_x)
    else:
        verdict = tr("**Verdict: memory sets the floor, but not every test agrees here.** ")
        if not votes[1]:
            verdict += tr("Fewer bytes per weight did not make decoding clearly faster: this machine's kernels for "
                          "{label} are slower per byte than its float32 ones, so the test changed more than the "
                          "bytes. ", label=v.bytes_label)
        if not votes[2]:
            verdict += tr("Even the fastest step took {x:.1f}x the bandwidth floor: something besides reading the "
                          "weights still takes time. Section 6 profiles the engine's step; notebook 08 profiles the "
                          "fast one and measures what the rest is.", x=v.fast_s / v.bandwidth_floor_s)
    note = "" if v.compiled else tr("(Timed on the eager fast path: compiling the step takes too long for the test "
                                    "suite; set `INFERLAB_FULL_RUN=1` for the compiled step.)")
    return table + verdict + "\n\n" + note


def myth(from_compute_s: float, from_bandwidth_s: float, measured_s: float) -> str:
    """The two articles' predictions of one batch-1 decode step against the measured step."""
    ratio = measured_s / from_bandwidth_s
    text = tr("Compute alone predicts {compute} per token, bandwidth alone {bandwidth} ({x:.1f}x longer): for a "
              "batch-1 step moving the weights is the larger floor, so of the two articles, article 000 has the floor "
              "right. The measured step took {measured}, **{ratio:.1f}x** the bandwidth prediction: ",
              compute=ms(from_compute_s), bandwidth=ms(from_bandwidth_s), x=from_bandwidth_s / from_compute_s,
              measured=ms(measured_s), ratio=ratio)
    return text + (tr("decode here is bandwidth-bound.") if ratio < 2.5 else
                   tr("neither ceiling explains all of it; the profile in section 6 measured where the rest went."))
