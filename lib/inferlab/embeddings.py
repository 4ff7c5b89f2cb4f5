"""Embeddings: ids pick rows of ``wte``, positions pick rows of ``wpe``, and their sum enters layer 0.

    vectors = wte[ids]                  # [tokens, d_model]  one row per token
    pos     = wpe[0..T-1]               # [tokens, d_model]  one row per position
    x0      = vectors + pos             # [tokens, d_model]  the first residual-stream vectors

The token table as a space of words (neighbours, projections) is ``vocab_space.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from . import _hf
from .errors import bad_value
from .i18n import tr
from .models import Model


def token_table(model: Model) -> torch.Tensor:
    """``wte``: the token table, ``[vocab, d_model]`` (a detached view of the weights: don't write to it)."""
    return _hf.embedding_tensors(model)[0]


@torch.no_grad()
def token_vectors(model: Model, ids: Sequence[int]) -> torch.Tensor:
    """``wte[ids]``: one row of the token table per id, ``[tokens, d_model]`` (float32, CPU)."""
    ids = torch.as_tensor(list(ids), dtype=torch.long)
    wte = token_table(model)
    if ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= wte.shape[0]:
        raise bad_value("ids", ids.tolist()[:8], f"1 or more ids in 0..{wte.shape[0] - 1}", "tokenize a non-empty text")
    return wte[ids.to(wte.device)].detach().float().cpu()


@torch.no_grad()
def position_table(model: Model, n: int | None = None) -> torch.Tensor:
    """``wpe``: the first ``n`` rows of the position table (all ``n_ctx`` by default), ``[n, d_model]``."""
    wpe = _hf.embedding_tensors(model)[1]
    n = wpe.shape[0] if n is None else n
    if not 1 <= n <= wpe.shape[0]:
        raise bad_value("n", n, f"1 <= n <= {wpe.shape[0]} (the context length)", "pass a smaller n")
    return wpe[:n].detach().float().cpu()


@dataclass(frozen=True)
class FirstResidual:
    """The input to layer 0 for a prompt: token part, position part and their sum, each ``[tokens, d_model]``."""

    ids: list[int]
    tok: torch.Tensor
    pos: torch.Tensor
    sum: torch.Tensor

    def __repr__(self) -> str:
        return tr("FirstResidual({n} tokens: tok + pos = sum, each {shape} [tokens, d_model])", n=len(self.ids),
                  shape=list(self.sum.shape))


def first_residual(model: Model, ids: Sequence[int]) -> FirstResidual:
    """``wte[ids] + wpe[0..T-1]``: what the first transformer block receives (GPT-2 adds nothing else)."""
    tok = token_vectors(model, ids)
    pos = position_table(model, len(tok))
    return FirstResidual(list(ids), tok, pos, tok + pos)


def cosine_matrix(x: torch.Tensor) -> torch.Tensor:
    """Cosine similarity between every pair of rows: ``[n, d]`` -> ``[n, n]`` (1 on the diagonal)."""
    unit = torch.nn.functional.normalize(x.float(), dim=-1)
    return unit @ unit.T


def position_structure(wpe: torch.Tensor, far: int = 100) -> tuple[float, float]:
    """Mean cosine of neighbouring positions (p, p+1) and of positions more than ``far`` apart."""
    sim = cosine_matrix(wpe)
    n = sim.shape[0]
    gap = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    far = min(far, n // 2)
    return float(sim[gap == 1].mean()), float(sim[gap > far].mean())
