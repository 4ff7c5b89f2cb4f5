"""The head guide (``--guide``): an extra loss on where two (or three) chosen heads attend, read from their own
queries and keys through a forward hook, so the model's forward is unchanged. It is what made notebook 03's
previous-token and induction heads form on 2 CPU cores (``HeadGuide``'s docstring says why).
"""

from __future__ import annotations

import torch
from transformers import GPT2LMHeadModel

from . import gpt2_parts


class HeadGuide:
    """An auxiliary loss that teaches two chosen heads the patterns notebook 03 scores (``--guide WEIGHT``).

    Left to itself, a model this small on 2 CPU cores formed neither head: induction has a long plateau (a
    previous-token head is useless until an induction head reads it, and the other way round), and toys on
    rows of repeated random spans stayed on it for 5,000 steps. The guide removes the plateau by saying where
    to look, not what to do with it: ``previous`` = (layer, head) is pushed to attend from each token to the
    one before it, ``induction`` = (a later layer, head) from each token to every token that *followed*
    an earlier occurrence of the same id (the mass on those keys; no loss where the id has not occurred
    before). Both are computed from the head's own queries and keys (a hook on its layer's ``c_attn``), so the
    model's attention is unchanged and must still learn, through the language loss, to use what those heads
    read: what switching the induction head off costs is the test of that (``training/evaluate.py``).
    """

    def __init__(self, model: GPT2LMHeadModel, previous: tuple[int, int], induction: tuple[int, int],
                 weight: float, copy: tuple[int, int] | None = None, copy_n: int = 2) -> None:
        self.previous, self.induction, self.weight = previous, induction, weight
        self.copy, self.copy_n = copy, copy_n
        self.n_head = gpt2_parts.head_count(model)
        self.qkv: dict[int, torch.Tensor] = {}
        layers = {previous[0], induction[0]} | ({copy[0]} if copy is not None else set())
        self.hooks = [gpt2_parts.attention_projection(model, layer).register_forward_hook(self._keep(layer))
                      for layer in sorted(layers)]

    def _keep(self, layer: int):
        def hook(_module, _inputs, output):
            self.qkv[layer] = output
        return hook

    def remove(self) -> None:
        for h in self.hooks:
            h.remove()

    def log_attention(self, layer: int, head: int) -> torch.Tensor:
        """``[batch, query, key]``: the head's log attention weights in the last forward (causal)."""
        out = self.qkv[layer].float()
        d = out.shape[-1] // 3
        hd = d // self.n_head
        q, k = out[..., head * hd:(head + 1) * hd], out[..., d + head * hd:d + (head + 1) * hd]
        scores = q @ k.transpose(-1, -2) * hd ** -0.5
        T = scores.shape[-1]
        causal = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
        return scores.masked_fill(~causal, float("-inf")).log_softmax(-1)

    @staticmethod
    def induction_keys(ids: torch.Tensor) -> torch.Tensor:
        """``[batch, query, key]``: True where the key follows an earlier occurrence of the query's id."""
        same = ids[:, :, None] == ids[:, None, :]  # [b, i, j]: id i == id j
        keys = torch.zeros_like(same)
        keys[:, :, 1:] = same[:, :, :-1]  # key k = j + 1
        return keys & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).tril()

    @staticmethod
    def copy_keys(ids: torch.Tensor, n: int) -> torch.Tensor:
        """``[batch, query, key]``: True where the key follows an earlier occurrence of the query's last ``n`` ids
        (the query's id and the ``n - 1`` before it). In text most ids recur often ("the", a comma, a line
        break), so one id says little about where a passage is being repeated; ``n`` of them in a row say where."""
        same = ids[:, :, None] == ids[:, None, :]
        run = same.clone()
        for back in range(1, n):  # ids i - back and j - back equal too
            shifted = torch.zeros_like(same)
            shifted[:, back:, back:] = same[:, :-back, :-back]
            run &= shifted
        keys = torch.zeros_like(run)
        keys[:, :, 1:] = run[:, :, :-1]
        return keys & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).tril(-1)

    def _mass_loss(self, head: tuple[int, int], keys: torch.Tensor) -> torch.Tensor:
        lp = self.log_attention(*head)
        rows = keys.any(-1)
        if not rows.any():
            return lp.new_zeros(())
        return -torch.logsumexp(lp.masked_fill(~keys, float("-inf")), -1)[rows].mean()

    def losses(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(previous-token loss, induction loss[, copy loss]) in nats: -log of the weight on the wanted keys."""
        lp = self.log_attention(*self.previous)
        q = torch.arange(1, ids.shape[1], device=ids.device)
        prev = -lp[:, q, q - 1].mean()
        ind = self._mass_loss(self.induction, self.induction_keys(ids))
        if self.copy is None:
            return prev, ind
        return prev, ind, self._mass_loss(self.copy, self.copy_keys(ids, self.copy_n))
