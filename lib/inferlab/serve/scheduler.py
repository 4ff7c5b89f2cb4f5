"""The scheduler: which requests run in each iteration, one iteration (``step``), and ``run``, the serving loop.

    repeat until every request is answered:                         (serve: the arrival clock around step)
        move the requests that have arrived into the waiting queue
        step:
            schedule: every running request gets its next tokens (one for a decode, a chunk of its prompt
                      for a prefill), taking KV blocks as its tokens reach them; when none is left, the
                      newest running request is preempted (its blocks freed, its context computed again later)
            admit:    waiting requests join, oldest first, while batch slots and blocks allow (leaving the
                      running requests room for their next block_size positions)
            run:      one batched forward over all of them (serve.paged)
            post-process: sample each request's next token, emit it; a request that is done frees its blocks

``step`` has nano-vllm's shape (``LLMEngine.step``: ``schedule``, ``run``, ``postprocess``) and vLLM v1's
(``EngineCore.step``: ``schedule``, ``execute_model``, ``update_from_output``). Two policies. ``"continuous"``
(Orca, OSDI 2022: iteration-level scheduling) admits at every iteration, so a finished request's slot is refilled at
once. ``"static"`` admits only when the batch is empty and runs it to completion, as ``generate()`` on a padded
batch does (its padding: ``serve.padded``). ``prefill_chunk`` (Sarathi-Serve, OSDI 2024) caps the prompt tokens of
one iteration, so a long prompt is read over several iterations while the others keep decoding; ``prefix_cache``
shares the full blocks of a common prompt opening.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass

import torch

from ..errors import bad_value
from ..fast.layouts import check_plain_gpt2
from ..models import Model, check_model
from ..sampling import draw
from ..timing import clock
from .blocks import BlockPool
from .config import ServeConfig
from .padded import StaticPadding
from .paged import PagedKV, Segment
from .report import Iteration, Served, ServeResult, summarize_run
from .requests import Live, Request, check_requests


@dataclass
class Plan:
    """One iteration's schedule (vLLM's ``SchedulerOutput``): each request with the tokens it runs now (a prompt or
    a chunk of one, or 1 for a decode), in batch order, and the ids preempted to make room."""

    runs: list[tuple[Live, int]]
    preempted: list[int]


class Scheduler:
    """Runs requests on ``model`` with the settings of a ``ServeConfig`` (``kv_blocks`` given): ``add`` a request,
    then ``step`` runs one iteration; ``serve`` runs a list of them on the real clock (``run`` builds one).

    >>> sched = Scheduler(m, ServeConfig(max_batch=2, kv_blocks=8))           # doctest: +SKIP
    >>> sched.add(il.serve.request(m, "To be, or not", 3)); sched.step()      # doctest: +SKIP
    """

    def __init__(self, model: Model, config: ServeConfig) -> None:
        check_model(model)
        check_plain_gpt2(model)  # the block serve.paged re-implements
        if config.kv_blocks is None:
            raise bad_value("kv_blocks", None, "a number of blocks", "give ServeConfig(kv_blocks=...), or use "
                            "il.serve.run, which sizes it for the requests")
        self.model, self.config = model, config
        self.pool = BlockPool(config.kv_blocks, config.block_size, prefix_cache=config.prefix_cache)
        self.kv = PagedKV(model, config.kv_blocks, config.block_size, config.weights)
        self.static = (StaticPadding(self.kv, model.eos_id, config.prefill_chunk) if config.policy == "static"
                       else None)
        self.waiting: deque[Live] = deque()
        self.running: list[Live] = []
        self.done: dict[int, Live] = {}
        self.iterations: list[Iteration] = []
        self.t0 = clock(model.device)  # the server's clock starts here (``serve`` starts it again)

    def add(self, r: Request) -> None:
        """``r`` joins the waiting queue (checked against the model first)."""
        check_requests(self.model, [r])
        if r.id in {live.id for live in (*self.waiting, *self.running)} | set(self.done):
            raise bad_value("request", r, "an id no other request here has", "number requests 0, 1, 2, ...")
        self._enqueue(r)

    def _enqueue(self, r: Request) -> None:
        device = self.model.device
        self.waiting.append(Live.start(self.model, r, device if device.type == "cuda" else "cpu"))

    # ------------------------------------------------------------------ schedule: one iteration's plan
    def _preempt(self, victim: Live) -> None:
        """Free the victim's blocks; it waits at the front of the queue to compute its context again."""
        self.pool.release(victim.id)
        self.running.remove(victim)
        victim.computed, victim.preemptions = 0, victim.preemptions + 1
        self.waiting.appendleft(victim)

    def schedule(self) -> Plan:
        """This iteration's ``Plan``: ``(request, tokens to run)`` pairs, and the ids preempted to make room."""
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
        return Plan(planned, preempted)

    def _room(self, live: Live) -> int:
        """Blocks ``live`` still needs for its next ``block_size`` positions (never past its last position)."""
        last = len(live.request.prompt_ids) + live.request.max_new_tokens
        end = min(len(live.tokens) + self.config.block_size, last)
        return max(0, self.pool.blocks_for(end) - len(self.pool.tables.get(live.id, [])))

    # ------------------------------------------------------------------ one iteration
    def step(self, now: float | None = None) -> Iteration:
        """One iteration, as nano-vllm's ``LLMEngine.step``: schedule, run one batched forward, post-process.
        ``now``: seconds on the server's clock when it starts (``None``: read the clock). Returns its ``Iteration``
        (also kept in ``iterations``); requests that finished are in ``done``."""
        now = clock(self.model.device) - self.t0 if now is None else now
        starting = self.static is not None and not self.running  # a static batch's first forward
        plan = self.schedule()                                   # schedule: who runs which tokens now
        if not plan.runs:  # everything waits for blocks: cannot happen while one request fits the pool
            raise RuntimeError("no request could be scheduled; kv_blocks is too small for any waiting request")
        segments = [self._segment(live, n) for live, n in plan.runs]
        pads = self.static.rows(len(self.running), plan.runs, starting) if self.static else ([], 0, 0)
        logits = self.kv.forward(segments + pads[0])             # run: one batched forward
        emitting = [live for (live, _), s in zip(plan.runs, segments, strict=True) if s.logits]
        chosen = self._choose(logits, emitting)                  # post-process: sample,
        end = clock(self.model.device) - self.t0  # the new ids are on the host now
        iteration = self._record(plan, pads, list(zip(emitting, chosen, strict=True)), now, end)
        self._postprocess(plan, emitting, chosen, end)           # update, emit, finish
        return iteration

    def _record(self, plan: Plan, pads: tuple, emitted: list[tuple[Live, int]], start: float, end: float) -> Iteration:
        """The ``Iteration`` of this step (kept in ``iterations``): its plan, the block tables, what it emitted."""
        runs, (_, pad_rows, pad_tokens) = plan.runs, pads
        iteration = Iteration(
            index=len(self.iterations), start=start, end=end,
            prefill_tokens=sum(n for _, n in runs if n > 1), decode_tokens=sum(n == 1 for _, n in runs),
            requests=tuple(live.id for live, _ in runs),
            tables=tuple((rid, tuple(t)) for rid, t in self.pool.tables.items()), used_blocks=self.pool.used_blocks,
            preempted=tuple(plan.preempted), padding_rows=pad_rows, padding_tokens=pad_tokens,
            runs=tuple((live.id, n) for live, n in runs), emitted=tuple((live.id, t) for live, t in emitted))
        self.iterations.append(iteration)
        return iteration

    def _segment(self, live: Live, n: int) -> Segment:
        """``live``'s share of the forward: its next ``n`` tokens, after the positions already in its blocks."""
        stop = live.computed + n
        return Segment(tuple(live.tokens[live.computed:stop]), live.computed, tuple(self.pool.tables[live.id]),
                       stop == len(live.tokens))

    def _choose(self, logits: torch.Tensor, emitting: list[Live]) -> list[int]:
        """Each request's next token: greedy rows in one argmax, sampled rows with their own seeded generator."""
        chosen = torch.argmax(logits, dim=-1).tolist() if len(emitting) else []
        for row, live in enumerate(emitting):
            if not live.request.sampling.greedy:
                chosen[row] = int(draw(logits[row], live.request.sampling, live.generator))
        return chosen

    def _postprocess(self, plan: Plan, emitting: list[Live], chosen: list[int], end: float) -> None:
        """Positions computed (and full blocks named for the prefix cache); each new token emitted; a request that is
        done (``generation.stop_reason``, or a stop string in its text) gives its blocks back."""
        for live, n in plan.runs:
            live.computed += n
            self.pool.remember(live.id, live.tokens, live.computed)
        for live, token in zip(emitting, chosen, strict=True):
            live.tokens.append(token)
            live.token_times.append(end)
            if live.stop(self.model, token) is not None:
                self.pool.release(live.id)
                self.running.remove(live)
                self.done[live.id] = live

    # ------------------------------------------------------------------ the arrival clock around step
    def serve(self, requests: list[Request]) -> ServeResult:
        """Run every request to its end on the real clock, each added when it arrives; returns a ``ServeResult``."""
        device = self.model.device
        requests = check_requests(self.model, requests)
        pending = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))  # not arrived yet
        if self.static is not None:  # its padding rows reach the longest request's last position
            self.static.reserve(requests)
        self.t0 = clock(device)
        while pending or self.waiting or self.running:
            now = clock(device) - self.t0
            while pending and pending[0].arrival <= now:
                self._enqueue(pending.popleft())
            if not self.waiting and not self.running:
                time.sleep(max(0.0, pending[0].arrival - now))  # nobody to serve until the next arrival
                continue
            self.step(now)
        done = self.done
        served = [Served(r, tuple(done[r.id].tokens[len(r.prompt_ids):]), tuple(done[r.id].token_times),
                         done[r.id].preemptions, done[r.id].cached_tokens) for r in requests]
        summary = summarize_run(self.config.policy, served, self.iterations, self.config.kv_blocks)
        return ServeResult(tuple(served), tuple(self.iterations), summary, self.pool, self.config)


def run(model: Model, requests, config: ServeConfig | None = None, **overrides) -> ServeResult:
    """Serve ``requests`` on ``model`` with real forwards on a real clock; returns a ``ServeResult``.

    ``requests``: ``Request``s (``workload`` or ``request``), each arriving at its ``arrival`` time. Settings as
    ``il.generate`` takes its own: a ``ServeConfig`` and/or its fields as keywords, which override ``config``'s
    (``policy``, ``max_batch``, ``block_size``, ``kv_blocks``, ``prefill_chunk``, ``prefix_cache``, ``weights``).
    ``kv_blocks=None`` makes room for ``max_batch`` of the longest request (no preemption); too few blocks for the
    running requests preempts the newest (freed, computed again later). ``weights``: ``"auto"`` (oneDNN-packed
    copies where this CPU allows, else the model's own tensors), ``"packed"`` or ``"model"``.

    >>> reqs = il.serve.workload(8, rate_per_s=4.0, model=m)                  # doctest: +SKIP
    >>> il.serve.run(m, reqs, policy="continuous", max_batch=4).summary       # doctest: +SKIP
    """
    if config is not None and not isinstance(config, ServeConfig):
        raise TypeError(f"config must be a ServeConfig, got {type(config).__name__}. "
                        "Fix: il.serve.ServeConfig(max_batch=4, ...), or pass the settings as keywords.")
    fields = [f.name for f in dataclasses.fields(ServeConfig)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise TypeError(f"unknown setting(s) {unknown}; the settings are {fields}. Fix: check the spelling.")
    config = dataclasses.replace(config or ServeConfig(), **overrides)  # checked by ServeConfig.__post_init__
    check_model(model)
    requests = check_requests(model, requests)
    longest = max(len(r.prompt_ids) + r.max_new_tokens for r in requests)
    need = -(-longest // config.block_size)
    if config.kv_blocks is None:
        config = dataclasses.replace(config, kv_blocks=need * config.max_batch)
    if config.kv_blocks < need:
        raise bad_value("kv_blocks", config.kv_blocks, f"at least {need}: the longest request ({longest} positions) "
                        f"must fit alone in blocks of {config.block_size}",
                        f"use kv_blocks >= {need}, or shorter requests")
    return Scheduler(model, config).serve(requests)
