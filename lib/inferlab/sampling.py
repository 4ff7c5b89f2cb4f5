"""Choosing the next token: greedy, temperature, top-k, top-p, as pure functions of the logits.

The order is Hugging Face's ``generate()``: temperature -> top-k -> top-p, then softmax and
``torch.multinomial``. With the same seed, ``sample`` picks the same tokens as ``generate()``
(``tests/test_engine.py`` proves it). Temperature 0 means greedy (argmax).

``filter_stages`` shows the work (minGPT's "show your work" idea): the ``[vocab]`` distribution after
each filter and a ``Stage`` summary of each (tokens kept, mass removed, entropy). The figures in
``inferlab.viz.sampling`` and the playground in ``inferlab.widgets.sampling`` draw its result.

Shapes: ``logits`` is ``[vocab]`` or ``[batch, vocab]``. One piece (over 300 lines) on purpose: the filters, their
shown work and the checks of their inputs are one idea, read top to bottom in ``generate()``'s order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .errors import bad_value, check_number
from .i18n import tr

# Temperatures are applied in float32: a positive one below float32's smallest number (2**-149) rounds to 0 and
# the division gives NaN, one above its largest rounds to inf. Either is refused when the config is made.
TEMPERATURE_MIN, TEMPERATURE_MAX = 2.0**-149, float(torch.finfo(torch.float32).max)
TEMPERATURE_RANGE = f"temperature = 0 (greedy) or {TEMPERATURE_MIN:.3g} <= temperature <= {TEMPERATURE_MAX:.3g}"


@dataclass(frozen=True)
class SamplingConfig:
    """How to pick the next token. ``temperature=0`` is greedy; ``top_k=0`` and ``top_p=1`` are off."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        check_number("temperature", self.temperature, low=0.0,
                     fix=tr("use 0 for greedy, 1 for the model's own distribution, >1 for bolder choices"))
        try:
            as_float32 = float(torch.tensor(float(self.temperature), dtype=torch.float32))
        except OverflowError:  # an integer such as 10**400: beyond any float
            as_float32 = math.inf
        if self.temperature != 0 and not (as_float32 > 0 and math.isfinite(as_float32)):
            raise bad_value("temperature", self.temperature, TEMPERATURE_RANGE,
                            tr("use 0 for greedy (below 0.01 a temperature already picks the most likely token "
                               "almost always), or at most a few for bolder choices"))
        check_number("top_k", self.top_k, low=0, integer=True, fix=tr("use 0 to switch top-k off"))
        check_number("top_p", self.top_p, low=0.0, high=1.0, low_open=True,
                     fix=tr("use 1.0 to switch top-p off, or a value such as 0.9"))
        if self.seed is not None:
            check_number("seed", self.seed, low=0, high=2**64 - 1, integer=True,
                         fix=tr("use a non-negative integer below 2**64 (torch.Generator's range) or None"))
        # numpy numbers are accepted; stored as Python's own so the config prints and compares plainly
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_k", int(self.top_k))
        object.__setattr__(self, "top_p", float(self.top_p))
        if self.seed is not None:
            object.__setattr__(self, "seed", int(self.seed))

    @property
    def greedy(self) -> bool:
        """True when the choice is the argmax (temperature 0)."""
        return self.temperature == 0

    def __str__(self) -> str:
        """A short label, e.g. ``'T=0.8, top-k 40, top-p 0.9'`` or ``'greedy'`` (the seed is not part of it)."""
        if self.greedy:
            return tr("greedy")
        parts = [f"T={self.temperature:g}"]
        if self.top_k:
            parts.append(f"top-k {self.top_k}")
        if self.top_p < 1:
            parts.append(f"top-p {self.top_p:g}")
        return ", ".join(parts)

    def generator(self, device: torch.device | str = "cpu") -> torch.Generator | None:
        """A fresh ``torch.Generator`` seeded with ``seed`` (None when no seed was given)."""
        if self.seed is None:
            return None
        return torch.Generator(device=device).manual_seed(self.seed)


GREEDY = SamplingConfig(temperature=0.0)


def check_logits(logits: torch.Tensor) -> None:
    """Refuse scores that cannot be sampled from, saying why and how to fix it (a ``ValueError``).

    ``logits`` must be a ``[vocab]`` or ``[batch, vocab]`` tensor of real numbers, with no NaN and no +inf,
    and each row must hold at least one finite score (-inf rules a token out; all -inf leaves nothing to pick).
    """
    if not isinstance(logits, torch.Tensor):
        raise bad_value("logits", type(logits).__name__, tr("a torch.Tensor of shape [vocab] or [batch, vocab]"),
                        tr("pass the model's logits, e.g. il.prefill(m, ids)[0][0], or torch.tensor(your_scores)"))
    if logits.dim() not in (1, 2) or logits.shape[-1] == 0 or logits.numel() == 0:
        raise bad_value("logits", tuple(logits.shape), tr("a [vocab] or [batch, vocab] tensor with vocab >= 1"),
                        tr("pass logits[0] for one sequence of il.prefill(m, ids)'s [batch, vocab] logits"))
    if logits.dtype == torch.bool or logits.is_complex():
        raise bad_value("logits", str(logits.dtype), tr("real-valued scores (float or integer)"),
                        tr("pass the model's logits, e.g. il.prefill(m, ids)[0][0]"))
    top = logits.max(dim=-1).values  # NaN anywhere, +inf anywhere, or a row of only -inf: not finite here
    if not bool(torch.isfinite(top).all()):
        x = logits.float()
        what = ("NaN" if bool(torch.isnan(x).any()) else "+inf" if bool(torch.isposinf(x).any())
                else tr("a row where every score is -inf"))
        raise bad_value("logits", f"<{what}>",
                        tr("finite scores, -inf for tokens ruled out, at least one finite score per row"),
                        tr("check what produced them: NaN or inf logits come from broken weights or an overflow, and "
                           "a row of -inf leaves no token to pick"))


def _check_config(config: SamplingConfig, generator: torch.Generator | None = None) -> None:
    if not isinstance(config, SamplingConfig):
        raise TypeError(tr("config must be a SamplingConfig, got {type} {value!r:.40}. "
                           "Fix: pass il.SamplingConfig(temperature=..., top_k=..., top_p=...).",
                           type=type(config).__name__, value=config))
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(tr("generator must be a torch.Generator or None, got {type}. "
                           "Fix: pass config.generator() (from a seed), torch.Generator().manual_seed(0), or None.",
                           type=type(generator).__name__))


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide the logits by the temperature (< 1 sharpens, > 1 flattens). 0 is handled as greedy elsewhere.

    Below 0.01 the largest logit is subtracted first, so a tiny temperature tends to greedy instead of
    overflowing to inf/NaN (the softmax is unchanged by the shift; above 0.01 we divide exactly as
    Hugging Face does, so seeded samples stay identical to ``generate()``).
    """
    if temperature in (0, 1.0):
        return logits
    if temperature < 0.01:
        return (logits - logits.max(dim=-1, keepdim=True).values) / temperature
    return logits / temperature


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits (and any tied with the k-th), set the rest to -inf. ``k=0``: off."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches ``p`` (the one crossing it included).

    Same rule as Hugging Face's ``TopPLogitsWarper``: sort ascending, drop tokens whose cumulative
    probability is ``<= 1 - p``, always keep the most likely token. ``p=1``: off.
    """
    if p >= 1.0:
        return logits
    sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - p)
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(-1, sorted_idx, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def filter_logits(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Temperature -> top-k -> top-p, in ``generate()``'s order; returns the filtered logits (float32).

    ``logits`` is ``[vocab]`` or ``[batch, vocab]`` (``check_logits`` says what is refused).
    """
    check_logits(logits)
    _check_config(config)
    return _filter(logits, config)


def _filter(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    x = logits.float()
    x = apply_temperature(x, config.temperature)
    x = apply_top_k(x, config.top_k)
    return apply_top_p(x, config.top_p)


def sample(logits: torch.Tensor, config: SamplingConfig = GREEDY,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """Pick the next token id(s): ``[vocab]`` -> scalar tensor, ``[batch, vocab]`` -> ``[batch]``.

    >>> sample(torch.tensor([0.1, 3.0, 0.2])).item()      # temperature 0: greedy
    1
    """
    check_logits(logits)
    _check_config(config, generator)
    if generator is not None and generator.device.type != logits.device.type:
        raise bad_value("generator", f"<on {generator.device}>", tr("a generator on the logits' device ({device})",
                                                                    device=logits.device),
                        tr("make it with config.generator(device=logits.device)"))
    return draw(logits, config, generator)


def draw(logits: torch.Tensor, config: SamplingConfig, generator: torch.Generator | None = None) -> torch.Tensor:
    """``sample`` without its input checks, for the engine's loop: its logits come straight from a model whose
    weights were checked finite at load, and the checks would cost a tenth of a millisecond every token."""
    if config.greedy:
        return torch.argmax(logits, dim=-1)
    probs = _filter(logits, config).softmax(dim=-1)
    flat = probs.reshape(-1, probs.shape[-1])
    picked = torch.multinomial(flat, num_samples=1, generator=generator).squeeze(-1)
    return picked.reshape(probs.shape[:-1])


STAGE_NAMES = ("model", "temperature", "top_k", "top_p")  # in the order they run; "model" is the raw softmax


@dataclass(frozen=True)
class Stage:
    """One filter's effect: what was still possible after it, and what it took away."""

    name: str
    kept: int  # tokens with non-zero probability after this stage
    removed_mass: float  # probability mass (under the previous stage) this stage removed
    entropy: float  # nats, of the distribution after this stage
    top_ids: tuple[int, ...]
    top_probs: tuple[float, ...]

    def __repr__(self) -> str:
        return tr("Stage({name}: kept {kept}, removed {removed:.3f} of the mass, entropy {entropy:.2f} nats)",
                  name=self.name, kept=self.kept, removed=self.removed_mass, entropy=self.entropy)


@dataclass(frozen=True, eq=False)
class FilterStages:
    """Sampling with its work shown: the ``[vocab]`` distribution after each filter, and a ``Stage`` for each.

    ``probs`` maps each name of ``STAGE_NAMES`` to a ``[vocab]`` probability vector; ``stages`` holds the
    matching summaries in the same order; ``final`` is the distribution ``sample`` draws from.
    """

    config: SamplingConfig
    probs: dict[str, torch.Tensor]
    stages: tuple[Stage, ...]

    @property
    def final(self) -> torch.Tensor:
        """The ``[vocab]`` distribution after every filter (what is sampled from)."""
        return self.probs[STAGE_NAMES[-1]]

    def __repr__(self) -> str:
        kept = " -> ".join(f"{s.name}:{s.kept:,}" for s in self.stages)
        return tr("FilterStages({kept} tokens possible)", kept=kept)


@dataclass(frozen=True)
class SamplingStep:
    """One sampling decision, shown with its work: the distribution after each stage and the choice."""

    token_id: int
    prob: float  # probability of the chosen token in the final distribution
    logprob_model: float  # log-probability under the unfiltered model (temperature 1)
    stages: tuple[Stage, ...] = field(default_factory=tuple)

    def __repr__(self) -> str:
        kept = " -> ".join(f"{s.name}:{s.kept}" for s in self.stages)
        return tr("SamplingStep(token {token}, p={p:.3f}, {kept})", token=self.token_id, p=self.prob, kept=kept)


def entropy(probs: torch.Tensor) -> float:
    """Entropy in nats of a ``[vocab]`` probability vector (tokens with p = 0 contribute nothing)."""
    p = probs.double()
    nz = p[p > 0]
    # max: a one-token distribution whose p rounds to just above 1 gives a tiny negative; print 0.000, not -0.000
    return max(0.0, float(-(nz * nz.log()).sum()))


def _summary(name: str, probs: torch.Tensor, previous: torch.Tensor | None, top_n: int) -> Stage:
    top = torch.topk(probs, min(top_n, probs.numel()))
    removed = 0.0 if previous is None else float(previous[(probs == 0) & (previous > 0)].double().sum())
    return Stage(name, int((probs > 0).sum()), removed, entropy(probs),
                 tuple(int(i) for i in top.indices), tuple(float(v) for v in top.values))


def filter_stages(logits: torch.Tensor, config: SamplingConfig, top_n: int = 10) -> FilterStages:
    """Run the filters on one ``[vocab]`` logits row, keeping each stage's distribution and a summary of it.

    Stages (``STAGE_NAMES``): ``model`` (softmax of the raw logits), ``temperature``, ``top_k``, ``top_p``
    (the final distribution, the one ``sample`` draws from). With temperature 0 every stage after ``model``
    is one-hot on the argmax. Each ``Stage`` counts the tokens still possible, the probability mass the
    stage removed (measured under the stage before) and the entropy in nats; ``top_n`` sets how many of
    the most likely ids and probabilities it keeps.

    >>> work = filter_stages(torch.tensor([2.0, 1.0, 0.0]), SamplingConfig(top_k=2))
    >>> [s.kept for s in work.stages], round(work.stages[2].removed_mass, 3)
    ([3, 3, 2, 2], 0.09)
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 1:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise bad_value("logits", shape, tr("a 1-D [vocab] tensor"), tr("pass logits[0] for one sequence"))
    check_logits(logits)
    _check_config(config)
    check_number("top_n", top_n, low=1, integer=True, fix=tr("ask for a few of the most likely tokens, e.g. 10"))
    x = logits.float()
    probs = {"model": x.softmax(-1)}
    if config.greedy:
        onehot = torch.zeros_like(x)
        onehot[int(x.argmax())] = 1.0
        probs.update(temperature=onehot, top_k=onehot, top_p=onehot)
    else:
        x = apply_temperature(x, config.temperature)
        probs["temperature"] = x.softmax(-1)
        x = apply_top_k(x, config.top_k)
        probs["top_k"] = x.softmax(-1)
        probs["top_p"] = apply_top_p(x, config.top_p).softmax(-1)
    stages, previous = [], None
    for name in STAGE_NAMES:
        stages.append(_summary(name, probs[name], previous, top_n))
        previous = probs[name]
    return FilterStages(config, probs, tuple(stages))


def sample_with_steps(logits: torch.Tensor, config: SamplingConfig = GREEDY,
                      generator: torch.Generator | None = None, top_n: int = 10) -> SamplingStep:
    """``sample`` for one ``[vocab]`` row that also reports each stage (``filter_stages``' summaries).

    Draws exactly the same token as ``sample`` with the same generator state.
    """
    work = filter_stages(logits, config, top_n)
    token = int(sample(logits, config, generator))
    return SamplingStep(token_id=token, prob=float(work.final[token]),
                        logprob_model=float(math.log(max(float(work.probs["model"][token]), 1e-45))),
                        stages=work.stages)
