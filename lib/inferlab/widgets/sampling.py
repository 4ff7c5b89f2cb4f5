"""The sampling playground: temperature, top-k and top-p together, on one real next-token distribution.

The filters run in the library's order, which is Hugging Face ``generate()``'s: temperature -> top-k ->
top-p (``inferlab.sampling.filter_stages``). The widget holds the logits: changing a filter re-draws from them
and never runs the model. Only a new prompt (when ``logits_for`` is given) runs the model, once per
prompt (remembered).

>>> logits, _ = il.prefill(m, m.encode("ROMEO."))           # doctest: +SKIP
>>> playground(logits[0], m.decode)                          # doctest: +SKIP
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable

import ipywidgets as w
import torch

from ..i18n import tr
from ..sampling import STAGE_NAMES, FilterStages, SamplingConfig, filter_stages
from ..viz import show_token
from ..viz.sampling import Decode, piece, stage_distributions
from . import error_box, message, show_figure, titled

# Slider ranges; the number box beside each slider accepts any value (a slider cannot go past its range).
SLIDERS = {"temperature": (0.0, 3.0, 0.05), "top_k": (0, 200, 1), "top_p": (0.01, 1.0, 0.01)}


def link_slider(box: w.ValueWidget, slider: w.ValueWidget) -> None:
    """Keep ``slider`` and the number ``box`` beside it in step; the box is the value the view uses.

    Typing moves the slider (clamped to its range); moving the slider writes the box. A typed value outside
    the slider's range stays in the box (so the view can explain it) instead of being clamped by the link.
    """
    busy = [False]

    def from_box(change) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            value = change["new"]
            if isinstance(value, (int, float)) and math.isfinite(value):
                slider.value = min(max(value, slider.min), slider.max)
        finally:
            busy[0] = False

    step = getattr(slider, "step", 1)
    digits = max(0, -math.floor(math.log10(step))) + 1 if isinstance(step, float) and step > 0 else None

    def from_slider(change) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:  # a float slider's steps carry binary residue (0.8000000000000002): the box shows the step's digits
            box.value = change["new"] if digits is None else round(change["new"], digits)
        finally:
            busy[0] = False

    box.observe(from_box, names="value")
    slider.observe(from_slider, names="value")


def _stage_title(name: str) -> str:
    """The table's name for a stage (the same words as the figure's, ``viz.sampling.STAGE_TITLES``)."""
    titles = {"model": tr("the model (softmax of the logits)"), "temperature": tr("after temperature"),
              "top_k": tr("after top-k"), "top_p": tr("after top-p (what is sampled from)")}
    return titles.get(name, name)


def _removed_tokens(before: torch.Tensor, after: torch.Tensor, decode: Decode, show: int = 6) -> str:
    """The most likely tokens a stage removed, as text (the rest counted)."""
    gone = ((before > 0) & (after == 0)).nonzero().flatten()
    if gone.numel() == 0:
        return tr("none")
    order = gone[torch.argsort(before[gone], descending=True)]
    names = ", ".join(f"'{show_token(piece(decode, int(i)))}' ({int(i)})" for i in order[:show])
    more = gone.numel() - min(show, gone.numel())
    return tr("{names} and {more:,} more", names=names, more=more) if more else names


def stage_report(work: FilterStages, decode: Decode) -> str:
    """An HTML table: per stage, tokens still possible, mass removed, entropy, and which tokens went.

    ``work`` comes from ``inferlab.sampling.filter_stages(logits[0], config)``.
    """
    rows = []
    for i, s in enumerate(work.stages):
        gone = "" if i == 0 else _removed_tokens(work.probs[STAGE_NAMES[i - 1]], work.probs[s.name], decode)
        rows.append(f"<tr><td>{html.escape(_stage_title(s.name))}</td><td>{s.kept:,}</td>"
                    f"<td>{'' if i == 0 else f'{s.removed_mass:.4f}'}</td><td>{s.entropy:.3f}</td>"
                    f"<td>{math.exp(s.entropy):,.1f}</td><td>{html.escape(gone)}</td></tr>")
    cells = [html.escape(tr("stage")), html.escape(tr("tokens possible")), html.escape(tr("mass removed")),
             html.escape(tr("entropy (nats)")), tr("e<sup>entropy</sup> (effective choices)"),  # our own markup
             html.escape(tr("most likely tokens removed"))]
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr>"
    return ('<table style="font-family:sans-serif;font-size:13px;border-collapse:collapse" border="1" '
            f'cellpadding="4">{head}{"".join(rows)}</table>')


def playground(logits: torch.Tensor, decode: Decode, *, temperature: float = 1.0, top_k: int = 0,
               top_p: float = 1.0, k_shown: int = 12, prompt: str | None = None,
               logits_for: Callable[[str], torch.Tensor] | None = None) -> w.VBox:
    """Temperature, top-k and top-p on one ``[vocab]`` logits vector, each stage drawn and counted.

    Args:
        logits: ``[vocab]`` next-token logits (e.g. ``prefill(m, ids)[0][0]``).
        decode: ``m.decode`` or a list/dict id -> text, for token labels.
        temperature, top_k, top_p: the starting values (0 / 0 / 1.0 = greedy / off / off).
        k_shown: how many of the most likely tokens to draw.
        prompt, logits_for: with both, a prompt box appears; a new prompt calls ``logits_for(prompt)``
            (e.g. ``lambda p: il.prefill(m, m.encode(p))[0][0]``) once and remembers the result.

    Returns:
        A VBox: the prompt box, one row per knob (slider + number box), the message line, the
        table and the figure output. ``box.controls`` are the number boxes, ``box.sliders`` the sliders.
        ``box.state`` exposes the current ``config``, ``work`` (the ``FilterStages``) and ``model_calls``.
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(tr("logits must be a 1-D [vocab] tensor, got {shape}. "
                            "Fix: pass logits[0] from il.prefill(m, ids) (logits are [batch, vocab]).", shape=shape))
    state = {"logits": logits.detach().float().cpu(), "config": None, "work": None, "model_calls": 0,
             "cache": {} if prompt is None else {prompt: logits.detach().float().cpu()}}
    style = {"description_width": "150px"}
    boxes, sliders = {}, {}
    for name, label, value, kind in (("temperature", tr("temperature"), temperature, w.FloatText),
                                     ("top_k", tr("top-k (0 = off)"), top_k, w.IntText),
                                     ("top_p", tr("top-p (1 = off)"), top_p, w.FloatText)):
        low, high, step = SLIDERS[name]
        slider_kind = w.IntSlider if kind is w.IntText else w.FloatSlider
        sliders[name] = slider_kind(value=min(max(value, low), high), min=low, max=high, step=step, description=label,
                                    readout=False, continuous_update=True, style=style,  # redraw while dragging
                                    layout=w.Layout(width="420px"))
        boxes[name] = kind(value=value, step=step, layout=w.Layout(width="90px"))
        link_slider(boxes[name], sliders[name])
    t_box, k_box, p_box = boxes["temperature"], boxes["top_k"], boxes["top_p"]
    controls = [t_box, k_box, p_box]
    prompt_box = None
    if logits_for is not None:
        # A text area, not a one-line box: prompts may hold newlines (a speaker's name, then the line). Every
        # keystroke applies (a prompt runs the model once and is remembered), not only leaving the box.
        prompt_box = w.Textarea(value=prompt or "", description=tr("prompt"), rows=2,
                                continuous_update=True, style={"description_width": "initial"},
                                layout=w.Layout(width="600px"))
    note = w.HTML(value=message(tr("Temperature 0 = greedy (only the most likely token). "
                                   "Filters run in this order: temperature -> top-k -> top-p."), "info"))
    errors = error_box()
    table = w.HTML()
    out = w.Output()

    def redraw(_=None) -> None:
        try:
            config = SamplingConfig(temperature=float(t_box.value), top_k=int(k_box.value), top_p=float(p_box.value))
            work = filter_stages(state["logits"], config)
        except (TypeError, ValueError) as exc:
            errors.value = message(str(exc))
            return
        vocab = state["logits"].numel()
        errors.value = ("" if config.top_k < vocab else
                        message(tr("top-k {top_k:,} is not smaller than the vocabulary ({vocab:,} tokens), "
                                   "so it keeps every token: the same as top-k 0 (off).",
                                   top_k=config.top_k, vocab=vocab), "info"))
        state.update(config=config, work=work)
        table.value = stage_report(work, decode)
        title = tr("After each stage ({settings})", settings=config)
        show_figure(out, stage_distributions(work, decode, k=k_shown, title=title),
                    tr("figure: the distribution after each stage"))

    def new_prompt(change) -> None:
        text = change["new"]
        if not text:
            errors.value = message(tr("The prompt is empty: type at least one character."))
            return
        if text not in state["cache"]:
            try:
                new = logits_for(text).detach().float().cpu().reshape(-1)
            except Exception as exc:  # the caller's function: any failure becomes a readable line, never a traceback
                errors.value = message(tr("Could not run the model on this prompt: {error}", error=exc))
                return
            state["model_calls"] += 1
            if new.numel() != state["logits"].numel():
                errors.value = message(tr("logits_for returned {got:,} scores, expected one per token of the "
                                          "vocabulary ({vocab:,}). Fix: return il.prefill(m, ids)[0][0].",
                                          got=new.numel(), vocab=state["logits"].numel()))
                return
            state["cache"][text] = new
        state["logits"] = state["cache"][text]
        redraw()

    for box in controls:
        box.observe(redraw, names="value")
    if prompt_box is not None:
        prompt_box.observe(new_prompt, names="value")
    redraw()
    knobs = [w.HBox([sliders[name], boxes[name]]) for name in SLIDERS]
    rows = ([prompt_box] if prompt_box is not None else []) + [*knobs, note, errors, table, out]
    box = titled(w.VBox(rows), tr("Sampling playground: temperature, top-k and top-p sliders (or a typed value in "
                                  "the box beside each) redraw each stage's distribution; run the cell to use it"))
    box.state = state  # type: ignore[attr-defined]
    box.controls = {"temperature": t_box, "top_k": k_box, "top_p": p_box, "prompt": prompt_box}  # type: ignore
    box.sliders = sliders  # type: ignore[attr-defined]
    box.errors = errors  # type: ignore[attr-defined]
    return box
