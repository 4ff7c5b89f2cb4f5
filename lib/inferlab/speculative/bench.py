"""Notebook 10's measurements, each one function; ``python -m inferlab.tools.bench speculative`` prints them
against their targets.

    copy_lengths(m)                      # does the model copy a passage its prompt holds? (tokens until it strays)
    one_answer_shares(m)                 # how often the last 1, 2, 3 tokens point back to one answer
    race(m, grounded_prompts(m))         # il.generate, plain decoding, lookup, transformers' lookup: tokens/s
    draft_gain(m, draft, prompts)        # alpha, c, predicted against measured speed-up of a draft model
    first_token_tv(m, draft, prompt)     # the rejection rule's output distribution against the target's

Every timed variant runs interleaved with the others (a rotating order, after one warm-up each), so a drift of
the machine's speed touches all of them alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .. import _hf
from ..engine import generate as plain_generate
from ..errors import check_number
from ..models import Model
from ..paths import REPO
from ..plain import plain
from ..sampling import SamplingConfig, _filter
from ..timing import clock
from .cost import expected_tokens_per_round, predicted_speedup
from .loop import accept, generate

HELDOUT = {"en": REPO / "data" / "heldout_excerpt.txt", "zh": REPO / "data" / "heldout_tang_excerpt.txt"}


def passages(language: str, count: int = 3, min_chars: int = 120) -> list[str]:
    """``count`` passages of held-out text (never trained on): English speeches of Julius Caesar, Tang poems."""
    text = HELDOUT[language].read_text(encoding="utf-8")
    if language == "zh":  # one poem per passage, title and author left out: the lines alone
        poems = [p.strip().split("\n")[2:] for p in text.split("<|endoftext|>")]
        out = ["\n".join(lines) for lines in poems if len("".join(lines)) >= min_chars // 2]
    else:  # runs of lines between speakers' names
        blocks = [b.strip() for b in text.split("\n\n")]
        out = ["\n".join(b.split("\n")[1:]) for b in blocks if len(b) >= min_chars]
    return [p for p in out if len(p) >= min_chars // 2][:count]


def grounded(passage: str) -> str:
    """A prompt whose answer it holds: the passage, a blank line, then the passage's first line again."""
    return f"{passage}\n\n{passage.split(chr(10))[0]}\n"


def named_passages(count: int = 3) -> dict[str, str]:
    """``passages`` of both languages, named ``en 1``, ``en 2``, ``zh 1`` ..."""
    return {f"{lang} {i + 1}": p for lang in ("en", "zh") for i, p in enumerate(passages(lang, count))}


def grounded_prompts(count: int = 3) -> dict[str, str]:
    """English and Chinese grounded prompts, named ``en 1``, ``zh 1`` ..."""
    return {name: grounded(p) for name, p in named_passages(count).items()}


COPY_AT_LEAST = 24  # tokens reproduced before the first divergence, on most passages (issue 45)
PLAIN_PROMPTS = {"en": "ROMEO.\nWhat news", "zh": "春风"}  # nothing in the prompt to look up


# ----------------------------------------------------------------------------- copying
def _answer_ids(model: Model, passage: str) -> tuple[list[int], list[int]]:
    """The grounded prompt's ids and the answer that copies the passage's rest (as the prompt's ids continue)."""
    prompt = grounded(passage)
    first_line = passage.split("\n")[0]
    head = model.encode(prompt)
    full = model.encode(prompt + passage[len(first_line) + 1:])
    return head, full[len(head):] if full[:len(head)] == head else model.encode(passage[len(first_line) + 1:])


def copy_length(model: Model, passage: str, new_tokens: int = 64) -> int:
    """Greedy, after the passage and its first line again: how many tokens reproduce the passage before the
    first that does not (the copy the induction heads make, notebook 03)."""
    want = _answer_ids(model, passage)[1]
    got = plain_generate(model, grounded(passage), min(new_tokens, len(want)), stop_at_eos=False).generated_ids
    return next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))


def copies_most(lengths: dict[str, int], at_least: int = COPY_AT_LEAST) -> bool:
    """Whether ``copy_lengths`` reached ``at_least`` tokens on most passages (issue 45's aim)."""
    return sum(n >= at_least for n in lengths.values()) > len(lengths) / 2


def copy_lengths(model: Model, count: int = 3, new_tokens: int = 64) -> dict[str, int]:
    """``copy_length`` of each held-out passage, English and Chinese."""
    return {name: copy_length(model, p, new_tokens) for name, p in named_passages(count).items()}


def one_answer_share(ids: Sequence[int], start: int, ngram: int) -> float:
    """Of the ids from position ``start`` on, the share whose last ``ngram`` ids before them occurred earlier and
    were followed, every time, by this same id: where looking back for those ``ngram`` ids finds one answer, the
    right one. Prompt lookup looks back for its ``ngram`` last tokens; an induction head (notebook 03) for one."""
    check_number("ngram", ngram, low=1, integer=True, fix="look back for 1 or more ids (prompt lookup: 3)")
    check_number("start", start, low=ngram, high=len(ids) - 1, integer=True,
                 fix="start at an id with ngram ids before it, inside ids")
    followers: dict[tuple[int, ...], set[int]] = {}  # each n-gram seen so far -> the ids that followed it
    hits = 0
    for i in range(ngram, len(ids)):
        key = tuple(ids[i - ngram:i])
        hits += i >= start and followers.get(key) == {ids[i]}
        followers.setdefault(key, set()).add(ids[i])
    return hits / (len(ids) - start)


def one_answer_shares(model: Model, count: int = 3, ngrams: Sequence[int] = (1, 2, 3)) -> dict[str, dict[int, float]]:
    """``one_answer_share`` over the answer ``copy_length`` wants (the passage's rest, after its first line again),
    for each held-out passage and each n-gram length: how often the prompt points to one answer."""
    out = {}
    for name, p in named_passages(count).items():
        prompt, want = _answer_ids(model, p)
        out[name] = {n: one_answer_share(prompt + want, len(prompt), n) for n in ngrams}
    return out


# ----------------------------------------------------------------------------- the race
@dataclass(frozen=True)
class RaceRow:
    """One prompt, every variant: median wall seconds of the whole request, tokens, and the tokens themselves."""

    prompt: str
    seconds: dict[str, float]
    tokens: dict[str, int]
    same_tokens: dict[str, bool]  # each variant's ids equal to il.generate's
    tokens_per_round: float  # lookup's
    acceptance: float  # lookup's

    def speed(self, variant: str) -> float:
        """Tokens per second of ``variant``."""
        return self.tokens[variant] / self.seconds[variant]

    def over(self, variant: str, base: str) -> float:
        """``variant``'s tokens/s over ``base``'s."""
        return self.speed(variant) / self.speed(base)

    def to_dict(self) -> dict:
        return plain(self)


def interleaved(runs: dict[str, Callable[[], object]], repeats: int,
                warmup: bool = True) -> tuple[dict[str, float], dict[str, object]]:
    """Median seconds of each run (one warm-up each unless ``warmup=False``, then ``repeats`` rounds in a rotating
    order) and its last result."""
    names = list(runs)
    last = {n: runs[n]() for n in names} if warmup else {}
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = clock()
            last[n] = runs[n]()
            times[n].append(clock() - t0)
    return {n: statistics.median(t) for n, t in times.items()}, last


def race(model: Model, prompts: dict[str, str], new_tokens: int = 64, *, draft="lookup", k: int = 4,
         ngram: int = 3, repeats: int = 3, warmup: bool = True) -> list[RaceRow]:
    """Greedy answers of ``new_tokens`` to each prompt, four ways: ``il.generate``; plain decoding on the path
    speculation verifies with (``draft="none"``); speculative decoding with ``draft`` (``"lookup"`` or a
    ``Model``); transformers' own (``prompt_lookup_num_tokens=k`` or ``assistant_model=draft``), interleaved.
    The variants are named ``"il.generate"``, ``"plain"``, ``"speculative"`` and ``"transformers"``; ``warmup``:
    one untimed run of each first (``interleaved``)."""
    check_number("new_tokens", new_tokens, low=2, integer=True)
    assistant = None if isinstance(draft, str) else draft
    rows = []
    for name, prompt in prompts.items():
        ids = torch.tensor([model.encode(prompt)], device=model.device)
        runs = {
            "il.generate": lambda p=prompt: plain_generate(model, p, new_tokens, stop_at_eos=False).generated_ids,
            "plain": lambda p=prompt: generate(model, p, new_tokens, draft="none", stop_at_eos=False).generated_ids,
            "speculative": lambda p=prompt: generate(model, p, new_tokens, draft=draft, k=k, ngram=ngram,
                                                     stop_at_eos=False),
            "transformers": lambda i=ids: [int(t) for t in _hf.hf_generate_assisted(
                model, i, max_new_tokens=new_tokens, k=k, ngram=ngram, assistant=assistant)[0]],
        }
        seconds, last = interleaved(runs, repeats, warmup)
        trace = last["speculative"]
        answers = {**last, "speculative": trace.generated_ids}
        rows.append(RaceRow(name, seconds, {n: len(a) for n, a in answers.items()},
                            {n: a == answers["il.generate"] for n, a in answers.items()},
                            trace.tokens_per_round, trace.acceptance))
    return rows


# ----------------------------------------------------------------------------- a draft model
@dataclass(frozen=True)
class DraftGain:
    """A draft's two deciding numbers, alpha and c, what they predict, and what was measured.

    The prediction is Leviathan et al.'s, round by round: a round that proposed ``n`` guesses emits
    (1 - alpha^(n+1)) / (1 - alpha) tokens on average and costs ``n c`` draft steps plus one verify. A model draft
    proposes ``k`` every round; prompt lookup proposes what it finds (often fewer, sometimes none).
    """

    draft: str
    k: int
    alpha: float  # guesses accepted / guesses tested
    c: float  # one draft forward's time over one target step
    verify: float  # the verify forward's mean time over one target step
    proposed: tuple[int, ...]  # guesses each round proposed
    tokens_per_round: float  # measured
    speedup: float  # measured: plain decoding's time over speculative's, same path, same answers

    @property
    def expected_tokens_per_round(self) -> float:
        """The formula's tokens per round, averaged over the rounds' proposal lengths."""
        return statistics.fmean(expected_tokens_per_round(self.alpha, n) for n in self.proposed)

    @property
    def predicted_speedup(self) -> float:
        """Expected tokens per round over a round's cost in target steps (its draft steps, then one verify)."""
        return self.expected_tokens_per_round / (self.c * statistics.fmean(self.proposed) + self.verify)

    @property
    def predicted_speedup_flat(self) -> float:
        """The textbook form, every round k guesses and a verify that costs one step: E / (1 + k c)."""
        return predicted_speedup(self.alpha, self.k, self.c)

    def to_dict(self) -> dict:
        return {**plain(self), "expected_tokens_per_round": self.expected_tokens_per_round,
                "predicted_speedup": self.predicted_speedup}


def draft_gain(model: Model, draft, prompts: dict[str, str], new_tokens: int = 64, *, k: int = 4,
               repeats: int = 3, path: str = "auto", warmup: bool = True) -> DraftGain:
    """Speculative decoding with ``draft`` (a ``Model`` or ``"lookup"``) against plain decoding on the same path,
    over ``prompts`` (interleaved, ``repeats`` each); alpha, c and the verify's cost from the rounds' own times."""
    spec_s = plain_s = 0.0
    rounds, plain_rounds = [], []
    for prompt in prompts.values():
        runs = {"plain": lambda p=prompt: generate(model, p, new_tokens, draft="none", path=path, stop_at_eos=False),
                "spec": lambda p=prompt: generate(model, p, new_tokens, draft=draft, k=k, path=path,
                                                  stop_at_eos=False)}
        seconds, last = interleaved(runs, repeats, warmup)
        spec_s, plain_s = spec_s + seconds["spec"], plain_s + seconds["plain"]
        rounds += last["spec"].rounds
        plain_rounds += last["plain"].rounds
    step = statistics.median(r.verify_s for r in plain_rounds)
    guesses = sum(r.proposed for r in rounds)
    tested = sum(r.accepted + (r.accepted < r.proposed) for r in rounds)
    name = draft if isinstance(draft, str) else draft.info.name
    return DraftGain(name, k, sum(r.accepted for r in rounds) / tested if tested else 0.0,
                     sum(r.draft_s for r in rounds) / guesses / step if guesses else 0.0,
                     statistics.fmean(r.verify_s for r in rounds) / step, tuple(r.proposed for r in rounds),
                     statistics.fmean(r.emitted for r in rounds), plain_s / spec_s)


# ----------------------------------------------------------------------------- exactness under sampling
@dataclass(frozen=True)
class Exactness:
    """Total-variation distance of sampled first-verified tokens from the target's probabilities, by draws."""

    draws: tuple[int, ...]
    rule: tuple[float, ...]  # the rejection rule
    accept_all: tuple[float, ...]  # the wrong rule: every guess accepted
    draft_vs_target: float  # the distance between q and p themselves: how much the draft disagrees

    def to_dict(self) -> dict:
        return plain(self)


def _tv(counts: torch.Tensor, n: int, p: torch.Tensor) -> float:
    return 0.5 * float((counts / n - p).abs().sum())


def first_token_tv(model: Model, draft: Model, prompt: str, draws: Sequence[int] = (250, 500, 1000, 2000, 4000), *,
                   sampling: SamplingConfig | None = None, seed: int = 0) -> Exactness:
    """Draw the first token a round decides, many times: a guess from the draft's q, then the verify rule on the
    target's p (both after the same filtering). The counts' distance from p shrinks as draws grow; accepting every
    guess (the wrong rule) levels off at the distance between q and p."""
    sampling = sampling or SamplingConfig(temperature=1.0, top_k=10)
    ids = torch.tensor([model.encode(prompt)], device=model.device)
    with torch.no_grad():
        p_logits = _hf.forward(model, ids, None, use_cache=False, last_only=True)[0][0, -1]
        q_logits = _hf.forward(draft, ids, None, use_cache=False, last_only=True)[0][0, -1]
    p, q = _filter(p_logits, sampling).softmax(-1), _filter(q_logits, sampling).softmax(-1)
    logits = torch.stack([p_logits, p_logits])
    g = torch.Generator().manual_seed(seed)
    right, wrong = torch.zeros_like(p), torch.zeros_like(p)
    out_rule, out_all, n = [], [], 0
    for target in sorted(draws):
        while n < target:
            guess = int(torch.multinomial(q, 1, generator=g))
            kept, token = accept(logits, [guess], [q], sampling, g)
            right[guess if kept else token] += 1
            wrong[guess] += 1
            n += 1
        out_rule.append(_tv(right, n, p))
        out_all.append(_tv(wrong, n, p))
    return Exactness(tuple(sorted(draws)), tuple(out_rule), tuple(out_all), 0.5 * float((p - q).abs().sum()))
