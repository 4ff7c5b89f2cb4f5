"""Notebook 04 (prefill and decode): each finding as Markdown, from the numbers the notebook measured.

Every function returns the text for the outcome the numbers show, including the outcome the articles
do not predict. Times are seconds, sizes bytes, intensities FLOP/byte.
"""

from __future__ import annotations

from ..cost import MachineProfile
from ..measure.roofline import TpotVerdict


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def two_models(loaded: str, loaded_params: int, timed: str, timed_params: int) -> str:
    """Why the notebook times a second model, and why its random weights time like trained ones."""
    if loaded == timed and loaded_params == timed_params:
        return (f"The loaded model, **{loaded}** ({loaded_params / 1e6:.0f}M parameters), is already full-size: "
                "every measurement below is made on it.")
    return (f"Two models from here on. **{loaded}** ({loaded_params / 1e6:.1f}M parameters) writes the text. "
            f"For the **time**, the notebook also loads **{timed}**'s real shape with random weights "
            f"({timed_params / 1e6:.0f}M parameters). A forward does the same multiplications on the same "
            "number of bytes whatever values the weights hold, so random weights take the same time as trained "
            "ones (only the text they write is noise). A small model hides the lesson: little of its step is spent "
            "streaming the weights of its blocks, which is most of a real model's step (section 6 profiles both).")


def intensity(decode_intensity: float, prefill_intensity: float, prompt_len: int, bytes_per_element: int,
              head_share: float) -> str:
    """The counted arithmetic intensity of one decode step against a prefill of ``prompt_len`` tokens."""
    return (f"A decode step does about **{decode_intensity:.2f} FLOP per byte**: each weight "
            f"({bytes_per_element} bytes) is used for one multiply-add. Prefill of {prompt_len} tokens does "
            f"**{prefill_intensity:.1f} FLOP/B**, {prefill_intensity / decode_intensity:.0f}x more, because each "
            "weight read is reused for every prompt token. (The LM head is "
            f"{head_share:.0%} of one token's FLOPs in this model; counting it for every prompt position would "
            "overstate prefill's work.)")


def ceilings(machine: MachineProfile, decode_intensity: float, prefill_intensity: float, prompt_len: int) -> str:
    """This machine's two ceilings, their spread, and which side of the ridge each job lies on."""
    spread = machine.spread
    worst = max(spread.values())
    runs = (f" (best of {machine.runs} runs, which differed by up to {spread['bandwidth']:.0%} and "
            f"{spread['matmul']:.0%}" + ("; a spread that large means other programs were using the machine, so "
                                         "read every time below as rough)" if worst > 0.2 else ")")
            if machine.runs > 1 else "")
    side = "below" if decode_intensity < machine.ridge else "above"
    pside = "above" if prefill_intensity > machine.ridge else "below"
    return (f"This {machine.device} moves about **{machine.bytes_per_s / 1e9:.1f} GB/s** and multiplies at about "
            f"**{machine.flops_per_s / 1e9:.1f} GFLOP/s** ({machine.dtype}){runs}. Their ratio, the *ridge point*, "
            f"is **{machine.ridge:.1f} FLOP/B**: a forward that does fewer FLOPs per byte than that cannot keep the "
            f"arithmetic busy, so memory sets its floor. Decode ({decode_intensity:.2f} FLOP/B) is {side} the ridge; "
            f"prefill of {prompt_len} tokens ({prefill_intensity:.1f} FLOP/B) is {pside} it. Every floor in this "
            "notebook uses these two numbers, measured once for the session.")


def prefill_knee(lengths, medians, knee: int | None, model: str) -> str:
    """Time per prompt token against prompt length, and the length where prefill turns compute-bound.

    ``knee``: the shortest prompt whose prefill the cost model puts on the compute side of the roofline
    on this machine (``measure.compute_bound_from``), or None if none up to the context window.
    """
    (n0, n1), (t0, t1) = (lengths[0], lengths[-1]), (medians[0], medians[-1])
    per0, per1 = t0 / n0, t1 / n1
    text = (f"On {model}, going from {n0} to {n1} prompt tokens ({n1 / n0:.0f}x the tokens), prefill took "
            f"**{t1 / t0:.1f}x** as long ({_ms(t0)} -> {_ms(t1)}). Per prompt token that is {_ms(per0)} at {n0} tokens "
            f"and {_ms(per1)} at {n1}: ")
    text += ("reading tokens together is cheaper per token, because the weights are read once and reused for every "
             "token of the prompt. " if per1 < per0 else
             "NOT cheaper per token on this run (look at the spread band: other work on the machine may have "
             "disturbed it). ")
    if knee is None:
        return text + ("On this machine no prompt that fits the context window does enough arithmetic per byte "
                       "to reach the ridge: prefill here stays memory-bound, it never turns compute-bound.")
    inside = n0 <= knee <= n1
    return text + (f"The cost model, with this machine's two ceilings, puts the turn at **{knee} prompt tokens**: "
                   f"prefill of fewer tokens is memory-bound here, of {knee} or more compute-bound. "
                   + ("Past that length the time per token should stop falling much: each extra token then costs "
                      "its own arithmetic." if inside else
                      f"That is {'beyond' if knee > n1 else 'below'} the lengths timed here."))


def decode_floor(times_floor: float, floor_s: float, compute_floor_s: float, step_s: float, weight_mb: float,
                 model: str, small: tuple[str, float] | None = None) -> str:
    """How close a batch-1 decode step came to its bandwidth floor, and how far above its compute floor.

    ``small``: (name, times its floor) of the loaded small model, when it is not the timed one.
    """
    above = step_s / compute_floor_s
    if small is not None:
        name, x = small
        step = (f"The loaded model, {name}, sat at {x:.1f}x its own floor: " + (
            "most of its step is not spent reading weights (the profile below shows where it goes), which is why "
            "the lesson is timed on the full shape. " if x > 2 * times_floor else "about as near as the full shape. "))
    else:
        step = ""
    head = (f"On {model} a decode step took {_ms(step_s)}: **{times_floor:.1f}x** its bandwidth floor "
            f"({_ms(floor_s)}, the time to read {weight_mb:.0f} MB of weights once) and **{above:.0f}x** its compute "
            f"floor ({_ms(compute_floor_s)}). ")
    if times_floor < 2.5:
        return head + ("It sits near the memory floor and far from the compute floor: decode is limited by reading "
                       "the weights, as the articles say. The profile below measures what the rest of the step "
                       "is. ") + step
    return head + ("On this machine decode did NOT come near its memory floor. The bandwidth still sets the floor "
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
        tail = (f" For {name}, Python and dispatch took **{share:.0%}** of its {_ms(sstep)} step"
                + (": with so few bytes per operator, the fixed cost of running each operator weighs more."
                   if share > python_share(groups, step_s) else "."))
    python = groups.get("Python & dispatch", 0.0)
    # shares of the larger of the wall time and the profiler's sum (on a busy machine the profiler can see more)
    total = max(step_s, sum(groups.values()))
    kernels = max(total - python, 1e-12)
    matmul = groups.get("matmuls", 0.0)
    stream = weight_bytes / matmul if matmul > 0 else 0.0
    text = (f"The profiler split one decode step of {model} ({_ms(step_s)}) into operator time and the rest: "
            f"**{kernels / total:.0%}** inside PyTorch's operators (matrix products alone {_ms(matmul)}, "
            f"{matmul / total:.0%}) and **{python / total:.0%}** in Python and dispatch between them. ")
    if stream:
        text += (f"Reading the weights in the matrix products' time is {stream / 1e9:.1f} GB/s. ")
    if python < 0.25 * total:
        ops = {k: v for k, v in groups.items() if k != "Python & dispatch"}
        top = max(ops, key=ops.get) if ops else "matmuls"
        if top == "matmuls":
            return text + (f"So the distance from the floor ({step_s / floor_s:.1f}x) is mostly the matrix products "
                           "streaming the weights slower than a plain copy does, not Python overhead.") + tail
        return text + (f"So the distance from the floor ({step_s / floor_s:.1f}x) is spent inside operators, not in "
                       f"Python: the largest group was {top} ({ops[top] / total:.0%}), which reads few bytes but "
                       "cost more here than the matrix products that read nearly all of them (on a busy machine, "
                       "threads waiting for a core count as operator time too).") + tail
    return text + (f"Here Python and dispatch are a large share: {_ms(python)} of every step goes to running the "
                   "operators one by one, not to moving bytes. That is what the fast path of notebook 08 "
                   "removes.") + tail


def python_share(groups: dict[str, float], step_s: float) -> float:
    """The share of a profiled step spent in Python and dispatch (0 to 1)."""
    return groups.get("Python & dispatch", 0.0) / step_s


def context_effect(contexts, medians, floors, kv_bytes_last: float, weight_bytes: float, prefill_growth: float) -> str:
    """What a longer context did to one decode step's time, against what it did to prefill."""
    (c0, c1), (d0, d1), (f0, f1) = (contexts[0], contexts[-1]), (medians[0], medians[-1]), (floors[0], floors[-1])
    text = (f"With {c0} cached positions a step took {_ms(d0)}; with {c1}, {_ms(d1)} ({d1 / d0:.2f}x). The floor moved "
            f"from {_ms(f0)} to {_ms(f1)} ({f1 / f0:.2f}x): the KV cache read ({kv_bytes_last / 1e6:.1f} MB at {c1} "
            f"tokens) is small next to the {weight_bytes / 1e6:.0f} MB of weights every step must read. ")
    if d1 / d0 < 1.5:
        return text + f"Compare with prefill, whose time changed {prefill_growth:.1f}x over its sweep."
    return text + ("The measured step grew more than its floor: attention over a long context costs more time than "
                   "its bytes alone predict on this machine (its operators are not pure streaming).")


def batch(b_max: int, grow: float, gain: float, turn: int | None, predicted_turn: int | None) -> str:
    """What decoding ``b_max`` sequences at once did to the step time and to tokens per second."""
    text = (f"From batch 1 to {b_max} ({b_max}x the tokens per step) the step time grew **{grow:.1f}x** and "
            f"tokens per second grew **{gain:.1f}x**. ")
    text += (f"From batch **{turn}** on, every step took at least twice the batch-1 time: from there, more sequences "
             "cost real time. " if turn else
             f"The step time never stayed at twice the batch-1 time: batching was nearly free up to {b_max}. ")
    if predicted_turn is None:
        return text + "The cost model finds no batch size that turns this step compute-bound on this machine."
    return text + (f"The cost model puts the turn to compute-bound (FLOPs / peak overtakes bytes / bandwidth) at "
                   f"batch **{predicted_turn}** on this machine"
                   + (", beyond this sweep." if predicted_turn > b_max else "."))


def tpot_verdict(v: TpotVerdict) -> str:
    """The articles' disagreement about TPOT, settled by three measurements (see ``TpotVerdict``)."""
    lines = [f"| measurement | result |\n|---|---|\n"
             f"| batch x{v.batch} (x{v.batch} the FLOPs, about the same bytes) | "
             f"step time **x{v.batch_time_x:.1f}** |\n"
             f"| x{v.bytes_x:.2f} the bytes per step ({v.bytes_label}) | TPOT **x{v.bytes_time_x:.2f}** |\n"
             f"| {v.fast_label} | **{v.fast_s / v.bandwidth_floor_s:.1f}x** the bandwidth floor, "
             f"**{v.fast_s / v.compute_floor_s:.0f}x** the compute floor |\n\n"]  # a blank line ends the table
    votes = [v.batch_time_x < v.batch / 4, v.bytes_time_x < 0.85, v.fast_s / v.bandwidth_floor_s < 3]
    if all(votes):
        lines.append(f"**Verdict: memory, as article 000 says.** {v.batch} times the arithmetic barely moved the "
                     "step, fewer bytes per weight made each token faster, and the fastest step sits close to the "
                     "bandwidth floor and far above the compute floor. Article 004's \"TPOT mainly depends on the "
                     "GPU's compute\" does not hold for batch-1 decoding.")
    elif not votes[0]:
        lines.append(f"**Verdict: not memory alone on this machine.** {v.batch} times the arithmetic cost "
                     f"x{v.batch_time_x:.1f} the time, so the step is not waiting on bytes only; this machine's "
                     "arithmetic is slow next to its bandwidth (a low ridge point) or other work shared it.")
    else:
        lines.append("**Verdict: memory sets the floor, but not every test agrees here.** "
                     + ("Fewer bytes per weight did not make decoding clearly faster: this machine's kernels for "
                        f"{v.bytes_label} are slower per byte than its float32 ones, so the test changed more than "
                        "the bytes. "
                        if not votes[1] else "")
                     + ("Even the fastest step stays far from the bandwidth floor, so fixed costs still weigh."
                        if not votes[2] else ""))
    return "".join(lines) + "\n\n" + ("" if v.compiled else "(Timed on the eager fast path: compiling the step takes "
                                      "too long for the test suite; set `INFERLAB_FULL_RUN=1` for the compiled step.)")


def myth(from_compute_s: float, from_bandwidth_s: float, measured_s: float) -> str:
    """The two articles' predictions of one batch-1 decode step against the measured step."""
    ratio = measured_s / from_bandwidth_s
    text = (f"Compute alone predicts {_ms(from_compute_s)} per token, bandwidth alone {_ms(from_bandwidth_s)} "
            f"({from_bandwidth_s / from_compute_s:.1f}x longer): for a batch-1 step moving the weights is the larger "
            f"floor, so of the two articles, article 000 has the floor right. The measured step took "
            f"{_ms(measured_s)}, **{ratio:.1f}x** the bandwidth prediction: ")
    return text + ("decode here is bandwidth-bound." if ratio < 2.5 else
                   "neither ceiling explains all of it; the profile in section 6 measured where the rest went.")
