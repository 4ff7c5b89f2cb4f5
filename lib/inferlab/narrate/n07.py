"""Notebook 07 (TTFT and TPOT): each finding as Markdown, from the numbers the notebook measured.

Every function returns the text for the outcome the numbers show, including the outcome the articles
do not predict. Times are seconds, sizes bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..measure.latency import HardwareFloor, Measurement


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def cold_call(first: float, later: float, n_later: int) -> str:
    """The cold first call's TTFT against the median of the calls after it."""
    verdict = ("slower: it paid one-off costs (memory allocation, kernel selection, lazy initialisation)"
               if first > 1.2 * later else "about as fast: on this machine the one-off costs are small "
               "(on a GPU the first call is often many times slower)" if first > 0.8 * later else
               "faster: other programs slowed the later calls more than one-off costs slowed the first")
    return (f"The cold call's TTFT was **{_ms(first)}**; the median of the next {n_later} calls was "
            f"**{_ms(later)}**, so the first call was {verdict}. Every measurement below therefore runs untimed "
            "warm-up calls first, then several timed repeats, and reports the spread.")


def ttft_parts(ttft: float, prefill_s: float, tokenize_s: float, n_tokens: int, tpot: float, e2e: float) -> str:
    """What TTFT is made of, and the TPOT and E2E of the same run."""
    return (f"TTFT was **{_ms(ttft)}**, of which the prefill pass took {prefill_s / ttft:.0%} and tokenization "
            f"{tokenize_s / ttft:.1%}; the rest is sampling and bookkeeping. After it, {n_tokens - 1} decode steps "
            f"arrived on average **{_ms(tpot)}** apart (TPOT), so the whole answer took E2E = **{_ms(e2e)}**.")


def llmperf(per_token: float, tpot: float) -> str:
    """LLMPerf's E2E / N against TPOT on the measured answer."""
    ratio = per_token / tpot
    return (f"On the measured answer, LLMPerf's E2E / N is **{_ms(per_token)}** against a TPOT of **{_ms(tpot)}** "
            f"({ratio:.2f}x): it spreads the TTFT over all N tokens, so it is {'larger' if ratio > 1 else 'smaller'} "
            f"whenever TTFT is {'longer' if ratio > 1 else 'shorter'} than TPOT. When you read a benchmark, check "
            "which of the two it reports.")


def tail(runs: int, p99: float, slowest: float, gaps: int) -> str:
    """Why p99 of a handful of runs is just the slowest run."""
    return (f"With only {runs} runs, p99 is essentially the slowest run ({_ms(p99)} against a maximum of "
            f"{_ms(slowest)} for TTFT): a meaningful p99 needs hundreds of requests. The ITL row pools every gap "
            f"of every run ({gaps} gaps), so its tail shows single slow steps that TPOT, an average, hides.")


def ttft_growth(sweeps: Mapping[str, tuple[Sequence[int], Sequence[float]]]) -> str:
    """TTFT against prompt length, per model: (prompt lengths, median TTFTs)."""
    parts = []
    for name, (xs, medians) in sweeps.items():
        (n0, n1), (t0, t1) = (xs[0], xs[-1]), (medians[0], medians[-1])
        growth = "less than" if t1 / t0 < n1 / n0 else "at least as much as"
        parts.append(f"on **{name}**, from {n0} to {n1} prompt tokens ({n1 / n0:.0f}x), the median TTFT went from "
                     f"{_ms(t0)} to {_ms(t1)} (**{t1 / t0:.1f}x**), {growth} the prompt")
    text = "; ".join(parts)
    return (text[0].upper() + text[1:] + ". Short prompts pay mostly fixed costs (reading every weight once, the "
            "LM head, Python); the cost of each prompt token shows once the prompt is long. A long document pasted "
            "into a chat is therefore felt as TTFT.")


def context_growth(first: float, last: float, x0: int, x1: int, weight_bytes: float, kv_per_token: float,
                   model: str) -> str:
    """Decode-step time as the context grows, against the growth of the bytes each step reads."""
    grown = kv_per_token * (x1 - x0)
    expected = grown / (weight_bytes + kv_per_token * x0)
    return (f"On {model}, from {x0} to {x1} tokens of context the median step went from **{_ms(first)}** to "
            f"**{_ms(last)}** ({last / first - 1:+.0%}). Each step reads all the weights "
            f"({weight_bytes / 1e6:.0f} MB) plus the cache, which grew by only {grown / 1e6:.1f} MB: the bytes "
            f"read grew {expected:+.1%}, and a memory-bound step should slow down by about that much (a larger "
            "change is noise, or work the byte count ignores). The context matters once the cache rivals the "
            "weights: long contexts, big batches.")


def dtypes(tpots: Mapping[str, float], weight_bytes: Mapping[str, float], device: str, model: str) -> str:
    """TPOT per weight format against the bytes each format reads per step (``float32`` is the reference)."""
    if "float32" not in tpots or len(tpots) < 2:
        return f"Only {', '.join(tpots)} ran on this {device}: nothing to compare."
    ref_t, ref_b = tpots["float32"], weight_bytes["float32"]
    rows = ", ".join(f"{k} {t / ref_t:.2f}x the time for {weight_bytes[k] / ref_b:.2f}x the bytes"
                     for k, t in tpots.items() if k != "float32")
    best = min(tpots, key=tpots.get)
    text = f"On {model} on this {device.upper()}, against float32: {rows}. "
    if best != "float32" and tpots[best] < 0.8 * ref_t:
        return text + (f"**{best}** was fastest. A decode step's time follows the bytes it reads: half the bytes per "
                       "weight, about half the time to stream them, as a memory-bound step should.")
    return text + ("Half the bytes did NOT make decode faster here: this device has no fast kernels for the "
                   "16-bit formats, so it converts each weight back to float32 as it multiplies, and that work "
                   "costs more than the bytes it saves. On a GPU (or a CPU with native 16-bit arithmetic) the "
                   "same step takes about half the time, because there the step's time is its bytes.")


def batching(b0: int, b1: int, tpot0: float, tpot1: float, rate0: float, rate1: float, prefill_x: float,
             model: str) -> str:
    """Each user's TPOT against the machine's total tokens per second, from batch ``b0`` to ``b1``."""
    tpot_x, thr_x = tpot1 / tpot0, rate1 / rate0
    verdict = ("batching bought throughput at a smaller cost in each user's speed" if thr_x > tpot_x
               else "here each user slowed down as much as the machine sped up: batching did not pay")
    return (f"On {model}, from batch {b0} to {b1}, total throughput changed **{thr_x:.1f}x** ({rate0:.0f} -> "
            f"{rate1:.0f} tokens/s) while each user's TPOT changed **{tpot_x:.1f}x** ({_ms(tpot0)} -> {_ms(tpot1)}): "
            f"{verdict}. Prefilling the whole batch (every user's TTFT) took {prefill_x:.1f}x as long as one prompt.")


def model_sizes(sizes: Mapping[str, Measurement], params: Mapping[str, int], floors: Mapping[str, float]) -> str:
    """Measured TTFT and TPOT per model size, against each one's memory floor (weights + cache / bandwidth)."""
    names = list(sizes)
    lines = [f"**{k}** ({params[k] / 1e6:.0f}M parameters): TTFT {_ms(m.ttft.median)}, TPOT {_ms(m.tpot.median)}, "
             f"{m.tpot.median / floors[k]:.1f}x its memory floor" for k, m in sizes.items()]
    small, big = names[0], names[-1]
    grow_p = params[big] / params[small]
    grow_t = sizes[big].tpot.median / sizes[small].tpot.median
    text = "Measured here, all of them: " + "; ".join(lines) + ". "
    if grow_t > 0.5 * grow_p:
        return text + (f"From {small} to {big}, {grow_p:.1f}x the parameters cost {grow_t:.1f}x the TPOT: a bigger "
                       "model streams more bytes every step, and the step time follows.")
    return text + (f"From {small} to {big}, {grow_p:.1f}x the parameters cost only {grow_t:.1f}x the TPOT: the smaller "
                   "model's step is dominated by costs that do not grow with its layers (its vocabulary, fixed costs "
                   "per step), so size shows fully only between models whose weights dominate.")


def step_profile(groups: Mapping[str, float], step_s: float, model: str) -> str:
    """Where one decode step's time went, from the profiler (``measure.profile_step``): the largest group decides."""
    total = sum(groups.values()) or 1.0
    share = {k: v / total for k, v in groups.items()}
    top = max(share, key=share.get)
    shown = ", ".join(f"{k} **{v:.0%}**" for k, v in sorted(share.items(), key=lambda kv: -kv[1]) if v >= 0.005)
    text = f"The profiler on one {model} decode step ({_ms(step_s)}), as shares of the profiled time: {shown}. "
    if top == "matmuls":
        return text + ("Most of the step is the matrix products reading the weights, so the distance from the "
                       "floor is mostly how fast those kernels stream memory, not per-operation overhead.")
    if top == "Python & dispatch":
        return text + ("Here Python and dispatch (launching each operation), not the weights, is the largest part: "
                       "this is the regime where removing Python from the loop (notebook 08: compiled steps, CUDA "
                       "graphs) pays most.")
    return text + (f"The largest part was {top}, not the matrix products that read the weights: on this run the step "
                   "is not simply its bytes over the bandwidth. (A profile is a measurement too: on a busy machine "
                   "it is disturbed; run the cell again when the machine is quiet.)")


def hardware_table(rows: Sequence[HardwareFloor]) -> str:
    """A Markdown table of published bandwidths and the decode floors they predict (not measured)."""
    models = list(rows[0].floors)
    head = "| device | memory bandwidth (published) | " + " | ".join(f"{k}: floor per token" for k in models)
    lines = [head + " | source |", "|---|---|" + "---|" * len(models) + "---|"]
    for r in rows:
        bw = r.spec.bytes_per_s
        cells = " | ".join(_ms(r.floors[k]) + f" ({1 / r.floors[k]:,.0f} tokens/s)" for k in models)
        lines.append(f"| {r.spec.name} | {bw / 1e9:,.0f} GB/s | {cells} | {r.spec.source} |")
    sizes = ", ".join(f"{k} {rows[0].step_bytes[k] / 1e9:.2f} GB" for k in models)
    return ("**Computed from published specifications, not measured.** Each floor is the bytes one decode step "
            f"reads at batch 1 ({sizes}: weights plus a short KV cache) divided by the published memory bandwidth: "
            "no real step is faster, and real steps land above it.\n\n" + "\n".join(lines))


def hardware_point(rows: Sequence[HardwareFloor], big: str) -> str:
    """What the hardware table says about article 004's 'TPOT depends on the GPU's compute'."""
    slow, fast = rows[0], rows[-1]
    return (f"From {slow.spec.name} to {fast.spec.name} the published bandwidth grows "
            f"{fast.spec.bytes_per_s / slow.spec.bytes_per_s:.0f}x, and {big}'s floor per token falls from "
            f"{_ms(slow.floors[big])} to {_ms(fast.floors[big])}. Article 004's author saw a V100 -> H100 upgrade "
            "speed up inference 'noticeably': for decode at batch 1, that is mostly the memory bandwidth "
            f"(900 -> 3350 GB/s, {3350 / 900:.1f}x), not the compute the article credits.")


def thinking(budget: int, wait: float, no_think: float, tpot: float) -> str:
    """The wait for the first visible token with ``budget`` hidden tokens, against no thinking."""
    per_hidden = (wait - no_think) / budget
    return (f"With {budget} hidden tokens the user saw the first answer token after **{_ms(wait)}**, "
            f"{wait / no_think:.1f}x the {_ms(no_think)} without thinking: about {_ms(per_hidden)} per hidden token, "
            f"against a TPOT of {_ms(tpot)} in section 4. Each hidden token is a decode step. Real reasoning models "
            "think for hundreds or thousands of tokens, so the wait for their first visible token is seconds to "
            "minutes, while the answer then streams at the usual TPOT.\n\n"
            "**What this cannot show: quality.** Article 004 says thinking buys better answers, especially for "
            "mathematics and programming (*test-time compute*: spending inference time, not training, on a better "
            "answer). Our model was not trained to reason: its hidden tokens are ordinary text and do not improve "
            "its answer. Only the cost in time is real here; the gain in quality needs a model trained to think.")
