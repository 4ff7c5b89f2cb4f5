"""Token widgets: a type-any-text box with chips and counts, and a BPE merge stepper.

    >>> from inferlab.widgets import tokens as wt        # doctest: +SKIP
    >>> wt.token_box(m.tokenizer)                         # type text, see its tokens
    >>> wt.bpe_stepper(" inference")                      # step through the merges of a word
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as w

from ..tokens import BPE, EXAMPLES, MAX_CHARS, gpt2_bpe, tokenize, visible
from ..viz.tokens import byte_map_html, chips_html, merge_table_html, stats_html
from . import message

_TYPED = "(your own text)"


def token_box(tokenizer, text: str | None = None, examples: Mapping[str, str] = EXAMPLES, *,
              max_chars: int = MAX_CHARS) -> w.VBox:
    """A text box: type any text (or pick an example) and see its tokens, count, chars/token, bytes/token.

    Args:
        tokenizer: GPT-2's tokenizer (``m.tokenizer``).
        text: the starting text (default: the first example).
        examples: name -> text, offered in a dropdown.
        max_chars: longer text gets a message instead of chips.
    """
    names = [_TYPED, *examples]
    first = next(iter(examples.values()), "") if text is None else text
    pick = w.Dropdown(options=names, value=names[1] if text is None and examples else _TYPED,
                      description="Example:", layout=w.Layout(width="320px"))
    box = w.Textarea(value=first, placeholder="Type any text...", continuous_update=False,
                     layout=w.Layout(width="100%", height="90px"))
    view = w.HTML()

    def redraw(_=None) -> None:
        t = box.value
        if not t:
            view.value = message("The box is empty: type some text (or pick an example) to see its tokens.", "info")
            return
        if len(t) > max_chars:
            view.value = message(f"That text has {len(t):,} characters; this box shows at most {max_chars:,}. "
                                 "Paste a shorter piece.")
            return
        try:
            tok = tokenize(tokenizer, t, max_chars=max_chars)
        except (ValueError, TypeError) as exc:
            view.value = message(str(exc))
            return
        view.value = stats_html(tok) + chips_html(tok)

    def choose(change) -> None:
        if change["new"] != _TYPED:
            box.value = examples[change["new"]]  # triggers redraw

    def typed(_change) -> None:
        if pick.value != _TYPED and box.value != examples.get(pick.value):
            pick.value = _TYPED
        redraw()

    pick.observe(choose, names="value")
    box.observe(typed, names="value")
    redraw()
    return w.VBox([pick, box, view])


def bpe_stepper(text: str = " inference", bpe: BPE | None = None) -> w.VBox:
    """Step through byte-level BPE: pick a chunk of ``text``, move the slider one merge at a time.

    Args:
        text: any text; it is first cut into chunks (words with their leading space, digits, ...).
        bpe: the hand-written tokenizer (default: GPT-2's files, ``inferlab.tokens.gpt2_bpe()``).
    """
    bpe = bpe or gpt2_bpe()
    box = w.Text(value=text, description="Text:", continuous_update=False, layout=w.Layout(width="420px"))
    chunk = w.Dropdown(description="Chunk:", layout=w.Layout(width="320px"))
    step = w.IntSlider(value=0, min=0, max=0, description="Merges:", continuous_update=True)
    view = w.HTML()
    works: dict[str, object] = {}

    def show(_=None) -> None:
        work = works.get(chunk.value)
        if work is None:
            return
        view.value = byte_map_html(work) + merge_table_html(work, upto=step.value)

    def pick(_=None) -> None:
        work = works.get(chunk.value)
        if work is None:
            return
        step.max = len(work.steps)
        step.value = 0
        show()

    def split(_=None) -> None:
        works.clear()
        if not box.value:
            chunk.options = []
            view.value = message("Type a word (try ' inference' with its leading space, or '量子').", "info")
            return
        if len(box.value) > 200:
            chunk.options = []
            view.value = message(f"{len(box.value):,} characters is too long to step through; type one word or "
                                 "a short phrase (200 characters at most).")
            return
        try:
            chunks = bpe.encode_and_show_work(box.value)
        except (ValueError, TypeError) as exc:  # e.g. a lone surrogate: a message, never a traceback
            chunk.options = []
            view.value = message(str(exc))
            return
        for wk in chunks:
            works[visible(wk.word)] = wk
        chunk.options = list(works)
        chunk.value = chunk.options[0]
        pick()

    box.observe(split, names="value")
    chunk.observe(pick, names="value")
    step.observe(show, names="value")
    split()
    return w.VBox([w.HBox([box, chunk]), step, view])
