"""Notebook 03's findings (attention and heads), told from its own numbers; each with its other-outcome branch.

>>> concentration(layer=1, head=2, peak_max=0.61, peak_min=0.2, tokens=25)[:40]
'The most concentrated head is layer 1, h'
"""

from __future__ import annotations

from ..heads import CHANCE_FACTOR, HEAD_KINDS, Ablation, HeadScores

ARTICLES = "00_start_here.ipynb#the-two-source-articles"
KIND_NAMES = {"previous": "previous-token", "first": "first-token", "induction": "induction"}


def head_dim_scale(d_model: int, n_head: int, head_dim: int) -> str:
    """Why the scores are divided by sqrt(head_dim)."""
    return (f"With `d_model` = {d_model} and {n_head} heads, each head works in `head_dim` = {head_dim} "
            f"dimensions, so the scores are divided by sqrt({head_dim}) = {head_dim ** 0.5:.2f} (the `scale` "
            "above is its inverse).")


def concentration(layer: int, head: int, peak_max: float, peak_min: float, tokens: int) -> str:
    """The most and least concentrated heads (mean of each row's largest weight) against even spreading."""
    even = 1 / tokens
    text = (f"The most concentrated head is layer {layer}, head {head}: on average each of its rows (after the "
            f"first) puts {peak_max:.2f} of its weight on a single key; the least concentrated, {peak_min:.2f}. "
            f"Evenly spread over the longest row would be {even:.2f}.")
    if peak_max < 2 * even:
        return text + " No head here is much more focused than even spreading: this model's heads barely choose."
    return text


def last_token_row(piece: str, tokens: int, weight: float, top_piece: str, top_pos: int) -> str:
    """Where the last token's row puts its largest weight."""
    even = 1 / tokens
    where = "well above" if weight >= 2 * even else "close to"
    return (f"The last token {piece!r} spreads its weight over {tokens} keys; its largest weight, {weight:.3f}, "
            f"goes to {top_piece!r} (position {top_pos}), {where} the even share of {even:.3f} each.")


def _verdict(scores: HeadScores, kind: str) -> str:
    layer, head, s = scores.top(kind)
    base = scores.baseline[kind]
    ok = scores.above_chance(kind)
    tail = "above chance" if ok else f"**not above chance** (we ask for {CHANCE_FACTOR:g} x)"
    return (f"- **{KIND_NAMES[kind]}**: the highest-scoring head is layer {layer}, head {head}, at {s:.3f}, "
            f"{s / base:.1f} x the even-spread score {base:.3f}: {tail}.")


def induction_note(scores: HeadScores) -> str:
    """Whether the top induction-scoring head can be an induction head (it needs an earlier previous-token head)."""
    c = scores.induction_check()
    if c.is_induction:
        pl, ph, ps = c.previous_before[0]
        return (f"Layer {c.layer}, head {c.head} behaves as an induction head, and it can be one: layer {pl}, "
                f"head {ph} (an earlier layer) is a previous-token head (score {ps:.2f}) that can tell it which "
                "token came before each key.")
    if not c.above_chance:
        return ("No head scores induction above chance here, so this model shows **no induction head**. (Even a "
                "high score in layer 0 would not count: an induction head finds the token that *followed* an "
                "earlier copy, which needs a previous-token head in an earlier layer to have copied each "
                "token's predecessor into it first.)")
    if c.layer == 0:
        return (f"Layer 0, head {c.head} scores above chance, but it **cannot be an induction head**: "
                "induction needs a previous-token head in an *earlier* layer, and layer 0 has none before it.")
    return (f"Layer {c.layer}, head {c.head} scores above chance, but no earlier layer has a previous-token head "
            "above chance, so the mechanism an induction head needs is missing: treat the score as a coincidence.")


def top_heads(scores: HeadScores) -> str:
    """The highest-scoring head of each kind, whether it beats chance, and the induction check."""
    lines = "\n".join(_verdict(scores, k) for k in HEAD_KINDS)
    return f"The highest-scoring head of each kind:\n{lines}\n\n{induction_note(scores)}"


def head_title(scores: HeadScores, kind: str) -> str:
    """A figure title that says what the top head of ``kind`` is, and no more."""
    layer, head, _ = scores.top(kind)
    if kind == "induction" and not scores.induction_check().is_induction:
        return f"Highest induction score, not an induction head: layer {layer}, head {head} (BOS + R + R)"
    if not scores.above_chance(kind):
        return f"Highest-scoring {KIND_NAMES[kind]} head, not above chance: layer {layer}, head {head}"
    suffix = " (BOS + R + R)" if kind == "induction" else ""
    return f"Top {KIND_NAMES[kind]} head: layer {layer}, head {head}{suffix}"


def kinds_summary(scores: HeadScores) -> str:
    """Which kinds this model shows, with the real-GPT-2 pointer when some are missing."""
    strong = [KIND_NAMES[k] for k in HEAD_KINDS if scores.above_chance(k)
              and (k != "induction" or scores.induction_check().is_induction)]
    if len(strong) == len(HEAD_KINDS):
        return "This model shows every kind: " + ", ".join(strong) + " heads all score above chance."
    return (f"Kinds this model shows: {', '.join(strong) or 'none'}. A small model trained briefly may lack some "
            "kinds; real GPT-2 is known to have strong previous-token and induction heads: load it "
            "(`il.load('gpt2')`) and run this section again.")


def entropy(layer: int, head: int, bits: float, widest_layer: int, widest_bits: float, even_bits: float) -> str:
    """The most focused head and the least focused layer against even spreading."""
    text = (f"The most focused head is layer {layer}, head {head} ({bits:.2f} bits); the least focused layer on "
            f"average is layer {widest_layer} ({widest_bits:.2f} bits); even spreading over this prompt would give "
            f"{even_bits:.2f} bits.")
    if bits > 0.8 * even_bits:
        return text + " Every head is close to even spreading: this model's attention hardly picks anything out."
    return text


def logit_lens(names: list[str], agree: list[float], echo: float) -> str:
    """How early each stage's top guess equals the final one; the embeddings stage echoes its input."""
    text = ("Share of positions where a stage's top guess already equals the final one: "
            + ", ".join(f"{n}: {v:.0%}" for n, v in zip(names, agree)) + ". ")
    if echo >= 0.5:
        return text + (f"The embeddings stage guesses the input token itself at {echo:.0%} of positions: GPT-2's LM "
                       "head is the token-embedding matrix again (tied weights), so a vector that is still mostly "
                       "its own embedding scores highest against itself.")
    return text + (f"The embeddings stage guesses the input token itself at only {echo:.0%} of positions, although "
                   "GPT-2's LM head is the token-embedding matrix again (tied weights): at this stage the vector is "
                   "its token's row plus a position vector, and that addition (with the final LayerNorm) is enough "
                   "to change the top guess at the other positions.")


def ablation(ab: Ablation, what: str) -> str:
    """Does switching the heads off matter? ``what`` names the sequence scored (e.g. "the second copy")."""
    off = ", ".join(f"layer {a}" + (" (every head)" if b is None else f", head {b}") for a, b in ab.heads)
    change = ab.loss_off - ab.loss
    text = (f"Switching off {off} moves the loss on {what} from {ab.loss:.3f} to {ab.loss_off:.3f} nats per token "
            f"({change:+.3f}), and the next-token distribution by {ab.kl_bits:.3g} bits (KL). ")
    if change > 0.05 * abs(ab.loss) or ab.kl_bits > 0.1:
        return text + "That is a real change: the model leans on what this switched off."
    return text + ("That is next to nothing: on its own it does not matter here (other heads may do the same job, "
                   "or none does it at all).")


def kernel_cost(ratio: float, tokens: int, repeats: int, mib: float, gpt2_layers: int, gpt2_heads: int,
                gpt2_ctx: int, gpt2_mib: float) -> str:
    """Eager against SDPA, and the memory a recorded prefill holds (it grows with T squared)."""
    if ratio > 1.15:
        speed = f"Here eager took {ratio:.2f} x the time of SDPA for {tokens} tokens (medians of {repeats})"
    else:
        speed = (f"Here eager took {ratio:.2f} x the time of SDPA for {tokens} tokens (medians of {repeats}): at "
                 "this size the two kernels cost about the same, since the T x T matrix is still small")
    return (f"{speed}, and keeping every probability of that pass holds {mib:.2f} MiB. The bytes grow with T "
            f"squared: real GPT-2 ({gpt2_layers} layers x {gpt2_heads} heads) at its full {gpt2_ctx} tokens would "
            f"hold {gpt2_mib:.0f} MiB for one prefill.")
