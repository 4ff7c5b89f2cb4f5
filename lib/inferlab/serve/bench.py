"""The serving benchmark's measurements: each of issue 31's targets measured side by side, one row each.

``python -m inferlab.tools.bench serve`` prints them; this module measures. Every row runs the real model
(GPT-2's shape with random weights: its speed does not depend on the weights' values) through ``serve.run``
twice, with and without the idea it measures, in the same process one after the other:

    continuous / static          throughput on a Poisson workload arriving near the server's capacity
    serve / generate_batch       tokens/s against transformers' own continuous batching, same requests
    paged / contiguous           requests in flight in the same KV memory: blocks of 16 positions against one
                                 block of the longest request's length each (a contiguous max-length reservation)
    chunked / whole prefill      the decoding requests' p99 time between tokens while a long prompt arrives
    prefix cache / none          TTFT p50 of requests that share a 256-token opening
    solo tokens                  the share of tokens equal to what ``il.generate`` gives each request alone,
                                 on the bundled model (greedy; every policy and option; under preemption)

"TPOT p99 while a long prompt arrives" is measured as the p99 of the running requests' gaps between tokens
(vLLM's ITL, Sarathi-Serve's TBT): a mean TPOT per request spreads a one-off stall over all its tokens.

    >>> rows = serve_bench(il.load("random:gpt2"), il.load("bundled"))      # doctest: +SKIP
    >>> print(rows.table())                                                  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from .. import _hf
from ..engine import generate
from ..models import Model
from ..timing import interleave, percentile, time_call
from .paged import PagedKV, Segment
from .report import ServeResult
from .requests import Request, workload
from .scheduler import run


@dataclass(frozen=True)
class BenchSizes:
    """How big each measurement is. The defaults take a few minutes on 2 CPU cores; ``small()`` seconds."""

    max_batch: int = 8
    requests: int = 24  # throughput and paged-vs-contiguous workloads
    prompt_tokens: tuple[int, int] = (16, 64)
    new_tokens: tuple[int, int] = (8, 128)
    peer_new_tokens: int = 32  # generate_batch takes one answer length for all
    fit_blocks: int = 48  # the KV memory of the paged-vs-contiguous row, in blocks of 16 positions
    long_prompt: int = 768  # the long prompt of the chunked-prefill row
    prefill_chunk: int = 64
    decoders: int = 4  # requests decoding when the long prompt arrives
    decoder_tokens: int = 48
    shared_prefix: int = 256
    prefix_requests: int = 8

    @classmethod
    def small(cls) -> BenchSizes:
        """Seconds, for the test suite: every row runs, none of its numbers means much."""
        return cls(max_batch=4, requests=6, prompt_tokens=(4, 12), new_tokens=(2, 12), peer_new_tokens=4,
                   fit_blocks=6, long_prompt=96, prefill_chunk=16, decoders=2, decoder_tokens=8, shared_prefix=64,
                   prefix_requests=3)


@dataclass(frozen=True)
class TargetRow:
    """One target: what is measured, the target (``ratio >= at_least`` or ``ratio <= at_most``), the measured
    ratio, and the numbers behind it."""

    measure: str
    target: str
    value: float
    passed: bool
    detail: str

    def __repr__(self) -> str:
        return f"TargetRow({self.measure}: {self.value:.3g} ({self.target}) {'PASS' if self.passed else 'FAIL'})"


@dataclass(frozen=True)
class ServeBench:
    """Every row, and the model the timings ran on."""

    model: str
    rows: tuple[TargetRow, ...]

    def table(self) -> str:
        """The rows as a fixed-width text table, each row's numbers below it."""
        head = f"{'measure':<70}{'target':>9}{'measured':>11}  result"
        lines = [f"inferlab.serve targets on {self.model}", head, "-" * len(head)]
        for r in self.rows:
            value = f"{r.value:.0%}" if r.target.endswith("%") else f"{r.value:.2f}x"
            lines += [f"{r.measure:<70}{r.target:>9}{value:>11}  {'PASS' if r.passed else 'FAIL'}",
                      f"    {r.detail}"]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready)."""
        return {"model": self.model, "rows": [dataclasses.asdict(r) for r in self.rows]}


def _ratio_row(measure: str, value: float, *, at_least: float | None = None, at_most: float | None = None,
               detail: str) -> TargetRow:
    target = f">= {at_least}x" if at_least is not None else f"<= {at_most}x"
    passed = value >= at_least if at_least is not None else value <= at_most
    return TargetRow(measure, target, value, bool(passed), detail)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms"


def forward_s(model: Model, batch: int, tokens: int, context: int = 0, *, repeats: int = 3) -> float:
    """Median seconds of one paged forward: ``batch`` requests each running ``tokens`` new tokens after ``context``
    positions already in their blocks (``tokens=1``: a decode step of the whole batch)."""
    bs = 16
    per = -(-(context + tokens) // bs)
    kv = PagedKV(model, batch * per, bs)
    ids = tuple(100 + i % 1000 for i in range(tokens))
    segments = [Segment(ids, context, tuple(range(i * per, (i + 1) * per)), True) for i in range(batch)]
    return statistics.median(time_call(lambda: kv.forward(segments), repeats=repeats, device=model.device))


# ----------------------------------------------------------------------------- the rows
def throughput_row(model: Model, sizes: BenchSizes, seed: int = 0) -> TargetRow:
    """Continuous against static batching on one Poisson workload arriving at about the server's capacity."""
    mean_new = sum(sizes.new_tokens) / 2
    step = forward_s(model, sizes.max_batch, 1, context=sum(sizes.prompt_tokens) // 2 + int(mean_new) // 2)
    rate = sizes.max_batch / step / mean_new  # requests/s that keep max_batch slots decoding
    reqs = workload(sizes.requests, rate, sizes.prompt_tokens, sizes.new_tokens, seed, model=model)
    res = {p: run(model, reqs, policy=p, max_batch=sizes.max_batch).summary for p in ("static", "continuous")}
    st, co = res["static"], res["continuous"]
    detail = (f"{sizes.requests} requests at {rate:.2f}/s (capacity: {sizes.max_batch} slots, a decode step "
              f"{_ms(step)}), prompts {sizes.prompt_tokens}, answers {sizes.new_tokens} tokens; tokens/s static "
              f"{st.tokens_per_s:.1f}, continuous {co.tokens_per_s:.1f}; TTFT p50 {_ms(st.ttft.p50)} vs "
              f"{_ms(co.ttft.p50)}, p99 {_ms(st.ttft.p99)} vs {_ms(co.ttft.p99)}; TPOT p50 {_ms(st.tpot.p50)} vs "
              f"{_ms(co.tpot.p50)}")
    return _ratio_row("continuous / static throughput (Poisson, near saturation)",
                      co.tokens_per_s / st.tokens_per_s, at_least=1.5, detail=detail)


def peer_row(model: Model, sizes: BenchSizes, seed: int = 0, repeats: int = 2) -> TargetRow:
    """inferlab.serve against transformers' ``generate_batch`` on the same requests, all at once, interleaved."""
    reqs = workload(sizes.requests, math.inf, sizes.prompt_tokens, sizes.peer_new_tokens, seed, model=model)
    per = -(-(sizes.prompt_tokens[1] + sizes.peer_new_tokens) // 16)
    blocks = per * sizes.max_batch
    prompts = [list(r.prompt_ids) for r in reqs]
    out: dict[str, list] = {}

    def ours():
        out["serve"] = [list(s.tokens) for s in run(model, reqs, max_batch=sizes.max_batch, kv_blocks=blocks).requests]

    def theirs():
        out["hf"] = _hf.hf_generate_batch(model, prompts, max_new_tokens=sizes.peer_new_tokens,
                                          max_batch=sizes.max_batch, block_size=16, kv_blocks=blocks)

    def timed(fn):
        return lambda: time_call(fn, repeats=1, warmup=0, device=model.device)[0]

    times = interleave({"serve": timed(ours), "generate_batch": timed(theirs)}, repeats)
    tokens = len(reqs) * sizes.peer_new_tokens
    ours_tps, theirs_tps = (tokens / statistics.median(times[k]) for k in ("serve", "generate_batch"))
    same = sum(a == b for a, b in zip(out["serve"], out["hf"], strict=True))
    detail = (f"{len(reqs)} requests x {sizes.peer_new_tokens} tokens, batch {sizes.max_batch}, {blocks} blocks of 16; "
              f"tokens/s serve {ours_tps:.1f}, generate_batch {theirs_tps:.1f} (median of {repeats} interleaved); "
              f"answers equal: {same}/{len(reqs)}")
    return _ratio_row("inferlab.serve continuous / transformers generate_batch tokens/s", ours_tps / theirs_tps,
                      at_least=1.0, detail=detail)


def in_flight(result: ServeResult) -> float:
    """Mean requests holding KV blocks per iteration, up to the one where the last request first runs (all
    arrive at once: until then the queue is never empty, and memory decides how many run)."""
    seen, counts = set(), []
    for it in result.iterations:
        counts.append(len(it.tables))
        seen.update(it.requests)
        if len(seen) == len(result.requests):
            break
    return statistics.mean(counts)


def fit_row(model: Model, sizes: BenchSizes, seed: int = 0) -> TargetRow:
    """Requests in flight in the same KV memory: paged (blocks of 16) against a contiguous max-length reservation
    (one block as long as the longest request the workload allows, for every request)."""
    reqs = workload(sizes.requests, math.inf, sizes.prompt_tokens, sizes.new_tokens, seed, model=model)
    positions = sizes.fit_blocks * 16
    longest = sizes.prompt_tokens[1] + sizes.new_tokens[1]
    paged = run(model, reqs, max_batch=len(reqs), block_size=16, kv_blocks=sizes.fit_blocks)
    whole = run(model, reqs, max_batch=len(reqs), block_size=longest, kv_blocks=positions // longest)
    a, b = in_flight(paged), in_flight(whole)
    detail = (f"{positions} KV positions; contiguous: {positions // longest} reservations of {longest}, paged: "
              f"{sizes.fit_blocks} blocks of 16; mean requests in flight while others wait {a:.1f} vs {b:.1f} "
              f"(paged peak {max(len(it.tables) for it in paged.iterations)}, {paged.summary.preemptions} "
              f"preemptions); tokens/s {paged.summary.tokens_per_s:.1f} vs {whole.summary.tokens_per_s:.1f}")
    return _ratio_row("requests in the same KV memory, paged / contiguous max-length", a / b, at_least=2.0,
                      detail=detail)


def gaps(result: ServeResult, ids) -> list[float]:
    """Seconds between consecutive tokens of the requests ``ids`` (time between tokens)."""
    out = []
    for s in result.requests:
        if s.request.id in ids:
            out += [b - a for a, b in zip(s.token_times, s.token_times[1:], strict=False)]
    return out


def chunk_row(model: Model, sizes: BenchSizes, seed: int = 0) -> TargetRow:
    """A long prompt arrives while ``decoders`` requests decode: their p99 time between tokens with and without
    chunked prefill, and what chunking costs the long prompt's TTFT."""
    decoders = workload(sizes.decoders, math.inf, sizes.prompt_tokens[0], sizes.decoder_tokens, seed, model=model)
    step = forward_s(model, sizes.decoders, 1, context=sizes.prompt_tokens[0] + sizes.decoder_tokens // 4)
    long = workload(1, 1.0, sizes.long_prompt, 4, seed, model=model)[0]
    long = dataclasses.replace(long, id=len(decoders), arrival=step * sizes.decoder_tokens / 4)
    reqs = [*decoders, long]
    ids = {r.id for r in decoders}
    res = {c: run(model, reqs, max_batch=len(reqs), prefill_chunk=c) for c in (None, sizes.prefill_chunk)}
    whole, chunked = (percentile(gaps(res[c], ids), 99) for c in (None, sizes.prefill_chunk))
    ttft = [res[c].requests[-1].ttft for c in (None, sizes.prefill_chunk)]
    detail = (f"{sizes.decoders} requests decode {sizes.decoder_tokens} tokens, a {sizes.long_prompt}-token prompt "
              f"arrives after {_ms(long.arrival)}; their p99 time between tokens {_ms(whole)} whole vs {_ms(chunked)} "
              f"in chunks of {sizes.prefill_chunk}; the long prompt's TTFT {_ms(ttft[0])} vs {_ms(ttft[1])}")
    return _ratio_row("decoding requests' TPOT p99 as a long prompt arrives, chunked / whole", chunked / whole,
                      at_most=0.5, detail=detail)


def prefix_row(model: Model, sizes: BenchSizes, seed: int = 0) -> TargetRow:
    """TTFT p50 of requests that share a ``shared_prefix``-token opening, with and without prefix caching."""
    own = (8, 24) if sizes.prompt_tokens[1] >= 24 else sizes.prompt_tokens
    prefill = forward_s(model, 1, sizes.shared_prefix + own[1])
    rate = 0.5 / prefill  # arrivals about two prefills apart: TTFT is the prefill, not a queue
    reqs = workload(sizes.prefix_requests, rate, own, 4, seed, model=model, shared_prefix=sizes.shared_prefix)
    res = {c: run(model, reqs, max_batch=sizes.max_batch, prefix_cache=c) for c in (False, True)}
    plain, cached = (res[c].summary.ttft.p50 for c in (False, True))
    detail = (f"{len(reqs)} requests, a {sizes.shared_prefix}-token shared opening + {own} own tokens, "
              f"{rate:.2f}/s; TTFT p50 {_ms(plain)} without vs {_ms(cached)} with; "
              f"{res[True].summary.cached_tokens} prompt positions reused")
    return _ratio_row(f"TTFT with / without prefix caching ({sizes.shared_prefix}-token shared prefix)",
                      cached / plain, at_most=0.33, detail=detail)


def solo_tokens(model: Model, r: Request) -> list[int]:
    """What ``il.generate`` gives request ``r`` alone."""
    s = r.sampling
    return generate(model, r.prompt, max_new_tokens=r.max_new_tokens, stop_at_eos=r.stop_at_eos,
                    temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, seed=s.seed).generated_ids


def equality_row(model: Model, seed: int = 3) -> TargetRow:
    """Tokens equal to solo ``il.generate``, on ``model`` (the bundled one), for every policy and option."""
    mixed = workload(5, math.inf, (5, 40), (3, 12), seed, model=model)
    shared = workload(4, 200.0, (3, 12), (3, 8), seed, model=model, shared_prefix=40)
    short = workload(4, math.inf, (3, 6), (8, 10), seed, model=model)
    cases = {
        "static": (mixed, {"policy": "static", "max_batch": 3}),
        "continuous": (mixed, {"max_batch": 3}),
        "chunked": (mixed, {"max_batch": 4, "prefill_chunk": 6}),
        "prefix cache": (shared, {"max_batch": 4, "prefix_cache": True}),
        "preemption": (short, {"max_batch": 4, "block_size": 4, "kv_blocks": 5}),
        "static+preemption": (short, {"policy": "static", "max_batch": 4, "block_size": 4, "kv_blocks": 5}),
        "everything": (shared, {"max_batch": 4, "prefill_chunk": 7, "prefix_cache": True, "kv_blocks": 4}),
    }
    equal = total = preempted = 0
    wrong = []
    solo = {}
    for name, (reqs, settings) in cases.items():
        result = run(model, reqs, **settings)
        preempted += result.summary.preemptions
        for s in result.requests:
            key = (id(reqs), s.request.id)
            if key not in solo:
                solo[key] = solo_tokens(model, s.request)
            same = sum(a == b for a, b in zip(s.tokens, solo[key], strict=False))
            equal, total = equal + same, total + max(len(s.tokens), len(solo[key]))
            if list(s.tokens) != solo[key]:
                wrong.append(f"{name} #{s.request.id}")
    detail = (f"{model.info.name}: {equal}/{total} tokens over {len(cases)} settings ({', '.join(cases)}), "
              f"{preempted} preemptions" + (f"; differ: {', '.join(wrong)}" if wrong else ""))
    return TargetRow("tokens equal to solo il.generate (greedy, every policy, preemption)", ">= 100%",
                     equal / total, equal == total, detail)


ROWS = {"throughput": throughput_row, "generate_batch": peer_row, "paged": fit_row, "chunked": chunk_row,
        "prefix": prefix_row}


def serve_bench(model: Model, reference: Model, sizes: BenchSizes | None = None, *, rows=tuple(ROWS),
                log=print) -> ServeBench:
    """Measure every row: the timings on ``model`` (GPT-2's shape), token equality on ``reference`` (the bundled
    model). ``rows``: which timed rows (the equality row always runs: it is seconds)."""
    sizes = sizes or BenchSizes()
    out = []
    for name in rows:
        log(f"  measuring {name} ...")
        out.append(ROWS[name](model, sizes))
    log("  checking tokens against il.generate ...")
    out.append(equality_row(reference))
    return ServeBench(f"{model.info.name} ({model.info.n_layer} blocks, {model.info.source})", tuple(out))
