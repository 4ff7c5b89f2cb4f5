"""Notebook 07 (TTFT and TPOT): each finding as Markdown, from the numbers the notebook measured.

Every function returns the text for the outcome the numbers show, including the outcome the articles
do not predict, in the reader's language (``inferlab.i18n.tr``). Times are seconds, sizes bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..cost import HardwareFloor
from ..i18n import by_language, tr
from ..measure.languages import PromptTTFT
from ..measure.latency import Measurement
from ..measure.profiling import group_label
from ..tokens import TextCost
from ..units import ms
from . import join
from .n04 import batch_curve


def cold_call(first: float, later: float, n_later: int) -> str:
    """The cold first call's TTFT against the median of the calls after it."""
    fields = {"first": ms(first), "n": n_later, "later": ms(later)}
    if first > 1.2 * later:
        text = tr("The cold call's TTFT was **{first}**; the median of the next {n} calls was **{later}**, so the "
                  "first call was slower: it paid one-off costs (memory allocation, kernel selection, lazy "
                  "initialisation). ", **fields)
    elif first > 0.8 * later:
        text = tr("The cold call's TTFT was **{first}**; the median of the next {n} calls was **{later}**, so the "
                  "first call was about as fast: on this machine the one-off costs are small (on a GPU the first call "
                  "is often many times slower). ", **fields)
    else:
        text = tr("The cold call's TTFT was **{first}**; the median of the next {n} calls was **{later}**, so the "
                  "first call was faster: other programs slowed the later calls more than one-off costs slowed the "
                  "first. ", **fields)
    return text + tr("Every measurement below therefore runs untimed warm-up calls first, then several timed repeats, "
                     "and reports the spread.")


def ttft_parts(ttft: float, prefill_s: float, tokenize_s: float, n_tokens: int, tpot: float, e2e: float) -> str:
    """What TTFT is made of, and the TPOT and E2E of the same run."""
    return tr("TTFT was **{ttft}**, of which the prefill pass took {prefill:.0%} and tokenization {tokenize:.1%}; the "
              "rest is sampling and bookkeeping. After it, {steps} decode steps arrived on average **{tpot}** apart "
              "(TPOT), so the whole answer took E2E = **{e2e}**.", ttft=ms(ttft), prefill=prefill_s / ttft,
              tokenize=tokenize_s / ttft, steps=n_tokens - 1, tpot=ms(tpot), e2e=ms(e2e))


def llmperf(per_token: float, tpot: float) -> str:
    """LLMPerf's E2E / N against TPOT on the measured answer."""
    fields = {"per_token": ms(per_token), "tpot": ms(tpot), "ratio": per_token / tpot}
    if per_token > tpot:
        return tr("On the measured answer, LLMPerf's E2E / N is **{per_token}** against a TPOT of **{tpot}** "
                  "({ratio:.2f}x): it spreads the TTFT over all N tokens, so it is larger whenever TTFT is longer than "
                  "TPOT. When you read a benchmark, check which of the two it reports.", **fields)
    return tr("On the measured answer, LLMPerf's E2E / N is **{per_token}** against a TPOT of **{tpot}** "
              "({ratio:.2f}x): it spreads the TTFT over all N tokens, so it is smaller whenever TTFT is shorter than "
              "TPOT. When you read a benchmark, check which of the two it reports.", **fields)


def tail(runs: int, p99: float, slowest: float, gaps: int) -> str:
    """Why p99 of a handful of runs is just the slowest run."""
    return tr("With only {runs} runs, p99 is essentially the slowest run ({p99} against a maximum of {slowest} for "
              "TTFT): a meaningful p99 needs hundreds of requests. The ITL row pools every gap of every run ({gaps} "
              "gaps), so its tail shows single slow steps that TPOT, an average, hides.", runs=runs, p99=ms(p99),
              slowest=ms(slowest), gaps=gaps)


def ttft_growth(sweeps: Mapping[str, tuple[Sequence[int], Sequence[float]]]) -> str:
    """TTFT against prompt length, per model: (prompt lengths, median TTFTs)."""
    parts = []
    for name, (xs, medians) in sweeps.items():
        (n0, n1), (t0, t1) = (xs[0], xs[-1]), (medians[0], medians[-1])
        fields = {"name": name, "n0": n0, "n1": n1, "nx": n1 / n0, "t0": ms(t0), "t1": ms(t1), "tx": t1 / t0}
        parts.append(tr("on **{name}**, from {n0} to {n1} prompt tokens ({nx:.0f}x), the median TTFT went from {t0} "
                        "to {t1} (**{tx:.1f}x**), less than the prompt", **fields) if t1 / t0 < n1 / n0 else
                     tr("on **{name}**, from {n0} to {n1} prompt tokens ({nx:.0f}x), the median TTFT went from {t0} "
                        "to {t1} (**{tx:.1f}x**), at least as much as the prompt", **fields))
    text = by_language(en="; ", zh="；").join(parts)
    return tr("{models}. Short prompts pay mostly fixed costs (reading every weight once, the LM head, Python); the "
              "cost of each prompt token shows once the prompt is long. A long document pasted into a chat is "
              "therefore felt as TTFT.", models=text[0].upper() + text[1:])


def context_growth(first: float, last: float, x0: int, x1: int, weight_bytes: float, kv_per_token: float,
                   model: str) -> str:
    """Decode-step time as the context grows, against the growth of the bytes each step reads."""
    grown = kv_per_token * (x1 - x0)
    expected = grown / (weight_bytes + kv_per_token * x0)
    return tr("On {model}, from {x0} to {x1} tokens of context the median step went from **{first}** to **{last}** "
              "({change:+.0%}). Each step reads all the weights ({weights:.0f} MB) plus the cache, which grew by only "
              "{grown:.1f} MB: the bytes read grew {expected:+.1%}, and a memory-bound step should slow down by about "
              "that much (a larger change is noise, or work the byte count ignores). The context matters once the "
              "cache rivals the weights: long contexts, big batches.", model=model, x0=x0, x1=x1, first=ms(first),
              last=ms(last), change=last / first - 1, weights=weight_bytes / 1e6, grown=grown / 1e6,
              expected=expected)


def dtypes(tpots: Mapping[str, float], weight_bytes: Mapping[str, float], device: str, model: str) -> str:
    """TPOT per weight format against the bytes each format reads per step (``float32`` is the reference)."""
    if "float32" not in tpots or len(tpots) < 2:
        return tr("Only {dtypes} ran on this {device}: nothing to compare.", dtypes=join(tpots), device=device)
    ref_t, ref_b = tpots["float32"], weight_bytes["float32"]
    rows = join(tr("{dtype} {time:.2f}x the time for {nbytes:.2f}x the bytes", dtype=k, time=t / ref_t,
                   nbytes=weight_bytes[k] / ref_b) for k, t in tpots.items() if k != "float32")
    best = min(tpots, key=tpots.get)
    text = tr("On {model} on this {device}, against float32: {rows}. ", model=model, device=device.upper(), rows=rows)
    time_x, bytes_x = tpots[best] / ref_t, weight_bytes[best] / ref_b
    if best != "float32" and time_x <= 1.25 * bytes_x:  # within a quarter of what the bytes alone predict
        return text + tr("**{best}** was fastest. A decode step's time follows the bytes it reads: half the bytes per "
                         "weight, about half the time to stream them, as a memory-bound step should.", best=best)
    if best != "float32" and time_x < 0.8:
        return text + tr("**{best}** was fastest, but its time did not fall as far as its bytes (to {nbytes:.2f}x): "
                         "the bytes explain only part of a decode step here. The rest is time that did not shrink with "
                         "the format (on a CPU, for instance, the 16-bit kernels' arithmetic and each step's fixed "
                         "overhead; not measured in this cell).",
                         best=best, nbytes=bytes_x)
    return text + tr("Half the bytes did NOT make decode clearly faster here, so on this {device} something other than "
                     "the bytes set the 16-bit step's time. A hypothesis, not measured in this cell: its matrix "
                     "kernels for 16-bit formats are slow, e.g. converting each weight to float32 as they multiply. "
                     "To test it, profile one 16-bit decode step (`measure.profile_step`) and compare its *matmuls* "
                     "with float32's. Where the hardware multiplies 16-bit numbers natively (most GPUs), the step "
                     "reads half the bytes and should take about half the time.", device=device.upper())


def batching(b0: int, b1: int, tpot0: float, tpot1: float, rate0: float, rate1: float, prefill_x: float,
             model: str, curve: tuple[Sequence[int], Sequence[float]] | None = None) -> str:
    """Each user's TPOT against the machine's total tokens per second, from batch ``b0`` to ``b1``.

    ``curve``: (batch sizes, each user's TPOT at each) of the whole sweep: a dip between the ends is named
    (``n04.batch_curve``), since the ends alone would hide it."""
    tpot_x, thr_x = tpot1 / tpot0, rate1 / rate0
    fields = {"model": model, "b0": b0, "b1": b1, "thr": thr_x, "rate0": rate0, "rate1": rate1, "tpot": tpot_x,
              "tpot0": ms(tpot0), "tpot1": ms(tpot1)}
    if thr_x > tpot_x:
        text = tr("On {model}, from batch {b0} to {b1}, total throughput changed **{thr:.1f}x** ({rate0:.0f} -> "
                  "{rate1:.0f} tokens/s) while each user's TPOT changed **{tpot:.1f}x** ({tpot0} -> {tpot1}): "
                  "batching bought throughput at a smaller cost in each user's speed. ", **fields)
    else:
        text = tr("On {model}, from batch {b0} to {b1}, total throughput changed **{thr:.1f}x** ({rate0:.0f} -> "
                  "{rate1:.0f} tokens/s) while each user's TPOT changed **{tpot:.1f}x** ({tpot0} -> {tpot1}): here "
                  "each user slowed down as much as the machine sped up: batching did not pay. ", **fields)
    if curve is not None:
        dip = batch_curve(*curve)
        text += dip + " " if dip else ""
    return text + tr("Prefilling the whole batch (every user's TTFT) took {x:.1f}x as long as one prompt.", x=prefill_x)


def model_sizes(sizes: Mapping[str, Measurement], params: Mapping[str, int], floors: Mapping[str, float]) -> str:
    """Measured TTFT and TPOT per model size, against each one's memory floor (weights + cache / bandwidth)."""
    names = list(sizes)
    lines = [tr("**{name}** ({params:.0f}M parameters): TTFT {ttft}, TPOT {tpot}, {x:.1f}x its memory floor", name=k,
                params=params[k] / 1e6, ttft=ms(m.ttft.median), tpot=ms(m.tpot.median), x=m.tpot.median / floors[k])
             for k, m in sizes.items()]
    small, big = names[0], names[-1]
    grow_p = params[big] / params[small]
    grow_t = sizes[big].tpot.median / sizes[small].tpot.median
    text = tr("Measured here, all of them: {models}. ", models=by_language(en="; ", zh="；").join(lines))
    if grow_t > 0.5 * grow_p:
        return text + tr("From {small} to {big}, {grow_p:.1f}x the parameters cost {grow_t:.1f}x the TPOT: a bigger "
                         "model streams more bytes every step, and the step time follows.", small=small, big=big,
                         grow_p=grow_p, grow_t=grow_t)
    return text + tr("From {small} to {big}, {grow_p:.1f}x the parameters cost only {grow_t:.1f}x the TPOT: the "
                     "smaller model's step is dominated by costs that do not grow with its layers (its vocabulary, "
                     "fixed costs per step), so size shows fully only between models whose weights dominate.",
                     small=small, big=big, grow_p=grow_p, grow_t=grow_t)


def step_profile(groups: Mapping[str, float], step_s: float, model: str) -> str:
    """Where one decode step's time went, from the profiler (``measure.profile_step``): the largest group decides."""
    total = sum(groups.values()) or 1.0
    share = {k: v / total for k, v in groups.items()}
    top = max(share, key=share.get)
    shown = join(f"{group_label(k)} **{v:.0%}**" for k, v in sorted(share.items(), key=lambda kv: -kv[1]) if v >= 0.005)
    text = tr("The profiler on one {model} decode step ({step}), as shares of the profiled time: {shown}. ",
              model=model, step=ms(step_s), shown=shown)
    if top == "matmuls":
        return text + tr("Most of the step is the matrix products reading the weights, so the distance from the floor "
                         "is mostly how fast those kernels stream memory, not per-operation overhead.")
    if top == "Python & dispatch":
        return text + tr("Here Python and dispatch (launching each operation), not the weights, is the largest part: "
                         "this is the regime where removing Python from the loop (notebook 08: compiled steps, CUDA "
                         "graphs) pays most.")
    return text + tr("The largest part was {top}, not the matrix products that read the weights: on this run the step "
                     "is not simply its bytes over the bandwidth. (A profile is a measurement too: on a busy machine "
                     "it is disturbed; run the cell again when the machine is quiet.)", top=group_label(top))


def _spec(text: str) -> str:
    """A device name or source of ``cost.PUBLISHED_MEMORY`` (stored in English) in the reader's language."""
    return {"laptop, DDR5-5600 (2 channels)": tr("laptop, DDR5-5600 (2 channels)"),
            "JEDEC DDR5 (JESD79-5): 5600 MT/s x 8 bytes x 2 channels":
                tr("JEDEC DDR5 (JESD79-5): 5600 MT/s x 8 bytes x 2 channels"),
            "Apple M2 press release and MacBook Air (M2) technical specifications":
                tr("Apple M2 press release and MacBook Air (M2) technical specifications"),
            "Apple MacBook Pro (M3 Max) technical specifications":
                tr("Apple MacBook Pro (M3 Max) technical specifications"),
            "NVIDIA Tesla V100 GPU datasheet": tr("NVIDIA Tesla V100 GPU datasheet"),
            "NVIDIA A100 Tensor Core GPU datasheet": tr("NVIDIA A100 Tensor Core GPU datasheet"),
            "NVIDIA H100 Tensor Core GPU datasheet": tr("NVIDIA H100 Tensor Core GPU datasheet"),
            "NVIDIA H200 Tensor Core GPU datasheet": tr("NVIDIA H200 Tensor Core GPU datasheet")}.get(text, text)


def _model_name(name: str) -> str:
    """A published model's label as the notebook names it ("7B model (fp16)"), in the reader's language."""
    return by_language(en=name, zh=name.replace("7B model", "7B 模型").replace(" (", "（").replace(")", "）"))


def hardware_table(rows: Sequence[HardwareFloor]) -> str:
    """A Markdown table of published bandwidths and the decode floors they predict (not measured)."""
    models = list(rows[0].floors)
    floors = " | ".join(tr("{model}: floor per token", model=_model_name(k)) for k in models)
    lines = [tr("| device | memory bandwidth (published) | {floors} | source |", floors=floors),
             "|---|---|" + "---|" * len(models) + "---|"]
    for r in rows:
        bw = r.spec.bytes_per_s
        cells = " | ".join(tr("{floor} ({rate:,.0f} tokens/s)", floor=ms(r.floors[k]), rate=1 / r.floors[k])
                           for k in models)
        lines.append(f"| {_spec(r.spec.name)} | {bw / 1e9:,.0f} GB/s | {cells} | {_spec(r.spec.source)} |")
    sizes = join(f"{_model_name(k)} {rows[0].step_bytes[k] / 1e9:.2f} GB" for k in models)
    return tr("**Computed from published specifications, not measured.** Each floor is the bytes one decode step "
              "reads at batch 1 ({sizes}: weights plus a short KV cache) divided by the published memory bandwidth: "
              "no real step is faster, and real steps land above it.", sizes=sizes) + "\n\n" + "\n".join(lines)


def hardware_point(rows: Sequence[HardwareFloor], big: str) -> str:
    """What the hardware table says about article 004's 'TPOT depends on the GPU's compute'."""
    slow, fast = rows[0], rows[-1]
    return tr("From {slow} to {fast} the published bandwidth grows {bw_x:.0f}x, and {big}'s floor per token falls from "
              "{floor_slow} to {floor_fast}. Article 004's author saw a V100 -> H100 upgrade speed up inference "
              "'noticeably': for decode at batch 1, that is mostly the memory bandwidth (900 -> 3350 GB/s, "
              "{upgrade_x:.1f}x), not the compute the article credits.", slow=_spec(slow.spec.name),
              fast=_spec(fast.spec.name),
              bw_x=fast.spec.bytes_per_s / slow.spec.bytes_per_s, big=_model_name(big), floor_slow=ms(slow.floors[big]),
              floor_fast=ms(fast.floors[big]), upgrade_x=3350 / 900)


def thinking(budget: int, wait: float, no_think: float, tpot: float) -> str:
    """The wait for the first visible token with ``budget`` hidden tokens, against no thinking."""
    return tr("With {budget} hidden tokens the user saw the first answer token after **{wait}**, {x:.1f}x the "
              "{no_think} without thinking: about {per_hidden} per hidden token, against a TPOT of {tpot} in section "
              "4. Each hidden token is a decode step. Real reasoning models think for hundreds or thousands of "
              "tokens, so the wait for their first visible token is seconds to minutes, while the answer then streams "
              "at the usual TPOT.", budget=budget, wait=ms(wait), x=wait / no_think, no_think=ms(no_think),
              per_hidden=ms((wait - no_think) / budget), tpot=ms(tpot)) + "\n\n" + tr(
        "**What this cannot show: quality.** Article 004 says thinking buys better answers, especially for mathematics "
        "and programming (*test-time compute*: spending inference time, not training, on a better answer). Our model "
        "was not trained to reason: its hidden tokens are ordinary text and do not improve its answer. Only the cost "
        "in time is real here; the gain in quality needs a model trained to think.")


# ----------------------------------------------------------------------------- the same question in two languages
def _prompt_name(name: str) -> str:
    """A prompt's language as the notebook keys it ("中文", "English") in the reader's language."""
    return {"English": tr("English"), "Chinese": tr("Chinese")}.get(name, name)


def language_table(rows: Sequence[PromptTTFT]) -> str:
    """A Markdown table of ``prompt_ttft`` rows: model, prompt, characters, tokens, tokens per character, TTFT."""
    head = tr("| model | prompt | characters | tokens | tokens per character | median TTFT (ms) |")
    lines = [head, "|---|---|---|---|---|---|"]
    lines += [f"| {r.model} | {_prompt_name(r.cost.name)} | {r.cost.n_chars} | {r.cost.n_tokens} | "
              f"{r.cost.tokens_per_char:.2f} | {r.ttft.median * 1e3:.2f} |" for r in rows]
    return "\n".join(lines)


def language_finding(zh: PromptTTFT, en: PromptTTFT, answer_zh: TextCost, answer_en: TextCost, tpot_s: float) -> str:
    """What the same question in Chinese (``zh``) and English (``en``) cost on one model, in words (Markdown).

    ``answer_zh``/``answer_en``: one answer sentence in each language (from ``tokens.costs``); ``tpot_s``: a TPOT
    measured on the same model (seconds), to turn the answer's tokens into decode time. The TTFT comparison has two
    branches: Chinese slower (the expected case), or the difference lost in the noise of short prompts.
    """
    text = tr("The same question is **{zh_tokens} tokens** in Chinese and **{en_tokens}** in English ({ratio:.1f}x), "
              "although the Chinese has fewer characters ({zh_chars} against {en_chars}). On {model} the Chinese "
              "prompt's median TTFT was **{zh_ms:.1f} ms** against **{en_ms:.1f} ms** ({t_ratio:.2f}x). ",
              zh_tokens=zh.cost.n_tokens, en_tokens=en.cost.n_tokens, ratio=zh.cost.n_tokens / en.cost.n_tokens,
              zh_chars=zh.cost.n_chars, en_chars=en.cost.n_chars, model=zh.model,
              zh_ms=zh.ttft.median * 1e3, en_ms=en.ttft.median * 1e3, t_ratio=zh.ttft.median / en.ttft.median)
    if zh.ttft.median > en.ttft.median:  # the English texts end in a space where a sentence follows; Chinese needs none
        text += tr("Same meaning, more tokens, more prefill: every token goes through every layer, so the "
                         "prompt's matrix products grow with its token count (the sweep above). The time grows less "
                         "than the tokens because part of a short prompt's TTFT does not depend on its length "
                         "(tokenizing, the LM head for the last position, Python).")
    else:
        text += tr("Here the difference was lost in the noise of two short prompts (re-run the cell); in "
                         "arithmetic the prompts still differ by their token counts, as the sweep above shows.")
    return text + "\n\n" + tr(
        "The answer pays again, one decode step per token: the sample answer sentence is {zh_tokens} tokens in "
        "Chinese and {en_tokens} in English, so at a TPOT of {tpot:.1f} ms (measured on {model} in section 4) it "
        "streams in about {zh_ms:.0f} ms against {en_ms:.0f} ms.", zh_tokens=answer_zh.n_tokens,
        en_tokens=answer_en.n_tokens, tpot=tpot_s * 1e3, model=zh.model, zh_ms=answer_zh.n_tokens * tpot_s * 1e3,
        en_ms=answer_en.n_tokens * tpot_s * 1e3)
