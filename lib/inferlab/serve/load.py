"""Continuous batching over arrival rates, each held long enough to tell a rate the server keeps up with from one
whose queue grows: the latency-throughput curve of notebook 09 §4 and what a server can promise (goodput).

    steady_state    what a run finished against what arrived, in a window without its warm-up and drain
    load_sweep      continuous batching at each rate, ``load_requests`` requests each (about ``load_seconds``)

Goodput is sustained throughput within an SLO: a short burst can meet a latency target at a rate the server cannot
keep up with (the queue is still growing when the burst ends), so each rate's window says whether it was sustained.

    >>> points = load_sweep(g, [2.0, 8.0], BenchSizes())                  # doctest: +SKIP
    >>> [p.sustained for p in points]                                     # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import bad_value, check_number
from ..i18n import tr
from ..models import Model
from .report import ServeSummary
from .requests import workload
from .scheduler import run
from .sizes import BenchSizes

WARMUP = 0.2  # steady_state leaves out the first fifth of the arrivals: the server starts empty
# A rate is sustained where the window's finishes kept up with its arrivals: at a sustainable rate the queue only
# fluctuates (a few requests at either end of the window), past the service rate it grows by (arrival rate - service
# rate) x seconds. Sustained: at least SUSTAINED of the window's arrivals finished in it, or the queue grew by at most
# QUEUE_SLACK requests (a short window's count of finishes is noisy where few requests arrive). Four fifths was too
# lenient: a quiet 2-core run at 6.1 requests/s finished 82% of its arrivals while its queue grew from 6 to 13; a
# full batch of queue slack too (a contended run at 1.6 requests/s finished 1.1/s, the queue growing from 4 to 10).
SUSTAINED = 0.9
QUEUE_SLACK = 2


@dataclass(frozen=True)
class SteadyState:
    """A run between its warm-up and its drain: from the arrival that ends the warm-up to the last arrival.

    ``queue`` counts the requests arrived and not finished (waiting or running) at the window's start and end, so
    ``queue[1] - queue[0] == arrived - finished``. The server *sustained* the rate when it finished requests about as
    fast as they arrived (at least ``SUSTAINED`` of the window's arrivals, or a queue that grew by at most
    ``QUEUE_SLACK``)."""

    seconds: float
    arrived: int
    finished: int
    tokens: int
    queue: tuple[int, int]

    @property
    def offered_per_s(self) -> float:
        return self.arrived / self.seconds

    @property
    def finished_per_s(self) -> float:
        return self.finished / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def growth(self) -> int:
        """Requests the queue gained over the window."""
        return self.queue[1] - self.queue[0]

    @property
    def sustained(self) -> bool:
        return self.finished >= SUSTAINED * self.arrived or self.growth <= QUEUE_SLACK

    def __repr__(self) -> str:
        return tr("SteadyState({s:.2f} s: {a} arrived ({ar:.2f}/s), {f} finished ({fr:.2f}/s), queue {q0} -> {q1}, "
                  "{tps:.1f} tokens/s, {verdict})", s=self.seconds, a=self.arrived, ar=self.offered_per_s,
                  f=self.finished, fr=self.finished_per_s, q0=self.queue[0], q1=self.queue[1], tps=self.tokens_per_s,
                  verdict=tr("sustained") if self.sustained else tr("queue growing"))


def steady_state(result, warmup: float = WARMUP) -> SteadyState:
    """``SteadyState`` of a ``ServeResult`` (anything with ``requests`` of ``Served``):
    the window runs from the arrival that ends the first ``warmup`` share of them to the last arrival, so neither
    the empty start nor the drain after the arrivals stop counts."""
    check_number("warmup", warmup, low=0, high=1, high_open=True)
    arrivals = sorted(s.arrival for s in result.requests)
    if len(arrivals) < 3 or arrivals[-1] <= arrivals[int(len(arrivals) * warmup)]:
        raise bad_value("result", tr("{n} requests over {s:.3f} s", n=len(arrivals),
                                     s=(arrivals[-1] - arrivals[0]) if arrivals else 0.0),
                        tr("at least 3 requests arriving over some time"),
                        tr("serve a Poisson workload with a finite rate (load_sweep does)"))
    a, b = arrivals[int(len(arrivals) * warmup)], arrivals[-1]

    def queue(t: float) -> int:
        return sum(1 for s in result.requests if s.arrival <= t < s.finish)
    return SteadyState(b - a, sum(a < s.arrival <= b for s in result.requests),
                       sum(a < s.finish <= b for s in result.requests),
                       sum(a < t <= b for s in result.requests for t in s.token_times),
                       (queue(a), queue(b)))


@dataclass(frozen=True)
class LoadPoint:
    """One arrival rate (requests/s offered), the whole run's summary, and its ``SteadyState`` window."""

    rate: float
    summary: ServeSummary
    steady: SteadyState

    @property
    def sustained(self) -> bool:
        return self.steady.sustained


def load_requests(rate: float, sizes: BenchSizes) -> int:
    """Requests ``load_sweep`` serves at ``rate``: ``load_seconds`` of arrivals, within ``load_requests``."""
    low, high = sizes.load_requests
    return min(high, max(low, math.ceil(rate * sizes.load_seconds)))


def load_sweep(model: Model, rates, sizes: BenchSizes, seed: int = 0) -> list[LoadPoint]:
    """Continuous batching at each arrival rate, the same lengths each time (``prompt_tokens``, ``new_tokens``):
    the latency-throughput curve. Each rate serves ``load_requests(rate, sizes)`` requests (about
    ``load_seconds`` of arrivals), long enough for ``steady_state`` to tell a rate the server keeps up with from one
    whose queue grows."""
    if isinstance(rates, (int, float, str)) or not rates:
        raise bad_value("rates", rates, tr("a non-empty list of arrival rates (requests/s)"), tr("e.g. [2.0, 8.0]"))
    for r in rates:
        check_number("rates", r, low=0, low_open=True, fix=tr("give each rate in requests/s, a finite number > 0"))
    check_number("sizes.load_seconds", sizes.load_seconds, low=0, low_open=True)
    low, high = sizes.load_requests
    check_number("sizes.load_requests[0]", low, low=3, integer=True)
    check_number("sizes.load_requests[1]", high, low=low, integer=True)
    out = []
    for r in rates:
        res = run(model, workload(load_requests(r, sizes), r, sizes.prompt_tokens, sizes.new_tokens, seed,
                                  model=model), max_batch=sizes.max_batch)
        out.append(LoadPoint(r, res.summary, steady_state(res)))
    return out
