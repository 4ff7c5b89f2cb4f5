"""Serving with and without each idea, on the same requests: the runs notebook 09 shows and the benchmark scores.
One piece (over 300 lines) on purpose: notebook 09's runs, one per section, and what each reads off its results.

Every function runs the real model through ``serve.run`` (or transformers, for ``peer_runs``) and returns the
results as a small dataclass, not a verdict; ``measure.serving_targets`` turns them into the benchmark's rows,
notebook 09 into figures.

    batching_runs   static and continuous batching on one Poisson workload near the server's capacity
    idle_slots      the share of batch slots that ran nothing
    batching_spread batching_runs on several workloads, both orders: each one's ratio and the pooled one
    peer_runs       inferlab.serve against transformers' ``generate_batch`` (and a padded ``generate()``)
    fit_runs        paged KV blocks against a contiguous max-length reservation, in the same memory
    kv_usage        positions reserved against used, per iteration, under either layout
    chunk_runs      a long prompt arrives while others decode: whole against chunked prefill
    gap_phases      the decoders' time between tokens before the long prompt arrived and while it was read
    prefix_runs     requests sharing a long opening, without and with prefix caching
    load_sweep      continuous batching over arrival rates, each held long enough (``serve.load``)
    equality        every policy and option against solo ``il.generate``, token for token (``serve.equality``)

Sizes travel as one ``BenchSizes`` (``serve.sizes``); one decode step of the forward these runs use, at several
batch sizes, is ``measure.serve_step_sweep`` (``measure.serving``); GPT-2's shape with random weights is the model to
time (its speed does not depend on its weights' values), the bundled model the one to check tokens on.

    >>> batching_runs(g, BenchSizes()).runs["continuous"].summary           # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field

from .. import _hf
from ..errors import bad_value, check_number
from ..i18n import tr
from ..models import Model
from ..serve.equality import (  # noqa: F401 (notebook 09 and the benchmark read them here)
    NEAR_TIE,
    Divergence,
    Equality,
    SettingCheck,
    divergence,
    equality,
    solo_tokens,
)
from ..serve.load import (  # noqa: F401 (notebook 09 reads them here)
    SUSTAINED,
    WARMUP,
    LoadPoint,
    SteadyState,
    load_requests,
    load_sweep,
    steady_state,
)
from ..serve.report import ServeResult
from ..serve.requests import workload
from ..serve.scheduler import run
from ..serve.sizes import BenchSizes
from ..timing import clock, interleave
from .serving import forward_s


# ----------------------------------------------------------------------------- the runs (notebook 09 shows them)
@dataclass(frozen=True)
class BatchingRuns:
    """``batching_runs``' result: the arrival rate (requests/s), one decode step at ``max_batch`` (seconds) it was
    set from, and each policy's run (``{"static": result, "continuous": result}``, in the order they ran)."""

    rate: float
    step: float
    runs: dict[str, ServeResult] = field(repr=False)


def batching_runs(model: Model, sizes: BenchSizes, seed: int = 0, order: tuple[str, str] = ("static", "continuous")
                  ) -> BatchingRuns:
    """Static and continuous batching on one Poisson workload arriving at about the server's capacity
    (``sizes.load`` times the requests/s that keep ``max_batch`` slots decoding answers of the mean length):
    a ``BatchingRuns`` (the rate, one decode step's seconds at max_batch, each policy's result).

    The estimate is an upper bound (every slot decoding at every step, no prefill), so ``load=1`` already arrives
    about as fast as continuous batching can finish; with a dozen requests the run is still mostly filling and
    draining (notebook 09: continuous batching left 46% of its slots idle). The benchmark's throughput row therefore
    runs more requests, faster (``throughput_requests``, ``throughput_load``). ``order``: which policy runs first
    (the benchmark alternates it between workloads, so that a machine slowing down mid-row favours neither)."""
    if not isinstance(order, (tuple, list)) or sorted(map(str, order)) != ["continuous", "static"]:
        raise ValueError(f"order={order!r}: name 'static' and 'continuous' once each, e.g. ('continuous', 'static')")
    mean_new = sum(sizes.new_tokens) / 2
    step = forward_s(model, sizes.max_batch, 1, context=sum(sizes.prompt_tokens) // 2 + int(mean_new) // 2, repeats=9)
    rate = sizes.load * sizes.max_batch / step / mean_new
    reqs = workload(sizes.requests, rate, sizes.prompt_tokens, sizes.new_tokens, seed, model=model)
    return BatchingRuns(rate, step, {p: run(model, reqs, policy=p, max_batch=sizes.max_batch) for p in order})


def idle_slots(result: ServeResult) -> float:
    """Share of the batch slots (``max_batch`` per iteration) that ran no request, over the run's iterations."""
    size = result.settings.max_batch
    return 1 - sum(len(it.requests) for it in result.iterations) / (size * len(result.iterations))


@dataclass(frozen=True)
class BatchingSpread:
    """``batching_runs`` on several workloads: per workload ``(seed, the policy run first, continuous / static
    tokens/s, static's idle slots, continuous's idle slots)``, and the pooled ratio (each policy's tokens over its
    seconds, all workloads together)."""

    workloads: tuple[tuple[int, str, float, float, float], ...]
    pooled: float
    rate: float  # the first workload's arrival rate (requests/s)
    step: float  # its decode step at max_batch (seconds)
    runs: tuple[BatchingRuns, ...] = field(default=(), repr=False, compare=False)  # every workload's runs

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(w[2] for w in self.workloads)

    def __repr__(self) -> str:
        each = ", ".join(f"{w[2]:.2f}x" for w in self.workloads)
        return tr("BatchingSpread({n} workloads: {each}; pooled {pooled:.2f}x)", n=len(self.workloads), each=each,
                  pooled=self.pooled)


def batching_spread(model: Model, sizes: BenchSizes, seed: int = 0) -> BatchingSpread:
    """``batching_runs`` on ``sizes.workloads`` Poisson workloads (seeds ``seed``, ``seed + 1``, ...), the policy
    run first alternating (static first on the first): one workload's ratio moves with the seed and with the
    machine's state, and whichever runs first was favoured on a 2-core VM. The spread keeps every workload's
    ``BatchingRuns`` (``runs``); ``measure.serving_targets.throughput_row`` scores it."""
    check_number("sizes.workloads", sizes.workloads, low=1, integer=True)
    orders = (("static", "continuous"), ("continuous", "static"))
    runs = [batching_runs(model, sizes, seed + i, orders[i % 2]) for i in range(sizes.workloads)]

    def pooled(policy: str) -> float:
        return (sum(b.runs[policy].summary.generated_tokens for b in runs)
                / sum(b.runs[policy].summary.seconds for b in runs))
    rows = tuple((seed + i, orders[i % 2][0],
                  b.runs["continuous"].summary.tokens_per_s / b.runs["static"].summary.tokens_per_s,
                  idle_slots(b.runs["static"]), idle_slots(b.runs["continuous"])) for i, b in enumerate(runs))
    return BatchingSpread(rows, pooled("continuous") / pooled("static"), runs[0].rate, runs[0].step, tuple(runs))


@dataclass(frozen=True)
class PeerComparison:
    """The same requests through ``inferlab.serve`` and transformers: tokens/s (median of interleaved runs) and
    how many answers equal serve's."""

    requests: int
    new_tokens: int
    tokens_per_s: dict[str, float]
    same_as_serve: dict[str, int]


SERVE_MODEL_LAYOUT = 'inferlab.serve, weights="model"'  # peer_runs' key for serve on the model's own layout


def peer_runs(model: Model, sizes: BenchSizes, seed: int = 0, repeats: int = 2, *, padded: bool = False,
              model_layout: bool = False) -> PeerComparison:
    """``serve.run`` (continuous), transformers' ``generate_batch``, (``padded``) ``generate()`` on one padded
    batch and (``model_layout``) ``serve.run(..., weights="model")``, on the same requests all at once, interleaved
    (``timing.interleave``).

    All requests arrive at once with equal answer lengths, so every scheduler does the same work: the comparison
    measures each engine's step (kernels, weight layout), not scheduling (``batching_runs`` measures that)."""
    reqs = workload(sizes.requests, math.inf, sizes.prompt_tokens, sizes.peer_new_tokens, seed, model=model)
    blocks = -(-(sizes.prompt_tokens[1] + sizes.peer_new_tokens) // 16) * sizes.max_batch
    prompts, n = [list(r.prompt_ids) for r in reqs], sizes.peer_new_tokens
    calls = {"inferlab.serve": lambda: [list(s.tokens) for s in run(model, reqs, max_batch=sizes.max_batch,
                                                                        kv_blocks=blocks).requests],
             "generate_batch": lambda: _hf.hf_generate_batch(model, prompts, max_new_tokens=n,
                                                             max_batch=sizes.max_batch, block_size=16,
                                                             kv_blocks=blocks)}
    if padded:
        calls["generate() padded"] = lambda: _hf.hf_generate_padded(model, prompts, max_new_tokens=n)
    if model_layout:
        calls[SERVE_MODEL_LAYOUT] = lambda: [list(s.tokens) for s in run(model, reqs, max_batch=sizes.max_batch,
                                                                          kv_blocks=blocks, weights="model").requests]
    out: dict[str, list] = {}

    def timed(name):
        def call():
            t0 = clock(model.device)
            out[name] = calls[name]()
            return clock(model.device) - t0
        return call

    times = interleave({k: timed(k) for k in calls}, repeats)
    tps = {k: len(reqs) * n / statistics.median(v) for k, v in times.items()}
    same = {k: sum(a == b for a, b in zip(v, out["inferlab.serve"], strict=True)) for k, v in out.items()}
    return PeerComparison(len(reqs), n, tps, same)


def in_flight(result: ServeResult) -> float:
    """Mean requests run per iteration while others waited (arrived, unfinished, not in that iteration's forward):
    while the queue is not empty, memory decides how many run. A request preempted and computed again counts only
    in the iterations that run it. If no request ever waited (all fitted), the most that ran at once."""
    finish = {s.request.id: s.finish for s in result.requests}
    arrival = {s.request.id: s.arrival for s in result.requests}
    counts = []
    for it in result.iterations:
        unfinished = sum(1 for rid, t in finish.items() if t >= it.end and arrival[rid] <= it.start)
        if unfinished > len(it.requests):
            counts.append(len(it.requests))
    return statistics.mean(counts) if counts else max(len(it.requests) for it in result.iterations)


@dataclass(frozen=True)
class FitRuns:
    """``fit_runs``' result: the longest request the workload allows (a contiguous reservation's length), and
    ``{"paged": result, "contiguous": result}``."""

    longest: int
    runs: dict[str, ServeResult] = field(repr=False)


def fit_runs(model: Model, sizes: BenchSizes, seed: int = 0) -> FitRuns:
    """The same requests in the same KV memory (``fit_blocks`` x 16 positions), all arriving at once: paged
    (blocks of 16) and contiguous (one block as long as the longest request the workload allows, per request)."""
    reqs = workload(sizes.requests, math.inf, sizes.prompt_tokens, sizes.new_tokens, seed, model=model)
    longest = sizes.prompt_tokens[1] + sizes.new_tokens[1]
    return FitRuns(longest, {"paged": run(model, reqs, max_batch=len(reqs), kv_blocks=sizes.fit_blocks),
                             "contiguous": run(model, reqs, max_batch=len(reqs), block_size=longest,
                                               kv_blocks=sizes.fit_blocks * 16 // longest)})


def kv_positions(result: ServeResult, longest: int) -> list[tuple[int, int, int]]:
    """Per iteration: ``(positions a contiguous server would reserve, positions in blocks, positions written)``
    for the requests holding blocks. A contiguous server reserves ``longest`` per request; the positions written
    after an iteration are a request's prompt (or what of it was run) and the tokens it had already been given."""
    tokens = {s.request.id: (len(s.request.prompt_ids), s.token_times) for s in result.requests}
    bs = result.pool.block_size
    out = []
    for it in result.iterations:
        used = 0
        for rid, table in it.tables:
            prompt, times = tokens[rid]  # a token given at an iteration's end is written by the next one
            used += min(prompt + sum(t < it.end for t in times), len(table) * bs)
        out.append((len(it.tables) * longest, sum(len(t) for _, t in it.tables) * bs, used))
    return out


def kv_usage(result: ServeResult, longest: int) -> dict[str, tuple[float, float]]:
    """Means over the iterations of ``kv_positions``: ``{"contiguous max-length": (reserved, written),
    "paged": (in blocks, written)}``."""
    reserved, paged, used = (statistics.mean(col) for col in zip(*kv_positions(result, longest), strict=True))
    return {"contiguous max-length": (reserved, used), "paged": (paged, used)}


def gaps(result: ServeResult, ids) -> list[float]:
    """Seconds between consecutive tokens of the requests ``ids`` (time between tokens)."""
    out = []
    for s in result.requests:
        if s.request.id in ids:
            out += [b - a for a, b in zip(s.token_times, s.token_times[1:], strict=False)]
    return out


@dataclass(frozen=True)
class GapPhases:
    """The decoders' time between tokens (seconds, medians and the longest) before a long prompt arrived and while
    it was read (from its arrival to its first token)."""

    before: float
    during: float
    longest_during: float

    def __repr__(self) -> str:
        return tr("GapPhases(before {b:.1f} ms, while the long prompt was read {d:.1f} ms (longest {m:.1f} ms))",
                  b=self.before * 1e3, d=self.during * 1e3, m=self.longest_during * 1e3)


def gap_phases(result: ServeResult, ids, long_id: int) -> GapPhases:
    """``GapPhases`` of the requests ``ids`` around request ``long_id``'s prefill: a gap belongs to the phase in
    which it ended (NaN where a phase holds none)."""
    long = next((s for s in result.requests if s.request.id == long_id), None)
    if long is None:
        raise bad_value("long_id", long_id, tr("the id of a request in the run"), tr("pass chunk_runs' long request"))
    before, during = [], []
    for s in result.requests:
        if s.request.id in ids:
            for a, b in zip(s.token_times, s.token_times[1:], strict=False):
                if b <= long.arrival:
                    before.append(b - a)
                elif b <= long.first_token:
                    during.append(b - a)

    def med(v: list[float]) -> float:
        return statistics.median(v) if v else math.nan
    return GapPhases(med(before), med(during), max(during, default=math.nan))


@dataclass(frozen=True)
class ChunkRuns:
    """``chunk_runs``' result: the decoding requests' ids, the long prompt's id, and
    ``{"whole": result, "chunked": result}``."""

    decoders: frozenset[int]
    long_id: int
    runs: dict[str, ServeResult] = field(repr=False)


def chunk_runs(model: Model, sizes: BenchSizes, seed: int = 0) -> ChunkRuns:
    """``decoders`` requests decode; a ``long_prompt`` arrives after about a quarter of their answers. Run with
    whole prompts and with ``prefill_chunk``: a ``ChunkRuns``."""
    decoders = workload(sizes.decoders, math.inf, sizes.prompt_tokens[0], sizes.decoder_tokens, seed, model=model)
    step = forward_s(model, sizes.decoders, 1, context=sizes.prompt_tokens[0] + sizes.decoder_tokens // 4)
    long = workload(1, 1.0, sizes.long_prompt, 4, seed, model=model)[0]
    long = dataclasses.replace(long, id=len(decoders), arrival=step * sizes.decoder_tokens / 4)
    reqs = [*decoders, long]
    return ChunkRuns(frozenset(r.id for r in decoders), long.id,
                     {k: run(model, reqs, max_batch=len(reqs), prefill_chunk=c)
                      for k, c in (("whole", None), ("chunked", sizes.prefill_chunk))})


def prefix_runs(model: Model, sizes: BenchSizes, seed: int = 0) -> dict[str, ServeResult]:
    """Requests sharing a ``shared_prefix``-token opening, arriving about two prefills apart (so TTFT is the
    prefill, not a queue), without and with prefix caching: ``{"without": result, "with": result}``."""
    own = (8, 24) if sizes.prompt_tokens[1] >= 24 else sizes.prompt_tokens
    rate = 0.5 / forward_s(model, 1, sizes.shared_prefix + own[1])
    reqs = workload(sizes.prefix_requests, rate, own, 4, seed, model=model, shared_prefix=sizes.shared_prefix)
    return {k: run(model, reqs, max_batch=sizes.max_batch, prefix_cache=c) for k, c in (("without", False),
                                                                                        ("with", True))}
