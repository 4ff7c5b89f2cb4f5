"""Timing that means what it says: TTFT, TPOT, ITL, E2E as vLLM's benchmark defines them.

- TTFT: from the request (before tokenization) to the first generated token id on the host.
- E2E: from the request to the last token id. N: number of generated tokens.
- TPOT = (E2E - TTFT) / (N - 1): the first token is excluded. ITL: the gaps between tokens.
- So E2E = TTFT + (N - 1) x TPOT exactly. LLMPerf's per-token figure is E2E / N instead.

The device is synchronized before every clock read (a GPU runs ahead of Python otherwise).
``interleave`` times several variants in rotating order, so a busy machine slows them alike.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .i18n import tr
from .plain import plain


def sync(device: torch.device | str | None = None) -> None:
    """Wait until the device has finished its queued work (a no-op on the CPU)."""
    kind = torch.device(device).type if device is not None else "cpu"
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


def clock(device: torch.device | str | None = None) -> float:
    """Synchronize, then read a monotonic clock (seconds)."""
    sync(device)
    return time.perf_counter()


@dataclass(frozen=True)
class Latency:
    """One request's latency numbers (seconds). Built from token timestamps by ``from_times``."""

    ttft: float
    tpot: float  # nan when only one token was generated
    e2e: float
    itl: tuple[float, ...]
    n_tokens: int

    @property
    def llmperf_per_token(self) -> float:
        """LLMPerf's figure, E2E / N (first token included): not the same as TPOT."""
        return self.e2e / self.n_tokens

    @property
    def tokens_per_second(self) -> float:
        """Decode speed after the first token, 1 / TPOT."""
        return 1.0 / self.tpot if self.tpot and math.isfinite(self.tpot) and self.tpot > 0 else float("nan")

    def __repr__(self) -> str:
        return tr("Latency(TTFT {ttft:.2f} ms, TPOT {tpot:.2f} ms, E2E {e2e:.2f} ms, N={n})",
                  ttft=self.ttft * 1e3, tpot=self.tpot * 1e3, e2e=self.e2e * 1e3, n=self.n_tokens)

    @classmethod
    def from_times(cls, request: float, token_times: Sequence[float]) -> Latency:
        """From the request time and the time each token id reached the host (same clock).

        >>> lat = Latency.from_times(0.0, [0.5, 0.6, 0.7, 0.8])
        >>> round(lat.ttft, 3), round(lat.tpot, 3), round(lat.e2e, 3)
        (0.5, 0.1, 0.8)
        """
        if not token_times:
            raise ValueError("token_times is empty: no token was generated, so there is no latency. "
                             "Fix: generate at least one token.")
        if any(b < a for a, b in itertools.pairwise(token_times)) or token_times[0] < request:
            raise ValueError("token_times must be non-decreasing and after the request time. "
                             "Fix: pass times from one monotonic clock (time.perf_counter()).")
        n = len(token_times)
        ttft = token_times[0] - request
        e2e = token_times[-1] - request
        tpot = (e2e - ttft) / (n - 1) if n > 1 else float("nan")
        itl = tuple(b - a for a, b in itertools.pairwise(token_times))
        return cls(ttft=ttft, tpot=tpot, e2e=e2e, itl=itl, n_tokens=n)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


@dataclass(frozen=True)
class Summary:
    """Mean, median, p90, p99, min, max over repeats (same unit as the inputs)."""

    n: int
    mean: float
    median: float
    p90: float
    p99: float
    min: float
    max: float

    def __repr__(self) -> str:
        return tr("Summary(n={n}, mean={mean:.4g}, median={median:.4g}, p90={p90:.4g}, p99={p99:.4g})",
                  n=self.n, mean=self.mean, median=self.median, p90=self.p90, p99=self.p99)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), ``q`` in [0, 100]."""
    xs = sorted(values)
    if not xs:
        raise ValueError("values is empty. Fix: measure at least once.")
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> Summary:
    """Summary statistics of repeated measurements.

    >>> summarize([1, 2, 3, 4]).median
    2.5
    """
    values = [float(v) for v in values if not math.isnan(float(v))]
    if not values:
        raise ValueError("values is empty (or all NaN). Fix: measure at least once.")
    return Summary(n=len(values), mean=sum(values) / len(values), median=percentile(values, 50),
                   p90=percentile(values, 90), p99=percentile(values, 99), min=min(values), max=max(values))


def time_call(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1,
              device: torch.device | str | None = None) -> list[float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times; seconds of each timed run.

    The device is synchronized before and after each timed call (pass the model's ``device``).
    Every measurement in ``inferlab.measure`` times through this function.
    """
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = clock(device)
        fn()
        out.append(clock(device) - t0)
    return out


def interleave(runs: dict[str, Callable[[], object]], repeats: int, *, warmup: int = 1) -> dict[str, list]:
    """Call each function ``warmup`` times untimed, then ``repeats`` rounds, rotating the order each round.

    A busy machine then slows every variant alike. Returns each name's results, in round order.

    >>> interleave({"a": lambda: 1, "b": lambda: 2}, 2)
    {'a': [1, 1], 'b': [2, 2]}
    """
    for _ in range(warmup):
        for fn in runs.values():
            fn()
    names, out = list(runs), {k: [] for k in runs}
    for r in range(repeats):
        for k in names[r % len(names):] + names[: r % len(names)]:
            out[k].append(runs[k]())
    return out


BUSY_SHARE = 0.75  # a one-minute load average above this share of the cores: other programs hold the machine


def busy_note(load: float | None = None, cores: int | None = None) -> str | None:
    """One line saying the machine is busy, or None. ``load``: the one-minute load average (default: the system's;
    None where the system has none, e.g. Windows); ``cores``: the CPU count. On a 2-core VM at a load of 3.6 a
    batch-8 decode step took 902 ms instead of 29 and notebook 09 seven times as long."""
    import os

    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            return None
    cores = cores or os.cpu_count() or 1
    if load <= BUSY_SHARE * cores:
        return None
    return tr("This machine is busy (load {load:.1f} on {cores} cores): timings will be slow and may be flagged as "
              "disturbed. Close other notebooks (Kernel > Shut Down All Kernels...) and programs, then run again.",
              load=load, cores=cores)
