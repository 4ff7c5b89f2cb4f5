"""Greedy decoding with the KV cache and without it: the time of every step, and whether the logits agree.

``compare_cache`` times ``inferlab.generate(..., use_cache=True)`` against ``use_cache=False`` (the
whole sequence recomputed every step), interleaved, and compares the logits of the two along the
cached run's tokens. ``inferlab.viz.kvcache.cache_timing_figure`` draws the result.

    >>> cmp = compare_cache(m, "To be, or not to be", 32)    # doctest: +SKIP
    >>> cmp.speedup, cmp.tokens_identical                    # doctest: +SKIP
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import gate
from ..engine import decode_step, forward_full, generate, prefill
from ..errors import check_number
from ..i18n import tr
from ..models import Model
from ..timing import interleave, summarize
from .sweeps import meta


@dataclass(frozen=True)
class CacheComparison:
    """Greedy decoding of one prompt with the KV cache and without it (the whole sequence every step).

    ``*_times[r][i]``: seconds of step i in run r (step 0 reads the prompt); ``max_abs_diff[i]``: the
    largest |logit difference| between the two at step i; ``max_logit[i]``: the largest |logit| there.
    """

    prompt_len: int
    cached_ids: tuple[int, ...]
    uncached_ids: tuple[int, ...]
    cached_times: tuple[tuple[float, ...], ...]
    uncached_times: tuple[tuple[float, ...], ...]
    max_abs_diff: tuple[float, ...]
    max_logit: tuple[float, ...]
    device: str
    dtype: str
    model: str

    @property
    def tokens_identical(self) -> bool:
        """The two runs chose the same tokens at every step."""
        return self.cached_ids == self.uncached_ids

    @property
    def max_diff(self) -> float:
        """The largest |logit difference| over all steps."""
        return max(self.max_abs_diff)

    @property
    def tolerance(self) -> float:
        """Allowed relative difference: rounding of a different summation order (larger in half precision)."""
        return 1e-4 if self.dtype == "float32" else 2e-2

    @property
    def logits_agree(self) -> bool:
        """Every step's max |difference| is within ``tolerance`` x that step's largest |logit|."""
        return all(d <= self.tolerance * max(m, 1.0) for d, m in zip(self.max_abs_diff, self.max_logit))

    def step_medians(self, cached: bool) -> tuple[float, ...]:
        """Median over runs of each step's seconds."""
        runs = self.cached_times if cached else self.uncached_times
        return tuple(summarize(col).median for col in zip(*runs))

    def total_s(self, cached: bool) -> float:
        """Median over runs of the whole generation's seconds (the sum of its steps)."""
        runs = self.cached_times if cached else self.uncached_times
        return summarize([sum(r) for r in runs]).median

    @property
    def speedup(self) -> float:
        """Total time without the cache / total time with it."""
        return self.total_s(False) / self.total_s(True)

    def __repr__(self) -> str:
        return tr("CacheComparison({n} tokens after a {prompt}-token prompt: cached {cached:.1f} ms, uncached "
                  "{uncached:.1f} ms (x{speedup:.1f}), identical tokens {same}, max |logit diff| {diff:.2e})",
                  n=len(self.cached_ids), prompt=self.prompt_len, cached=self.total_s(True) * 1e3,
                  uncached=self.total_s(False) * 1e3, speedup=self.speedup, same=self.tokens_identical,
                  diff=self.max_diff)


def step_logits(model: Model, prompt_ids: Sequence[int], tokens: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits ``[steps, vocab]`` that chose each of ``tokens`` after ``prompt_ids``, with and without the cache.

    With: ``prefill`` then one ``decode_step`` per given token (teacher forcing: the tokens are given,
    not sampled). Without: one ``forward_full`` over the whole sequence, whose position i holds what an
    uncached step recomputes for its last position.
    """
    ids, tokens = list(prompt_ids), list(tokens)
    logits, cache = prefill(model, [ids])
    cached = [logits[0]]
    for token in tokens[:-1]:
        logits, cache = decode_step(model, token, cache)
        cached.append(logits[0])
    uncached = forward_full(model, [ids + tokens[:-1]])[0, len(ids) - 1:]  # [steps, vocab]
    return torch.stack(cached).float(), uncached.float()


def compare_cache(model: Model, prompt: str, new_tokens: int, *, repeats: int = 3,
                  warmup_tokens: int = 4) -> CacheComparison:
    """Greedy-decode ``new_tokens`` tokens with and without the cache, ``repeats`` times each (interleaved).

    Step times come from each run's ``Trace`` (``StepRecord.seconds``: the forward and the choice), after
    one untimed warm-up run of each that generates ``warmup_tokens`` (a short one: the uncached run of a
    long answer takes long, and warming up needs only its first steps). The logits are compared along
    the cached run's tokens.
    """
    prompt_len = len(model.encode(prompt))
    check_number("new_tokens", new_tokens, low=1, high=model.info.n_ctx - prompt_len, integer=True,
                 fix="shorten the prompt or generate fewer tokens (prompt + new tokens <= the context length)")
    check_number("repeats", repeats, low=1, integer=True)
    check_number("warmup_tokens", warmup_tokens, low=1, integer=True)
    for c in (True, False):
        generate(model, prompt, min(warmup_tokens, new_tokens), stop_at_eos=False, use_cache=c)
    runs = interleave({c: (lambda c=c: generate(model, prompt, new_tokens, stop_at_eos=False, use_cache=c))
                       for c in (True, False)}, repeats, warmup=0)
    with_cache, without = runs[True][0], runs[False][0]
    cached, uncached = step_logits(model, with_cache.prompt_ids, with_cache.generated_ids)
    decode = [s for run in runs[True] for s in (x.seconds for x in run.steps[1:])]  # step 0 is the prefill
    if decode:
        gate.step(model.info, statistics.median(decode), via="compare_cache (with the cache)",
                  context=len(with_cache.prompt_ids))
    result = CacheComparison(
        len(with_cache.prompt_ids), tuple(with_cache.generated_ids), tuple(without.generated_ids),
        tuple(tuple(s.seconds for s in t.steps) for t in runs[True]),
        tuple(tuple(s.seconds for s in t.steps) for t in runs[False]),
        tuple(float(d) for d in (cached - uncached).abs().amax(-1)), tuple(float(v) for v in cached.abs().amax(-1)),
        **meta(model))
    # the gate's spike rule reads both curves: step i runs over prompt + i tokens (the cached step 0 is the prefill)
    first, n = result.prompt_len, len(result.cached_ids)
    if n >= 4:  # three points at least on each curve: with fewer, no point has a neighbour on each side
        gate.sweep(model.info, range(first + 1, first + n), result.step_medians(True)[1:],
                   via="compare_cache (with the cache)", job="decode")
        gate.sweep(model.info, range(first, first + n), result.step_medians(False),
                   via="compare_cache (without the cache)", job="decode without the cache")
    return result
