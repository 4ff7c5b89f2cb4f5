"""Measuring TTFT and TPOT: one request, sweeps, batches, model variants, and "thinking" budgets.

The definitions live in ``inferlab.timing.Latency.from_times`` (vLLM's benchmark): TTFT from the
request (before tokenization) to the first token id, TPOT = (E2E - TTFT) / (N - 1), ITL the gaps.
Everything here runs the real loop (``generate``, or ``prefill``/``decode_step`` for batches), warms
up first, repeats, and keeps every run so a figure can show the spread, not only the median.

    >>> import inferlab as il
    >>> m = il.load("bundled", verbose=False)                      # doctest: +SKIP
    >>> r = il.latency.measure(m, "To be, or not", 16, repeats=5)  # doctest: +SKIP
    >>> r.ttft.median, r.tpot.p90                                  # seconds  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from . import _hf
from .cost import MachineProfile, Shape, decode_cost, prefill_cost
from .engine import decode_step, generate, prefill
from .errors import bad_value, check_number
from .models import Model, load
from .timing import Latency, Summary, clock, summarize
from .trace import Trace

# Public-domain text (Hamlet, III.i), repeated to build prompts of any length.
FILLER = ("To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer the slings "
          "and arrows of outrageous fortune, or to take arms against a sea of troubles, and by opposing "
          "end them. To die: to sleep; no more; and by a sleep to say we end the heart-ache and the "
          "thousand natural shocks that flesh is heir to. ")


def _ms(s: float) -> str:
    return "n/a" if s is None or not math.isfinite(s) else f"{s * 1e3:.2f}"


def summary_markdown(rows: Mapping[str, Summary]) -> str:
    """A Markdown table of summaries (seconds in, milliseconds out): one row per metric."""
    lines = ["| metric | runs | mean (ms) | median (ms) | p90 (ms) | p99 (ms) |", "|---|---|---|---|---|---|"]
    lines += [f"| {k} | {s.n} | {_ms(s.mean)} | {_ms(s.median)} | {_ms(s.p90)} | {_ms(s.p99)} |"
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

    @property
    def identity_gap(self) -> float:
        """Largest |E2E - (TTFT + (N - 1) x TPOT)| over the runs (seconds): zero up to rounding."""
        return max(abs(r.e2e - (r.ttft + (r.n_tokens - 1) * (r.tpot if r.n_tokens > 1 else 0.0)))
                   for r in self.runs)

    def markdown(self) -> str:
        """Mean, median, p90 and p99 of TTFT, TPOT, ITL and E2E as a Markdown table (ms)."""
        rows = {"TTFT": self.ttft, "E2E": self.e2e}
        if any(r.n_tokens > 1 for r in self.runs):
            rows = {"TTFT": self.ttft, "TPOT": self.tpot, "ITL (all gaps)": self.itl, "E2E": self.e2e}
        return summary_markdown(rows)

    def __repr__(self) -> str:
        tpot = _ms(self.tpot.median) if any(r.n_tokens > 1 for r in self.runs) else "n/a"
        return (f"Measurement({self.prompt_tokens} prompt tokens -> {self.runs[0].n_tokens} new, "
                f"{len(self.runs)} runs after {len(self.warmup_runs)} warm-up: median TTFT "
                f"{_ms(self.ttft.median)} ms, TPOT {tpot} ms, E2E {_ms(self.e2e.median)} ms)")


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
    warm, runs, trace = [], [], None
    for i in range(warmup + repeats):
        trace = generate(model, prompt, max_new_tokens, stop_at_eos=stop_at_eos, **sampling)
        (warm if i < warmup else runs).append(trace.latency)
    settings = {"max_new_tokens": max_new_tokens, "stop_at_eos": stop_at_eos, "device": str(model.device),
                "dtype": str(model.info.dtype).removeprefix("torch."), "threads": torch.get_num_threads(),
                "model": model.info.name, **{k: v for k, v in sampling.items() if k != "sampling"}}
    return Measurement(prompt, len(trace.prompt_ids), tuple(runs), tuple(warm), trace, settings)


@dataclass(frozen=True)
class Sweep:
    """Seconds measured at several x values (prompt lengths, context lengths, ...), every repeat kept."""

    name: str  # what was timed, e.g. "TTFT"
    x_label: str  # axis title with unit, e.g. "prompt length (tokens)"
    xs: tuple[int, ...]
    values: tuple[tuple[float, ...], ...]  # seconds, one tuple per x

    @property
    def summaries(self) -> list[Summary]:
        """One ``Summary`` per x."""
        return [summarize(v) for v in self.values]

    @property
    def medians(self) -> list[float]:
        """Median seconds per x."""
        return [s.median for s in self.summaries]

    def markdown(self) -> str:
        """One row per x: mean, median, p90, p99 in ms."""
        return summary_markdown({f"{self.x_label.split(' (')[0]} {x}": s for x, s in zip(self.xs, self.summaries)})

    def __repr__(self) -> str:
        pts = ", ".join(f"{x}: {_ms(m)}" for x, m in zip(self.xs, self.medians))
        return f"Sweep({self.name} median ms by {self.x_label}: {pts})"


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
    return Sweep("TTFT", "prompt length (tokens)", tuple(xs), tuple(values))


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
    return Sweep("time per decode step", "context length (tokens)", xs, values)


def load_variant(model: Model, *, dtype=None, device=None) -> tuple[Model | None, str]:
    """A second copy of ``model`` in another dtype and/or on another device, or ``(None, why not)``.

    It is tried on a 2-token generation, so a dtype the device cannot run is reported, not raised.
    """
    info = model.info
    ref = {"bundled": "bundled", "folder": info.path, "random-weights": f"random:{info.name}"}.get(info.source,
                                                                                                 info.name)
    try:
        variant = load(ref, device=device or info.device, dtype=dtype or info.dtype, verbose=False)
        generate(variant, "Hello", 2, stop_at_eos=False)
    except Exception as exc:  # any failure means "not supported here": say why instead of raising
        return None, f"{type(exc).__name__}: {str(exc)[:160]}"
    return variant, f"{info.name} as {str(variant.info.dtype).removeprefix('torch.')} on {variant.info.device}"


def compare(variants: Mapping[str, Model], prompt: str, max_new_tokens: int = 16, *, repeats: int = 5,
            warmup: int = 1, **sampling) -> dict[str, Measurement]:
    """``measure`` the same request on several models (dtypes, devices, sizes), one ``Measurement`` each.

    The runs are interleaved (A, B, C, A, B, C, ...) so a machine that gets busier halfway through
    slows every variant alike instead of the last one measured.
    """
    check_number("repeats", repeats, low=1, integer=True, fix="time at least one run")
    parts = {label: measure(m, prompt, max_new_tokens, repeats=1, warmup=warmup, **sampling)
             for label, m in variants.items()}
    runs = {label: list(r.runs) for label, r in parts.items()}
    traces = {label: r.trace for label, r in parts.items()}
    for _ in range(repeats - 1):
        for label, m in variants.items():
            traces[label] = generate(m, prompt, max_new_tokens, stop_at_eos=False, **sampling)
            runs[label].append(traces[label].latency)
    return {label: Measurement(r.prompt, r.prompt_tokens, tuple(runs[label]), r.warmup_runs, traces[label],
                               r.settings) for label, r in parts.items()}


@dataclass(frozen=True)
class BatchPoint:
    """One batch size: prefill of all prompts, and each decode step (= every user's TPOT)."""

    batch: int
    prefill: Summary  # seconds to prefill the whole batch (every user's TTFT, tokenization aside)
    step: Summary  # seconds per decode step for the whole batch

    @property
    def tokens_per_second(self) -> float:
        """Total decode throughput: ``batch`` tokens per step."""
        return self.batch / self.step.median

    def __repr__(self) -> str:
        return (f"BatchPoint(batch {self.batch}: prefill {_ms(self.prefill.median)} ms, per-user TPOT "
                f"{_ms(self.step.median)} ms, {self.tokens_per_second:.0f} tokens/s in total)")


def batch_sweep(model: Model, prompt: str, batch_sizes: Sequence[int] = (1, 2, 4, 8), *, new_tokens: int = 16,
                repeats: int = 3) -> list[BatchPoint]:
    """Prefill ``[batch, T]`` copies of the prompt, then greedy-decode ``new_tokens`` steps, for each batch size.

    Same-length prompts need no padding; a server with mixed lengths pads or packs them.
    """
    ids = model.encode(prompt)
    if not ids:
        raise bad_value("prompt", prompt, "text with at least one token", "type a prompt")
    check_number("new_tokens", new_tokens, low=1, high=model.info.n_ctx - len(ids), integer=True)
    dev, out = model.device, []
    for b in batch_sizes:
        check_number("batch size", b, low=1, integer=True)
        batch_ids = [ids] * b
        prefills, steps = [], []
        for r in range(repeats + 1):  # the first round is the warm-up
            t0 = clock(dev)
            logits, cache = prefill(model, batch_ids)
            token = logits.argmax(-1).tolist()  # [batch] ids on the host, as a server would need them
            t1 = clock(dev)
            times = []
            for _ in range(new_tokens):
                t = clock(dev)
                logits, cache = decode_step(model, token, cache)
                token = logits.argmax(-1).tolist()
                times.append(clock(dev) - t)
            if r:
                prefills.append(t1 - t0)
                steps += times
        out.append(BatchPoint(b, summarize(prefills), summarize(steps)))
    return out


@dataclass(frozen=True)
class Prediction:
    """Roofline prediction for one model shape (not measured, except where ``measured`` says so)."""

    name: str
    params: int
    ttft_s: float  # predicted (or measured) TTFT
    tpot_s: float
    ttft_floor_s: float  # roofline lower bounds: max(FLOPs / peak compute, bytes / bandwidth)
    tpot_floor_s: float
    tpot_bound: str  # "memory" or "compute": which floor is higher for a decode step
    measured: bool = False

    def __repr__(self) -> str:
        kind = "measured" if self.measured else "PREDICTED"
        return (f"Prediction({self.name}, {self.params / 1e6:.0f}M params, {kind}: TTFT {_ms(self.ttft_s)} ms, "
                f"TPOT {_ms(self.tpot_s)} ms; floors {_ms(self.ttft_floor_s)} / {_ms(self.tpot_floor_s)} ms, "
                f"decode {self.tpot_bound}-bound)")


def cached_model(name: str, like: Model) -> Model | None:
    """Model ``name`` (e.g. ``"gpt2"``) on ``like``'s device and dtype if it is in the local Hugging Face
    cache, else None. Never downloads (a notebook cell should not fetch 500 MB by surprise)."""
    if like.info.name == name or not _hf.hub_cached(name):
        return None
    return load(name, device=like.info.device, dtype=like.info.dtype, verbose=False)


def predict_sizes(measured: Measurement, model: Model, machine: MachineProfile, shapes: Mapping[str, Shape],
                  also_measured: Mapping[str, Measurement] | None = None) -> list[Prediction]:
    """The loaded model as measured, then other shapes predicted as roofline floor + overhead per layer.

    The overhead (measured median minus the floor, for the loaded model) is Python and framework time
    that the roofline ignores; it is scaled by the number of layers, a crude but stated assumption.
    Shapes named in ``also_measured`` (e.g. real GPT-2 found in the cache) are shown measured instead.
    """
    also_measured = also_measured or {}
    prompt_len, n_new = measured.prompt_tokens, measured.runs[0].n_tokens
    context = prompt_len + n_new // 2

    def floors(shape: Shape) -> tuple[float, float, str]:
        d = decode_cost(shape, context, machine=machine)
        return prefill_cost(shape, prompt_len, machine=machine).floor_s, d.floor_s, d.bound

    own = Shape.from_info(model.info)
    f_ttft, f_tpot, bound = floors(own)
    per_layer = (max(measured.ttft.median - f_ttft, 0.0) / own.n_layer,
                 max(measured.tpot.median - f_tpot, 0.0) / own.n_layer)
    out = [Prediction(own.name, model.info.n_params, measured.ttft.median, measured.tpot.median, f_ttft, f_tpot,
                      bound, measured=True)]
    for name, shape in shapes.items():
        if name == own.name:
            continue
        shape = Shape(**{**shape.__dict__, "bytes_per_element": own.bytes_per_element})
        f_ttft, f_tpot, bound = floors(shape)
        if name in also_measured:
            other = also_measured[name]
            out.append(Prediction(name, shape.weight_params, other.ttft.median, other.tpot.median, f_ttft, f_tpot,
                                  bound, measured=True))
            continue
        out.append(Prediction(name, shape.weight_params, f_ttft + per_layer[0] * shape.n_layer,
                              f_tpot + per_layer[1] * shape.n_layer, f_ttft, f_tpot, bound))
    return out


@dataclass(frozen=True)
class ThinkingPoint:
    """One thinking budget: ``budget`` hidden tokens first, then the visible answer. Seconds per repeat."""

    budget: int
    first_token: tuple[float, ...]  # TTFT of the stream (the first hidden token when budget > 0)
    first_visible: tuple[float, ...]  # time to the first token the user sees
    visible_tpot: tuple[float, ...]

    def __repr__(self) -> str:
        return (f"ThinkingPoint({self.budget} hidden tokens: first visible token after "
                f"{_ms(summarize(self.first_visible).median)} ms)")


def token_times(latency: Latency) -> list[float]:
    """Each token's arrival time since the request, rebuilt from TTFT and the gaps (seconds)."""
    times = [latency.ttft]
    for gap in latency.itl:
        times.append(times[-1] + gap)
    return times


def split_thinking(trace: Trace, budget: int) -> tuple[str, str, Latency]:
    """(hidden text, visible text, the visible part's latency measured from the request)."""
    if not 0 <= budget < len(trace.token_times):
        raise bad_value("budget", budget, f"0 <= budget < {len(trace.token_times)} generated tokens",
                        "generate more tokens than the thinking budget")
    hidden = "".join(trace.generated_pieces[:budget])
    return hidden, "".join(trace.generated_pieces[budget:]), Latency.from_times(0.0, trace.token_times[budget:])


def thinking_sweep(model: Model, prompt: str, budgets: Sequence[int] = (0, 8, 16, 32), *, answer_tokens: int = 8,
                   repeats: int = 3, warmup: int = 1, **sampling) -> list[ThinkingPoint]:
    """Simulate a reasoning model: generate ``budget`` hidden tokens, then ``answer_tokens`` visible ones.

    It is one ordinary generation whose first ``budget`` tokens are not shown: exactly what a reasoning
    model's thinking costs in time (its hidden tokens are real decode steps).
    """
    check_number("answer_tokens", answer_tokens, low=1, integer=True)
    out = []
    for i, n in enumerate(budgets):
        check_number("budget", n, low=0, integer=True)
        # one warm-up before the first budget is enough: every budget runs the same shapes
        r = measure(model, prompt, n + answer_tokens, repeats=repeats, warmup=warmup if i == 0 else 0, **sampling)
        visible = [Latency.from_times(0.0, token_times(run)[n:]) for run in r.runs]
        out.append(ThinkingPoint(n, tuple(x.ttft for x in r.runs), tuple(v.ttft for v in visible),
                                 tuple(v.tpot for v in visible)))
    return out
