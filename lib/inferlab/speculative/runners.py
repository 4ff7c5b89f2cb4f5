"""One model and its cache, as speculative decoding drives them: read a prompt, read a few tokens more (logits
at each), forget the last few. Two paths: the engine's (Hugging Face's forward, ``KVCache.crop``) and the fast
path's (``FastDecoder.extend`` / ``crop``, whose products run a few rows in about the time of one).
"""

from __future__ import annotations

from typing import Protocol

import torch

from .. import _hf
from ..engine import prefill
from ..errors import bad_value
from ..fast import FastDecoder
from ..i18n import tr
from ..models import Model

PATHS = ("fast", "engine")


class Runner(Protocol):
    tokens: int

    def prefill(self, ids: list[int]) -> torch.Tensor: ...      # last logits [vocab]

    def extend(self, ids: list[int]) -> torch.Tensor: ...       # logits at every new token [tokens, vocab]

    def crop(self, tokens: int) -> None: ...


class EngineRunner:
    """The engine's forward (``_hf.forward``) on a ``KVCache`` that ``crop`` rolls back."""

    def __init__(self, model: Model) -> None:
        self.model, self.cache = model, None

    @property
    def tokens(self) -> int:
        return 0 if self.cache is None else self.cache.tokens

    def prefill(self, ids: list[int]) -> torch.Tensor:
        logits, self.cache = prefill(self.model, [ids])
        return logits[0]

    @torch.no_grad()
    def extend(self, ids: list[int]) -> torch.Tensor:
        logits, _ = _hf.forward(self.model, torch.tensor([ids], device=self.model.device), self.cache)
        return logits[0]

    def crop(self, tokens: int) -> None:
        self.cache.crop(tokens)


class FastRunner:
    """``FastDecoder`` with a cache of ``slots`` positions; ``weights`` as ``FastDecoder`` takes it."""

    def __init__(self, model: Model, slots: int, weights: str = "auto") -> None:
        self.decoder = FastDecoder(model, slots, weights=weights)

    @property
    def tokens(self) -> int:
        return self.decoder.tokens

    def prefill(self, ids: list[int]) -> torch.Tensor:
        return self.decoder.prefill([ids])[0]

    def extend(self, ids: list[int]) -> torch.Tensor:
        return self.decoder.extend([ids])[0]

    def crop(self, tokens: int) -> None:
        self.decoder.crop(tokens)


def fast_supported(model: Model) -> bool:
    """Whether the fast path runs this model (GPT-2's published config)."""
    return _hf.follows_plain_gpt2(model)


def runner(model: Model, path: str, slots: int) -> Runner:
    """The runner for ``path`` (``"auto"``: the fast path where it runs the model, else the engine)."""
    if path == "auto":
        path = "fast" if fast_supported(model) else "engine"
    if path == "fast":
        return FastRunner(model, slots)
    if path == "engine":
        return EngineRunner(model)
    raise bad_value("path", path, tr("'auto' or one of {paths}", paths=PATHS), tr("leave path='auto'"))
