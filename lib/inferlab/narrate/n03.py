"""Notebook 03's findings (attention and heads), told from its own numbers; each with its other-outcome branch.

>>> concentration(layer=1, head=2, peak_max=0.61, peak_min=0.2, tokens=25)[:40]
'The most concentrated head is layer 1, h'
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import gate
from ..heads import CHANCE_FACTOR, HEAD_KINDS, Ablation, HeadScores
from ..i18n import by_language, tr
from ..units import ms
from . import join as _join

ARTICLES = "00_start_here.ipynb#the-two-source-articles"
KIND_NAMES = {"previous": "previous-token", "first": "first-token", "induction": "induction"}  # English names


def _kind(kind: str) -> str:
    """A head kind's name in the reader's language (``KIND_NAMES`` in English)."""
    return {"previous": tr("previous-token"), "first": tr("first-token"), "induction": tr("induction")}[kind]


def head_dim_scale(d_model: int, n_head: int, head_dim: int) -> str:
    """Why the scores are divided by sqrt(head_dim)."""
    return tr("With `d_model` = {d_model} and {n_head} heads, each head works in `head_dim` = {head_dim} dimensions, "
              "so the scores are divided by sqrt({head_dim}) = {root:.2f} (the `scale` above is its inverse).",
              d_model=d_model, n_head=n_head, head_dim=head_dim, root=head_dim ** 0.5)


def concentration(layer: int, head: int, peak_max: float, peak_min: float, tokens: int) -> str:
    """The most and least concentrated heads (mean of each row's largest weight) against even spreading."""
    even = 1 / tokens
    text = tr("The most concentrated head is layer {layer}, head {head}: on average each of its rows (after the first) "
              "puts {peak_max:.2f} of its weight on a single key; the least concentrated, {peak_min:.2f}. Evenly "
              "spread over the longest row would be {even:.2f}.", layer=layer, head=head, peak_max=peak_max,
              peak_min=peak_min, even=even)
    if peak_max < 2 * even:
        return text + tr(" No head here is much more focused than even spreading: this model's heads barely choose.")
    return text


def last_token_row(piece: str, tokens: int, weight: float, top_piece: str, top_pos: int) -> str:
    """Where the last token's row puts its largest weight."""
    fields = {"piece": piece, "tokens": tokens, "weight": weight, "top_piece": top_piece, "top_pos": top_pos,
              "even": 1 / tokens}
    if weight >= 2 / tokens:
        return tr("The last token {piece!r} spreads its weight over {tokens} keys; its largest weight, {weight:.3f}, "
                  "goes to {top_piece!r} (position {top_pos}), well above the even share of {even:.3f} each.",
                  **fields)
    return tr("The last token {piece!r} spreads its weight over {tokens} keys; its largest weight, {weight:.3f}, goes "
              "to {top_piece!r} (position {top_pos}), close to the even share of {even:.3f} each.", **fields)


def _verdict(scores: HeadScores, kind: str) -> str:
    layer, head, s = scores.top(kind)
    base = scores.baseline[kind]
    fields = {"kind": _kind(kind), "layer": layer, "head": head, "score": s, "x": s / base, "base": base}
    if scores.above_chance(kind):
        return tr("- **{kind}**: the highest-scoring head is layer {layer}, head {head}, at {score:.3f}, {x:.1f} x the "
                  "even-spread score {base:.3f}: above chance.", **fields)
    return tr("- **{kind}**: the highest-scoring head is layer {layer}, head {head}, at {score:.3f}, {x:.1f} x the "
              "even-spread score {base:.3f}: **not above chance** (we ask for {factor:g} x).", factor=CHANCE_FACTOR,
              **fields)


def induction_note(scores: HeadScores) -> str:
    """Whether the top induction-scoring head can be an induction head (it needs an earlier previous-token head)."""
    c = scores.induction_check()
    if c.is_induction:
        pl, ph, ps = c.previous_before[0]
        return tr("Layer {layer}, head {head} behaves as an induction head, and it can be one: layer {pl}, head {ph} "
                  "(an earlier layer) is a previous-token head (score {ps:.2f}) that can tell it which token came "
                  "before each key.", layer=c.layer, head=c.head, pl=pl, ph=ph, ps=ps)
    if not c.above_chance:
        return tr("No head scores induction above chance here, so this model shows **no induction head**. (Even a "
                  "high score in layer 0 would not count: an induction head finds the token that *followed* an "
                  "earlier copy, which needs a previous-token head in an earlier layer to have copied each token's "
                  "predecessor into it first.)")
    if c.layer == 0:
        return tr("Layer 0, head {head} scores above chance, but it **cannot be an induction head**: induction needs "
                  "a previous-token head in an *earlier* layer, and layer 0 has none before it.", head=c.head)
    return tr("Layer {layer}, head {head} scores above chance, but no earlier layer has a previous-token head above "
              "chance, so the mechanism an induction head needs is missing: treat the score as a coincidence.",
              layer=c.layer, head=c.head)


def top_heads(scores: HeadScores) -> str:
    """The highest-scoring head of each kind, whether it beats chance, and the induction check."""
    lines = "\n".join(_verdict(scores, k) for k in HEAD_KINDS)
    return tr("The highest-scoring head of each kind:") + f"\n{lines}\n\n{induction_note(scores)}"


def head_title(scores: HeadScores, kind: str) -> str:
    """A figure title that says what the top head of ``kind`` is, and no more."""
    layer, head, _ = scores.top(kind)
    if kind == "induction" and not scores.induction_check().is_induction:
        return tr("Highest induction score, not an induction head: layer {layer}, head {head} (BOS + R + R)",
                  layer=layer, head=head)
    if not scores.above_chance(kind):
        return tr("Highest-scoring {kind} head, not above chance: layer {layer}, head {head}", kind=_kind(kind),
                  layer=layer, head=head)
    if kind == "induction":
        return tr("Top induction head: layer {layer}, head {head} (BOS + R + R)", layer=layer, head=head)
    return tr("Top {kind} head: layer {layer}, head {head}", kind=_kind(kind), layer=layer, head=head)


def kinds_summary(scores: HeadScores) -> str:
    """Which kinds this model shows, with the real-GPT-2 pointer when some are missing."""
    strong = [_kind(k) for k in HEAD_KINDS if scores.above_chance(k)
              and (k != "induction" or scores.induction_check().is_induction)]
    if len(strong) == len(HEAD_KINDS):
        return tr("This model shows every kind: {kinds} heads all score above chance.", kinds=_join(strong))
    return tr("Kinds this model shows: {kinds}. A small model trained briefly may lack some kinds; real GPT-2 is known "
              "to have strong previous-token and induction heads: load it (`il.load('gpt2')`) and run this section "
              "again.", kinds=_join(strong) or tr("none"))


def entropy(layer: int, head: int, bits: float, widest_layer: int, widest_bits: float, even_bits: float) -> str:
    """The most focused head and the least focused layer against even spreading."""
    text = tr("The most focused head is layer {layer}, head {head} ({bits:.2f} bits); the least focused layer on "
              "average is layer {widest_layer} ({widest_bits:.2f} bits); even spreading over this prompt would give "
              "{even_bits:.2f} bits.", layer=layer, head=head, bits=bits, widest_layer=widest_layer,
              widest_bits=widest_bits, even_bits=even_bits)
    if bits > 0.8 * even_bits:
        return text + tr(" Every head is close to even spreading: this model's attention hardly picks anything out.")
    return text


def logit_lens(names: list[str], agree: list[float], echo: float) -> str:
    """How early each stage's top guess equals the final one; the embeddings stage echoes its input.

    ``names``: the stages as shown (``LogitLens.stage_labels()``: in the reader's language).
    """
    colon = by_language(en=": ", zh="：")
    shares = by_language(en=", ", zh="，").join(f"{n}{colon}{v:.0%}" for n, v in zip(names, agree))
    text = tr("Share of positions where a stage's top guess already equals the final one: {shares}. ", shares=shares)
    if echo >= 0.5:
        return text + tr("The embeddings stage guesses the input token itself at {echo:.0%} of positions: GPT-2's LM "
                         "head is the token-embedding matrix again (tied weights), so a vector that is still mostly "
                         "its own embedding scores highest against itself.", echo=echo)
    return text + tr("The embeddings stage guesses the input token itself at only {echo:.0%} of positions, although "
                     "GPT-2's LM head is the token-embedding matrix again (tied weights): at this stage the vector is "
                     "its token's row plus a position vector, and that addition (with the final LayerNorm) is enough "
                     "to change the top guess at the other positions.", echo=echo)


def ablation(ab: Ablation, what: str) -> str:
    """Does switching the heads off matter? ``what`` names the sequence scored (e.g. ``il.tr("the second copy")``)."""
    off = _join([tr("layer {layer} (every head)", layer=a) if b is None else
                 tr("layer {layer}, head {head}", layer=a, head=b) for a, b in ab.heads])
    change = ab.loss_off - ab.loss
    text = tr("Switching off {off} moves the loss on {what} from {loss:.3f} to {loss_off:.3f} nats per token "
              "({change:+.3f}), and the next-token distribution by {kl:.3g} bits (KL). ", off=off, what=what,
              loss=ab.loss, loss_off=ab.loss_off, change=change, kl=ab.kl_bits)
    if change > 0.05 * abs(ab.loss) or ab.kl_bits > 0.1:
        return text + tr("That is a real change: the model leans on what this switched off.")
    return text + tr("That is next to nothing: on its own it does not matter here (other heads may do the same job, "
                     "or none does it at all).")


def kernel_cost(ratio: float, tokens: int, repeats: int, mib: float, gpt2_layers: int, gpt2_heads: int,
                gpt2_ctx: int, gpt2_mib: float, runs: Sequence[Sequence[float]] = ()) -> str:
    """Eager against SDPA, and the memory a recorded prefill holds (it grows with T squared).

    ``ratio``: eager's median over SDPA's; above 1.15 eager is slower, below 1 / 1.15 faster, between them about
    the same. ``runs``: each kernel's repeats (seconds, e.g. ``[s.times[0] for s in times.sweeps.values()]``);
    where one kernel's median is beyond ``gate.NOISE_X`` times its fastest run, the run was disturbed and the
    ratio is not read."""
    fields = {"ratio": ratio, "tokens": tokens, "repeats": repeats, "mib": mib}
    noisy = max(runs, key=gate.noise, default=None)
    if noisy is not None and gate.noise(noisy) > gate.NOISE_X:
        speed = tr("Here eager took {ratio:.2f} x the time of SDPA for {tokens} tokens (medians of {repeats}), and "
                   "keeping every probability of that pass holds {mib:.2f} MiB. ", **fields)
        speed += tr("One kernel's runs ranged from {fast} to {slow}, its median {x:.2f}x its fastest (a quiet run "
                    "stays within {limit:g}x), so the ratio is not the kernels'. ", fast=ms(min(noisy)),
                    slow=ms(max(noisy)), x=gate.noise(noisy), limit=gate.NOISE_X) + gate.rerun_cell()
        speed += by_language(en=" ", zh="")
    elif ratio > 1.15:
        speed = tr("Here eager took {ratio:.2f} x the time of SDPA for {tokens} tokens (medians of {repeats}), and "
                   "keeping every probability of that pass holds {mib:.2f} MiB. ", **fields)
    elif ratio < 1 / 1.15:
        speed = tr("Here eager took only {ratio:.2f} x the time of SDPA for {tokens} tokens (medians of {repeats}): "
                   "the kernel that builds the whole T x T matrix was the faster one. At this size, where that "
                   "matrix is still small, the two usually cost about the same, so a gap this wide most often means "
                   "other programs were using the CPU while they were timed: re-run this cell; if it stays, SDPA's "
                   "fused kernel is the slower one on this machine. Keeping every probability of that pass holds "
                   "{mib:.2f} MiB. ",
                   **fields)
    else:
        speed = tr("Here eager took {ratio:.2f} x the time of SDPA for {tokens} tokens (medians of {repeats}): at "
                   "this size the two kernels cost about the same, since the T x T matrix is still small, and keeping "
                   "every probability of that pass holds {mib:.2f} MiB. ", **fields)
    return speed + tr("The bytes grow with T squared: real GPT-2 ({layers} layers x {heads} heads) at its full {ctx} "
                      "tokens would hold {gpt2_mib:.0f} MiB for one prefill.", layers=gpt2_layers, heads=gpt2_heads,
                      ctx=gpt2_ctx, gpt2_mib=gpt2_mib)
