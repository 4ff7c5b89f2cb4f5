"""Notebook 00 (start here): each finding as Markdown, from the numbers the notebook measured.

Every function returns the text for the outcome the numbers show, including the outcome the articles
do not predict, in the reader's language (``inferlab.i18n.tr``). Times are seconds.
"""

from __future__ import annotations

from ..i18n import tr
from ..measure.latency import FirstToken
from ..units import ms


def two_models(loaded: str, loaded_params: int, timed: str, timed_params: int) -> str:
    """Which model writes the text and which one is timed, and why random weights time like trained ones."""
    if loaded == timed:
        return tr("The loaded model, **{loaded}** ({params:.0f}M parameters), is full-size: it writes the text and "
                  "it is timed.", loaded=loaded, params=loaded_params / 1e6)
    return tr("**Two models from here on.** The loaded **{loaded}** ({loaded_params:.1f}M parameters) writes the text "
              "you read. For the *time*, we also load **{timed}**'s real shape with random weights "
              "({timed_params:.0f}M parameters). Why random weights are enough: a forward pass multiplies the same "
              "matrices of the same size whatever numbers they hold, so it reads the same bytes and does the same "
              "arithmetic, and takes the same time as trained weights would. Only its text is noise. A tiny model "
              "would tell the wrong story about time: most of its work is its large vocabulary, not its layers.",
              loaded=loaded, loaded_params=loaded_params / 1e6, timed=timed, timed_params=timed_params / 1e6)


def cold_call(cold_ttft: float, warm_ttft: float) -> str:
    """The first call of a fresh kernel against the same call again."""
    ratio = cold_ttft / warm_ttft
    if ratio > 1.5:
        return tr("The very first call waited **{cold}** for its first token; the same call again, **{warm}** "
                  "({ratio:.0f}x faster). The first call pays one-off costs (memory allocation, library "
                  "initialisation), not prefill. Every timing below therefore comes after a warm-up call; notebook 07 "
                  "measures this properly.", cold=ms(cold_ttft), warm=ms(warm_ttft), ratio=ratio)
    return tr("The first call waited {cold} for its first token and the same call again {warm}: on this machine the "
              "one-off costs of a first call were small this time (on a GPU they are often large). Every timing below "
              "still comes after a warm-up call.", cold=ms(cold_ttft), warm=ms(warm_ttft))


def first_token(parts: FirstToken) -> str:
    """Why TTFT is (or is not) much larger than TPOT, from a prompt's prefill, a 1-token prefill and a decode step."""
    p = parts
    per = p.prefill_s / p.one_token_s
    text = tr("On **{model}**: reading the {n}-token prompt in one pass took **{prefill}**, a 1-token prompt "
              "**{one}**, and one decode step **{decode}**. ", model=p.model, n=p.prompt_tokens,
              prefill=ms(p.prefill_s), one=ms(p.one_token_s), decode=ms(p.decode_s))
    if per < 1.5:
        text += tr("So the prompt's {n} tokens cost only {per:.1f}x a single token: the first token comes about one "
                   "decode step late, because most of a forward's time does not depend on how many tokens it reads. ",
                   n=p.prompt_tokens, per=per)
        if p.head_share > 0.5:
            text += tr("Here that is the LM head, {share:.0%} of one token's arithmetic: it scores all 50,257 "
                       "vocabulary entries once per forward, for the last position only, in prefill and in decode "
                       "alike. ", share=p.head_share)
        else:
            text += tr("Reading every weight once is the same work for one token or a few. ")
        return text + tr("A longer prompt changes that: exercise 1 asks you to try.")
    return text + tr("The prompt cost {per:.1f}x a single token: with {n} tokens the per-token work of the layers "
                     "shows, and that is why the first token waits longer than each later one (the LM head, "
                     "{share:.0%} of one token's arithmetic, runs once per forward either way).",
                     per=per, n=p.prompt_tokens, share=p.head_share)


def _apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with as few decimals (1 to 3) as tell them apart: "2.94" and "2.86", never "2.9" twice."""
    for digits in (1, 2, 3):
        x, y = f"{a:.{digits}f}", f"{b:.{digits}f}"
        if x != y:
            return x, y
    return x, y


def per_token(prefill_s: float, prompt_tokens: int, decode_s: float, prompt_intensity: float, ridge: float,
              model: str, knee: int | None = None, weight_bytes: float | None = None,
              bytes_per_s: float | None = None) -> str:
    """Per token, prefill against decode; whether decode sits on its memory floor; and which side of this
    machine's ridge this prompt's prefill lies on.

    ``knee``: the shortest prompt whose prefill is compute-bound on this machine (``measure.compute_bound_from``).
    ``weight_bytes`` and ``bytes_per_s``: the timed model's weights and this machine's copy bandwidth. With both,
    the text tests "decode is memory-bound" against the floor they give (the time to read every weight once);
    without them it only says which notebook tests it. Cheaper per token shows reuse, not which ceiling binds.
    """
    cheaper = decode_s / (prefill_s / prompt_tokens)
    intensity, ridge_text = _apart(prompt_intensity, ridge)
    text = (tr("On {model}, per token, prefill was **{x:.1f}x cheaper** than a decode step. ", model=model, x=cheaper)
            if cheaper > 1 else
            tr("On {model}, per token, prefill was NOT cheaper than a decode step this time (a busy machine can blur "
               "it: run the cells again). ", model=model))
    text += tr("The reason is reuse: a decode step reads every weight to make one token, while prefill reads each "
               "weight once for all the prompt's tokens. ")
    text += _decode_floor(decode_s, weight_bytes, bytes_per_s)
    if prompt_intensity >= ridge:
        return text + tr("This prompt's prefill does {intensity} FLOPs per byte it reads, above this machine's "
                         "ridge point ({ridge} FLOP/B): it is limited by arithmetic (*compute-bound*), as the "
                         "articles say.", intensity=intensity, ridge=ridge_text)
    if knee:
        return text + tr("Is prefill *compute-bound*, as the articles say? Only for long enough prompts: this one "
                         "does {intensity} FLOPs per byte it reads, below this machine's ridge point ({ridge} "
                         "FLOP/B), so even its prefill is still limited by memory. The cost model puts the turn at "
                         "about **{knee} prompt tokens**; notebook 04 measures where the time per token really "
                         "stops falling.", intensity=intensity, ridge=ridge_text, knee=knee)
    return text + tr("Is prefill *compute-bound*, as the articles say? Only for long enough prompts: this one does "
                     "{intensity} FLOPs per byte it reads, below this machine's ridge point ({ridge} FLOP/B), "
                     "so even its prefill is still limited by memory. By the cost model, prefill turns compute-bound "
                     "here for no prompt that fits the context window; notebook 04 measures it.",
                     intensity=intensity, ridge=ridge_text)


def _decode_floor(decode_s: float, weight_bytes: float | None, bytes_per_s: float | None) -> str:
    """The memory floor of one decode step (every weight read once) against the measured step."""
    if not weight_bytes or not bytes_per_s:
        return tr("Whether decode is then limited by memory (*memory-bound*) is a question of which floor its step "
                  "sits on: notebook 04 tests it. ")
    floor = weight_bytes / bytes_per_s
    fields = {"mb": weight_bytes / 1e6, "gbs": bytes_per_s / 1e9, "floor": ms(floor), "step": ms(decode_s),
              "x": decode_s / floor}
    text = tr("Is decode limited by memory (*memory-bound*)? Reading the weights once is its floor: "
              "`{mb:,.0f} MB / {gbs:.1f} GB/s = {floor}`, against a measured step of **{step}**. ", **fields)
    if decode_s < floor:
        return text + tr("The step beat that floor: the weights came in faster than the measured copy bandwidth "
                         "(a cache, or a copy test that ran slow), so this run cannot say which ceiling binds; "
                         "notebook 04 tests it. ", **fields)
    if decode_s <= 1.5 * floor:
        return text + tr("The step is only {x:.1f}x that floor: reading the weights is most of its time, so decode "
                         "is memory-bound here. ", **fields)
    return text + tr("The step is {x:.1f}x that floor: reading the weights can explain at most {share:.0%} of it, "
                     "and other costs (arithmetic on a single row, Python, dispatch) take the rest. Which ceiling "
                     "binds, and where the rest goes, is what notebook 04 tests. ", share=floor / decode_s, **fields)
