"""Notebook 00 (start here): each finding as Markdown, from the numbers the notebook measured.

Every function returns the text for the outcome the numbers show, including the outcome the articles
do not predict. Times are seconds.
"""

from __future__ import annotations

from ..measure.latency import FirstToken


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def two_models(loaded: str, loaded_params: int, timed: str, timed_params: int) -> str:
    """Which model writes the text and which one is timed, and why random weights time like trained ones."""
    if loaded == timed:
        return (f"The loaded model, **{loaded}** ({loaded_params / 1e6:.0f}M parameters), is full-size: it writes "
                "the text and it is timed.")
    return (f"**Two models from here on.** The loaded **{loaded}** ({loaded_params / 1e6:.1f}M parameters) writes "
            f"the text you read. For the *time*, we also load **{timed}**'s real shape with random weights "
            f"({timed_params / 1e6:.0f}M parameters). Why random weights are enough: a forward pass multiplies the "
            "same matrices of the same size whatever numbers they hold, so it reads the same bytes and does the same "
            "arithmetic, and takes the same time as trained weights would. Only its text is noise. A tiny model "
            "would tell the wrong story about time: most of its work is its large vocabulary, not its layers.")


def cold_call(cold_ttft: float, warm_ttft: float) -> str:
    """The first call of a fresh kernel against the same call again."""
    ratio = cold_ttft / warm_ttft
    if ratio > 1.5:
        return (f"The very first call waited **{_ms(cold_ttft)}** for its first token; the same call again, "
                f"**{_ms(warm_ttft)}** ({ratio:.0f}x faster). The first call pays one-off costs (memory allocation, "
                "library initialisation), not prefill. Every timing below therefore comes after a warm-up call; "
                "notebook 07 measures this properly.")
    return (f"The first call waited {_ms(cold_ttft)} for its first token and the same call again {_ms(warm_ttft)}: "
            "on this machine the one-off costs of a first call were small this time (on a GPU they are often "
            "large). Every timing below still comes after a warm-up call.")


def first_token(parts: FirstToken) -> str:
    """Why TTFT is (or is not) much larger than TPOT, from a prompt's prefill, a 1-token prefill and a decode step."""
    p = parts
    per = p.prefill_s / p.one_token_s
    text = (f"On **{p.model}**: reading the {p.prompt_tokens}-token prompt in one pass took **{_ms(p.prefill_s)}**, "
            f"a 1-token prompt **{_ms(p.one_token_s)}**, and one decode step **{_ms(p.decode_s)}**. ")
    if per < 1.5:
        text += (f"So the prompt's {p.prompt_tokens} tokens cost only {per:.1f}x a single token: the first token "
                 "comes about one decode step late, because most of a forward's time does not depend on how many "
                 "tokens it reads. ")
        if p.head_share > 0.5:
            text += (f"Here that is the LM head, {p.head_share:.0%} of one token's arithmetic: it scores all "
                     "50,257 vocabulary entries once per forward, for the last position only, in prefill and in "
                     "decode alike. ")
        else:
            text += ("Reading every weight once is the same work for one token or a few. ")
        return text + "A longer prompt changes that: exercise 1 asks you to try."
    return text + (f"The prompt cost {per:.1f}x a single token: with {p.prompt_tokens} tokens the per-token work "
                   "of the layers shows, and that is why the first token waits longer than each later one (the LM "
                   f"head, {p.head_share:.0%} of one token's arithmetic, runs once per forward either way).")


def per_token(prefill_s: float, prompt_tokens: int, decode_s: float, prompt_intensity: float, ridge: float,
              model: str, knee: int | None = None) -> str:
    """Per token, prefill against decode, and which side of this machine's ridge this prompt's prefill lies on.

    ``knee``: the shortest prompt whose prefill is compute-bound on this machine (``measure.compute_bound_from``).
    """
    cheaper = decode_s / (prefill_s / prompt_tokens)
    text = (f"On {model}, per token, prefill was **{cheaper:.1f}x cheaper** than a decode step. "
            if cheaper > 1 else
            f"On {model}, per token, prefill was NOT cheaper than a decode step this time (a busy machine can "
            "blur it: run the cells again). ")
    text += ("The reason is reuse: a decode step reads every weight to make one token, while prefill reads each "
             "weight once for all the prompt's tokens. Decode is therefore limited by memory (*memory-bound*). ")
    if prompt_intensity >= ridge:
        return text + (f"This prompt's prefill does {prompt_intensity:.1f} FLOPs per byte it reads, above this "
                       f"machine's ridge point ({ridge:.1f} FLOP/B): it is limited by arithmetic (*compute-bound*), "
                       "as the articles say.")
    where = (f"from about **{knee} prompt tokens** on" if knee else "for no prompt that fits the context window")
    return text + (f"Is prefill *compute-bound*, as the articles say? Only for long enough prompts: this one does "
                   f"{prompt_intensity:.1f} FLOPs per byte it reads, below this machine's ridge point "
                   f"({ridge:.1f} FLOP/B), so even its prefill is still limited by memory. By the cost model, "
                   f"prefill turns compute-bound here {where}; notebook 04 measures it.")
