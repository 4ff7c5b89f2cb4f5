"""Streaming as the user sees it: tokens printed as they arrive, with a running TTFT and TPOT readout.

    view = streaming_view(m, "To be, or not", max_new_tokens=40)   # runs once, then "Run again"
    view.trace.latency                                             # the last run's numbers

It uses ``inferlab.stream``; each ``TokenEvent`` updates the widget the moment its id is on the host
(its ``text`` is the piece it completes). When the run ends the widget shows ``trace.text``, the answer as
the library returns it (a stop string is cut from it). This widget is a live run by design, so it takes
the model; every other view takes data. Outside a live kernel (nbval, an HTML export) it simply runs once
and shows the final state.

A small model writes its answer faster than anyone can watch, so the view also offers a slow-motion
**replay** of the last run at a chosen pace (tokens per second): the engine's ``Stream`` replays its
events from memory when iterated again, so the model does not run again and the readout keeps the real
times. The text box keeps its newest line in sight (it scrolls from the bottom).
"""

from __future__ import annotations

import html
import time

import ipywidgets as w

from ..engine import stream
from ..i18n import by_language, tr
from ..models import Model
from . import error_box, message

_BOX = ("font-family:monospace;white-space:pre-wrap;border:1px solid #ddd;border-radius:4px;"
        "padding:8px;min-height:3em")
# The widget scrolls, not the box inside it: column-reverse anchors the scroll position at the bottom,
# so the newest text stays visible as the answer grows past the height. ipywidgets 8's Layout has
# ``overflow`` only (an ``overflow_y`` is dropped with a warning, and the text then spills over the buttons).
_SCROLL = {"max_height": "16em", "overflow": "auto", "flex_flow": "column-reverse", "width": "95%"}


def _why_stopped(reason: str) -> str:
    """The engine's ``stop_reason`` (kept in English: it is data) in the reader's language."""
    if reason == "stop token":
        return tr("stop token")
    if reason.startswith("stop string "):
        return tr("stop string {text}", text=reason.removeprefix("stop string "))
    return reason  # "max_new_tokens": a parameter's name


def _readout(n: int, ttft: float | None, t_last: float | None, done: bool, stop_reason: str = "",
             replay: float | None = None) -> str:
    """One line: TTFT, running TPOT = (t_last - TTFT) / (n - 1), tokens so far."""
    if ttft is None:
        return f'<span style="color:#555">{html.escape(tr("waiting for the first token ..."))}</span>'
    tpot = (t_last - ttft) / (n - 1) if n > 1 else None
    # TTFT, TPOT, N and E2E are the names the articles use in both languages
    tpot_text = (f"{tpot * 1e3:.2f} ms {tr('({rate:.0f} tokens/s)', rate=1 / tpot)}" if tpot
                 else tr("(needs 2 tokens)"))
    parts = [f"<b>TTFT</b> {ttft * 1e3:.1f} ms", f"<b>TPOT</b> {html.escape(tpot_text)}",
             f"<b>N</b> {n}", f"<b>E2E</b> {t_last * 1e3:.1f} ms"]
    if replay and done:
        state = tr("slow-motion replay at {rate:g} tokens/s; the times are the real run's (done)", rate=replay)
    elif replay:
        state = tr("slow-motion replay at {rate:g} tokens/s; the times are the real run's", rate=replay)
    else:
        state = tr("done ({reason})", reason=_why_stopped(stop_reason)) if done else tr("streaming ...")
    return " · ".join(parts) + f' · <span style="color:#555">{html.escape(state)}</span>'


class StreamingView(w.VBox):
    """A prompt box, a token slider, "Run again", a slow-motion replay, the streamed text and a live readout.

    ``trace`` holds the last completed run's ``Trace`` (None until one finished); ``stream`` its ``Stream``.
    """

    def __init__(self, model: Model, prompt: str, max_new_tokens: int, stop_at_eos: bool, sampling: dict) -> None:
        self.model, self.sampling, self.stop_at_eos = model, sampling, stop_at_eos
        self.trace = None
        self.stream = None
        self.prompt_box = w.Textarea(value=prompt, description=tr("prompt"), layout=w.Layout(width="95%"))
        self.tokens = w.IntSlider(value=max(1, min(max_new_tokens, model.info.n_ctx - 1)), min=1,
                                  max=self._most_new_tokens(prompt), description=tr("new tokens"),
                                  continuous_update=False, style={"description_width": "initial"})
        self.prompt_box.observe(lambda change: self._fit_slider(change["new"]), names="value")
        self.button = w.Button(description=tr("Run again"), icon="play", button_style="primary")
        self.pace = w.FloatSlider(value=5.0, min=0.5, max=30.0, step=0.5, description=tr("tokens/s"),
                                  continuous_update=False, readout_format=".1f",
                                  style={"description_width": "initial"})  # "每秒 token 数" is wider than the default
        self.replay_button = w.Button(description=tr("Replay slowly"), icon="step-forward",
                                      tooltip=tr("replay the last run at the chosen pace (the model does not run)"))
        # handles for browser tests that do not depend on the language
        self.button.add_class("inferlab-stream-run")
        self.replay_button.add_class("inferlab-stream-replay")
        self.text = w.HTML(value=f'<div style="{_BOX}"></div>', layout=w.Layout(**_SCROLL))
        self.readout = w.HTML()
        self.text.add_class("inferlab-stream-text")
        self.readout.add_class("inferlab-stream-readout")
        self.error = error_box()
        self.button.on_click(lambda _: self._safely(self.run))
        self.replay_button.on_click(lambda _: self._safely(lambda: self.replay(self.pace.value)))
        super().__init__([self.prompt_box, w.HBox([self.tokens, self.button]),
                          w.HBox([self.pace, self.replay_button]), self.error, self.text, self.readout])

    def _most_new_tokens(self, prompt: str) -> int:
        """The slider's top: what fits in the context after ``prompt`` (at most 512), never below 1."""
        try:
            used = len(self.model.encode(prompt))
        except (ValueError, TypeError):  # a prompt the tokenizer refuses: run() says why
            used = 1
        return max(1, min(512, self.model.info.n_ctx - max(used, 1)))

    def _fit_slider(self, prompt: str) -> None:
        """Keep the slider inside what the context allows for the prompt now in the box."""
        top = self._most_new_tokens(prompt)
        if self.tokens.value > top:
            self.tokens.value = top
        self.tokens.max = top

    def _safely(self, action) -> None:
        """Run a button's action; an error it raises is shown in the view (a callback's traceback is lost)."""
        try:
            action()
        except Exception as exc:  # nothing may escape a widget callback unseen
            self.error.value = message(f"{type(exc).__name__}: {exc}")
            self.button.disabled = self.replay_button.disabled = False

    def _show(self, prompt: str, answer: str) -> None:
        self.text.value = (f'<div style="{_BOX}"><span style="color:#888">{html.escape(prompt)}</span>'
                           f"<b>{html.escape(answer)}</b></div>")

    def __repr__(self) -> str:
        if self.trace is None:
            return f"<{tr('Streaming view: press Run again to stream an answer')}>"
        lat, t = self.trace.latency, self.trace
        run = {"prompt": t.prompt, "text": t.text, "n": lat.n_tokens, "ttft": lat.ttft * 1e3}
        if lat.n_tokens > 1:
            return "<" + tr("Streaming view: {prompt!r} -> {text!r} ({n} tokens, TTFT {ttft:.1f} ms, "
                            "TPOT {tpot:.2f} ms)", tpot=lat.tpot * 1e3, **run) + ">"
        return "<" + tr("Streaming view: {prompt!r} -> {text!r} ({n} tokens, TTFT {ttft:.1f} ms)", **run) + ">"

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = repr(self)
        use = tr("Interactive view: run this cell in JupyterLab to stream a new answer or replay it slowly.")
        bundle["text/html"] = f"{self.text.value}{self.readout.value}<p><i>{html.escape(use)}</i></p>"
        return bundle

    def run(self) -> None:
        """Stream one answer for the current prompt and slider value, updating the widget per token."""
        self.error.value = ""
        prompt = self.prompt_box.value
        self.button.disabled = True
        try:
            s = stream(self.model, prompt, self.tokens.value, stop_at_eos=self.stop_at_eos, **self.sampling)
            answer, ttft = "", None
            self._show(prompt, answer)
            self.readout.value = _readout(0, None, None, False)
            for ev in s:
                ttft = ev.t if ttft is None else ttft
                answer += ev.text  # the pieces as they come
                self._show(prompt, answer)
                self.readout.value = _readout(ev.index + 1, ttft, ev.t, False)
            self.trace, self.stream = s.trace, s
            self._show(prompt, s.trace.text)  # the final answer, as the library returns it
            lat = s.trace.latency
            self.readout.value = _readout(lat.n_tokens, lat.ttft, lat.e2e, True, s.trace.stop_reason)
        except (ValueError, TypeError) as exc:  # bad prompt or settings: say so in the widget
            self.error.value = message(str(exc))
        except RuntimeError as exc:  # e.g. out of memory on a device: the view says so, the kernel goes on
            self.error.value = message(f"RuntimeError: {exc}")
        finally:
            self.button.disabled = False

    def replay(self, tokens_per_s: float = 5.0) -> None:
        """Show the last run again at ``tokens_per_s``; the readout shows each token's real time.

        The engine's ``Stream`` replays its events from memory: the model does not run again.
        """
        if self.stream is None:
            self.error.value = message(tr("Nothing to replay yet: press Run again first."), kind="info")
            return
        if not isinstance(tokens_per_s, (int, float)) or not tokens_per_s > 0:
            self.error.value = message(tr("tokens_per_s={value!r} must be a number > 0, e.g. 5.", value=tokens_per_s))
            return
        self.error.value = ""
        self.replay_button.disabled = self.button.disabled = True
        try:
            answer, ttft = "", None
            for ev in self.stream:
                ttft = ev.t if ttft is None else ttft
                answer += ev.text
                self._show(self.trace.prompt, answer)
                self.readout.value = _readout(ev.index + 1, ttft, ev.t, False, replay=tokens_per_s)
                time.sleep(1 / tokens_per_s)
            lat = self.trace.latency
            self._show(self.trace.prompt, self.trace.text)
            self.readout.value = _readout(lat.n_tokens, lat.ttft, lat.e2e, True, self.trace.stop_reason,
                                          replay=tokens_per_s)
        finally:
            self.replay_button.disabled = self.button.disabled = False


def streaming_view(model: Model, prompt: str | None = None, max_new_tokens: int = 40, *,
                   stop_at_eos: bool = True, run: bool = True, **sampling) -> StreamingView:
    """A live view of one streamed answer with a running TTFT/TPOT readout and a "Run again" button.

    Args:
        model: from ``inferlab.load()``.
        prompt: the starting text (the learner can edit it in the widget); default: a line of Shakespeare,
            or of Li Bai when the language is Chinese.
        max_new_tokens: the slider's starting value.
        stop_at_eos: stop at ``<|endoftext|>``.
        run: stream once right away (so a static export shows a finished answer).
        **sampling: ``temperature``, ``top_k``, ``top_p``, ``seed``, ``stop_strings`` (as for
            ``il.generate``); greedy if none.

    Example:
        >>> view = streaming_view(m, "ROMEO.", max_new_tokens=30, temperature=0.8, seed=0)  # doctest: +SKIP
        >>> view                                                                             # doctest: +SKIP
    """
    if prompt is None:
        prompt = by_language(en="To be, or not to be", zh="床前明月光，")
    view = StreamingView(model, prompt, max_new_tokens, stop_at_eos, sampling)
    if run:
        view.run()
    return view
