"""Notebook 02's findings (embeddings), told from its own numbers; each function has its other-outcome branch.

>>> print(shared_rows(100, 1000, 0.5)[:12])
**100** of t
"""

from __future__ import annotations

from ..i18n import tr
from ..vocab_space import group_name
from . import join


def _num(x: float) -> str:
    """Two decimals, never "-0.00" (a tiny negative is shown as 0.00)."""
    return f"{x:.2f}".replace("-0.00", "0.00")


def shared_rows(n_shared: int, vocab: int, pair_median: float) -> str:
    """How many rows are one shared untrained copy, and what random pairs of the other rows look like."""
    text = (tr("**{n:,}** of the {vocab:,} rows are exact copies of one shared vector ({share:.0%}): tokens the model "
               "never learned a vector for. Searches below leave them out. ", n=n_shared, vocab=vocab,
               share=n_shared / vocab)
            if n_shared else tr("No row is a shared copy: every token has a vector of its own. "))
    text += tr("Two random tokens with learned rows have median cosine **{median:.2f}**. ", median=pair_median)
    if pair_median > 0.3:
        return text + tr("That is high: most learned rows lean the same way, so a cosine must be judged against what "
                         "random pairs score, not against zero.")
    return text + tr("Near zero: rows point in all directions, so a clearly positive cosine stands out.")


def neighbours(query: str, cosines: list[float], tokens: list[str], chance: list[float], pair_median: float,
               pair_top: float, own_median: float, margin: float = 0.1) -> str:
    """``query``'s neighbours judged against random pairs of learned tokens (median, 99th percentile ``pair_top``)
    and against a random table at the same rank (``chance``); ``own_median``: the query's median with random tokens.
    """
    above = [t for t, c in zip(tokens, cosines) if c > pair_top]
    over_median = [t for t, c in zip(tokens, cosines) if c > pair_median]
    text = tr("The best neighbour of {query!r} scores {best:.2f}. Random pairs of learned tokens have median cosine "
              "{median}, and 1% of them score above {top}. ", query=query, best=cosines[0],
              median=_num(pair_median), top=_num(pair_top))
    if above:
        text += tr("{n} of the {total} neighbours are above that 1%: {above}. ", n=len(above), total=len(tokens),
                   above=above)
    elif len(over_median) == 1:
        text += tr("None is in that top 1%; {n} of {total} scores above the median of random pairs ({over}), the "
                   "rest below it. ", n=len(over_median), total=len(tokens), over=over_median)
    elif over_median:
        text += tr("None is in that top 1%; {n} of {total} score above the median of random pairs ({over}), the "
                   "rest below it. ", n=len(over_median), total=len(tokens), over=over_median)
    else:
        text += tr("**None of the neighbours scores even as high as a typical random pair**: by raw cosine, nothing "
                   "in this list is closer to it than two tokens picked at random. ")
    beat = [t for t, c, r in zip(tokens, cosines, chance) if c - r > margin]
    text += (tr("Against a random table with no structure (the black ticks), {n} of {total} beat the score at their "
                "rank by more than {margin}. ", n=len(beat), total=len(tokens), margin=margin) if beat else
             tr("Nor does any neighbour clearly beat a random table with no structure (the black ticks). "))
    if own_median < pair_median - 0.2:
        text += tr("Both facts hold because most learned rows lean the same way while the row of {query!r} does not "
                   "(its median cosine with a random token is {own}): the list ranks the rows least far from it. "
                   "Whether they share its meaning is for you to read, not something these cosines prove.",
                   query=query, own=_num(own_median))
    return text


def row_strips(n_rows: int, d_model: int, norm_min: float, norm_max: float, largest: float) -> str:
    """What the strips of ``wte[ids]`` show: row lengths and the largest single value."""
    text = tr("The strips show {n_rows} rows of {d_model} numbers each. Their lengths (Euclidean norms) range from "
              "{lo:.2f} to {hi:.2f}; the largest single value is {largest:.3f}. ", n_rows=n_rows, d_model=d_model,
              lo=norm_min, hi=norm_max, largest=largest)
    if norm_max > 2 * norm_min:
        return text + tr("Some rows are more than twice as long as others: the table does not give every token a "
                         "vector of the same size.")
    return text + tr("The rows have similar lengths: what tells tokens apart is the direction of the row, not its "
                     "size.")


def position_smoothness(near: float, far: float, rand_near: float, rand_far: float, gap: int) -> str:
    """Whether neighbouring positions look alike, against a random table of the same shape."""
    text = tr("Neighbouring positions (p, p+1) have mean cosine **{near}**; positions more than {gap} apart "
              "**{far}**. A random table of the same shape gives {rand_near} and {rand_far}. ", near=_num(near),
              gap=gap, far=_num(far), rand_near=_num(rand_near), rand_far=_num(rand_far))
    if near > rand_near + 0.2 and near > far + 0.2:
        return text + tr("So this model's positions **do** have smooth structure: nearby positions look alike.")
    return text + tr("So this model's position table shows **little smooth structure**: nearby positions are barely "
                     "more alike than distant ones. Its training was too short to shape it the way real GPT-2's is.")


def token_vs_position(tok_norm: float, pos_norm: float) -> str:
    """Which part of the first residual vector is larger on average: the token part or the position part."""
    if tok_norm > pos_norm:
        return tr("On average the token part has length {tok:.2f} and the position part {pos:.2f}: the token part is "
                  "larger, and the sum carries both.", tok=tok_norm, pos=pos_norm)
    return tr("On average the token part has length {tok:.2f} and the position part {pos:.2f}: the position part is "
              "as large or larger, so *where* a token sits weighs as much as *which* token it is in what block 0 "
              "receives.", tok=tok_norm, pos=pos_norm)


def cohesion(groups: dict[str, tuple[float, float]], kept: float, margin: float = 0.2) -> str:
    """A table of group cohesion against background, then which groups are clearly together.

    Group names are shown as given (the notebook chooses them, in the reader's language).
    """
    rows = [tr("| group | within the group | background | difference |"), "|---|---|---|---|"]
    rows += [f"| {group_name(g)} | {a:.2f} | {b:.2f} | {a - b:+.2f} |" for g, (a, b) in groups.items()]
    together = [group_name(g) for g, (a, b) in groups.items() if round(a - b, 2) > margin]
    verdict = (tr("Groups clearly above their background (difference above {margin}): **{groups}**.", margin=margin,
                  groups=join(together)) if together else
               tr("No group is clearly above its background (no difference above {margin}).", margin=margin))
    return ("\n".join(rows) + "\n\n" + verdict + tr(" The 2-D picture keeps {kept:.0%} of these words' variance, so a "
                                                    "cluster missing from this table can appear in the picture by "
                                                    "accident, and a real one can hide.", kept=kept))
