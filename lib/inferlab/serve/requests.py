"""The requests a server receives: a prompt, how many tokens to answer with, and when it arrives.

``request`` makes one from text; ``workload`` makes many, as a load generator does: arrivals from a
Poisson process (independent users: the gaps between arrivals are exponential, ``rate_per_s`` on
average) and prompt and answer lengths drawn from ranges. Its prompts are windows of a passage of
Shakespeare, chosen so that each prompt's text tokenizes back to exactly its ids: ``il.generate`` given
the same text then sees the same prompt, so a request can be checked against it alone. A request's settings are
``il.generate``'s own (``Request.config``, a ``GenerationConfig``), and it stops where ``il.generate`` would
(``generation.stop_reason``, and the text's stop strings). ``Live`` is a request's state while it is served.
"""

from __future__ import annotations

import math
import numbers
import random
from dataclasses import dataclass, field

import torch

from ..errors import bad_value, check_number
from ..generation import GenerationConfig, TextAssembler, stop_reason
from ..i18n import tr
from ..models import Model, check_model
from ..sampling import SamplingConfig

# The prompts' source: Hamlet, Act 3, Scene 1 (public domain); repeated when a prompt needs more tokens.
PASSAGE = (
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer the slings and "
    "arrows of outrageous fortune, or to take arms against a sea of troubles and by opposing end them. To die, "
    "to sleep; no more; and by a sleep to say we end the heart-ache and the thousand natural shocks that flesh "
    "is heir to: 'tis a consummation devoutly to be wish'd. To die, to sleep; to sleep, perchance to dream, ay, "
    "there's the rub: for in that sleep of death what dreams may come, when we have shuffled off this mortal "
    "coil, must give us pause. There's the respect that makes calamity of so long life; for who would bear the "
    "whips and scorns of time, the oppressor's wrong, the proud man's contumely, the pangs of despised love, "
    "the law's delay, the insolence of office, and the spurns that patient merit of the unworthy takes, when he "
    "himself might his quietus make with a bare bodkin? Who would fardels bear, to grunt and sweat under a "
    "weary life, but that the dread of something after death, the undiscover'd country from whose bourn no "
    "traveller returns, puzzles the will, and makes us rather bear those ills we have than fly to others that "
    "we know not of? Thus conscience does make cowards of us all; and thus the native hue of resolution is "
    "sicklied o'er with the pale cast of thought, and enterprises of great pitch and moment with this regard "
    "their currents turn awry and lose the name of action. "
)


@dataclass(frozen=True)
class Request:
    """One user's request: the prompt (text and its ids), its settings and the arrival time.

    ``config`` is what ``il.generate`` takes (``max_new_tokens``, ``sampling``, ``stop_at_eos``,
    ``stop_token_ids``, ``stop_strings``), read here as ``max_new_tokens``, ``sampling`` and ``stop_at_eos`` too.
    ``arrival`` is seconds after the server starts. ``stop_at_eos=False`` answers with exactly ``max_new_tokens``
    tokens (vLLM's benchmark calls it ``ignore_eos``): a workload's lengths stay as drawn.
    """

    id: int
    prompt: str
    prompt_ids: tuple[int, ...] = field(repr=False)
    config: GenerationConfig
    arrival: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.config, GenerationConfig):
            raise TypeError(f"config must be a GenerationConfig, got {type(self.config).__name__}. "
                            "Fix: il.GenerationConfig(max_new_tokens=20), or make it with il.serve.request(...).")
        if not self.config.use_cache or self.config.cache_implementation != "dynamic":
            raise bad_value("config", self.config, "use_cache=True and cache_implementation='dynamic'",
                            "leave both as they are: a server keeps every request's keys and values in its blocks")

    max_new_tokens = property(lambda self: self.config.max_new_tokens, doc="The answer's length limit.")
    stop_at_eos = property(lambda self: self.config.stop_at_eos, doc="Whether <|endoftext|> ends the answer.")
    sampling = property(lambda self: self.config.sampling, doc="The sampling settings (greedy by default).")

    def __repr__(self) -> str:
        return tr("Request(#{id}, {prompt} prompt tokens, up to {new} new, arrives at {ms:.1f} ms)", id=self.id,
                  prompt=len(self.prompt_ids), new=self.max_new_tokens, ms=self.arrival * 1e3)


def request(model: Model, prompt: str, max_new_tokens: int | None = None, *, arrival: float = 0.0, id: int = 0,
            config: GenerationConfig | None = None, sampling: SamplingConfig | None = None, **settings) -> Request:
    """One ``Request`` from text, checked as ``il.generate`` checks it (same settings, limits and messages):
    ``config`` and keywords as ``il.generate`` takes them (``stop_at_eos``, ``stop_token_ids``, ``stop_strings``,
    ``temperature``, ``top_k``, ``top_p``, ``seed``).

    >>> r = request(m, "To be, or not", 20, arrival=0.5)        # doctest: +SKIP
    """
    check_model(model)
    config = GenerationConfig.from_arguments(config, max_new_tokens, sampling, **settings)
    ids = config.check(model, prompt)
    check_number("arrival", arrival, low=0.0, fix="give the arrival in seconds after the server starts, e.g. 0.0")
    check_number("id", id, low=0, integer=True, fix="number requests 0, 1, 2, ...")
    return Request(int(id), prompt, tuple(ids), config, float(arrival))


def check_requests(model: Model, requests) -> list[Request]:
    """``requests`` as a list, checked: ``Request``s with different ids, each fitting ``model``'s context and
    vocabulary."""
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


@dataclass
class Live:
    """A request's state while it is served: its tokens so far and how many positions are in its blocks
    (``computed``: vLLM's ``num_computed_tokens``)."""

    request: Request
    tokens: list[int]  # prompt + generated
    computed: int = 0  # positions whose keys and values are in the blocks
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    cached_tokens: int = 0
    generator: torch.Generator | None = None
    text: TextAssembler | None = None  # the answer's text, kept only to find a stop string in it

    @classmethod
    def start(cls, model: Model, r: Request, device) -> Live:
        config = r.config
        text = TextAssembler(model.tokenizer, config.stop_strings) if config.stop_strings else None
        return cls(r, list(r.prompt_ids), generator=config.sampling.generator(device), text=text)

    @property
    def id(self) -> int:
        return self.request.id

    @property
    def generated(self) -> int:
        return len(self.tokens) - len(self.request.prompt_ids)

    def stop(self, model: Model, token: int) -> str | None:
        """Why the answer ends after ``token`` (just appended), as ``il.generate`` decides it; else None."""
        reason = stop_reason(model, self.request.config, token, self.generated - 1)
        if self.text is not None:
            self.text.add(token, final=reason is not None)
            reason = self.text.stopped or reason
        return reason


def _length_range(name: str, value, low: int, high: int) -> tuple[int, int]:
    """An int or an inclusive ``(lo, hi)`` pair, checked against ``[low, high]``."""
    pair = (value, value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
    fix = f"pass a whole number or a (shortest, longest) pair within [{low}, {high}], e.g. ({low}, {min(high, 64)})"
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise bad_value(name, value, f"an int or a (lo, hi) pair of ints in [{low}, {high}]", fix)
    for v in pair:
        check_number(name, v, low=low, high=high, integer=True, fix=fix)
    if pair[0] > pair[1]:
        raise bad_value(name, tuple(value), "lo <= hi", "put the shorter length first")
    return int(pair[0]), int(pair[1])


def _window(model: Model, source: list[int], prefix: list[int], length: int, rng: random.Random) -> list[int]:
    """``prefix`` + ``length`` ids of ``source`` from a random offset, such that decode-then-encode gives them back."""
    start = rng.randrange(len(source) - length)
    for shift in range(len(source) - length):
        offset = (start + shift) % (len(source) - length)
        ids = prefix + source[offset:offset + length]
        if model.encode(model.decode(ids)) == ids:  # a window cut inside a word may tokenize differently as text
            return ids
    raise AssertionError("no window of the passage tokenizes back to itself")  # never seen: most windows do


def workload(n: int, rate_per_s: float, prompt_tokens=(16, 64), new_tokens=(8, 64), seed: int = 0, *,
             model: Model, shared_prefix: int = 0) -> list[Request]:
    """``n`` requests with Poisson arrivals and lengths drawn uniformly from ranges (inclusive).

    Args:
        n: how many requests.
        rate_per_s: mean arrivals per second; the first request arrives at 0 s and the gaps are exponential
            with mean ``1 / rate_per_s``. ``math.inf``: all arrive at once (an offline batch).
        prompt_tokens, new_tokens: an int or a ``(lo, hi)`` range of each request's prompt length and answer
            length (the answer is exactly that long: ``stop_at_eos=False``).
        seed: the same seed gives the same requests.
        model: whose tokenizer writes the prompts (a keyword here, unlike the issue's sketch: prompts are text).
        shared_prefix: this many tokens of one common opening (a system prompt) before each request's own
            ``prompt_tokens``: what prefix caching reuses.

    >>> reqs = workload(16, rate_per_s=4.0, prompt_tokens=(16, 64), new_tokens=(8, 128), model=m)  # doctest: +SKIP
    """
    check_model(model)
    check_number("n", n, low=1, integer=True, fix="ask for at least one request, e.g. n=16")
    if rate_per_s != math.inf:
        check_number("rate_per_s", rate_per_s, low=0.0, low_open=True,
                     fix="give arrivals per second, e.g. 2.0, or math.inf for all at once")
    n_ctx = model.info.n_ctx
    check_number("shared_prefix", shared_prefix, low=0, high=n_ctx - 2, integer=True,
                 fix="give the common opening's length in tokens, e.g. 256, or 0 for none")
    p_lo, p_hi = _length_range("prompt_tokens", prompt_tokens, 1, n_ctx - 1 - shared_prefix)
    g_lo, g_hi = _length_range("new_tokens", new_tokens, 1, n_ctx - 1)
    if shared_prefix + p_hi + g_hi > n_ctx:
        raise bad_value("new_tokens", (g_lo, g_hi), f"shared_prefix + the longest prompt + the longest answer <= "
                        f"{n_ctx} (the context length)", f"use new_tokens up to {n_ctx - shared_prefix - p_hi}")
    check_number("seed", seed, low=0, integer=True, fix="use a non-negative integer")
    rng = random.Random(seed)
    need = shared_prefix + p_hi + 1
    copies = need // len(model.encode(PASSAGE)) + 2
    source = model.encode(PASSAGE * copies)  # the text repeated, then encoded: ids repeated would not round-trip
    prefix = _window(model, source, [], shared_prefix, random.Random(seed)) if shared_prefix else []
    out, t = [], 0.0
    for i in range(n):
        ids = _window(model, source, prefix, rng.randint(p_lo, p_hi), rng)
        answer = GenerationConfig(max_new_tokens=rng.randint(g_lo, g_hi), stop_at_eos=False)
        out.append(Request(i, model.decode(ids), tuple(ids), answer, t))
        t += rng.expovariate(rate_per_s) if rate_per_s != math.inf else 0.0
    return out
