"""Serving many users at once: continuous batching, a paged KV cache, chunked prefill and prefix caching.

The two jobs and the KV cache of the engine, applied to what a server does when many people ask at once.
Five modules, in reading order:

- ``serve.requests``: ``Request``, ``request`` (one from text) and ``workload`` (Poisson arrivals, length ranges).
- ``serve.blocks``: ``BlockPool``, the KV memory cut into blocks, a block table per request, shared prefixes.
- ``serve.paged``: ``PagedKV``, one batched forward over every running request, keys and values in blocks.
- ``serve.scheduler``: the ``Scheduler`` (``schedule``; ``step``: schedule, run, post-process) and ``run``, the
  serving loop on a real clock, with the settings of a ``ServeConfig`` (``serve.config``).
- ``serve.report``: ``ServeResult``, ``Served``, ``Iteration`` and ``ServeSummary`` (TTFT/TPOT p50/p90/p99,
  throughput, KV blocks over time).

Then static batching's padding (``serve.padded``: the baseline's own room), and two that run with the parts:
``serve.equality`` (every policy and option against solo ``il.generate``, and any divergence's logit margin) and
``serve.load`` (continuous batching over arrival rates). The timing wrappers notebook 09 shows and the benchmark
scores live in ``measure`` (``measure.serve_runs``, ``measure.serving_targets``).

With greedy settings every request's tokens are those ``il.generate`` gives it alone (``tests/test_serve.py``),
for every policy and option, under preemption too.

    >>> reqs = il.serve.workload(16, 8.0, prompt_tokens=(16, 64), new_tokens=(8, 64), model=m)  # doctest: +SKIP
    >>> il.serve.run(m, reqs, policy="continuous", max_batch=8).summary                     # doctest: +SKIP
"""

from __future__ import annotations

from .blocks import BlockKey, BlockPool
from .config import POLICIES, ServeConfig
from .paged import PagedKV, Segment
from .report import Iteration, Percentiles, Served, ServeResult, ServeSummary, policy_text
from .requests import Live, Request, request, workload
from .scheduler import Plan, Scheduler, run
from .sizes import BenchSizes

__all__ = ["POLICIES", "BenchSizes", "BlockKey", "BlockPool", "Iteration", "Live", "PagedKV", "Percentiles", "Plan",
           "Request", "Scheduler", "Segment", "ServeConfig", "ServeResult", "ServeSummary", "Served", "policy_text",
           "request", "run", "workload"]
