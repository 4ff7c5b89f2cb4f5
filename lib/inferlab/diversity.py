"""Varied or likely? Many samples of one prompt, measured two ways.

A sampling setting is judged here by two numbers, over several seeded samples of the same prompt:

- **variety**: distinct-n, the number of different n-grams (runs of n token ids) divided by the total
  number of n-grams in all the samples together (Li et al., 2016). 1.0 = no n-gram ever repeats;
  greedy, which writes the same text every time, scores low.
- **likelihood**: the mean log-probability per token of what was written, under the model's own
  unfiltered distribution (temperature 1), in nats. Closer to 0 = text the model finds more likely.

Also here: ``repetition`` (how much of one text repeats itself: greedy's loops) and ``tail_mass``
(how much probability sits outside the top 10 / 100 / 1000 candidates).

>>> results = sample_many(m, "ROMEO.", {"T=0.7": SamplingConfig(0.7)}, n_samples=4)   # doctest: +SKIP
>>> results[0]                                                                          # doctest: +SKIP
SettingResult('T=0.7': 4 samples x 24 tokens, distinct-2 0.912, mean log-prob -3.41 nats/token)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .engine import forward_full, generate
from .errors import bad_value, check_number
from .i18n import tr
from .models import Model
from .sampling import SamplingConfig


# ----------------------------------------------------------------------------- variety
def ngrams(ids: Sequence[int], n: int) -> list[tuple[int, ...]]:
    """All runs of ``n`` consecutive ids, in order (``len(ids) - n + 1`` of them, or none).

    >>> ngrams([5, 6, 5, 6], 2)
    [(5, 6), (6, 5), (5, 6)]
    """
    check_number("n", n, low=1, integer=True, fix="use n=1 for single tokens, 2 for pairs, ...")
    return [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]


def distinct_n(samples: Sequence[Sequence[int]], n: int = 2) -> float:
    """Distinct n-grams / total n-grams over all ``samples`` (lists of token ids) together.

    1.0 when no n-gram occurs twice; ``1 / len(samples)`` (or less) when every sample is the same text.
    Returns 0.0 when the samples hold no n-gram at all (all shorter than ``n``).

    >>> distinct_n([[1, 2, 3], [1, 2, 4]], n=2)     # (1,2) twice, (2,3), (2,4): 3 distinct of 4
    0.75
    """
    grams = [g for s in samples for g in ngrams(list(s), n)]
    return len(set(grams)) / len(grams) if grams else 0.0


@dataclass(frozen=True)
class Repetition:
    """How much one text repeats itself: n-grams that already occurred earlier in the same text."""

    n: int
    total: int  # n-grams in the text
    repeated: int  # of those, how many are copies of an earlier one
    longest_loop: int  # tokens in the longest stretch that copies the stretch just before it (0 = none)

    @property
    def fraction(self) -> float:
        """``repeated / total`` (0.0 for a text shorter than n)."""
        return self.repeated / self.total if self.total else 0.0

    def __repr__(self) -> str:
        loop = (tr("longest loop {loop} token", loop=self.longest_loop) if self.longest_loop == 1
                else tr("longest loop {loop} tokens", loop=self.longest_loop))
        return tr("Repetition({repeated} of {total} {n}-grams repeat an earlier one ({fraction:.0%}), {loop})",
                  repeated=self.repeated, total=self.total, n=self.n, fraction=self.fraction, loop=loop)


def _longest_loop(ids: Sequence[int], max_period: int = 32) -> int:
    """Length of the longest run where ``ids[i] == ids[i - period]`` for one period (a loop), in tokens."""
    best = 0
    for period in range(1, min(max_period, len(ids) // 2) + 1):
        run = 0
        for i in range(period, len(ids)):
            run = run + 1 if ids[i] == ids[i - period] else 0
            best = max(best, run if run >= period else 0)
    return best


def repetition(ids: Sequence[int], n: int = 3) -> Repetition:
    """Count the ``n``-grams of one text that repeat an earlier one, and the longest loop.

    >>> repetition([7, 8, 9, 7, 8, 9, 7, 8, 9], n=3)
    Repetition(4 of 7 3-grams repeat an earlier one (57%), longest loop 6 tokens)
    """
    grams = ngrams(list(ids), n)
    seen: set[tuple[int, ...]] = set()
    repeated = 0
    for g in grams:
        repeated += g in seen
        seen.add(g)
    return Repetition(n=n, total=len(grams), repeated=repeated, longest_loop=_longest_loop(list(ids)))


# ----------------------------------------------------------------------------- the long tail
@dataclass(frozen=True)
class TailMass:
    """Probability outside the top-k candidates, for a few k (one next-token distribution)."""

    ks: tuple[int, ...]
    outside: tuple[float, ...]  # 1 - (mass of the k most likely tokens), one per k
    vocab: int

    def __repr__(self) -> str:
        parts = ", ".join(tr("top {k}: {outside:.3f}", k=k, outside=o)
                          for k, o in zip(self.ks, self.outside, strict=True))
        return tr("TailMass(outside {parts}; vocab {vocab})", parts=parts, vocab=self.vocab)


def tail_mass(probs: torch.Tensor, ks: Sequence[int] = (10, 100, 1000)) -> TailMass:
    """How much of a ``[vocab]`` probability vector lies outside the ``k`` most likely tokens.

    >>> tail_mass(torch.tensor([0.5, 0.3, 0.1, 0.1]), ks=(1, 2))
    TailMass(outside top 1: 0.500, top 2: 0.200; vocab 4)
    """
    if probs.dim() != 1:
        raise bad_value("probs", tuple(probs.shape), "a 1-D [vocab] probability vector",
                        "pass logits[0].softmax(-1) for one sequence")
    for k in ks:
        check_number("k", k, low=1, integer=True, fix="use k >= 1")
    ordered = torch.sort(probs.double(), descending=True).values
    outside = tuple(float(ordered[k:].sum()) for k in ks)
    return TailMass(ks=tuple(ks), outside=outside, vocab=probs.numel())


# ----------------------------------------------------------------------------- many samples
@dataclass(frozen=True)
class SettingResult:
    """Several seeded samples of one prompt under one setting, with their variety and likelihood."""

    name: str
    config: SamplingConfig
    prompt: str
    seeds: tuple[int | None, ...]  # one per sample (None for greedy: no randomness)
    texts: tuple[str, ...]
    ids: tuple[tuple[int, ...], ...]
    stop_reasons: tuple[str, ...]
    distinct: Mapping[int, float]  # n -> distinct-n over all samples together
    mean_logprob: float  # nats per generated token, under the unfiltered model

    def __repr__(self) -> str:
        tokens = sum(len(i) for i in self.ids)
        d2 = self.distinct.get(2, next(iter(self.distinct.values()), float("nan")))
        return tr("SettingResult({name!r}: {samples} samples, {tokens} tokens, distinct-2 {d2:.3f}, mean log-prob "
                  "{logprob:.2f} nats/token)", name=self.name, samples=len(self.texts), tokens=tokens, d2=d2,
                  logprob=self.mean_logprob)


def token_logprobs(model: Model, prompt_ids: Sequence[int], samples: Sequence[Sequence[int]]) -> list[list[float]]:
    """Log-probability (nats) of each token of each sample under the unfiltered model, given the prompt.

    Scores a whole sample in one uncached forward pass (samples of equal length share one batch
    ``[n, prompt + length]``); the same numbers as ``SamplingStep.logprob_model`` from ``record="sampling"``,
    at a fraction of the cost.
    """
    out: list[list[float]] = [[] for _ in samples]
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        by_length.setdefault(len(s), []).append(i)
    p = len(prompt_ids)
    for length, idx in by_length.items():
        if length == 0:
            continue
        ids = torch.tensor([list(prompt_ids) + list(samples[i]) for i in idx])  # [n, p + length]
        logp = forward_full(model, ids)[:, p - 1:-1].float().log_softmax(-1)     # [n, length, vocab]
        picked = logp.gather(-1, ids[:, p:].unsqueeze(-1).to(logp.device)).squeeze(-1)  # [n, length]
        for row, i in zip(picked.cpu().tolist(), idx):
            out[i] = row
    return out


def sample_many(model: Model, prompt: str, settings: Mapping[str, SamplingConfig] | Sequence[SamplingConfig],
                n_samples: int = 8, max_new_tokens: int = 24, *, first_seed: int = 0,
                ns: Sequence[int] = (1, 2, 3), stop_at_eos: bool = False) -> list[SettingResult]:
    """Generate ``n_samples`` continuations of ``prompt`` per setting, seeds ``first_seed, first_seed+1, ...``.

    Each sample is ``inferlab.generate`` with ``SamplingConfig(seed=...)``; ``token_logprobs`` then scores
    the samples under the unfiltered model. Greedy ignores the seed, so a greedy setting is generated
    once and counted ``n_samples`` times (the same text each time).

    Args:
        model: from ``inferlab.load()``.
        prompt: the text to continue.
        settings: ``{label: SamplingConfig}``, or a list of configs (labelled with ``str(config)``). Their
            own ``seed`` is replaced.
        n_samples: samples per setting (>= 1).
        max_new_tokens: length of each sample, in tokens.
        ns: the n of the distinct-n values to compute.
        stop_at_eos: False (the default) makes every sample the same length, so settings compare fairly.

    Returns:
        One ``SettingResult`` per setting, in the order given.
    """
    check_number("n_samples", n_samples, low=1, integer=True, fix="ask for at least one sample")
    if not isinstance(settings, Mapping):
        settings = {str(c): c for c in settings}
    if not settings:
        raise bad_value("settings", settings, "at least one SamplingConfig", "e.g. {'T=1': SamplingConfig(1.0)}")
    results = []
    for name, config in settings.items():
        if not isinstance(config, SamplingConfig):
            raise TypeError(f"settings[{name!r}] must be a SamplingConfig, got {type(config).__name__}. "
                            "Fix: wrap the numbers, e.g. SamplingConfig(temperature=0.8, top_k=40).")
        runs = []
        for i in range(1 if config.greedy else n_samples):
            seeded = dataclasses.replace(config, seed=None if config.greedy else first_seed + i)
            runs.append(generate(model, prompt, max_new_tokens, seeded, stop_at_eos=stop_at_eos))
        runs = runs * (n_samples if config.greedy else 1)
        ids = tuple(tuple(t.generated_ids) for t in runs)
        logprobs = [lp for row in token_logprobs(model, runs[0].prompt_ids, ids) for lp in row]
        results.append(SettingResult(
            name=name, config=config, prompt=prompt, seeds=tuple(t.config.seed for t in runs),
            texts=tuple(t.text for t in runs), ids=ids,
            stop_reasons=tuple(t.stop_reason for t in runs),
            distinct={n: distinct_n(ids, n) for n in ns},
            mean_logprob=sum(logprobs) / len(logprobs)))
    return results
