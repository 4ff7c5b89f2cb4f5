"""What each attention head does: kinds of heads, how focused they are, and what switching one off changes.

    pat = Patterns.from_trace(il.generate(m, "To be, or not", 4, record=("embeddings", "attention", "residual")))
    scores = head_scores(m, pat)                  # previous-token, first-token, induction [layers, heads]
    bits = attention_entropy(pat.attention)       # [layers, heads]: how spread out each head looks
    with heads_off(m, [(1, 3)]): ...              # switch a head off (its mixed values set to 0)
    effect = ablate(m, ids, [(1, 3)])             # loss and next-token distribution, with and without it

Scores and entropies take attention ``[..., query_pos, key_pos]`` and drop the last two axes; the
residual stream is ``[layers + 1, tokens, d_model]`` (the embeddings, then the output of each block).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .attention import Patterns, record_patterns
from .engine import forward_full
from .errors import bad_value, check_number
from .hooks import zero_heads
from .i18n import tr
from .models import Model, as_ids

HEAD_KINDS = ("previous", "first", "induction")
CHANCE_FACTOR = 2.0  # a head "does the job" when it scores at least this many times the even-spread score


# --------------------------------------------------------------------- kinds of heads
def _mean_at(attention: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    return attention[..., queries, keys].mean(dim=-1)


def previous_token_score(attention: torch.Tensor) -> torch.Tensor:
    """Mean weight from each query (position >= 1) to the token just before it: ``[..., query_pos, key_pos]``
    -> ``[...]``."""
    q = torch.arange(1, attention.shape[-1])
    return _mean_at(attention, q, q - 1)


def first_token_score(attention: torch.Tensor) -> torch.Tensor:
    """Mean weight from each query (position >= 1) to position 0: ``[..., query_pos, key_pos]`` -> ``[...]``."""
    q = torch.arange(1, attention.shape[-1])
    return _mean_at(attention, q, torch.zeros_like(q))


def induction_score(attention: torch.Tensor, repeat_len: int, offset: int = 0) -> torch.Tensor:
    """On ``prefix(offset) + R + R`` (R of ``repeat_len`` tokens): mean weight from each token of the
    second copy to the token after its earlier occurrence (key = query - repeat_len + 1)."""
    q = torch.arange(offset + repeat_len, offset + 2 * repeat_len)
    return _mean_at(attention, q, q - repeat_len + 1)


def uniform_baseline(queries: torch.Tensor) -> float:
    """The score a head would get by spreading weight evenly over every allowed key: mean 1/(q+1)."""
    return float((1.0 / (queries.double() + 1)).mean())


@dataclass(frozen=True)
class InductionCheck:
    """Is the top induction-scoring head an induction head? Above chance, and a previous-token head before it."""

    layer: int
    head: int
    score: float
    baseline: float  # the even-spread score
    above_chance: bool  # score >= CHANCE_FACTOR x baseline
    previous_before: list[tuple[int, int, float]]  # (layer, head, score): previous-token heads in earlier layers

    @property
    def is_induction(self) -> bool:
        """Above chance, not in layer 0, and fed by a previous-token head in an earlier layer."""
        return self.above_chance and self.layer > 0 and bool(self.previous_before)


@dataclass
class HeadScores:
    """Per-head scores ``[layers, heads]`` for each kind, and the repeated sequence (BOS + R + R) used."""

    previous: torch.Tensor
    first: torch.Tensor
    induction: torch.Tensor
    baseline: dict[str, float]  # what evenly spread attention would score, per kind
    repeated: Patterns  # BOS + R + R, recorded
    repeat_len: int

    def top(self, kind: str) -> tuple[int, int, float]:
        """``(layer, head, score)`` of the highest-scoring head of ``kind``."""
        if kind not in HEAD_KINDS:
            raise bad_value("kind", kind, f"one of {list(HEAD_KINDS)}", "pick one of those")
        s = getattr(self, kind)
        flat = int(s.argmax())
        return flat // s.shape[1], flat % s.shape[1], float(s.flatten()[flat])

    def above_chance(self, kind: str) -> bool:
        """Whether the top head of ``kind`` scores at least ``CHANCE_FACTOR`` x the even-spread score."""
        return self.top(kind)[2] >= CHANCE_FACTOR * self.baseline[kind]

    def induction_check(self) -> InductionCheck:
        """The top induction head, and whether it can be one: induction needs a previous-token head in an
        earlier layer (it looks for the token that *followed* an earlier copy), so never in layer 0."""
        layer, head, score = self.top("induction")
        earlier = [(i, h, float(self.previous[i, h])) for i in range(layer) for h in range(self.previous.shape[1])
                   if float(self.previous[i, h]) >= CHANCE_FACTOR * self.baseline["previous"]]
        return InductionCheck(layer, head, score, self.baseline["induction"], self.above_chance("induction"),
                              sorted(earlier, key=lambda e: -e[2]))

    def __repr__(self) -> str:
        tops = ", ".join(f"{k}: L{a}H{b}={c:.2f}" for k in HEAD_KINDS for a, b, c in [self.top(k)])
        return tr("HeadScores([{layers}, {heads}], top {tops})", layers=self.previous.shape[0],
                  heads=self.previous.shape[1], tops=tops)


def token_pool(model: Model, text: str, size: int = 200) -> list[int]:
    """The ``size`` most frequent token ids of ``text`` (never ``<|endoftext|>``): tokens the model has seen.

    A model trained on text like ``text`` has learned vectors for these; most of GPT-2's 50,257 ids may
    never occur in a small training set (the bundled model's untrained rows all share one vector).
    """
    check_number("size", size, low=2, high=model.info.vocab_size, integer=True, fix="pick a few hundred")
    counts = Counter(i for i in model.encode(text) if i != model.eos_id)
    if len(counts) < 2:
        raise bad_value("text", f"{len(counts)} distinct token(s)", "at least 2", "pass a longer text")
    return [i for i, _ in counts.most_common(size)]


def random_repeated_ids(model: Model, repeat_len: int, seed: int = 0, pool: list[int] | None = None) -> list[int]:
    """``<|endoftext|>`` + R + R, with R ``repeat_len`` distinct random token ids (fixed by ``seed``),
    drawn from ``pool`` (e.g. ``token_pool(m, text)``) or, without one, from the whole vocabulary."""
    high = (model.info.n_ctx - 1) // 2 if pool is None else min((model.info.n_ctx - 1) // 2, len(pool))
    check_number("repeat_len", repeat_len, low=2, high=high, integer=True,
                 fix="pick a length that fits twice in the context (and at most the pool's size)")
    g = torch.Generator().manual_seed(seed)
    if pool is None:
        r = torch.randperm(model.info.vocab_size - 1, generator=g)[:repeat_len]
        r = (r + (r >= model.eos_id).long()).tolist()  # every id except <|endoftext|>
    else:
        r = [int(pool[i]) for i in torch.randperm(len(pool), generator=g)[:repeat_len]]
    return [model.eos_id, *r, *r]


def head_scores(model: Model, patterns: Patterns, *, repeat_len: int = 20, seed: int = 0,
                pool: list[int] | None = None) -> HeadScores:
    """Score every head: previous and first token on ``patterns``; induction on a repeated random sequence
    drawn from ``pool`` (tokens the model was trained on: ``token_pool(m, text)``; None: any id)."""
    T = patterns.shape[2]
    if T < 2:
        raise bad_value("patterns", f"{T} token(s)", "at least 2 tokens", "use a longer prompt")
    repeated = record_patterns(model, random_repeated_ids(model, repeat_len, seed, pool))
    q_text = torch.arange(1, T)
    q_ind = torch.arange(1 + repeat_len, 1 + 2 * repeat_len)
    return HeadScores(
        previous=previous_token_score(patterns.attention), first=first_token_score(patterns.attention),
        induction=induction_score(repeated.attention, repeat_len, offset=1),
        baseline={"previous": uniform_baseline(q_text), "first": uniform_baseline(q_text),
                  "induction": uniform_baseline(q_ind)},
        repeated=repeated, repeat_len=repeat_len)


def attention_entropy(attention: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of each query row, averaged over queries >= 1: ``[..., query_pos, key_pos]`` -> ``[...]``.

    0 bits: all weight on one key. log2(q+1) bits: spread evenly over every allowed key.
    """
    p = attention[..., 1:, :].double()
    h = -(p * torch.log2(p.clamp_min(1e-30))).sum(-1)
    return h.mean(-1).float()


def uniform_entropy(tokens: int) -> float:
    """The entropy (bits) ``attention_entropy`` gives for evenly spread attention over ``tokens`` positions."""
    return float(torch.log2(torch.arange(2, tokens + 1, dtype=torch.float64)).mean())


# --------------------------------------------------------------------- ablation
HeadSpec = tuple[int, int | None]  # (layer, head); head None switches off the whole layer's attention


def _check_specs(model: Model, specs: Iterable[HeadSpec]) -> dict[int, list[int]]:
    """``{layer: [heads]}`` for ``[(layer, head or None), ...]``, every entry checked before anything runs."""
    L, H = model.info.n_layer, model.info.n_head
    off: dict[int, set[int]] = {}
    for spec in specs:
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise bad_value("heads", spec, "(layer, head) pairs, head None for the whole layer", "e.g. [(1, 3)]")
        layer, head = spec
        check_number("layer", layer, low=0, high=L - 1, integer=True, fix=f"pick a layer 0..{L - 1}")
        if head is not None:
            check_number("head", head, low=0, high=H - 1, integer=True, fix=f"pick a head 0..{H - 1} or None")
        off.setdefault(layer, set()).update(range(H) if head is None else {head})
    return {layer: sorted(hs) for layer, hs in off.items()}


@contextlib.contextmanager
def heads_off(model: Model, specs: Iterable[HeadSpec]) -> Iterator[None]:
    """Switch heads off (zero ablation) for the forwards run inside the block; hooks removed on exit, always.

    A head's mixed values ``[batch, tokens, head_dim]`` are set to 0 before the output projection, so it
    adds nothing to the residual stream (the projection's bias stays). ``[]`` switches nothing off.

    >>> with heads_off(m, [(1, 3), (2, None)]):   # head 3 of layer 1, every head of layer 2  # doctest: +SKIP
    ...     logits = il.forward_full(m, ids)
    """
    with zero_heads(model, _check_specs(model, specs)):
        yield


@dataclass
class Ablation:
    """What switching ``heads`` off changed: the loss on ``ids`` and the last position's next-token distribution."""

    heads: list[HeadSpec]
    start: int  # the loss scores the predictions of tokens start..T-1
    loss: float  # mean cross-entropy (nats per token), everything on
    loss_off: float  # the same with ``heads`` switched off
    probs: torch.Tensor  # [vocab]: next-token probabilities after the last token, everything on
    probs_off: torch.Tensor  # [vocab]: the same with ``heads`` off
    kl_bits: float  # KL(on || off) of those two distributions, in bits (0: unchanged)

    def __repr__(self) -> str:
        off = ", ".join(f"L{a}" + ("" if b is None else f"H{b}") for a, b in self.heads)
        numbers = {"loss": self.loss, "loss_off": self.loss_off, "kl": self.kl_bits}
        if not off:
            return tr("Ablation(nothing off: loss {loss:.3f} -> {loss_off:.3f} nats/token, next-token KL {kl:.3g} "
                      "bits)", **numbers)
        return tr("Ablation({off} off: loss {loss:.3f} -> {loss_off:.3f} nats/token, next-token KL {kl:.3g} bits)",
                  off=off, **numbers)


def ablate(model: Model, ids, specs: Iterable[HeadSpec], *, start: int = 1) -> Ablation:
    """Run ``ids`` with every head on, then with ``specs`` off; compare the loss (on tokens ``start`` ..
    T-1) and the next-token distribution after the last token."""
    specs = list(specs)
    _check_specs(model, specs)
    t = as_ids(model, ids)[:1]
    T = t.shape[1]
    check_number("start", start, low=1, high=T - 1, integer=True, fix=f"pick 1..{T - 1} (the first token "
                 "scored)")

    def run() -> tuple[float, torch.Tensor]:
        with torch.inference_mode():
            logits = forward_full(model, t)[0].float()  # [tokens, vocab]
        loss = F.cross_entropy(logits[start - 1:-1], t[0, start:].to(logits.device))
        return float(loss), logits[-1].softmax(-1).cpu()

    loss, probs = run()
    with heads_off(model, specs):
        loss_off, probs_off = run()
    kl = float((probs * (probs.clamp_min(1e-30).log2() - probs_off.clamp_min(1e-30).log2())).sum())
    return Ablation(specs, start, loss, loss_off, probs, probs_off, max(kl, 0.0))
