"""Every policy and option against solo ``il.generate``, token for token: the check behind 09's equality table
and the benchmark's last two rows (the bundled model: all equal; random weights: any divergence with its margin).

    solo_tokens     what ``il.generate`` gives one request alone
    equality        every policy and option on small workloads: tokens equal, preemptions, the block pool's books
    divergence      where a request's greedy tokens first part from its solo run, and the solo logit margin there
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine import generate, prefill
from ..models import Model
from .requests import Request, workload
from .scheduler import run


def solo_tokens(model: Model, r: Request) -> list[int]:
    """What ``il.generate`` gives request ``r`` alone (with the request's own settings)."""
    return generate(model, r.prompt, config=r.config).generated_ids


NEAR_TIE = 1e-3  # a logit margin below this is floating-point rounding (different product order), not a bug


@dataclass(frozen=True)
class Divergence:
    """Where a served request's greedy tokens first left what ``il.generate`` gives it alone, and by how much the
    solo run's logits preferred its own token there (``margin``: logit of the solo token minus the served one's)."""

    setting: str
    request: int
    index: int  # position in the answer
    served: int
    solo: int
    margin: float

    @property
    def near_tie(self) -> bool:
        return self.margin < NEAR_TIE


@dataclass(frozen=True)
class SettingCheck:
    """One setting's run against solo ``il.generate``: tokens equal, tokens, preemptions, and whether the block
    pool's books balanced after the run (no problem, no block held)."""

    equal: int
    total: int
    preemptions: int
    balanced: bool


@dataclass(frozen=True)
class Equality:
    """A ``SettingCheck`` per setting, and each request's first divergence, with its logit margin (greedy
    requests)."""

    settings: dict[str, SettingCheck]
    divergences: tuple[Divergence, ...] = ()

    @property
    def equal(self) -> int:
        return sum(c.equal for c in self.settings.values())

    @property
    def total(self) -> int:
        return sum(c.total for c in self.settings.values())


def equality(model: Model, seed: int = 3) -> Equality:
    """Every policy and option on small workloads of ``model`` (the bundled one), each request's tokens against
    solo ``il.generate``, and the block pool's books after each run (``BlockPool.problems``, nothing held)."""
    mixed = workload(4, math.inf, (5, 36), (3, 8), seed, model=model)  # some prompts over two blocks of 16
    shared = workload(3, 200.0, (3, 8), (3, 6), seed, model=model, shared_prefix=40)
    short = workload(3, math.inf, (3, 6), (8, 10), seed, model=model)  # they outgrow 5 blocks of 4
    cases = {
        "static": (mixed, {"policy": "static", "max_batch": 3}),
        "continuous": (mixed, {"max_batch": 3}),
        "chunked prefill": (mixed, {"max_batch": 4, "prefill_chunk": 6}),
        "prefix cache": (shared, {"max_batch": 4, "prefix_cache": True}),
        "preemption": (short, {"max_batch": 3, "block_size": 4, "kv_blocks": 5}),
        "static + preemption": (short, {"policy": "static", "max_batch": 3, "block_size": 4, "kv_blocks": 5}),
        "all at once": (shared, {"max_batch": 4, "prefill_chunk": 7, "prefix_cache": True, "block_size": 4,
                                 "kv_blocks": 14}),
    }
    solo: dict[tuple[int, int], list[int]] = {}
    out, diverged = {}, []
    for name, (reqs, settings) in cases.items():
        result = run(model, reqs, **settings)
        equal = total = 0
        for s in result.requests:
            want = solo.setdefault((id(reqs), s.request.id), solo_tokens(model, s.request))
            equal += sum(a == b for a, b in zip(s.tokens, want, strict=False))
            total += max(len(s.tokens), len(want))
            first = next((i for i, (a, b) in enumerate(zip(s.tokens, want, strict=False)) if a != b), None)
            if first is not None and s.request.sampling.greedy:
                diverged.append(divergence(model, name, s.request, first, s.tokens[first], want))
        balanced = not result.pool.problems() and result.pool.used_blocks == 0
        out[name] = SettingCheck(equal, total, result.summary.preemptions, balanced)
    return Equality(out, tuple(diverged))


def divergence(model: Model, setting: str, r: Request, index: int, served: int, want: list[int]) -> Divergence:
    """The solo run's logit margin at answer position ``index`` of request ``r``: its own token against ``served``."""
    logits = prefill(model, [*r.prompt_ids, *want[:index]])[0][0].float()
    return Divergence(setting, r.id, index, served, want[index], float(logits[want[index]] - logits[served]))
