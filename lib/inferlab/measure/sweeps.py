"""Forward passes timed at growing sizes: prefill against prompt length, decode against context and batch.

Every sweep returns the one ``Sweep`` result type (``times[i]`` holds every repeat, in seconds, at
``xs[i]``), which ``inferlab.viz.latency.sweep_figure`` / ``batch_figure`` draw and
``inferlab.measure.roofline`` places on the roofline. Each point is timed by ``timing.time_call``
(warm-up, device sync, repeats) around the engine's own ``prefill`` / ``decode_step``, or the fast
path's ``FastDecoder.prefill`` / ``step`` with ``path="fast"``.

    >>> s = prefill_sweep(m, [8, 64, 256])          # doctest: +SKIP
    >>> s.medians                                    # seconds, one per prompt length  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .. import gate
from ..engine import decode_step, prefill
from ..errors import bad_value, check_number
from ..fast import FastDecoder
from ..i18n import tr
from ..models import Model
from ..plain import plain
from ..progress import progress
from ..timing import Summary, summarize, time_call

PATHS = ("engine", "fast")


@dataclass(frozen=True)
class Sweep:
    """One job timed at several sizes: ``times[i]`` holds the repeats (seconds) at ``xs[i]``.

    ``job`` names what was timed: ``"prefill"``, ``"decode"`` (against the context), ``"decode-batch"``
    and ``"prefill-batch"`` (against the batch size), ``"TTFT"`` or ``"decode step"`` (whole requests,
    ``inferlab.measure.latency``).
    """

    job: str
    x_name: str  # what xs are, with units: "prompt length (tokens)", "context (tokens in the cache)", ...
    xs: tuple[int, ...]
    times: tuple[tuple[float, ...], ...]
    tokens: tuple[int, ...]  # tokens one forward processes at each x (all sequences)
    batch: int = 1  # sequences per forward (batch sweeps: see xs)
    context: int = 0  # tokens per sequence before the timed forward (decode) or read by it (batch sweeps)
    model: str = ""
    device: str = ""
    dtype: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not len(self.xs) == len(self.times) == len(self.tokens):
            raise ValueError(f"a Sweep needs one entry of times and tokens per x: {len(self.xs)} xs, "
                             f"{len(self.times)} times, {len(self.tokens)} tokens. Fix: pass equal lengths.")

    @property
    def summaries(self) -> tuple[Summary, ...]:
        """``timing.Summary`` (median, p90, min, max ...) at each x."""
        return tuple(summarize(t) for t in self.times)

    @property
    def medians(self) -> tuple[float, ...]:
        """Median seconds at each x."""
        return tuple(s.median for s in self.summaries)

    @property
    def lows(self) -> tuple[float, ...]:
        """Fastest repeat at each x (seconds): the lower edge of the spread band."""
        return tuple(min(t) for t in self.times)

    @property
    def highs(self) -> tuple[float, ...]:
        """Slowest repeat at each x (seconds): the upper edge of the spread band."""
        return tuple(max(t) for t in self.times)

    @property
    def tokens_per_s(self) -> tuple[float, ...]:
        """Tokens processed per second at each x (median time)."""
        return tuple(n / s for n, s in zip(self.tokens, self.medians))

    def __repr__(self) -> str:
        facts = {"job": self.job, "x_name": self.x_name, "xs": list(self.xs),
                 "ms": [f"{s * 1e3:.2f}" for s in self.medians], "repeats": len(self.times[0]) if self.times else 0}
        if self.model:
            return tr("Sweep({job}: {x_name} {xs} -> median ms {ms}, {repeats} repeats, {model} on {device} {dtype})",
                      model=self.model, device=self.device, dtype=self.dtype, **facts)
        return tr("Sweep({job}: {x_name} {xs} -> median ms {ms}, {repeats} repeats)", **facts)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


def sample_ids(model: Model, length: int, batch: int = 1, seed: int = 0) -> torch.Tensor:
    """Reproducible token ids ``[batch, length]`` for timing (the values do not change the cost)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.info.vocab_size, (batch, length), generator=g).to(model.device)


def meta(model: Model) -> dict:
    """The ``model``, ``device`` and ``dtype`` fields of a result, read from ``model``."""
    return {"device": str(model.device), "dtype": str(model.info.dtype).removeprefix("torch."),
            "model": model.info.name}


def check_sizes(name: str, sizes: Sequence[int], low: int, high: int) -> tuple[int, ...]:
    """``sizes`` as a tuple of integers in ``[low, high]``, or a clear error naming ``name``."""
    if isinstance(sizes, (int, str)) or not sizes:
        raise bad_value(name, sizes, f"a non-empty list of integers in [{low}, {high}]", f"e.g. {name}=[{low}, {high}]")
    for s in sizes:
        check_number(name, s, low=low, high=high, integer=True,
                     fix=f"keep every size between {low} and {high} (the model's context is the limit)")
    return tuple(int(s) for s in sizes)


def _check_path(path: str) -> None:
    if path not in PATHS:
        raise bad_value("path", path, f"one of {list(PATHS)}", "use 'engine' (Hugging Face forward) or 'fast'")


def prefill_call(model: Model, ids: torch.Tensor, path: str = "engine", **options) -> Callable[[], object]:
    """A no-argument function that prefills ``ids`` ``[batch, tokens]`` once on ``path`` (for ``time_call``)."""
    _check_path(path)
    if path == "engine":
        return lambda: prefill(model, ids)
    dec = FastDecoder(model, ids.shape[1], batch=ids.shape[0], **options)
    return lambda: dec.prefill(ids)


FILLS = ("prefill", "random")


def random_fill(dec: FastDecoder, context: int, seed: int = 0) -> None:
    """Write random keys and values into the first ``context`` slots of ``dec``'s cache and place it after them.

    A decode step's cost does not depend on what the cache holds, only on how much: this gives a long context
    without a prefill, which costs batch x context tokens of arithmetic (at batch 32 and 1,000 tokens, a minute on
    a CPU). Every slot written is a real page of memory (a cache left at zeros can be served from one shared page).
    """
    g = torch.Generator(device=dec.k[0].device).manual_seed(seed)
    for t in (*dec.k, *dec.v):
        t[:, :, :context].normal_(generator=g)
    dec.tokens = context


def decode_call(model: Model, context: int, batch: int, steps: int, path: str = "engine", fill: str = "prefill",
                **options) -> Callable[[], object]:
    """Prefill ``[batch, context]`` ids; return a function that runs one decode step (``steps`` calls fit).

    Each call appends one position to the cache, as decoding does. ``fill="random"`` (fast path only) fills the
    cache with random keys and values instead of a prefill (``random_fill``): the same step, at far less cost.
    """
    _check_path(path)
    if fill not in FILLS or (fill == "random" and path != "fast"):
        raise bad_value("fill", fill, "'prefill', or 'random' with path='fast'",
                        "fill the cache by a prefill, or use path='fast' for random keys and values")
    if fill == "random":
        dec = FastDecoder(model, context + steps, batch=batch, **options)
        random_fill(dec, context)
        token = torch.zeros(batch, dtype=torch.long, device=model.device)
        return lambda: dec.step(token)
    ids = sample_ids(model, context, batch)
    if path == "engine":
        _, cache = prefill(model, ids)
        token = torch.zeros(batch, dtype=torch.long, device=model.device)
        return lambda: decode_step(model, token, cache)
    dec = FastDecoder(model, context + steps, batch=batch, **options)
    token = dec.prefill(ids).argmax(-1)
    return lambda: dec.step(token)


def _times(fn: Callable[[], object], model: Model, repeats: int, warmup: int) -> tuple[float, ...]:
    return tuple(time_call(fn, repeats=repeats, warmup=warmup, device=model.device))


def prefill_sweep(model: Model, lengths: Sequence[int], *, repeats: int = 5, warmup: int = 1,
                  batch: int = 1) -> Sweep:
    """Time ``prefill`` of ``[batch, T]`` prompts for each T in ``lengths`` (each <= the context length)."""
    lengths = check_sizes("lengths", lengths, 1, model.info.n_ctx)
    check_number("repeats", repeats, low=1, integer=True)
    times = [_times(prefill_call(model, sample_ids(model, t, batch)), model, repeats, warmup)
             for t in progress(lengths, tr("prefill"))]
    sweep = Sweep("prefill", tr("prompt length (tokens)"), lengths, tuple(times), tuple(batch * t for t in lengths),
                  batch=batch, **meta(model))
    _leave_curve(model, sweep, "prefill_sweep")
    return sweep


def decode_sweep(model: Model, contexts: Sequence[int], *, repeats: int = 5, warmup: int = 1, batch: int = 1,
                 path: str = "engine", fill: str = "prefill", **options) -> Sweep:
    """Time one decode step with ``C`` positions already cached, for each C in ``contexts``.

    Each timed step appends a position, so the repeats at C run at contexts C .. C + warmup + repeats - 1.
    ``path="fast"`` times ``FastDecoder.step`` (``options`` go to ``FastDecoder``); ``fill="random"`` fills its
    cache with random keys and values instead of a prefill (``decode_call``).
    """
    check_number("repeats", repeats, low=1, integer=True)
    contexts = check_sizes("contexts", contexts, 1, model.info.n_ctx - warmup - repeats)
    times = [_times(decode_call(model, c, batch, warmup + repeats, path, fill, **options), model, repeats, warmup)
             for c in progress(contexts, tr("decode"))]
    sweep = Sweep("decode", tr("context (tokens in the cache)"), contexts, tuple(times), tuple(batch for _ in contexts),
                  batch=batch, context=contexts[0], **meta(model),
                  note=tr("each repeat adds one position (contexts C to C+{last})", last=warmup + repeats - 1))
    _leave_curve(model, sweep, "decode_sweep")
    if batch == 1 and _chosen_path(path, options):
        gate.step(model.info, sweep.medians[0], via="decode_sweep", path=path, context=contexts[0])
    return sweep


def _leave_curve(model: Model, sweep: Sweep, via: str) -> None:
    """The gate's record of a sweep's curve (its ``spike`` rule), for three points or more: with fewer, no point has
    a neighbour on each side, and the record would only add an empty output to the notebook."""
    if len(sweep.xs) >= 3:
        gate.sweep(model.info, sweep.xs, sweep.medians, via=via, job=sweep.job)


def _chosen_path(path: str, options: dict) -> bool:
    """The engine, or the fast path in the layout this machine chose: what the gate compares (``inferlab.gate``)."""
    return path == "engine" or options.get("weights", "auto") == "auto"


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def out_of_memory_note(exc: RuntimeError, model: Model, batch: int) -> str:
    """A sweep over batch sizes stops where memory ran out: the note it keeps (any other error is raised again)."""
    if not _out_of_memory(exc):
        raise exc
    if model.device.type == "cuda":
        torch.cuda.empty_cache()
    return tr("stopped at batch {batch}: out of memory", batch=batch)


def batch_sweep(model: Model, batches: Sequence[int], *, context: int = 32, repeats: int = 5, warmup: int = 1,
                job: str = "decode", path: str = "engine", **options) -> Sweep:
    """Time one forward of ``batch`` sequences at once, for each batch size.

    ``job="decode"``: one decode step for ``[batch]`` new tokens after a ``[batch, context]`` prefill
    (each user's TPOT). ``job="prefill"``: the prefill of ``[batch, context]`` (each user's TTFT).
    ``path="fast"`` times the fast path (``options`` go to ``FastDecoder``). Stops early, with a
    ``note``, if the device runs out of memory.

    Where a bigger batch's median comes out more than ``gate.BATCH_DROP`` below the smaller one's, the smaller batch
    is timed once more after the sweep (a new decoder, the same settings): a step slowed by a disturbance at the
    start comes back faster, one that is slower at that batch size on this machine (its kernels) does not. The
    gate's ``batch`` rule reads both.
    """
    if job not in ("decode", "prefill"):
        raise bad_value("job", job, "'decode' or 'prefill'", "use job='decode' for TPOT, 'prefill' for TTFT")
    batches = check_sizes("batches", batches, 1, 1 << 20)
    check_number("repeats", repeats, low=1, integer=True)
    high = model.info.n_ctx - (warmup + repeats if job == "decode" else 0)
    check_number("context", context, low=1, high=high, integer=True)
    done, times, note = [], [], ""
    if job == "decode" and path == "fast":
        # The first fast decoder a process builds ran slower for its whole life (GPT-2's shape, batch 1: 19.5 ms,
        # then 13.7 and 14.4 ms for the next two): one built and used here first, untimed, keeps that off batch 1.
        _times(decode_call(model, context, batches[0], warmup + 1, path, **options), model, 1, warmup)
    def timed(b: int) -> tuple[float, ...]:
        fn = (decode_call(model, context, b, warmup + repeats, path, **options) if job == "decode" else
              prefill_call(model, sample_ids(model, context, b), path, **options))
        return _times(fn, model, repeats, warmup)

    for b in progress(batches, tr("batch")):
        try:
            times.append(timed(b))
        except RuntimeError as exc:
            note = out_of_memory_note(exc, model, b)
            break
        done.append(b)
    if not done:
        raise RuntimeError(f"batch_sweep: even batch {batches[0]} ran out of memory. Fix: use a smaller context.")
    tokens = tuple(done) if job == "decode" else tuple(b * context for b in done)
    sweep = Sweep(f"{job}-batch", tr("batch size (sequences)"), tuple(done), tuple(times), tokens, batch=1,
                  context=context, **meta(model), note=note)
    med = sweep.medians
    again = [summarize(timed(b)).median if k + 1 < len(med) and med[k + 1] < (1 - gate.BATCH_DROP) * med[k] else None
             for k, b in enumerate(sweep.xs)]
    gate.batch(model.info, sweep.xs, sweep.medians, via=f"batch_sweep({job}, {path})", job=job, path=path,
               fastest=[min(t) for t in sweep.times], slowest=[max(t) for t in sweep.times], again=again)
    if job == "decode" and sweep.xs[0] == 1 and _chosen_path(path, options):
        gate.step(model.info, sweep.medians[0], via="batch_sweep (batch 1)", path=path, context=context)
    return sweep


def turn_batch(sweep: Sweep, factor: float = 2.0) -> int | None:
    """Smallest batch from which on every median step time is >= ``factor`` x the first batch's.

    "From which on" keeps one slow outlier (another program using the machine) from counting as the turn.
    None: the step time never stayed that high within the sweep.
    """
    first, medians = sweep.medians[0], sweep.medians
    return next((b for i, b in enumerate(sweep.xs) if all(s >= factor * first for s in medians[i:])), None)
