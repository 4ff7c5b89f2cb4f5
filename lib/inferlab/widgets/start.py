"""The start notebook's teaser: the next-token distribution under a temperature slider.

The widget takes the logits (the notebook runs the model once, before); moving the slider only redoes
the arithmetic of ``inferlab.sampling.filter_stages`` and redraws ``viz.sampling.candidate_bars``.
The candidates are listed in the model's order (by logit), so at temperature 0 (greedy: the top token
gets 100%) the runners-up stay the model's runners-up, each with what it would get at temperature 1.

>>> logits, _ = il.prefill(m, m.encode("To be, or not to be,"))      # doctest: +SKIP
>>> next_token_peek(logits[0], m.decode, prompt="To be, or not to be,")   # doctest: +SKIP
"""

from __future__ import annotations

import html

import ipywidgets as w
import torch

from ..bpe import bytes_to_unicode
from ..i18n import tr
from ..sampling import SamplingConfig, filter_stages
from ..viz import show_token
from ..viz.sampling import Decode, candidate_bars, character_parts, piece
from . import message, show_figure


class PeekView(w.VBox):
    """The peek's widgets; its text and HTML representations (a stored, unrun notebook) describe the view."""

    @property
    def summary(self) -> str:
        return tr("Next-token peek: a temperature slider over one next-token distribution")

    def __repr__(self) -> str:
        return f"<{self.summary}>"

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = repr(self)
        headline = html.escape(tr("{summary}.", summary=self.summary))
        use = html.escape(tr("Interactive view: run this cell in JupyterLab to move the slider."))
        bundle["text/html"] = f"<p><b>{headline}</b><br><i>{use}</i></p>"
        return bundle


def ranked(row: torch.Tensor, temperature: float, n: int) -> list[tuple[int, float, float]]:
    """The ``n`` highest logits of ``row`` ``[vocab]`` as (id, probability at ``temperature``, at temperature 1).

    The order is the model's (by logit), whatever the temperature: at 0 the top token gets 1.0 and the
    runners-up 0.0, and their temperature-1 probabilities still say how close they came.

    >>> [(i, p, round(p1, 3)) for i, p, p1 in ranked(torch.tensor([0.0, 2.0, 1.0]), 0.0, 2)]
    [(1, 1.0, 0.665), (2, 0.0, 0.245)]
    """
    probs = filter_stages(row, SamplingConfig(temperature=temperature)).final
    at_one = row.float().softmax(-1)
    top = torch.topk(row, min(n, row.numel())).indices.tolist()
    return [(i, float(probs[i]), float(at_one[i])) for i in top]


def _candidate(token: str, token_id: int, p: float, p_at_one: float | None) -> str:
    """One list item: the token, its id and probability (and what it gets at temperature 1, when greedy)."""
    item = f"<li><code>{html.escape(token)}</code> {html.escape(tr('(id {id}): {p:.1%}', id=token_id, p=p))}"
    if p_at_one is not None:
        item += f" <span style='color:#777'>{html.escape(tr('(at temperature 1: {p:.1%})', p=p_at_one))}</span>"
    return item + "</li>"


_CONTINUES = {symbol for byte, symbol in bytes_to_unicode().items() if 0x80 <= byte < 0xC0}


def characters_begun(model, prompt: str, logits: torch.Tensor, n: int = 8, max_tokens: int = 3) -> dict[int, str]:
    """For each of the top ``n`` candidates that holds only bytes of a character: the character it makes.

    A candidate like ``⟨e5⟩⟨ba⟩`` completes a character the prompt left open, or begins one; then the model
    continues with its likeliest bytes that go on with a character (at most ``max_tokens`` more tokens, a few
    forwards) until the character is whole.
    Pass the result to ``next_token_peek(..., begun=...)`` so its chips name the character, as 01's do.
    This helper runs the model; the peek itself only draws data.

    >>> characters_begun(m, "床前明月光，", logits[0])   # doctest: +SKIP
    {163: '疑', ...}
    """
    from ..engine import decode_step, prefill  # the view modules never run a model; this helper does

    ids = model.encode(prompt)
    row = logits.detach().float().cpu()
    # tokens that go on with a character (their first byte is a continuation byte 10xxxxxx): the only ones
    # that can finish it, so the likeliest of them is the finish, found in at most 3 steps
    goes_on = torch.zeros(row.numel(), dtype=torch.bool)
    for symbol, token_id in model.tokenizer.get_vocab().items():
        if symbol and symbol[0] in _CONTINUES and token_id < row.numel():
            goes_on[token_id] = True
    found = {}
    for cand in torch.topk(row, min(n, row.numel())).indices.tolist():
        seq = [cand]
        text, chars = character_parts(model.decode, seq, context=ids)[0]
        if "⟨" not in text:
            continue
        if not chars:
            step, cache = prefill(model, [ids + seq])
            for _ in range(max_tokens):
                seq.append(int(step[0].float().cpu().masked_fill(~goes_on, float("-inf")).argmax()))
                chars = character_parts(model.decode, seq, context=ids)[0][1]
                if chars or len(ids) + len(seq) >= model.info.n_ctx:
                    break
                step, cache = decode_step(model, seq[-1], cache)
        if chars:
            found[cand] = chars
    return found


def next_token_peek(logits: torch.Tensor, decode: Decode, *, prompt: str | None = None, n: int = 8,
                    begun: dict[int, str] | None = None) -> PeekView:
    """A temperature slider over one next-token distribution: a ranked list and a bar chart of the top ``n``.

    Args:
        logits: ``[vocab]`` next-token logits, e.g. ``il.prefill(m, ids)[0][0]`` (logits are ``[batch, vocab]``).
        decode: ``m.decode`` or a list/dict id -> text.
        prompt: the text the logits continue (only for the titles).
        n: how many candidates to show.
        begun: id -> the character a byte candidate makes (from ``characters_begun``): shown as ``⟨e5⟩⟨ba⟩→床``.

    The text view has the CSS class ``inferlab-peek`` (a stable handle for the browser test).
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(tr("logits must be a 1-D [vocab] tensor, got {shape}. "
                            "Fix: pass logits[0] from il.prefill(m, ids) (logits are [batch, vocab]).", shape=shape))
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(tr("n={n!r} must be an integer >= 1. Fix: pass n=8.", n=n))
    row = logits.detach().float().cpu()
    pieces: dict[int, str] = {}

    begun = dict(begun or {})

    def text_of(i: int) -> str:  # decoding is slow next to the arithmetic: remember each piece
        if i not in pieces:
            pieces[i] = piece(decode, i) + (f"→{begun[i]}" if i in begun else "")
        return pieces[i]

    def text_of_ids(ids: list[int]) -> str:  # the decode signature the figure expects
        return "".join(text_of(int(i)) for i in ids)

    slider = w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description=tr("temperature"),
                           continuous_update=True, readout_format=".2f",
                           style={"description_width": "initial"})  # the whole word, never "temperat…"
    text = w.HTML()
    out = w.Output()

    def draw(_=None) -> None:
        try:
            cfg = SamplingConfig(temperature=float(slider.value))
            probs = filter_stages(row, cfg).final
        except (TypeError, ValueError) as exc:
            text.value = message(str(exc))
            return
        rows = ranked(row, cfg.temperature, n)
        items = "".join(_candidate(repr(show_token(text_of(i))), i, p, p1 if cfg.greedy else None)
                        for i, p, p1 in rows)
        label = (tr("greedy: always the top token") if cfg.greedy
                 else tr("temperature {t:.2f}", t=cfg.temperature))
        order = tr("in the model's order; greedy gives the top one 100%")
        note = f"<br><small>{html.escape(order)}</small>" if cfg.greedy else ""
        if any(i in begun for i, _, _ in rows):
            arrow = tr("⟨e5⟩⟨ba⟩→床: a token of bytes, and the character it makes with the prompt or with the "
                       "model's likeliest next bytes")
            note += f"<br><small>{html.escape(arrow)}</small>"
        text.value = f'<div class="inferlab-peek"><b>{html.escape(label)}</b>{note}<ol>{items}</ol></div>'
        # greedy bars would all be 0 but one: draw the same candidates at temperature 1 instead, in the same order
        shown = row.softmax(-1) if cfg.greedy else probs
        if cfg.greedy:
            title = tr("Greedy picks the top one; bars: temperature 1")
        elif prompt:
            title = tr("Next token after {prompt!r} ({label})", prompt=prompt, label=label)
        else:
            title = tr("Next token ({label})", label=label)
        fig = candidate_bars(shown, text_of_ids, k=n, title=title, x_max=1.0)
        show_figure(out, fig, tr("figure: the next-token candidates"))

    slider.observe(draw, names="value")
    draw()
    # the list keeps a readable width (one line per candidate); the figure takes the rest and never spills over
    text.layout = w.Layout(flex="0 0 330px", width="330px")
    out.layout = w.Layout(flex="1 1 0%", min_width="0", overflow="hidden")
    box = PeekView([slider, w.HBox([text, out], layout=w.Layout(width="100%"))])
    box.add_class("inferlab-peek-box")  # a stable handle for the browser test
    return box
