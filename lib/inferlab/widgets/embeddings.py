"""Embedding widgets: nearest-neighbour search and a PCA explorer where the learner adds words.

Both take a ``VocabSpace`` (``inferlab.vocab_space.vocab_space(m)``), built once: callbacks only index it.

    >>> space = vocab_space(m)                       # doctest: +SKIP
    >>> neighbour_search(space, "king")              # doctest: +SKIP
    >>> pca_explorer(space)                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ipywidgets as w
from IPython.display import display

from ..i18n import tr
from ..viz.embeddings import neighbour_bars, pca_scatter
from ..vocab_space import WORD_GROUPS, VocabSpace
from . import message, titled


def _show(out: w.Output, fig) -> None:
    with out:
        out.clear_output(wait=True)
        display(fig)


def neighbour_search(space: VocabSpace, word: str = "king", k: int = 10) -> w.VBox:
    """Type a word, see the ``k`` tokens whose rows have the highest cosine similarity with its row.

    A word that is several tokens, or whose row the model never learned, gets a message saying why.
    """
    box = w.Text(value=word, description=tr("Word:"), continuous_update=False, layout=w.Layout(width="300px"))
    count = w.IntSlider(value=k, min=3, max=30, description=tr("How many:"), continuous_update=True)  # cheap
    space_first = w.Checkbox(value=True, description=tr("leading space (' king', the form inside a sentence)"),
                             indent=False, layout=w.Layout(width="380px"))
    note, out = w.HTML(), w.Output()

    def redraw(_=None) -> None:
        try:
            nb = space.nearest(box.value, count.value, leading_space=space_first.value)
        except (ValueError, TypeError) as exc:
            note.value = message(str(exc))
            out.clear_output()
            return
        if not nb.items:
            note.value = message(nb.note, "info")
            out.clear_output()
            return
        median, top = space.typical_cosine()
        beat = sum(n.cosine > c for n, c in zip(nb.items, nb.chance))
        over = sum(n.cosine > median for n in nb.items)
        note.value = message(tr("{over} of {n} neighbours score above the median of random pairs of learned tokens "
                                "({median:.2f}, dashed); {beat} beat the same rank in a random table (the black "
                                "ticks).", over=over, n=len(nb.items), median=median, beat=beat), "info")
        _show(out, neighbour_bars(nb, lines={tr("random pairs: median"): median,
                                             tr("random pairs: 99th percentile"): top}))

    for control in (box, count, space_first):
        control.observe(redraw, names="value")
    redraw()
    return titled(w.VBox([w.HBox([box, count]), space_first, note, out]), tr(
        "Neighbour search: type a word and see the tokens whose rows point most the same way (cosine); "
        "run the cell to use it"))


def _parse_words(text: str) -> list[str]:
    """The words of a comma-separated list (a Chinese comma or a newline separates too)."""
    for sep in ("\n", "，", "、"):
        text = text.replace(sep, ",")
    return [t.strip() for t in text.split(",") if t.strip()]


def pca_explorer(space: VocabSpace, groups: Mapping[str, Sequence[str]] = WORD_GROUPS, dims: int = 2) -> w.VBox:
    """The word groups projected by PCA in 2-D or 3-D; type extra words (comma-separated) to add them."""
    extra = w.Text(value="", placeholder=tr("add words, e.g. night, day, sword"), description=tr("Add:"),
                   continuous_update=False, layout=w.Layout(width="420px"))
    which = w.ToggleButtons(options=[(tr("2-D"), 2), (tr("3-D"), 3)], value=dims, description=tr("View:"))
    note, out = w.HTML(), w.Output()

    def redraw(_=None) -> None:
        mine = _parse_words(extra.value)
        if len(mine) > 50:
            note.value = message(tr("{n} words is too many to read in one picture; add at most 50.", n=len(mine)))
            return
        chosen = {**groups, **({tr("your words"): mine} if mine else {})}
        try:
            proj = space.project(chosen, dims=which.value)
        except (ValueError, TypeError) as exc:
            note.value = message(str(exc))
            out.clear_output()
            return
        left = tr("; ").join(f"{word!r}: {why}" for word, why in proj.skipped.items())
        note.value = message(tr("Left out: {words}", words=left) if left else tr("Every word was found."), "info")
        _show(out, pca_scatter(proj))

    extra.observe(redraw, names="value")
    which.observe(redraw, names="value")
    redraw()
    return titled(w.VBox([w.HBox([extra, which]), note, out]), tr(
        "PCA explorer: add comma-separated words to the groups and switch between 2-D and 3-D; "
        "run the cell to use it"))
