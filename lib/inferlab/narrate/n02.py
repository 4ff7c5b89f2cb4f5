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
               pair_top: float, own_median: float, own_top: float, margin: float = 0.1) -> str:
    """``query``'s neighbours judged first against the query's own background (its cosines with random learned
    tokens: median ``own_median``, 99.9th percentile ``own_top``, ``VocabSpace.background``) and against a random
    table at the same rank (``chance``); then what random pairs of other tokens score (median ``pair_median``, 99th
    percentile ``pair_top``, ``VocabSpace.typical_cosine``) and why that yardstick can mislead.
    """
    above = [t for t, c in zip(tokens, cosines) if c > own_top]
    text = tr("Against its own background: {query!r} has median cosine {own} with a random learned token, and only 1 "
              "random token in 1,000 scores above {own_top}. ", query=query, own=_num(own_median),
              own_top=_num(own_top))
    text += (tr("**{n} of its {total} neighbours score above that** (best {best:.2f}): {above}. ", n=len(above),
                total=len(tokens), best=cosines[0], above=above) if above else
             tr("**None of its {total} neighbours scores above that** (best {best:.2f}): none stands out from what "
                "random tokens score against it. ", total=len(tokens), best=cosines[0]))
    beat = [t for t, c, r in zip(tokens, cosines, chance) if c - r > margin]
    text += (tr("Against a random table with no structure (the black ticks), {n} of {total} beat the score at their "
                "rank by more than {margin}. ", n=len(beat), total=len(tokens), margin=margin) if beat else
             tr("Nor does any neighbour clearly beat a random table with no structure (the black ticks). "))
    text += tr("A third yardstick, random pairs of *other* learned tokens, has median {median} and a 99th percentile "
               "of {top}. ", median=_num(pair_median), top=_num(pair_top))
    if pair_top > 0.9:
        text += tr("A 99th percentile that high means at least 1% of random pairs point in almost the same direction: "
                   "a crowd of learned rows sits in one narrow cone (why is a hypothesis, not measured here: e.g. "
                   "rows of rare tokens that training moved little, and alike). ")
    if own_median < pair_median - 0.2:
        text += tr("{query!r} is not in that crowd (its own median is {own}, against {median} for random pairs), so "
                   "that yardstick says nothing about it: its neighbours are judged against its own background "
                   "above.", query=query, own=_num(own_median), median=_num(pair_median))
    return text.rstrip()


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


def cohesion(groups: dict[str, tuple[float, float]], margin: float = 0.2) -> str:
    """A table of group cohesion against background, then which groups are clearly together.

    Group names are shown as given (the notebook chooses them, in the reader's language).
    """
    rows = [tr("| group | within the group | background | difference |"), "|---|---|---|---|"]
    rows += [f"| {group_name(g)} | {a:.2f} | {b:.2f} | {a - b:+.2f} |" for g, (a, b) in groups.items()]
    together = [group_name(g) for g, (a, b) in groups.items() if round(a - b, 2) > margin]
    verdict = (tr("Groups clearly above their background (difference above {margin}): **{groups}**.", margin=margin,
                  groups=join(together)) if together else
               tr("No group is clearly above its background (no difference above {margin}).", margin=margin))
    return "\n".join(rows) + "\n\n" + verdict


def projection(kept: float) -> str:
    """What share of the chosen words' variance a PCA picture keeps, and what that means for reading it."""
    return tr("The 2-D picture keeps {kept:.0%} of these words' variance, so a cluster missing from the table above "
              "can appear in the picture by accident, and a real one can hide.", kept=kept)
