"""Notebook 06's findings (sampling), told from its own numbers; each function has its other-outcome branch.

In the reader's language (``inferlab.i18n.tr``).

>>> print(small_temperature(3.0, 1e-38, True, 1e-4, False)[:24])
Dividing the logits by a
"""

from __future__ import annotations

import math

from ..i18n import tr
from . import join

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
    text = tr("Dividing the logits by a small temperature overflows only when the largest logit ({largest:g}) divided "
              "by $T$ passes the largest number the type can hold: about $T = {limit32}$ in float32 (largest number "
              "${max32}$) but $T = {limit16}$ in float16 (largest number {max16:,.0f}). ", largest=largest_logit,
              limit32=_tex(largest_logit / FLOAT32_MAX), max32=_tex(FLOAT32_MAX, 1),
              limit16=_tex(largest_logit / FLOAT16_MAX), max16=FLOAT16_MAX)
    text += (tr("At $T = {t}$ float32 still gave a valid distribution (all probability on the favourite). ",
                t=_tex(t32)) if ok32 else
             tr("Here float32 already failed at $T = {t}$ (infinite logits, `nan` probabilities). ", t=_tex(t32)))
    text += (tr("Float16, the type a GPU often runs in, failed at $T = {t}$: the divided logits became infinite and "
                "the softmax returned `nan`. ", t=_tex(t16)) if not ok16 else
             tr("Float16 still coped at $T = {t}$ on this vector, but its limit is close. ", t=_tex(t16)))
    return text + tr("So $T = 0$ is a separate, exact rule (argmax) for another reason: dividing by zero is undefined, "
                     "and in half precision a merely small $T$ already breaks the arithmetic. (This library also "
                     "subtracts the largest logit before dividing by a $T$ below 0.01, so the favourite's logit is 0 "
                     "and cannot overflow.)")


def tokens_possible(n: int) -> str:
    """'1 token possible' / '12 tokens possible' (in the reader's language)."""
    return tr("{n:,} token possible", n=n) if n == 1 else tr("{n:,} tokens possible", n=n)


def _tokens(n: int) -> str:
    return tr("{n:,} token", n=n) if n == 1 else tr("{n:,} tokens", n=n)


def top_candidates(token: str, token_id: int, p: float, held: float, k: int, vocab: int) -> str:
    """The favourite and how much probability the top ``k`` hold together."""
    text = tr("The most likely next token is `{token!r}` (id {id}) with p = {p:.3f}. ", token=token, id=token_id, p=p)
    if held > 0.99:
        return text + tr("The {k} tokens shown hold {held:.1%} of the probability: here the model is sure, and the "
                         "other {rest:,} tokens share almost nothing.", k=k, held=held, rest=vocab - k)
    return text + tr("The {k} tokens shown hold {held:.1%} of the probability together; the other {rest:,} tokens "
                     "share the remaining {left:.1%}.", k=k, held=held, rest=vocab - k, left=1 - held)


def long_tail(outside: list[float], ks: list[int]) -> str:
    """How much probability lies outside the top ``ks`` (e.g. 10, 100, 1000), and what that means for sampling."""
    listed = join(tr("outside the top {k} {share:.1%}", k=k, share=o) for k, o in zip(ks, outside))
    text = tr("Probability {listed}. ", listed=listed)
    if outside[1] >= 0.01:
        return text + tr("So a draw from the full distribution lands outside the top {k} with probability "
                         "{share:.1%}: each tail token is unlikely on its own, but together they are picked regularly, "
                         "and one odd token can derail the rest of the text. Top-k and top-p exist to cut that tail.",
                         k=ks[1], share=outside[1])
    return text + tr("On this prompt the tail is thin: a draw lands outside the top {k} less than once in a hundred. "
                     "On less certain prompts it is much heavier, which is what top-k and top-p are for.", k=ks[1])


LOOP_TOKENS = 4  # a stretch this long that copies the stretch just before it is a loop; 1-3 tokens are a stutter


def greedy_repetition(greedy_share: float, loop: int, sample_share: float) -> str:
    """Whether greedy fell into a loop (``loop``: tokens in its longest stretch that copies the stretch just before
    it, ``Repetition.longest_loop``), and its share of repeated 3-grams against a temperature-1 sample's."""
    text = tr("Greedy repeated {greedy:.0%} of its 3-grams; the sample at temperature 1 repeated {sample:.0%}. ",
              greedy=greedy_share, sample=sample_share)
    if loop >= LOOP_TOKENS:
        text += tr("Greedy fell into a loop: its longest stretch that copies the stretch just before it is "
                   "{tokens} long. ", tokens=_tokens(loop))
        if greedy_share > sample_share:
            return text + tr("The sample, drawn at random, repeated less: the loop is greedy's, as the argument "
                             "below predicts.")
        return text + tr("The sample repeated as much this time: a short random text can repeat by chance too, "
                         "but it has no reason to stay in a loop.")
    text += tr("No loop formed in this run (its longest stretch that copies the one before it is {tokens}): greedy "
               "does not always loop, and on a short run a loop may not have started yet. Raise GREEDY_TOKENS, or "
               "try another prompt, to watch one form. ", tokens=_tokens(loop))
    if greedy_share > sample_share:
        return text + tr("Greedy still repeated more 3-grams than the sample.")
    return text + tr("Here greedy did **not** repeat more than the sample either.")


def stage_effects(temperature: float, temp_removed: float, model_kept: int, k_kept: int, k_removed: float,
                  p_kept: int, p_removed: float, entropy_before: float, entropy_after: float) -> str:
    """What each stage of the default settings did: tokens kept, mass removed, entropy before and after."""
    text = tr("Temperature {t:g} removed {t_removed:.1%} of the mass (it reshapes, it does not filter); top-k left "
              "{k_kept:,} of {model_kept:,} tokens and removed {k_removed:.1%} of the mass; ", t=temperature,
              t_removed=temp_removed, k_kept=k_kept, model_kept=model_kept, k_removed=k_removed)
    text += (tr("top-p then kept {kept}, removing a further {removed:.1%} of what was left. ", kept=_tokens(p_kept),
                removed=p_removed) if p_kept < k_kept else
             tr("top-p then removed nothing more: the top-k survivors were already inside its share. "))
    return text + tr("Entropy fell from {before:.2f} to {after:.2f} nats. $e^{{entropy}}$ reads as an *effective "
                     "number of equally likely choices*: from {choices_before:,.1f} to {choices_after:,.1f}.",
                     before=entropy_before, after=entropy_after, choices_before=math.exp(entropy_before),
                     choices_after=math.exp(entropy_after))


def variety_against_likelihood(likely: str, likely_logprob: float, varied: str, varied_distinct: float,
                               n_samples: int, greedy_distinct: float) -> str:
    """Which setting wrote the most likely text and which the most varied (setting names shown as given)."""
    text = tr("Here the most likely text came from **{likely}** ({logprob:.2f} nats/token) and the most varied from "
              "**{varied}** (distinct-2 {distinct:.2f}). ", likely=likely, logprob=likely_logprob, varied=varied,
              distinct=varied_distinct)
    if likely == varied:
        text += tr("One setting won both here: with few short samples the points are noisy. ")
    return text + tr("Greedy wrote the same text {n} times: distinct-2 {distinct:.2f}.", n=n_samples,
                     distinct=greedy_distinct)


def stop_token_search(seed: int | None, position: int, eos_id: int, text: str, tries: int, p_eos: float) -> str:
    """Whether one of ``tries`` seeds picked the stop token (``seed`` is None when none did)."""
    if seed is not None:
        return tr("With seed {seed} the sampler picked `<|endoftext|>` (id {eos_id}) as token {position}, and the loop "
                  "stopped: `stop_reason = 'stop token'`, text before it: `{text!r}`.", seed=seed, eos_id=eos_id,
                  position=position, text=text)
    return tr("None of {tries} seeds picked `<|endoftext|>` within 8 tokens: right after the prompt its probability "
              "was only {p:.2g}. This is exactly why every request also carries a length limit: a model is never "
              "obliged to choose its stop token.", tries=tries, p=p_eos)
