"""The scheduler: which requests run in each iteration, and ``run``, the serving loop on a real clock.

    repeat until every request is answered:
        move the requests that have arrived into the waiting queue
        schedule: every running request gets its next tokens (one for a decode, a chunk of its prompt
                  for a prefill), taking KV blocks as its tokens reach them; when none is left, the
                  newest running request is preempted (its blocks freed, its context computed again later)
        admit:    waiting requests join, oldest first, while batch slots and blocks allow (leaving the running
                  requests room for their next block_size positions)
        one batched forward over all of them (serve.paged); sample; emit
        a request that is done gives its blocks back

Two policies. ``"continuous"`` (Orca, OSDI 2022: iteration-level scheduling) admits at every iteration, so a
finished request's slot is refilled at once. ``"static"`` admits only when the batch is empty and runs it to
completion, as ``generate()`` on a padded batch does: every prompt of the batch is read as long as its longest (pad
tokens before the shorter ones), and the row of a short answer that is done keeps being computed (a padding row, its
tokens thrown away) until the longest is done, so its slot costs a row of every product and serves no one.
``prefill_chunk`` (Sarathi-Serve, OSDI 2024) caps the prompt tokens of one iteration, so a long prompt is read over
several iterations while the others keep decoding; ``prefix_cache`` shares the full blocks of a common prompt opening.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import torch

from .. import _hf
from ..errors import bad_value, check_number
from ..models import Model, check_model
from ..sampling import draw
from ..timing import clock
from .blocks import BlockPool
from .paged import WEIGHTS, PagedKV, Segment
from .report import Iteration, Served, ServeResult, summarize_run
from .requests import Request

POLICIES = ("static", "continuous")


@dataclass(frozen=True)
class ServeConfig:
    """A server's settings (vLLM's names in brackets): ``policy``, ``max_batch`` requests at once
    (``max_num_seqs``), KV blocks of ``block_size`` positions (``block_size``), ``kv_blocks`` of them (what
    ``gpu_memory_utilization`` decides), ``prefill_chunk`` prompt tokens per iteration at most (``None``: whole
    prompts; ``enable_chunked_prefill`` with ``max_num_batched_tokens``), ``prefix_cache``
    (``enable_prefix_caching``)."""

    policy: str = "continuous"
    max_batch: int = 8
    block_size: int = 16
    kv_blocks: int = 256
    prefill_chunk: int | None = None
    prefix_cache: bool = False
    weights: str = "auto"  # the products' weight layout (serve.paged): "auto", "packed" or "model"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise bad_value("policy", self.policy, f"one of {list(POLICIES)}",
                            "use 'continuous' (admit at every iteration) or 'static' (batch by batch)")
        check_number("max_batch", self.max_batch, low=1, integer=True, fix="run at least one request at a time")
        check_number("block_size", self.block_size, low=1, high=1024, integer=True,
                     fix="use 16 (vLLM's default) or another power of two")
        check_number("kv_blocks", self.kv_blocks, low=1, integer=True, fix="give the KV memory in blocks, e.g. 256")
        if self.prefill_chunk is not None:
            check_number("prefill_chunk", self.prefill_chunk, low=1, integer=True,
                         fix="use None for whole prompts, or a number of tokens such as 64")
        if self.weights not in WEIGHTS:
            raise bad_value("weights", self.weights, f"one of {list(WEIGHTS)}",
                            "use 'auto' (packed where this CPU allows), 'packed' or 'model' (the model's own tensors)")
        if not isinstance(self.prefix_cache, bool):
            raise TypeError(f"prefix_cache must be True or False, got {self.prefix_cache!r}. Fix: pass "
                            "prefix_cache=True to share common prompt openings, False not to.")


@dataclass
class _Live:
    """A request's state while it is served: its tokens so far and how many positions are in its blocks."""

    request: Request
    tokens: list[int]  # prompt + generated
    computed: int = 0  # positions whose keys and values are in the blocks
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    cached_tokens: int = 0
    generator: torch.Generator | None = None

    @property
    def id(self) -> int:
        return self.request.id

    @property
    def generated(self) -> int:
        return len(self.tokens) - len(self.request.prompt_ids)


class Scheduler:
    """Runs ``requests`` on ``model`` with the settings of a ``ServeConfig`` (use ``run``, which builds one)."""

    def __init__(self, model: Model, config: ServeConfig) -> None:
        self.model, self.config = model, config
        self.pool = BlockPool(config.kv_blocks, config.block_size, prefix_cache=config.prefix_cache)
        self.kv = PagedKV(model, config.kv_blocks, config.block_size, config.weights)
        self.waiting: deque[_Live] = deque()
        self.running: list[_Live] = []
        self.batch_rows = 0  # static: the rows of the batch now running (its finished requests' rows still run)

    # ------------------------------------------------------------------ one iteration's plan
    def _preempt(self, victim: _Live) -> None:
        """Free the victim's blocks; it waits at the front of the queue to compute its context again."""
        self.pool.release(victim.id)
        self.running.remove(victim)
        victim.computed, victim.preemptions = 0, victim.preemptions + 1
        self.waiting.appendleft(victim)

    def schedule(self) -> tuple[list[tuple[_Live, int]], list[int]]:
        """This iteration's ``(request, tokens to run)`` pairs, and the ids preempted to make room."""
        budget = self.config.prefill_chunk or float("inf")  # prompt tokens this iteration may still take
        may_admit = self.config.policy == "continuous" or not self.running
        planned, preempted = [], []
        for live in list(self.running):  # oldest first
            if live not in self.running:  # preempted below to make room for an older one
                continue
            n = len(live.tokens) - live.computed
            if n > 1:
                n = int(min(n, budget))
                if n == 0:
                    continue
            while not self.pool.grow(live.id, live.computed + n):
                victim = self.running[-1]  # the newest; vLLM preempts the lowest priority the same way
                self._preempt(victim)
                preempted.append(victim.id)
                if victim is live:
                    break
            if live in self.running:
                planned.append((live, n))
                budget -= n if n > 1 else 0
        static = self.config.policy == "static"  # fills its batch now, even with requests that get no chunk yet
        # Room for the running requests' next block_size positions stays free (vLLM keeps a watermark of free blocks
        # too): admitting on the prompt alone fills the pool, and the running requests then preempt each other.
        headroom = sum(self._room(live) for live in self.running)
        while may_admit and self.waiting and len(self.running) < self.config.max_batch and (budget > 0 or static):
            live = self.waiting[0]
            shared = self.pool.cached_prefix(live.tokens)  # a waiting request holds no blocks (computed is 0)
            start = len(shared) * self.config.block_size
            n = int(min(len(live.tokens) - start, budget))
            need = self.pool.blocks_for(start + n) - len(shared) + headroom
            if need > self.pool.free_after_sharing(shared):
                break  # first come, first served: the queue waits for blocks rather than let a later one pass
            self.waiting.popleft()
            self.pool.share(live.id, shared)
            self.pool.grow(live.id, start + n)
            live.computed, live.cached_tokens = start, live.cached_tokens + start
            self.running.append(live)
            headroom += self._room(live)
            if n:
                planned.append((live, n))
            budget -= n if n > 1 else 0
        return planned, preempted

    def _room(self, live: _Live) -> int:
        """Blocks ``live`` still needs for its next ``block_size`` positions (never past its last position)."""
        last = len(live.request.prompt_ids) + live.request.max_new_tokens
        end = min(len(live.tokens) + self.config.block_size, last)
        return max(0, self.pool.blocks_for(end) - len(self.pool.tables.get(live.id, [])))

    # ------------------------------------------------------------------ the loop
    def serve(self, requests: list[Request]) -> ServeResult:
        """Run every request to its end on the real clock; returns a ``ServeResult``."""
        device = self.model.device
        gen_device = device if device.type == "cuda" else "cpu"
        eos = self.model.eos_id
        pending = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))  # not arrived yet
        done: dict[int, _Live] = {}
        iterations: list[Iteration] = []
        if self.config.policy == "static":  # its padding rows reach the longest request's last position
            self.kv.reserve_padding(max(len(r.prompt_ids) + r.max_new_tokens for r in requests))
        t0 = clock(device)
        while pending or self.waiting or self.running:
            now = clock(device) - t0
            while pending and pending[0].arrival <= now:
                r = pending.popleft()
                self.waiting.append(_Live(r, list(r.prompt_ids), generator=r.sampling.generator(gen_device)))
            if not self.waiting and not self.running:
                time.sleep(max(0.0, pending[0].arrival - now))  # nobody to serve until the next arrival
                continue
            starting = self.config.policy == "static" and not self.running  # a static batch's first forward
            planned, preempted = self.schedule()
            if not planned:  # everything waits for blocks: cannot happen while one request fits the pool
                raise RuntimeError("no request could be scheduled; kv_blocks is too small for any waiting request")
            segments = [Segment(tuple(lv.tokens[lv.computed:lv.computed + n]), lv.computed,
                                tuple(self.pool.tables[lv.id]), lv.computed + n == len(lv.tokens))
                        for lv, n in planned]
            padding, pads = self._padding_rows(), (self._prompt_padding(planned) if starting else [])
            pad_rows = [self.kv.padding(eos, n) for n in pads]  # and finished rows, at the batch's longest position:
            pad_rows += [self.kv.padding(eos, start=max(lv.computed for lv, _ in planned))] * padding if padding else []
            logits = self.kv.forward(segments + pad_rows)  # [requests at their end, vocab]
            emitting = [lv for (lv, _), s in zip(planned, segments, strict=True) if s.logits]
            chosen = self._choose(logits, emitting)
            t_end = clock(device) - t0  # the new ids are on the host now
            iterations.append(Iteration(
                len(iterations), now, t_end, sum(n for _, n in planned if n > 1),
                sum(1 for _, n in planned if n == 1), tuple(lv.id for lv, _ in planned),
                tuple((rid, tuple(t)) for rid, t in self.pool.tables.items()), self.pool.used_blocks,
                tuple(preempted), padding, sum(pads)))
            for lv, n in planned:
                lv.computed += n
                self.pool.remember(lv.id, lv.tokens, lv.computed)
            for lv, token in zip(emitting, chosen, strict=True):
                lv.tokens.append(token)
                lv.token_times.append(t_end)
                if lv.generated == lv.request.max_new_tokens or (lv.request.stop_at_eos and token == eos):
                    self.pool.release(lv.id)
                    self.running.remove(lv)
                    done[lv.id] = lv
        served = [Served(r, tuple(done[r.id].tokens[len(r.prompt_ids):]), tuple(done[r.id].token_times),
                         done[r.id].preemptions, done[r.id].cached_tokens) for r in requests]
        summary = summarize_run(self.config.policy, served, iterations, self.config.kv_blocks)
        return ServeResult(tuple(served), tuple(iterations), summary, self.pool, self.config)

    def _padding_rows(self) -> int:
        """Static batching: rows of the running batch's finished (or preempted) requests, still computed."""
        if self.config.policy != "static":
            return 0
        self.batch_rows = max(self.batch_rows, len(self.running)) if self.running else 0
        return self.batch_rows - len(self.running)

    def _prompt_padding(self, planned: list[tuple[_Live, int]]) -> list[int]:
        """Static batching: the pad tokens a padded ``generate()`` puts before each shorter prompt of the batch it
        starts, every row as long as the longest (none with ``prefill_chunk``: a padded batch reads prompts whole)."""
        longest = max(n for _, n in planned)  # (planned is never empty: serve raises first)
        return [] if self.config.prefill_chunk else [longest - n for _, n in planned if n < longest]

    def _choose(self, logits: torch.Tensor, emitting: list[_Live]) -> list[int]:
        """Each request's next token: greedy rows in one argmax, sampled rows with their own seeded generator."""
        chosen = torch.argmax(logits, dim=-1).tolist() if len(emitting) else []
        for row, lv in enumerate(emitting):
            if not lv.request.sampling.greedy:
                chosen[row] = int(draw(logits[row], lv.request.sampling, lv.generator))
        return chosen


def _check_requests(model: Model, requests) -> list[Request]:
    if isinstance(requests, Request):
        requests = [requests]
    if not isinstance(requests, (list, tuple)) or not requests or not all(isinstance(r, Request) for r in requests):
        raise bad_value("requests", f"{requests!r:.60}", "a non-empty list of Request",
                        "make them with il.serve.workload(...) or il.serve.request(model, text, ...)")
    ids = [r.id for r in requests]
    if len(set(ids)) != len(ids):
        raise bad_value("requests", f"ids {ids[:10]}", "a different id for every request",
                        "number them 0, 1, 2, ... (workload does)")
    n_ctx, vocab = model.info.n_ctx, model.info.vocab_size
    for r in requests:
        if len(r.prompt_ids) + r.max_new_tokens > n_ctx or any(not 0 <= t < vocab for t in r.prompt_ids):
            raise bad_value("requests", r, f"prompt + max_new_tokens <= {n_ctx} and token ids in [0, {vocab})",
                            "make the request for this model with il.serve.request(model, text, ...)")
    return list(requests)


def run(model: Model, requests, policy: str = "continuous", max_batch: int = 8, block_size: int = 16,
        kv_blocks: int | None = None, prefill_chunk: int | None = None, prefix_cache: bool = False,
        weights: str = "auto") -> ServeResult:
    """Serve ``requests`` on ``model`` with real forwards on a real clock; returns a ``ServeResult``.

    Args:
        model: from ``inferlab.load()`` (GPT-2 family).
        requests: ``Request``s (``workload`` or ``request``); each arrives at its ``arrival`` time.
        policy: ``"continuous"`` (admit at every iteration) or ``"static"`` (a batch runs to completion).
        max_batch: requests in one forward at most.
        block_size: token positions per KV block.
        kv_blocks: KV memory in blocks; ``None``: room for ``max_batch`` of the longest request (no preemption).
            Too few blocks for the running requests preempts the newest (freed, computed again later).
        prefill_chunk: prompt tokens per iteration at most (``None``: whole prompts).
        prefix_cache: share the full blocks of a common prompt opening between requests.
        weights: the products' weight layout (``serve.paged``): ``"auto"`` (oneDNN-packed copies where this CPU
            allows, else the model's own tensors), ``"packed"`` or ``"model"``.

    >>> reqs = il.serve.workload(8, rate_per_s=4.0, model=m)                  # doctest: +SKIP
    >>> il.serve.run(m, reqs, policy="continuous", max_batch=4).summary       # doctest: +SKIP
    """
    check_model(model)
    requests = _check_requests(model, requests)
    if not _hf.follows_plain_gpt2(model):
        raise bad_value("model", model.info.name, "a GPT-2 as published (tanh GELU, 1/sqrt(head_dim) attention scale)",
                        "serve a GPT-2-family model; this one changes the block the paged forward re-implements")
    check_number("block_size", block_size, low=1, high=1024, integer=True, fix="use 16 (vLLM's default)")
    longest = max(len(r.prompt_ids) + r.max_new_tokens for r in requests)
    need = -(-longest // int(block_size))
    if kv_blocks is None:
        check_number("max_batch", max_batch, low=1, integer=True, fix="run at least one request at a time")
        kv_blocks = need * int(max_batch)
    config = ServeConfig(policy, max_batch, block_size, kv_blocks, prefill_chunk, prefix_cache, weights)
    if kv_blocks < need:
        raise bad_value("kv_blocks", kv_blocks, f"at least {need}: the longest request ({longest} positions) must "
                        f"fit alone in blocks of {block_size}", f"use kv_blocks >= {need}, or shorter requests")
    return Scheduler(model, config).serve(requests)
