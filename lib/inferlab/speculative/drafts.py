"""Where the guesses come from: prompt lookup (no model at all), or a draft model that shares the tokenizer.

    lookup(ids, k=4, ngram=3)            # the k tokens that followed the latest earlier match of the last 3
    draft = first_layers(m, 2)           # self-speculation: the target's first 2 blocks, its norm and its head

A draft proposes; it never decides. Every guess is checked by the target (``inferlab.speculative.loop``), so
a bad draft costs time, never a wrong token.
"""

from __future__ import annotations

import dataclasses

import torch

from .. import _hf
from ..errors import bad_value, check_number
from ..i18n import tr
from ..models import Model
from ..sampling import SamplingConfig, _filter
from .runners import Runner

DRAFT_NAMES = ("lookup", "none")  # "none": no guesses, plain decoding on the same path (the baseline)
MAX_K = 64  # guesses per round; past a few dozen, the verify forward is no longer one memory-bound step


def lookup(sequence: list[int], k: int, ngram: int = 3) -> list[int]:
    """Prompt lookup: the (up to) ``k`` tokens that followed the latest earlier occurrence of the last ``ngram``
    tokens of ``sequence``; shorter n-grams when the longest is not found; ``[]`` when none is.

    >>> lookup([5, 6, 7, 8, 9, 5, 6], k=3, ngram=2)      # "5 6" occurred before, followed by 7 8 9
    [7, 8, 9]
    """
    n_seq = len(sequence)
    for n in range(min(ngram, n_seq - 1), 0, -1):
        tail = sequence[n_seq - n:]
        for start in range(n_seq - n - 1, -1, -1):  # latest first; the tail itself is not an earlier occurrence
            if sequence[start:start + n] == tail:
                return list(sequence[start + n:start + n + k])
    return []


def first_layers(model: Model, n_layer: int) -> Model:
    """Self-speculation's draft: ``model``'s first ``n_layer`` blocks, then its final norm and head (no new
    weights: the same tensors). Cheap when the blocks are most of a step's bytes; on a model whose vocabulary
    head is most of them (the bundled one), it saves little (notebook 10 measures it)."""
    if not isinstance(model, Model):
        raise TypeError(tr("model must be a Model from il.load(), got {kind}. Fix: m = il.load(), then pass m.",
                           kind=type(model).__name__))
    check_number("n_layer", n_layer, low=1, high=model.info.n_layer - 1, integer=True,
                 fix=f"keep fewer blocks than the model's {model.info.n_layer}")
    hf = _hf.first_blocks(model, n_layer)
    params = list(hf.parameters())  # each shared tensor once (the tied head is the embedding)
    info = dataclasses.replace(
        model.info, name=tr("{name} (first {n} of {total} blocks)", name=model.info.name, n=n_layer,
                            total=model.info.n_layer),
        n_layer=n_layer, n_params=sum(p.numel() for p in params),
        weight_bytes=sum(p.numel() * p.element_size() for p in params))
    return Model(hf, tokenizer=model.tokenizer, info=info)


def check_draft(target: Model, draft) -> None:
    """Refuse, before any forward pass, a draft the target cannot verify: not ``"lookup"`` or a ``Model``,
    another vocabulary, device or dtype."""
    if isinstance(draft, str):
        if draft not in DRAFT_NAMES:
            raise bad_value("draft", draft, tr("'lookup', 'none' or a Model that shares the target's tokenizer"),
                            tr("use draft='lookup', or draft=il.load(...) / speculative.first_layers(m, 2)"))
        return
    if not isinstance(draft, Model):
        raise TypeError(tr("draft must be 'lookup' or a Model from il.load(), got {kind}. Fix: draft='lookup', or "
                           "draft=speculative.first_layers(m, 2).", kind=type(draft).__name__))
    if draft.info.vocab_size != target.info.vocab_size or draft.tokenizer.get_vocab() != target.tokenizer.get_vocab():
        raise bad_value("draft", draft.info.name, tr("a model with the target's vocabulary ({n:,} tokens, the same "
                                                     "ids)", n=target.info.vocab_size),
                        tr("use a draft trained with the target's tokenizer (e.g. first_layers(target, 2))"))
    if draft.device != target.device:
        raise bad_value("draft", tr("{name} on {device}", name=draft.info.name, device=draft.device),
                        tr("a model on the target's device ({device})", device=target.device),
                        tr("load both on the same device"))
    if draft.info.dtype != target.info.dtype:
        raise bad_value("draft", tr("{name} in {dtype}", name=draft.info.name, dtype=draft.info.dtype),
                        tr("a model in the target's dtype ({dtype})", dtype=target.info.dtype),
                        tr("load both with the same dtype"))


class ModelDraft:
    """A draft model with its own cache: proposes ``k`` tokens one forward at a time, and forgets rejected ones.

    Its cache follows the sequence: before proposing it reads whatever of the sequence it has not seen (the
    target's correction, or its own last accepted guess), so it is never re-run on the whole prompt.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def start(self, ids: list[int]) -> None:
        self.runner.prefill(ids)

    def propose(self, sequence: list[int], k: int, sampling: SamplingConfig,
                generator: torch.Generator | None) -> tuple[list[int], list[torch.Tensor] | None]:
        """``k`` guesses after ``sequence``, and each one's distribution q (None when greedy)."""
        logits = self.runner.extend(sequence[self.runner.tokens:])[-1]
        tokens, qs = [], ([] if not sampling.greedy else None)
        for i in range(k):
            if qs is None:
                token = int(torch.argmax(logits))
            else:
                q = _filter(logits, sampling).softmax(-1)
                token = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            tokens.append(token)
            if i + 1 < k:
                logits = self.runner.extend([token])[-1]
        return tokens, qs

    def keep(self, length: int) -> None:
        """The sequence now agrees with the draft's cache up to ``length`` tokens: forget the rest."""
        self.runner.crop(min(length, self.runner.tokens))


class LookupDraft:
    """Prompt lookup as a draft: guesses copied from the sequence itself, each a certainty (a one-hot q).
    ``ngram=0``: no guesses at all (``draft="none"``), so every round is one plain decode step."""

    def __init__(self, ngram: int) -> None:
        self.ngram = ngram

    def start(self, ids: list[int]) -> None:
        pass

    def propose(self, sequence: list[int], k: int, sampling: SamplingConfig,
                generator: torch.Generator | None) -> tuple[list[int], None]:
        return (lookup(sequence, k, self.ngram) if self.ngram else []), None

    def keep(self, length: int) -> None:
        pass
