"""Serving many users at once: continuous batching, a paged KV cache, chunked prefill and prefix caching.

The two jobs and the KV cache of the engine, applied to what a server does when many people ask at once.
Five modules, in reading order, then three that measure with them:

- ``serve.requests``: ``Request``, ``request`` (one from text) and ``workload`` (Poisson arrivals, length ranges).
- ``serve.blocks``: ``BlockPool``, the KV memory cut into blocks, a block table per request, shared prefixes.
- ``serve.paged``: ``PagedKV``, one batched forward over every running request, keys and values in blocks.
- ``serve.scheduler``: ``ServeConfig``, the ``Scheduler`` and ``run``, the serving loop on a real clock.
- ``serve.report``: ``ServeResult``, ``Served``, ``Iteration`` and ``ServeSummary`` (TTFT/TPOT p50/p90/p99,
  throughput, KV blocks over time).
- ``serve.compare``: each idea's runs with and without it, on the same requests (notebook 09 shows them).
- ``serve.equality``: every policy and option against solo ``il.generate``, and any divergence's logit margin.
- ``serve.bench``: the same runs scored against issue 31's targets (``python -m inferlab.tools.bench serve``).

With greedy settings every request's tokens are those ``il.generate`` gives it alone (``tests/test_serve.py``),
for every policy and option, under preemption too.

    >>> reqs = il.serve.workload(16, 8.0, prompt_tokens=(16, 64), new_tokens=(8, 64), model=m)  # doctest: +SKIP
    >>> il.serve.run(m, reqs, policy="continuous", max_batch=8).summary                     # doctest: +SKIP
"""

from __future__ import annotations

from .blocks import BlockKey, BlockPool
from .paged import PagedKV, Segment
from .report import Iteration, Percentiles, Served, ServeResult, ServeSummary, policy_text
from .requests import Request, request, workload
from .scheduler import POLICIES, Scheduler, ServeConfig, run

__all__ = ["POLICIES", "BlockKey", "BlockPool", "Iteration", "PagedKV", "Percentiles", "Request", "Scheduler",
           "Segment", "ServeConfig", "ServeResult", "ServeSummary", "Served", "policy_text", "request", "run",
           "workload"]
