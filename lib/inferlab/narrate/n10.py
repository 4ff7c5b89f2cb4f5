"""Notebook 10 (speculative decoding): each finding as Markdown, from the numbers the notebook measured.

In the reader's language (``inferlab.i18n.tr``). Times are seconds. The results come from
``inferlab.speculative`` (``VerifyCost``, ``SpeculativeTrace``) and ``inferlab.speculative.bench`` (``RaceRow``,
``DraftGain``, ``Exactness``).
"""

from __future__ import annotations

import statistics

from ..i18n import tr
from ..speculative.bench import copies_most
from ..units import ms
from . import join

FLAT = 1.4  # a forward of 8 tokens within this many times one's: "about the cost of one"


def verify(fast, engine) -> str:
    """Two ``VerifyCost`` sweeps over the same ks: the path speculation verifies with, and the engine's."""
    ks = list(fast.sweep.xs)
    k8 = 8 if 8 in ks else ks[-1]
    rf, re_ = fast.ratios[ks.index(k8)], engine.ratios[list(engine.sweep.xs).index(k8)] if k8 in engine.sweep.xs \
        else engine.ratios[-1]
    text = tr("On the path speculation verifies with, a forward of {k} new tokens took **{rf:.2f}x** the time of a "
              "forward of one ({t1} for one). Through the engine's forward (Hugging Face's modules) it took "
              "**{re:.2f}x**. ", k=k8, rf=rf, t1=ms(fast.sweep.medians[0]), re=re_)
    knee = fast.predicted_knee
    roof = (tr("The roofline predicts the cost stays flat up to about k = {knee}, where the arithmetic of k tokens "
               "outgrows the time to read the weights once. ", knee=knee) if knee is not None else
            tr("The roofline predicts the cost stays flat over every k tried here: reading the weights takes longer "
               "than the arithmetic of all these tokens. "))
    if rf < 0.95:
        text += roof + tr("Here {k} tokens were even **faster** than one: on this CPU the matrix library's kernel for "
                          "one row streams the weights slower than its kernel for a few rows (notebooks 04 and 08 "
                          "show the same dip at batch 1). Either way, checking {g} guesses costs no more than a "
                          "plain step: that is what speculative decoding spends, and why it can pay.", k=k8, g=k8 - 1)
    elif rf <= FLAT:
        text += roof + tr("The fast path's products take a few rows in about the time of one, so checking {g} "
                          "guesses (the last real token and {g} after it) costs about one step: that is what "
                          "speculative decoding spends, and why it can pay.", g=k8 - 1)
    else:
        text += roof + tr("On this run the fast path's forward grew more than that ({rf:.2f}x): part of each step is "
                          "per-row work (the vocabulary head, Python around the kernels), and on a small or busy CPU "
                          "the arithmetic comes sooner. Speculation still pays where the guesses are accepted often "
                          "enough to cover it; section 3 puts numbers on that.", rf=rf)
    if re_ > rf * 1.2:
        text += tr(" The engine's forward is a different story: its matrix library switches to a slower kernel as "
                   "soon as there are two rows, not what the roofline says. The same idea needs the right kernels.")
    return text


def rounds(trace) -> str:
    """One ``SpeculativeTrace``: what its rounds did."""
    n, r = len(trace.generated_ids), len(trace.rounds)
    if not r:
        return tr("The answer was one token long: no round ran.")
    full = sum(x.accepted == x.proposed and x.proposed == trace.k for x in trace.rounds)
    empty = sum(x.proposed == 0 for x in trace.rounds)
    text = tr("{n} tokens came from {r} target forwards after the prefill: **{tpr:.2f} tokens per forward**. Of the "
              "guesses proposed, {acc:.0%} were accepted; {full} rounds kept all {k} guesses (and got the target's "
              "next token free), {empty} proposed nothing (no earlier match). ", n=n, r=r, tpr=trace.tokens_per_round,
              acc=trace.acceptance, full=full, k=trace.k, empty=empty)
    if trace.tokens_per_round >= 2:
        return text + tr("Where the answer repeats the prompt, a guess copied from it is right, and each forward "
                         "confirms several tokens at once.")
    return text + tr("Few guesses held here: the answer did not follow the prompt's text for long, so most rounds "
                     "gave the one token a plain step gives.")


def race(rows, plain_rows) -> str:
    """``RaceRow``s on grounded prompts and on prompts with nothing to look up."""
    med = statistics.median
    g_gen = med(r.over("speculative", "il.generate") for r in rows)
    g_plain = med(r.over("speculative", "plain") for r in rows)
    g_tf = med(r.over("speculative", "transformers") for r in rows)
    same = all(all(r.same_tokens.values()) for r in [*rows, *plain_rows])
    text = tr("On the prompts that hold their answer, prompt lookup made **{g:.2f}x** the tokens/s of `il.generate` "
              "(median of {n}); against plain decoding on the same fast path **{gp:.2f}x**, so the rest is the fast "
              "path itself (notebook 08). Against transformers' own prompt lookup: **{gt:.2f}x**. ", g=g_gen,
              n=len(rows), gp=g_plain, gt=g_tf)
    text += tr("Every answer was the same, token for token. ") if same else tr(
        "**Some answers differ** from `il.generate`'s (see the table): a near-tie flipped by rounding, or a bug. ")
    p = med(r.over("speculative", "plain") for r in plain_rows)
    tpr = med(r.tokens_per_round for r in plain_rows)
    if p >= 0.95 and tpr >= 1.3:
        return text + tr("On the prompts with nothing to look up, lookup still ran at {p:.2f}x plain decoding, with "
                         "{t:.2f} tokens per forward: this small model's answers repeat themselves (\"and the king, "
                         "and the king\"), and a repeat is something to look up.", p=p, t=tpr)
    if p >= 0.95:
        return text + tr("Where there is nothing to look up, lookup costs almost nothing: {p:.2f}x plain decoding. A "
                         "wrong guess wastes only the extra rows of one forward.", p=p)
    return text + tr("Where there is nothing to look up, lookup cost time: {p:.2f}x plain decoding. Each rejected "
                     "guess made the verify forward longer than one step; engines turn lookup off where its guesses "
                     "keep failing.", p=p)


def copying(lengths: dict, at_least: int = 24) -> str:
    """``{passage: tokens copied before the first divergence}``: does the model copy what its prompt holds?"""
    text = tr("Given a passage and then its first line again, the model reproduced {vals} tokens before it strayed "
              "(on passages it never trained on). ", vals=join(str(v) for v in lengths.values()))
    if copies_most(lengths, at_least):
        return text + tr("It copies: notebook 03's induction heads look back for the token that followed the "
                         "current one last time and predict it again. That is why the guesses of prompt lookup, "
                         "copied from the prompt the same way, are so often right on this kind of text.")
    return text + tr("It copies little: its induction heads were trained on rows of random tokens (its model card "
                     "says how), and the next cells count what makes text harder to copy. Prompt lookup's guesses "
                     "are then right mostly where the answer repeats itself.")


def one_answer(shares: dict, random_name: str, lengths: dict, at_least: int = 24) -> str:
    """``{name: {n: share}}`` from ``speculative.bench.one_answer_shares`` (names ``en 1``, ``zh 1`` ...) plus the
    random tokens' row under ``random_name``: how often looking back for the last n tokens finds one answer.
    ``lengths``, ``at_least``: the copies ``copying`` narrated."""
    def med(lang: str, n: int) -> float:
        return statistics.median(v[n] for k, v in shares.items() if k.startswith(lang + " "))

    ns = sorted(shares[random_name])
    one, last = ns[0], ns[-1]
    count = sum(k.startswith("en ") for k in shares)
    text = tr("Looking back for the current token alone, as an induction head does, found one answer, the right "
              "one, for **{e:.0%}** of the English answer's tokens and **{z:.0%}** of the Chinese (medians of {n} "
              "passages each); for notebook 03's random tokens, all different, **{r:.0%}**. ",
              e=med("en", one), z=med("zh", one), n=count, r=shares[random_name][one])
    text += tr("Looking back for the last {n} tokens, prompt lookup's n-gram, found one for **{e:.0%}** and "
               "**{z:.0%}**. ", n=last, e=med("en", last), z=med("zh", last))
    text += tr("In text, the same word, comma or line break recurs, followed each time by something else: to copy "
               "{a} tokens in a row, a model must match two or three tokens back at nearly every step, as prompt "
               "lookup does by construction. ", a=at_least)
    if copies_most(lengths, at_least):
        return text + tr("This model does: its copies above run on.")
    return text + tr("This model does not: most of its copies above end before {a} tokens.", a=at_least)


def drafts(gains) -> str:
    """``DraftGain``s, one that pays and one that does not (or whichever the numbers say)."""
    parts = []
    for g in gains:
        pays = g.speedup >= 1.0
        verdict = tr("**pays**") if pays else tr("**does not pay**")
        why = (tr("alpha is well above c") if g.alpha > g.c else tr("alpha is not above c"))
        parts.append(tr("- **{name}**: alpha = {a:.2f} (guesses accepted), c = {c:.2f} (a guess costs that share of "
                        "a target step), k = {k}. Expected tokens per round {e:.2f}, measured {m:.2f}; predicted "
                        "speed-up {p:.2f}x, measured {x:.2f}x: it {verdict} ({why}).", name=g.draft, a=g.alpha, c=g.c,
                        k=g.k, e=g.expected_tokens_per_round, m=g.tokens_per_round, p=g.predicted_speedup,
                        x=g.speedup, verdict=verdict, why=why))
    off = [abs(g.predicted_speedup / g.speedup - 1) for g in gains]
    tail = (tr("The prediction from alpha and c came within {e:.0%} of the measurement for each draft.", e=max(off))
            if max(off) <= 0.15 else
            tr("The prediction missed the measurement by up to {e:.0%}: the formula treats each guess as accepted "
               "independently, with the same chance, while real guesses come right or wrong in runs (a copied "
               "passage holds for many tokens, then fails).", e=max(off)))
    return "\n".join(parts) + "\n\n" + tail


def exactness(equal: int, total: int, ex) -> str:
    """Greedy equality counts and an ``Exactness`` (sampling)."""
    text = (tr("Greedy: **{e} of {t}** answers were identical to `il.generate`'s, token for token. ", e=equal, t=total)
            if equal == total else
            tr("Greedy: only {e} of {t} answers were identical to `il.generate`'s: compare the first token where "
               "they differ with its logit margin (a near-tie flipped by rounding, or a bug). ", e=equal, t=total))
    rule, wrong = ex.rule[-1], ex.accept_all[-1]
    if rule < wrong / 3:
        return text + tr("Sampling: after {n:,} draws the rejection rule's tokens were {r:.3f} from the target's own "
                         "probabilities (total-variation distance, shrinking as the draws grow: sampling noise), while "
                         "accepting every guess stayed {w:.3f} away, the distance between the draft's distribution and "
                         "the target's. Rejection sampling hands the draft's mistakes back to the target.",
                         n=ex.draws[-1], r=rule, w=wrong)
    return text + tr("Sampling: after {n:,} draws the rule was {r:.3f} from the target and accepting every guess "
                     "{w:.3f}: too close to tell apart here (the draft agrees with the target on this prompt); try a "
                     "prompt where they disagree.", n=ex.draws[-1], r=rule, w=wrong)


def server(gain_1, gain_b, batch: int, k: int, verify_1: float = 1.0) -> str:
    """Predicted speed-ups at batch 1 and at ``batch``, at ``k`` guesses, from each batch's verify cost;
    ``verify_1``: the batch-1 verify of k + 1 tokens over one token."""
    if verify_1 < 0.95:
        lead = tr("At batch 1 the verify of {n} tokens took {v:.2f}x one token's forward (this CPU's one-row dip), "
                  "so k = {k} guesses predict **{a:.2f}x**, more than the guesses alone give; ", n=k + 1, v=verify_1,
                  k=k, a=gain_1)
    else:
        lead = tr("At batch 1 the verify costs about one step, so k = {k} guesses predict **{a:.2f}x**; ", k=k,
                  a=gain_1)
    text = lead + tr("at batch {b} the same guesses predict **{c:.2f}x**. ", b=batch, c=gain_b)
    if gain_b < gain_1:
        return text + tr("A batch of {b} already fills the step with arithmetic: {b} x (k + 1) tokens per forward "
                         "turn it compute-bound, and every rejected guess now costs real time. This is why engines "
                         "report speculation's gains at low load and turn it down or off at high load (vLLM measured "
                         "1.5x for a draft model and 2.8x for n-gram lookup at low load, and 1.4-1.8x *slower* at high "
                         "load).", b=batch)
    return text + tr("On this machine the gain held at batch {b}: its step was still limited by reading the weights. "
                     "On a GPU, where a step turns compute-bound at far larger batches, the same happens later.",
                     b=batch)


def transformers(lookup_rows, draft_rows) -> str:
    """``RaceRow``s of prompt lookup and of a draft model, each against transformers' own speculative decoding."""
    med = statistics.median
    lk = med(r.over("speculative", "transformers") for r in lookup_rows)
    dr = med(r.over("speculative", "transformers") for r in draft_rows)
    same = all(r.same_tokens["transformers"] for r in [*lookup_rows, *draft_rows])
    text = tr("Against transformers' own speculative decoding on the same model, prompts and k: prompt lookup ran at "
              "**{lk:.2f}x** its `prompt_lookup_num_tokens`, the draft model at **{dr:.2f}x** its "
              "`assistant_model`. ", lk=lk, dr=dr)
    text += (tr("Every answer matched, token for token: the same algorithm, greedy. ") if same else
             tr("**Some answers differ** (see the table): both sides are greedy, so a difference is a near-tie "
                "flipped by rounding or a bug. "))
    return text + tr("The gap is the forward, not the algorithm: ours verifies on the fast path's packed products, "
                     "transformers' on its modules; and transformers reads the draft's settings (k, its schedule, a "
                     "confidence threshold) from the draft model's own `generation_config`, which the comparison set "
                     "to a constant k.")
