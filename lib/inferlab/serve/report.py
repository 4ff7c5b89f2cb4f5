"""What a serving run returns: each request's tokens and times, each iteration's work, and a summary.

Times are seconds on one real clock, from the moment the server started (``run``'s first clock read).
TTFT and TPOT follow vLLM's benchmark (``inferlab.timing``): TTFT from arrival to the first token on the
host, TPOT = (finish - first token) / (N - 1). Throughput is generated tokens over the time from the first
arrival to the last finish.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..i18n import by_language, tr
from ..plain import plain
from ..timing import percentile
from .blocks import BlockPool
from .requests import Request

# The policy and layout names are identifiers (code passes them: policy="static"); the Chinese edition shows the
# course's words for them. "contiguous" is not 连续 here: that word is continuous batching's.
_ZH_NAMES = {"static": "静态批处理", "continuous": "连续批处理", "paged": "分页",
             "contiguous max-length": "按最长长度整段预留", "chunked prefill": "分块 Prefill",
             "prefix cache": "前缀缓存", "preemption": "抢占", "static + preemption": "静态批处理 + 抢占",
             "all at once": "全部同时到达", "generate() padded": "generate()（填充）"}


def policy_text(name: str) -> str:
    """A serving policy's or KV layout's name ("static", "paged", ...) in the reader's language; others unchanged."""
    return by_language(en=name, zh=_ZH_NAMES.get(name, name))


@dataclass(frozen=True)
class Served:
    """One request after the run: its answer and when each of its tokens reached the host."""

    request: Request
    tokens: tuple[int, ...]  # the generated ids
    token_times: tuple[float, ...]  # seconds since the server started, one per token
    preemptions: int  # times its blocks were taken back and its context computed again later
    cached_tokens: int  # prompt positions taken from the prefix cache (summed over admissions)

    @property
    def arrival(self) -> float:
        return self.request.arrival

    @property
    def first_token(self) -> float:
        return self.token_times[0]

    @property
    def finish(self) -> float:
        return self.token_times[-1]

    @property
    def ttft(self) -> float:
        """Arrival to first token (seconds): waiting in the queue plus the prompt's prefill."""
        return self.first_token - self.arrival

    @property
    def tpot(self) -> float:
        """Mean time per output token after the first (seconds); NaN for a one-token answer."""
        n = len(self.tokens)
        return (self.finish - self.first_token) / (n - 1) if n > 1 else math.nan

    def __repr__(self) -> str:
        return tr("Served(#{id}: {n} tokens, TTFT {ttft:.1f} ms, TPOT {tpot:.1f} ms, {pre} preemptions)",
                  id=self.request.id, n=len(self.tokens), ttft=self.ttft * 1e3, tpot=self.tpot * 1e3,
                  pre=self.preemptions)


@dataclass(frozen=True)
class Iteration:
    """One scheduler iteration: one batched forward over the running requests."""

    index: int
    start: float  # seconds since the server started
    end: float  # after the new tokens reached the host
    prefill_tokens: int  # prompt (or recomputed) positions run this iteration
    decode_tokens: int  # requests that ran one new token
    requests: tuple[int, ...]  # ids of the requests in this forward
    tables: tuple[tuple[int, tuple[int, ...]], ...]  # (request id, its block table) for every request holding blocks
    used_blocks: int
    preempted: tuple[int, ...]  # ids whose blocks were taken back before this forward
    padding_rows: int = 0  # static batching: rows of finished requests still computed, as a padded generate() does
    padding_tokens: int = 0  # static batching, a batch's first forward: pad tokens making its prompts equally long
    runs: tuple[tuple[int, int], ...] = ()  # (request id, tokens it ran: a prompt or a chunk of one, 1 for a decode)
    emitted: tuple[tuple[int, int], ...] = ()  # (request id, the token it was given) for each request at its end

    def __repr__(self) -> str:
        return tr("Iteration(#{index}: {n} running | tokens: {prefill} prefill + {decode} decode | KV blocks in use: "
                  "{blocks} | {ms:.1f} ms)", index=self.index, n=len(self.requests), prefill=self.prefill_tokens,
                  decode=self.decode_tokens, blocks=self.used_blocks, ms=(self.end - self.start) * 1e3)


@dataclass(frozen=True)
class Percentiles:
    """p50, p90 and p99 of one measure over the requests (seconds)."""

    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values) -> Percentiles:
        values = [v for v in values if not math.isnan(v)]
        if not values:
            return cls(math.nan, math.nan, math.nan)
        return cls(percentile(values, 50), percentile(values, 90), percentile(values, 99))

    def __repr__(self) -> str:
        return f"p50 {self.p50 * 1e3:.1f} / p90 {self.p90 * 1e3:.1f} / p99 {self.p99 * 1e3:.1f} ms"


@dataclass(frozen=True)
class ServeSummary:
    """The run in numbers: latency percentiles, throughput, and how the KV blocks were used."""

    policy: str
    requests: int
    generated_tokens: int
    seconds: float  # first arrival to last finish
    tokens_per_s: float  # generated tokens / seconds
    ttft: Percentiles
    tpot: Percentiles
    iterations: int
    preemptions: int
    kv_blocks: int
    peak_blocks: int  # most blocks in use at once
    cached_tokens: int  # prompt positions reused from the prefix cache
    blocks_over_time: tuple[tuple[float, int], ...]  # (iteration end, blocks in use)

    def __repr__(self) -> str:
        return tr("ServeSummary({policy}: {n} requests, {tokens} tokens in {s:.2f} s = {tps:.1f} tokens/s; TTFT "
                  "{ttft!r}; TPOT {tpot!r}; {it} iterations, {pre} preemptions, peak {peak}/{blocks} KV blocks)",
                  policy=policy_text(self.policy), n=self.requests, tokens=self.generated_tokens, s=self.seconds,
                  tps=self.tokens_per_s, ttft=self.ttft, tpot=self.tpot, it=self.iterations, pre=self.preemptions,
                  peak=self.peak_blocks, blocks=self.kv_blocks)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


@dataclass(frozen=True, eq=False)
class ServeResult:
    """``requests`` in the order given, ``iterations`` in the order run, the ``summary``, and the ``pool`` as the
    run left it (``pool.problems()`` is empty and ``pool.used_blocks`` 0 when no block leaked)."""

    requests: tuple[Served, ...]
    iterations: tuple[Iteration, ...]
    summary: ServeSummary
    pool: BlockPool
    settings: object  # the ServeConfig it ran with

    def __repr__(self) -> str:
        return tr("ServeResult({n} requests, {it} iterations; {summary!r})", n=len(self.requests),
                  it=len(self.iterations), summary=self.summary)


def summarize_run(policy: str, served: list[Served], iterations: list[Iteration], kv_blocks: int) -> ServeSummary:
    """The ``ServeSummary`` of a finished run."""
    start = min(s.arrival for s in served)
    seconds = max(s.finish for s in served) - start
    tokens = sum(len(s.tokens) for s in served)
    return ServeSummary(
        policy=policy, requests=len(served), generated_tokens=tokens, seconds=seconds,
        tokens_per_s=tokens / seconds if seconds > 0 else math.nan,
        ttft=Percentiles.of([s.ttft for s in served]), tpot=Percentiles.of([s.tpot for s in served]),
        iterations=len(iterations), preemptions=sum(s.preemptions for s in served), kv_blocks=kv_blocks,
        peak_blocks=max((it.used_blocks for it in iterations), default=0),
        cached_tokens=sum(s.cached_tokens for s in served),
        blocks_over_time=tuple((it.end, it.used_blocks) for it in iterations))
