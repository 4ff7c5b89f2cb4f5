"""Measuring TTFT and TPOT of whole requests: one request, sweeps, model variants, "thinking" budgets.

The definitions live in ``inferlab.timing.Latency.from_times`` (vLLM's benchmark): TTFT from the
request (before tokenization) to the first token id, TPOT = (E2E - TTFT) / (N - 1), ITL the gaps.
Everything here runs the real loop (``inferlab.generate``), warms up first, repeats, and keeps every
run so a figure can show the spread, not only the median. Sweeps return ``measure.sweeps.Sweep``.
``first_token_parts`` times the three forwards that explain TTFT against TPOT (notebook 00);
``hardware_floors`` computes, from vendors' published memory bandwidths (``PUBLISHED_MEMORY``), the
decode floors a model would have on hardware this machine is not (notebook 07, ``tools.gpu_check``).

    >>> from inferlab import measure
    >>> r = measure.measure(m, "To be, or not", 16, repeats=5)   # doctest: +SKIP
    >>> r.ttft.median, r.tpot.p90                                 # seconds  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .. import gate, hub, scale
from ..cost import Shape, flops_per_token
from ..engine import decode_step, generate, prefill
from ..errors import bad_value, check_number, one_line
from ..i18n import tr
from ..models import Model, load
from ..timing import Latency, Summary, interleave, summarize, time_call
from ..trace import Trace
from ..units import ms_cell
from .sweeps import Sweep, meta

# Public-domain text (Hamlet, III.i), repeated to build prompts of any length.
FILLER = ("To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer the slings "
          "and arrows of outrageous fortune, or to take arms against a sea of troubles, and by opposing "
          "end them. To die: to sleep; no more; and by a sleep to say we end the heart-ache and the "
          "thousand natural shocks that flesh is heir to. ")


def summary_markdown(rows: Mapping[str, Summary]) -> str:
    """A Markdown table of summaries (seconds in, milliseconds out): one row per metric."""
    lines = [tr("| metric | runs | mean (ms) | median (ms) | p90 (ms) | p99 (ms) |"), "|---|---|---|---|---|---|"]
    lines += [f"| {k} | {s.n} | {ms_cell(s.mean)} | {ms_cell(s.median)} | {ms_cell(s.p90)} | {ms_cell(s.p99)} |"
              for k, s in rows.items()]
    return "\n".join(lines)


def prompt_of_length(model: Model, n_tokens: int, text: str = FILLER) -> str:
    """Text whose tokenization is (about) ``n_tokens`` long: ``text`` repeated, cut at a token boundary.

    Re-encoding decoded text can merge differently at the cut, so callers read the real length back
    (``Measurement.prompt_tokens``) instead of trusting ``n_tokens``.
    """
    check_number("n_tokens", n_tokens, low=1, high=model.info.n_ctx - 1, integer=True,
                 fix=f"the model's context holds {model.info.n_ctx} tokens")
    ids = model.encode(text)
    ids = (ids * (n_tokens // len(ids) + 1))[:n_tokens]
    return model.decode(ids)


@dataclass(frozen=True)
class Measurement:
    """Repeated runs of one request. Every ``Latency`` is kept; ``ttft``/``tpot``/``e2e`` summarize them."""

    prompt: str
    prompt_tokens: int
    runs: tuple[Latency, ...]  # timed runs, in order
    warmup_runs: tuple[Latency, ...]  # untimed warm-up runs (kept to show why they are dropped)
    trace: Trace  # the last timed run, for the timeline
    settings: dict

    @property
    def ttft(self) -> Summary:
        """TTFT over the timed runs (seconds)."""
        return summarize([r.ttft for r in self.runs])

    @property
    def tpot(self) -> Summary:
        """TPOT over the timed runs (seconds; needs at least 2 generated tokens)."""
        values = [r.tpot for r in self.runs if math.isfinite(r.tpot)]
        if not values:
            raise ValueError("TPOT needs at least 2 generated tokens per run. Fix: measure with "
                             "max_new_tokens >= 2 (and stop_at_eos=False so the run is not cut short).")
        return summarize(values)

    @property
    def e2e(self) -> Summary:
        """End-to-end time over the timed runs (seconds)."""
        return summarize([r.e2e for r in self.runs])

    @property
    def itl(self) -> Summary:
        """Every gap between consecutive tokens, all runs pooled (seconds)."""
        return summarize([g for r in self.runs for g in r.itl])

    def markdown(self) -> str:
        """Mean, median, p90 and p99 of TTFT, TPOT, ITL and E2E as a Markdown table (ms)."""
        rows = {"TTFT": self.ttft, "E2E": self.e2e}
        if any(r.n_tokens > 1 for r in self.runs):
            rows = {"TTFT": self.ttft, "TPOT": self.tpot, tr("ITL (all gaps)"): self.itl, "E2E": self.e2e}
        return summary_markdown(rows)

    def __repr__(self) -> str:
        tpot = ms_cell(self.tpot.median) if any(r.n_tokens > 1 for r in self.runs) else "n/a"
        return tr("Measurement({prompt} prompt tokens -> {new} new, {runs} runs after {warmup} warm-up: median TTFT "
                  "{ttft} ms, TPOT {tpot} ms, E2E {e2e} ms)", prompt=self.prompt_tokens, new=self.runs[0].n_tokens,
                  runs=len(self.runs), warmup=len(self.warmup_runs), ttft=ms_cell(self.ttft.median), tpot=tpot,
                  e2e=ms_cell(self.e2e.median))


def measure(model: Model, prompt: str, max_new_tokens: int = 32, *, repeats: int = 5, warmup: int = 1,
            stop_at_eos: bool = False, **sampling) -> Measurement:
    """Time ``generate(model, prompt, max_new_tokens)`` ``repeats`` times after ``warmup`` untimed runs.

    Args:
        model: from ``inferlab.load()``.
        prompt: any text (tokenization is inside the timed request, as in vLLM's benchmark).
        max_new_tokens: tokens per run (N). With ``stop_at_eos=False`` (the benchmark default,
            "ignore EOS") every run makes exactly N tokens, so runs are comparable.
        repeats: timed runs (>= 1). warmup: untimed runs first (>= 0; 0 shows the cold first call).
        **sampling: passed to ``generate`` (``temperature``, ``top_k``, ``top_p``, ``seed``, ``stop`` ...).

    Returns:
        A ``Measurement``: ``.ttft``, ``.tpot``, ``.e2e`` are ``Summary`` (mean/median/p90/p99, seconds).
    """
    check_number("repeats", repeats, low=1, integer=True, fix="time at least one run")
    check_number("warmup", warmup, low=0, integer=True, fix="use 0 to keep the cold first call")
    traces = [generate(model, prompt, max_new_tokens, stop_at_eos=stop_at_eos, **sampling)
              for _ in range(warmup + repeats)]  # the warm-up runs are kept: notebook 07 shows the cold one
    result = _measurement(model, traces[warmup:], traces[:warmup], max_new_tokens, stop_at_eos, sampling)
    if all(r.n_tokens > 1 for r in result.runs):  # TPOT: the engine's decode step, as a request sees it
        gate.step(model.info, result.tpot.median, via="measure (TPOT)", context=result.prompt_tokens)
    return result


def _measurement(model: Model, traces: Sequence[Trace], warm: Sequence[Trace], max_new_tokens: int,
                 stop_at_eos: bool, sampling: dict) -> Measurement:
    settings = {"max_new_tokens": max_new_tokens, "stop_at_eos": stop_at_eos, **meta(model),
                "threads": torch.get_num_threads(), **{k: v for k, v in sampling.items() if k != "sampling"}}
    last = traces[-1]
    return Measurement(last.prompt, len(last.prompt_ids), tuple(t.latency for t in traces),
                       tuple(t.latency for t in warm), last, settings)


def ttft_sweep(model: Model, lengths: Sequence[int], *, repeats: int = 5, warmup: int = 1,
               text: str = FILLER) -> Sweep:
    """TTFT (one new token: tokenize + prefill + first choice) against prompt length in tokens."""
    if not lengths:
        raise bad_value("lengths", lengths, "a non-empty list of prompt lengths", "e.g. [16, 64, 256]")
    xs, values = [], []
    for n in lengths:
        r = measure(model, prompt_of_length(model, n, text), 1, repeats=repeats, warmup=warmup)
        xs.append(r.prompt_tokens)
        values.append(tuple(x.ttft for x in r.runs))
    return Sweep("TTFT", tr("prompt length (tokens)"), tuple(xs), tuple(values), tuple(xs), **meta(model))


def tpot_sweep(model: Model, prompt: str, new_tokens: int = 64, *, bin_size: int = 8, repeats: int = 3,
               warmup: int = 1) -> Sweep:
    """Each decode step's time (the gap before each token after the first) against the context it attends over.

    Steps are pooled in bins of ``bin_size`` steps; x is the context length (tokens in the cache + the
    new one) at the start of each bin. All repeats go into each bin.
    """
    check_number("bin_size", bin_size, low=1, integer=True)
    r = measure(model, prompt, new_tokens, repeats=repeats, warmup=warmup)
    if new_tokens < 2:
        raise bad_value("new_tokens", new_tokens, ">= 2", "generate at least 2 tokens to have a decode step")
    # gap i (0-based) is decode step i+1, which attends over prompt + i + 1 positions
    starts = range(0, new_tokens - 1, bin_size)
    xs = tuple(r.prompt_tokens + s + 1 for s in starts)
    values = tuple(tuple(g for run in r.runs for g in run.itl[s:s + bin_size]) for s in starts)
    return Sweep("decode step", tr("context length (tokens)"), xs, values, (1,) * len(xs), context=xs[0],
                 **meta(model), note=tr("each x pools {bin_size} consecutive steps of {runs} runs", bin_size=bin_size,
                                        runs=len(r.runs)))


FULL_SIZE = 100e6  # parameters: a loaded model this big (GPT-2 small has 124M) is timed itself


def timing_model(model: Model, *, always_shape: bool = False) -> Model:
    """The model whose times the notebooks show: ``model`` itself when it has GPT-2 small's size (``FULL_SIZE``
    parameters or more), else GPT-2's shape with random weights on ``model``'s device and dtype.

    A 4-block model's step is mostly fixed costs, so its times would not show what a real model's do; the speed
    of GPT-2's shape does not depend on its weights' values. At the test scale (``inferlab.scale``) the shape
    keeps ``scale.TEST_BLOCKS`` of its 12 blocks (same width, context and vocabulary).

    Args:
        always_shape: load GPT-2's shape whatever ``model`` is (notebook 08 compares the two side by side).

    Example:
        >>> g = timing_model(il.load("bundled"))     # doctest: +SKIP
        >>> g.info.name, g.info.source               # doctest: +SKIP
        ('gpt2', 'random-weights')
    """
    if model.info.n_params >= FULL_SIZE and not always_shape:
        return model
    return load("random:gpt2", device=model.info.device, dtype=model.info.dtype, verbose=False,
                n_layer=scale.pick(full=None, test=scale.TEST_BLOCKS))


def load_variant(model: Model, *, dtype=None, device=None) -> tuple[Model | None, str]:
    """A second copy of ``model`` in another dtype and/or on another device, or ``(None, why not)``.

    It is tried on a 2-token generation, so a dtype the device cannot run is reported, not raised.
    """
    info = model.info
    ref = {"bundled": "bundled", "folder": info.path, "random-weights": info.path}.get(info.source, info.name)
    blocks = {"n_layer": info.n_layer} if info.source == "random-weights" else {}  # the same depth (test scale)
    try:
        variant = load(ref, device=device or info.device, dtype=dtype or info.dtype, verbose=False, **blocks)
        generate(variant, "Hello", 2, stop_at_eos=False)
    except Exception as exc:  # any failure means "not supported here": say why instead of raising
        return None, one_line(exc, 160)
    return variant, tr("{name} as {dtype} on {device}", name=info.name,
                       dtype=str(variant.info.dtype).removeprefix("torch."), device=variant.info.device)


def compare(variants: Mapping[str, Model], prompt: str, max_new_tokens: int = 16, *, repeats: int = 5,
            warmup: int = 1, **sampling) -> dict[str, Measurement]:
    """``measure`` the same request on several models (dtypes, devices, sizes), one ``Measurement`` each.

    The runs are interleaved (``timing.interleave``: A, B, C, then B, C, A, ...) so a machine that gets
    busier halfway through slows every variant alike instead of the last one measured.
    """
    check_number("repeats", repeats, low=1, integer=True, fix="time at least one run")
    check_number("warmup", warmup, low=0, integer=True)
    traces = interleave({label: (lambda m=m: generate(m, prompt, max_new_tokens, stop_at_eos=False, **sampling))
                         for label, m in variants.items()}, repeats, warmup=warmup)
    return {label: _measurement(variants[label], runs, (), max_new_tokens, False, sampling)
            for label, runs in traces.items()}


def cached_model(name: str, like: Model) -> Model | None:
    """Model ``name`` (e.g. ``"gpt2"``) on ``like``'s device and dtype if it is in the local Hugging Face
    cache, else None. Never downloads (a notebook cell should not fetch 500 MB by surprise)."""
    if like.info.name == name or not hub.hub_cached(name):
        return None
    return load(name, device=like.info.device, dtype=like.info.dtype, verbose=False)


@dataclass(frozen=True)
class FirstToken:
    """Why TTFT is not TPOT: the prompt's prefill, a 1-token prefill, and one decode step (medians, seconds)."""

    model: str
    prompt_tokens: int
    prefill_s: float  # the whole prompt in one forward: the bulk of TTFT
    one_token_s: float  # a 1-token prompt: what one forward costs before the prompt's length counts
    decode_s: float  # one decode step against the prompt's cache: what TPOT averages
    head_share: float  # the LM head's share of one token's FLOPs (it runs once per forward, prefill or decode)

    def __repr__(self) -> str:
        return tr("FirstToken({model}: prefill of {n} tokens {prefill} ms, of 1 token {one} ms, decode step {decode} "
                  "ms; LM head {head:.0%} of a token's FLOPs)", model=self.model, n=self.prompt_tokens,
                  prefill=ms_cell(self.prefill_s), one=ms_cell(self.one_token_s), decode=ms_cell(self.decode_s),
                  head=self.head_share)


def first_token_parts(model: Model, prompt: str, *, repeats: int = 7, warmup: int = 2) -> FirstToken:
    """Time the three forwards that explain TTFT against TPOT (``timing.time_call``, medians).

    The LM head runs for the last position only in prefill, so a model whose head dominates
    (the bundled one) pays about one decode step's price for a short prompt.
    """
    check_number("repeats", repeats, low=1, integer=True)
    ids = model.encode(prompt)
    if len(ids) < 2:
        raise bad_value("prompt", prompt, "a prompt of at least 2 tokens", "use a sentence, not a word")
    _, cache = prefill(model, [ids])

    def median(fn) -> float:
        return summarize(time_call(fn, repeats=repeats, warmup=warmup, device=model.device)).median

    shape = Shape.from_info(model.info)
    head = 2 * shape.vocab_size * shape.d_model / flops_per_token(shape, len(ids))
    parts = FirstToken(model.info.name, len(ids), median(lambda: prefill(model, [ids])),
                       median(lambda: prefill(model, [ids[-1:]])), median(lambda: decode_step(model, ids[-1], cache)),
                       head)
    gate.step(model.info, parts.decode_s, via="first_token_parts", context=len(ids))
    return parts
