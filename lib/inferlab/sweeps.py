"""Measured sweeps: prefill against prompt length, decode against context and batch, cache on and off.

Each sweep times the engine's own ``prefill`` / ``decode_step`` (device synchronized, warm-up first,
several repeats) and returns a small dataclass of plain numbers that ``inferlab.viz.roofline`` and
``inferlab.viz.kvcache`` draw. Counting (FLOPs, bytes, floors) comes from ``inferlab.cost``.

    >>> s = prefill_sweep(m, [8, 64, 256])          # doctest: +SKIP
    >>> s.medians                                    # seconds, one per prompt length  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from . import _hf
from .cost import Cost, MachineProfile, Shape, decode_cost, prefill_cost
from .engine import decode_step, prefill
from .errors import bad_value, check_number
from .models import Model
from .progress import progress
from .timing import Summary, clock, summarize, time_call


@dataclass(frozen=True)
class Sweep:
    """Timed forwards of one job at several sizes; ``times[i]`` holds the repeats (seconds) at ``xs[i]``."""

    job: str  # "prefill", "decode" or "decode-batch"
    x_name: str  # what xs are, with units: "prompt length (tokens)", "context (tokens)", "batch size"
    xs: tuple[int, ...]
    tokens: tuple[int, ...]  # tokens one forward processes at each x (all sequences)
    times: tuple[tuple[float, ...], ...]
    batch: int  # sequences per forward (batch sweeps: see xs)
    context: int  # decode: positions in the cache before the first timed step (0 for prefill)
    device: str
    dtype: str
    model: str
    note: str = ""

    @property
    def summaries(self) -> tuple[Summary, ...]:
        """``timing.Summary`` (median, p90, min, max ...) at each x."""
        return tuple(summarize(t) for t in self.times)

    @property
    def medians(self) -> tuple[float, ...]:
        """Median seconds per forward at each x."""
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
        ms = [f"{s * 1e3:.2f}" for s in self.medians]
        return (f"Sweep({self.job}: {self.x_name} {list(self.xs)} -> median ms {ms}, "
                f"{len(self.times[0]) if self.times else 0} repeats, {self.model} on {self.device} {self.dtype})")

    def to_dict(self) -> dict:
        """Plain-Python form (for JSON)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def sample_ids(model: Model, length: int, batch: int = 1, seed: int = 0) -> torch.Tensor:
    """Reproducible token ids ``[batch, length]`` for timing (the values do not change the cost)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.info.vocab_size, (batch, length), generator=g).to(model.device)


def _meta(model: Model) -> dict:
    return {"device": str(model.device), "dtype": str(model.info.dtype).removeprefix("torch."),
            "model": model.info.name}


def _check_sizes(name: str, sizes: Sequence[int], low: int, high: int) -> tuple[int, ...]:
    if isinstance(sizes, (int, str)) or not sizes:
        raise bad_value(name, sizes, f"a non-empty list of integers in [{low}, {high}]", f"e.g. {name}=[{low}, {high}]")
    for s in sizes:
        check_number(name, s, low=low, high=high, integer=True,
                     fix=f"keep every size between {low} and {high} (the model's context is the limit)")
    return tuple(int(s) for s in sizes)


def prefill_sweep(model: Model, lengths: Sequence[int], *, repeats: int = 5, warmup: int = 1,
                  batch: int = 1) -> Sweep:
    """Time ``prefill`` of ``[batch, T]`` prompts for each T in ``lengths`` (each <= the context length)."""
    lengths = _check_sizes("lengths", lengths, 1, model.info.n_ctx)
    check_number("repeats", repeats, low=1, integer=True)
    times = []
    for t in progress(lengths, "prefill"):
        ids = sample_ids(model, t, batch)
        times.append(tuple(time_call(lambda ids=ids: prefill(model, ids), repeats=repeats, warmup=warmup,
                                     device=model.device)))
    return Sweep("prefill", "prompt length (tokens)", lengths, tuple(batch * t for t in lengths), tuple(times),
                 batch, 0, **_meta(model))


def _decode_times(model: Model, context: int, batch: int, repeats: int, warmup: int) -> tuple[float, ...]:
    """Prefill ``context`` tokens, then time single decode steps (the cache grows by one each)."""
    _, cache = prefill(model, sample_ids(model, context, batch))
    token = torch.zeros(batch, dtype=torch.long, device=model.device)
    return tuple(time_call(lambda: decode_step(model, token, cache), repeats=repeats, warmup=warmup,
                           device=model.device))


def decode_sweep(model: Model, contexts: Sequence[int], *, repeats: int = 5, warmup: int = 1,
                 batch: int = 1) -> Sweep:
    """Time one ``decode_step`` with ``C`` positions already cached, for each C in ``contexts``.

    Each timed step appends a position, so the repeats at C run at contexts C .. C + warmup + repeats - 1.
    """
    check_number("repeats", repeats, low=1, integer=True)
    contexts = _check_sizes("contexts", contexts, 1, model.info.n_ctx - warmup - repeats)
    times = [_decode_times(model, c, batch, repeats, warmup) for c in progress(contexts, "decode")]
    return Sweep("decode", "context (tokens in the cache)", contexts, tuple(batch for _ in contexts),
                 tuple(times), batch, contexts[0], **_meta(model),
                 note=f"each repeat adds one position (contexts C to C+{warmup + repeats - 1})")


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def batch_sweep(model: Model, batches: Sequence[int], *, context: int = 32, repeats: int = 5,
                warmup: int = 1) -> Sweep:
    """Time one decode step for ``[batch]`` new tokens (after a ``[batch, context]`` prefill) per batch size.

    Stops early, with a ``note``, if the device runs out of memory.
    """
    batches = _check_sizes("batches", batches, 1, 1 << 20)
    check_number("context", context, low=1, high=model.info.n_ctx - warmup - repeats, integer=True)
    done, times, note = [], [], ""
    for b in progress(batches, "batch"):
        try:
            times.append(_decode_times(model, context, b, repeats, warmup))
        except RuntimeError as exc:
            if not _out_of_memory(exc):
                raise
            if model.device.type == "cuda":
                torch.cuda.empty_cache()
            note = f"stopped at batch {b}: out of memory"
            break
        done.append(b)
    if not done:
        raise RuntimeError(f"batch_sweep: even batch {batches[0]} ran out of memory. Fix: use a smaller context.")
    return Sweep("decode-batch", "batch size (sequences)", tuple(done), tuple(done), tuple(times), 1, context,
                 **_meta(model), note=note)


def turn_batch(sweep: Sweep, factor: float = 2.0) -> int | None:
    """Smallest batch from which on every median step time is >= ``factor`` x the first batch's.

    "From which on" keeps one slow outlier (another program using the machine) from counting as the turn.
    None: the step time never stayed that high within the sweep.
    """
    first, medians = sweep.medians[0], sweep.medians
    return next((b for i, b in enumerate(sweep.xs) if all(s >= factor * first for s in medians[i:])), None)


# ----------------------------------------------------------------------------- counting and floors
def sweep_costs(sweep: Sweep, shape: Shape, machine: MachineProfile | None = None) -> list[Cost]:
    """The cost model's FLOPs, bytes and floors for every point of a sweep."""
    if sweep.job == "prefill":
        return [prefill_cost(shape, x, sweep.batch, machine) for x in sweep.xs]
    if sweep.job == "decode":
        return [decode_cost(shape, x, sweep.batch, machine) for x in sweep.xs]
    return [decode_cost(shape, sweep.context, b, machine) for b in sweep.xs]


@dataclass(frozen=True)
class RooflinePoint:
    """One measured forward placed on the roofline: its counted work and its median time."""

    label: str
    job: str
    flops: float
    bytes: float
    seconds: float  # measured median
    floor_s: float  # the larger of the two floors on this machine

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (x on the roofline)."""
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s (y on the roofline)."""
        return self.flops / self.seconds

    @property
    def times_floor(self) -> float:
        """Measured time / floor: 1 means on the roof; 10 means ten times slower than the roof allows."""
        return self.seconds / self.floor_s

    def __repr__(self) -> str:
        return (f"RooflinePoint({self.label}: {self.intensity:.2f} FLOP/B, {self.flops_per_s / 1e9:.2f} GFLOP/s, "
                f"{self.seconds * 1e3:.3f} ms = {self.times_floor:.1f} x the floor)")


def roofline_points(sweep: Sweep, shape: Shape, machine: MachineProfile) -> list[RooflinePoint]:
    """Each sweep point as a ``RooflinePoint`` (work from the cost model, time from the sweep)."""
    out = []
    for x, cost, t in zip(sweep.xs, sweep_costs(sweep, shape, machine), sweep.medians):
        label = {"prefill": f"prefill T={x}", "decode": f"decode ctx={x}"}.get(sweep.job, f"decode batch={x}")
        out.append(RooflinePoint(label, sweep.job, cost.flops, cost.bytes, t, cost.floor_s))
    return out


@dataclass(frozen=True)
class MythCheck:
    """TPOT predicted from compute alone, from bandwidth alone, and measured (seconds per decode step)."""

    from_compute_s: float
    from_bandwidth_s: float
    measured_s: float
    context: int

    @property
    def closer(self) -> str:
        """Which prediction is nearer the measurement (ratio-wise): "compute" or "bandwidth"."""
        def off(p: float) -> float:
            return max(p, self.measured_s) / min(p, self.measured_s)

        return "compute" if off(self.from_compute_s) < off(self.from_bandwidth_s) else "bandwidth"

    def __repr__(self) -> str:
        return (f"MythCheck(compute predicts {self.from_compute_s * 1e3:.3f} ms, bandwidth predicts "
                f"{self.from_bandwidth_s * 1e3:.3f} ms, measured {self.measured_s * 1e3:.3f} ms)")


def myth_check(shape: Shape, machine: MachineProfile, measured_s: float, context: int) -> MythCheck:
    """Both predictions of one batch-1 decode step at ``context`` cached positions."""
    cost = decode_cost(shape, context, 1, machine)
    return MythCheck(cost.floor_compute_s, cost.floor_memory_s, measured_s, context)


def count_ops(fn: Callable[[], object]) -> int:
    """How many tensor operations (ATen calls; on a GPU, roughly kernel launches) ``fn()`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Counter(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    with _Counter() as counter:
        fn()
    return counter.n


# ----------------------------------------------------------------------------- cache on and off
@dataclass(frozen=True)
class CacheComparison:
    """Greedy decoding of one prompt with the KV cache and without it (the whole sequence every step).

    ``*_times[r][i]``: seconds of step i in run r (step 0 reads the prompt); ``max_abs_diff[i]``: the
    largest |logit difference| between the two at step i; ``max_logit[i]``: the largest |logit| there.
    """

    prompt_len: int
    cached_ids: tuple[int, ...]
    uncached_ids: tuple[int, ...]
    cached_times: tuple[tuple[float, ...], ...]
    uncached_times: tuple[tuple[float, ...], ...]
    max_abs_diff: tuple[float, ...]
    max_logit: tuple[float, ...]
    device: str
    dtype: str
    model: str

    @property
    def tokens_identical(self) -> bool:
        """The two runs chose the same tokens at every step."""
        return self.cached_ids == self.uncached_ids

    @property
    def max_diff(self) -> float:
        """The largest |logit difference| over all steps."""
        return max(self.max_abs_diff)

    @property
    def tolerance(self) -> float:
        """Allowed relative difference: rounding of a different summation order (larger in half precision)."""
        return 1e-4 if self.dtype == "float32" else 2e-2

    @property
    def logits_agree(self) -> bool:
        """Every step's max |difference| is within ``tolerance`` x that step's largest |logit|."""
        return all(d <= self.tolerance * max(m, 1.0) for d, m in zip(self.max_abs_diff, self.max_logit))

    def step_medians(self, cached: bool) -> tuple[float, ...]:
        """Median over runs of each step's seconds."""
        runs = self.cached_times if cached else self.uncached_times
        return tuple(summarize(col).median for col in zip(*runs))

    def total_s(self, cached: bool) -> float:
        """Median over runs of the whole generation's seconds."""
        runs = self.cached_times if cached else self.uncached_times
        return summarize([sum(r) for r in runs]).median

    @property
    def speedup(self) -> float:
        """Total time without the cache / total time with it."""
        return self.total_s(False) / self.total_s(True)

    def __repr__(self) -> str:
        return (f"CacheComparison({len(self.cached_ids)} tokens after a {self.prompt_len}-token prompt: "
                f"cached {self.total_s(True) * 1e3:.1f} ms, uncached {self.total_s(False) * 1e3:.1f} ms "
                f"(x{self.speedup:.1f}), identical tokens {self.tokens_identical}, "
                f"max |logit diff| {self.max_diff:.2e})")


def _greedy_run(model: Model, ids: torch.Tensor, new_tokens: int, cached: bool):
    device, times, tokens, logits_seen = model.device, [], [], []
    seq = ids
    cache = None
    with torch.inference_mode():
        for i in range(new_tokens):
            t0 = clock(device)
            if not cached:  # re-read the whole sequence; only the last position's logits are needed
                logits = _hf.forward(model.hf, seq, None, use_cache=False, last_only=True)[0][:, -1, :]
            elif i == 0:
                logits, cache = prefill(model, seq)
            else:
                logits, cache = decode_step(model, tokens[-1], cache)
            token = int(logits[0].argmax())
            times.append(clock(device) - t0)
            tokens.append(token)
            logits_seen.append(logits[0].float())
            seq = torch.cat([seq, torch.tensor([[token]], device=device)], dim=1)
    return tuple(tokens), tuple(times), logits_seen


def compare_cache(model: Model, prompt_ids: Sequence[int], new_tokens: int, *, repeats: int = 3) -> CacheComparison:
    """Greedy-decode ``new_tokens`` tokens with and without the cache, ``repeats`` times each (timed).

    The logits of the first run of each are compared step by step.
    """
    ids = torch.as_tensor(list(prompt_ids), dtype=torch.long, device=model.device).reshape(1, -1)
    check_number("new_tokens", new_tokens, low=1, high=model.info.n_ctx - ids.shape[1], integer=True,
                 fix="shorten the prompt or generate fewer tokens (prompt + new tokens <= the context length)")
    check_number("repeats", repeats, low=1, integer=True)
    _greedy_run(model, ids, min(new_tokens, 3), True)  # warm-up: first-call costs stay out of the timings
    _greedy_run(model, ids, min(new_tokens, 3), False)
    runs: dict[bool, list] = {True: [], False: []}
    for r in progress(range(2 * repeats), "cache on/off"):
        runs[r % 2 == 0].append(_greedy_run(model, ids, new_tokens, cached=r % 2 == 0))
    with_cache, without = runs[True][0], runs[False][0]
    diffs = tuple(float((a - b).abs().max()) for a, b in zip(with_cache[2], without[2]))
    peaks = tuple(float(a.abs().max()) for a in with_cache[2])
    return CacheComparison(ids.shape[1], with_cache[0], without[0], tuple(r[1] for r in runs[True]),
                           tuple(r[1] for r in runs[False]), diffs, peaks, **_meta(model))
