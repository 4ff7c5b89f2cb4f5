"""Notebook 06's findings (sampling), told from its own numbers; each function has its other-outcome branch.

>>> print(small_temperature(3.0, 1e-38, True, 1e-4, False)[:24])
Dividing the logits by a
"""

from __future__ import annotations

import math

FLOAT32_MAX = 3.4028234663852886e38
FLOAT16_MAX = 65504.0


def _tex(x: float, digits: int = 0) -> str:
    """A number for LaTeX: 9e-39 -> 9 \\times 10^{-39}; 0.01 -> 10^{-2}."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    power = f"10^{{{int(exponent)}}}"
    return power if mantissa == "1" else f"{mantissa} \\times {power}"


def small_temperature(largest_logit: float, t32: float, ok32: bool, t16: float, ok16: bool) -> str:
    """Where dividing by a small temperature overflows: in float32 (``t32``) and float16 (``t16``).

    ``ok32``/``ok16``: whether the softmax of ``logits / t`` was still finite at that temperature.
    """
    limit32, limit16 = largest_logit / FLOAT32_MAX, largest_logit / FLOAT16_MAX
    text = (f"Dividing the logits by a small temperature overflows only when the largest logit "
            f"({largest_logit:g}) divided by $T$ passes the largest number the type can hold: about "
            f"$T = {_tex(limit32)}$ in float32 (largest number ${_tex(FLOAT32_MAX, 1)}$) but $T = {_tex(limit16)}$ in "
            f"float16 (largest number {FLOAT16_MAX:,.0f}). ")
    text += (f"At $T = {_tex(t32)}$ float32 still gave a valid distribution (all probability on the favourite). "
             if ok32 else f"Here float32 already failed at $T = {_tex(t32)}$ (infinite logits, `nan` probabilities). ")
    text += (f"Float16, the type a GPU often runs in, failed at $T = {_tex(t16)}$: the divided logits became "
             "infinite and the softmax returned `nan`. " if not ok16 else
             f"Float16 still coped at $T = {_tex(t16)}$ on this vector, but its limit is close. ")
    return text + ("So $T = 0$ is a separate, exact rule (argmax) for another reason: dividing by zero is "
                   "undefined, and in half precision a merely small $T$ already breaks the arithmetic. "
                   "(This library also subtracts the largest logit before dividing by a $T$ below 0.01, so the "
                   "favourite's logit is 0 and cannot overflow.)")


def tokens_possible(n: int) -> str:
    """'1 token possible' / '12 tokens possible'."""
    return f"{n:,} token possible" if n == 1 else f"{n:,} tokens possible"


def top_candidates(token: str, token_id: int, p: float, held: float, k: int, vocab: int) -> str:
    """The favourite and how much probability the top ``k`` hold together."""
    text = f"The most likely next token is `{token!r}` (id {token_id}) with p = {p:.3f}. "
    if held > 0.99:
        return text + (f"The {k} tokens shown hold {held:.1%} of the probability: here the model is sure, and the "
                       f"other {vocab - k:,} tokens share almost nothing.")
    return text + (f"The {k} tokens shown hold {held:.1%} of the probability together; the other "
                   f"{vocab - k:,} tokens share the remaining {1 - held:.1%}.")


def long_tail(outside: list[float], ks: list[int]) -> str:
    """How much probability lies outside the top ``ks`` (e.g. 10, 100, 1000), and what that means for sampling."""
    listed = ", ".join(f"outside the top {k} {o:.1%}" for k, o in zip(ks, outside))
    text = f"Probability {listed}. "
    if outside[1] >= 0.01:
        return text + (f"So a draw from the full distribution lands outside the top {ks[1]} with probability "
                       f"{outside[1]:.1%}: each tail token is unlikely on its own, but together they are picked "
                       "regularly, and one odd token can derail the rest of the text. Top-k and top-p exist to "
                       "cut that tail.")
    return text + (f"On this prompt the tail is thin: a draw lands outside the top {ks[1]} less than once in a "
                   "hundred. On less certain prompts it is much heavier, which is what top-k and top-p are for.")


def greedy_repetition(greedy_share: float, loop: int, sample_share: float) -> str:
    """Greedy's share of repeated 3-grams against a temperature-1 sample's."""
    text = (f"Greedy repeated {greedy_share:.0%} of its 3-grams (longest loop: {loop} "
            f"{'token' if loop == 1 else 'tokens'}); the sample at temperature 1 repeated {sample_share:.0%}. ")
    if greedy_share > sample_share:
        return text + "Greedy repeated itself more, as the loop argument below predicts."
    return text + ("Here greedy did **not** repeat more than the sample: on a short run the loop may not have "
                   "started yet. Run more tokens (raise GREEDY_TOKENS) and it usually does.")


def stage_effects(temperature: float, temp_removed: float, model_kept: int, k_kept: int, k_removed: float,
                  p_kept: int, p_removed: float, entropy_before: float, entropy_after: float) -> str:
    """What each stage of the default settings did: tokens kept, mass removed, entropy before and after."""
    text = (f"Temperature {temperature:g} removed {temp_removed:.1%} of the mass (it reshapes, it does not filter); "
            f"top-k left {k_kept:,} of {model_kept:,} tokens and removed {k_removed:.1%} of the mass; ")
    text += (f"top-p then kept {tokens_possible(p_kept).removesuffix(' possible')}, removing a further "
             f"{p_removed:.1%} of what was left. " if p_kept < k_kept else
             "top-p then removed nothing more: the top-k survivors were already inside its share. ")
    return text + (f"Entropy fell from {entropy_before:.2f} to {entropy_after:.2f} nats. $e^{{entropy}}$ reads as "
                   f"an *effective number of equally likely choices*: from {math.exp(entropy_before):,.1f} to "
                   f"{math.exp(entropy_after):,.1f}.")


def variety_against_likelihood(likely: str, likely_logprob: float, varied: str, varied_distinct: float,
                               n_samples: int, greedy_distinct: float) -> str:
    """Which setting wrote the most likely text and which the most varied."""
    text = (f"Here the most likely text came from **{likely}** ({likely_logprob:.2f} nats/token) and the most "
            f"varied from **{varied}** (distinct-2 {varied_distinct:.2f}). ")
    if likely == varied:
        text += "One setting won both here: with few short samples the points are noisy. "
    return text + f"Greedy wrote the same text {n_samples} times: distinct-2 {greedy_distinct:.2f}."


def stop_token_search(seed: int | None, position: int, eos_id: int, text: str, tries: int, p_eos: float) -> str:
    """Whether one of ``tries`` seeds picked the stop token (``seed`` is None when none did)."""
    if seed is not None:
        return (f"With seed {seed} the sampler picked `<|endoftext|>` (id {eos_id}) as token {position}, and the "
                f"loop stopped: `stop_reason = 'stop token'`, text before it: `{text!r}`.")
    return (f"None of {tries} seeds picked `<|endoftext|>` within 8 tokens: right after the prompt its probability "
            f"was only {p_eos:.2g}. This is exactly why every request also carries a length limit: a model is "
            "never obliged to choose its stop token.")
