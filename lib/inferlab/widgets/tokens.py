"""Token widgets: a type-any-text box with chips and counts, and a BPE merge stepper.

    >>> from inferlab.widgets import tokens as wt        # doctest: +SKIP
    >>> wt.token_box(m.tokenizer)                         # type text, see its tokens
    >>> wt.bpe_stepper(" inference")                      # step through the merges of a word
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import ipywidgets as w

from ..bpe import BPE, gpt2_bpe
from ..i18n import tr
from ..tokens import EXAMPLES, MAX_CHARS, tokenize, visible
from ..viz.tokens import byte_map_html, chips_html, merge_table_html, stats_html, text_name
from . import message, titled

_TYPED = "(your own text)"  # the dropdown's value for typed text; its label is in the reader's language
DEBOUNCE_S = 0.15  # redraw this long after the last keystroke (Transformer Explainer waits about as long)


def _call_later(delay: float, fn: Callable[[], None]):
    """Run ``fn`` after ``delay`` seconds on the kernel's event loop; without a running loop, run it now."""
    try:
        return asyncio.get_running_loop().call_later(delay, fn)
    except RuntimeError:  # no loop (a plain script or a test): nothing to wait for
        fn()
        return None


class Debouncer:
    """Call ``fn`` once, ``wait`` seconds after the last of a burst of calls (each keystroke restarts the wait).

    ``schedule(delay, callback)`` starts the wait and returns a handle with ``cancel()``; the default uses
    the kernel's asyncio loop. ``flush()`` runs a pending call at once.

    >>> calls = []
    >>> d = Debouncer(calls.append, 0.15, schedule=lambda delay, cb: None)   # never fires by itself
    >>> d("a"); d("ab"); d.flush(); calls
    ['ab']
    """

    def __init__(self, fn: Callable, wait: float = DEBOUNCE_S, *,
                 schedule: Callable[[float, Callable[[], None]], object] = _call_later):
        self.fn, self.wait, self.schedule = fn, wait, schedule
        self._handle = None
        self._pending: tuple | None = None

    def __call__(self, *args) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._pending = args
        self._handle = self.schedule(self.wait, self.flush)

    def flush(self) -> None:
        """Run the pending call now (if any)."""
        args, self._pending, self._handle = self._pending, None, None
        if args is not None:
            self.fn(*args)


def token_box(tokenizer, text: str | None = None, examples: Mapping[str, str] = EXAMPLES, *,
              max_chars: int = MAX_CHARS, debounce_s: float = DEBOUNCE_S,
              schedule: Callable[[float, Callable[[], None]], object] = _call_later) -> w.VBox:
    """A text box: type any text (or pick an example) and see its tokens, count, chars/token, bytes/token.

    The chips follow the typing: every keystroke reaches the kernel (``continuous_update=True``) and the
    view redraws ``debounce_s`` seconds after the last one, so a fast typist costs one redraw, not twenty.

    Args:
        tokenizer: GPT-2's tokenizer (``m.tokenizer``).
        text: the starting text (default: the first example).
        examples: name -> text, offered in a dropdown.
        max_chars: longer text gets a message instead of chips.
        debounce_s, schedule: the wait after the last keystroke and how it is scheduled (see ``Debouncer``).

    Returns:
        A VBox ``[dropdown, text area, view]``; ``box.debouncer`` holds the pending redraw.
    """
    names = [_TYPED, *examples]
    first = next(iter(examples.values()), "") if text is None else text
    pick = w.Dropdown(options=[(tr("(your own text)"), _TYPED), *((text_name(name), name) for name in examples)],
                      value=names[1] if text is None and examples else _TYPED,
                      description=tr("Example:"), layout=w.Layout(width="320px"))
    box = w.Textarea(value=first, placeholder=tr("Type any text..."), continuous_update=True,
                     layout=w.Layout(width="100%", height="90px"))
    view = w.HTML()

    def redraw(_=None) -> None:
        t = box.value
        if not t:
            view.value = message(tr("The box is empty: type some text (or pick an example) to see its tokens."),
                                 "info")
            return
        if len(t) > max_chars:
            view.value = message(tr("That text has {n:,} characters; this box shows at most {max_chars:,}. "
                                    "Paste a shorter piece.", n=len(t), max_chars=max_chars))
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

    later = Debouncer(redraw, debounce_s, schedule=schedule)

    def typed(_change) -> None:
        if pick.value != _TYPED and box.value != examples.get(pick.value):
            pick.value = _TYPED
        later()

    pick.observe(choose, names="value")
    box.observe(typed, names="value")
    redraw()
    view_box = titled(w.VBox([pick, box, view]), tr("Token box: type any text (or pick an example) and its "
                                                    "tokens appear as chips as you type; run the cell to use it"))
    view_box.debouncer = later  # type: ignore[attr-defined]
    return view_box


def bpe_stepper(text: str = " inference", bpe: BPE | None = None) -> w.VBox:
    """Step through byte-level BPE: pick a chunk of ``text``, move the slider one merge at a time.

    Args:
        text: any text; it is first cut into chunks (words with their leading space, digits, ...).
        bpe: the hand-written tokenizer (default: GPT-2's files, ``inferlab.bpe.gpt2_bpe()``).
    """
    bpe = bpe or gpt2_bpe()
    box = w.Text(value=text, description=tr("Text:"), continuous_update=False, layout=w.Layout(width="420px"))
    chunk = w.Dropdown(description=tr("Chunk:"), layout=w.Layout(width="320px"))
    step = w.IntSlider(value=0, min=0, max=0, description=tr("Merges:"), continuous_update=True)
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
            view.value = message(tr("Type a word (try ' inference' with its leading space, or '量子')."), "info")
            return
        if len(box.value) > 200:
            chunk.options = []
            view.value = message(tr("{n:,} characters is too long to step through; type one word or "
                                    "a short phrase (200 characters at most).", n=len(box.value)))
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
    return titled(w.VBox([w.HBox([box, chunk]), step, view]), tr(
        "BPE stepper: type a word, pick a chunk and move the slider one merge at a time; run the cell to use it"))
