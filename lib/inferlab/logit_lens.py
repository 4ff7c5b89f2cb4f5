"""The logit lens: what the model would predict if it stopped after each layer (notebook 03).

The final LayerNorm and the LM head, applied to the residual stream after every block
``[layers + 1, tokens, d_model]`` (nostalgebraist, 2020): the last stage is the model's own output, and the
earlier stages show the prediction forming layer by layer.

    lens = logit_lens(m, pat.residual, pat.ids)    # pat: attention.Patterns recorded with "residual"
    lens.table(position)                           # each layer's top guesses for the next token, as Markdown
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import _hf
from .errors import bad_value, check_number
from .i18n import tr
from .models import Model
from .tokens import piece_text


@dataclass
class LogitLens:
    """What the model would predict if it stopped after each layer (final norm + LM head on the residual)."""

    layer_names: list[str]  # "embeddings", "block 0", ...
    pieces: list[str]  # the input tokens, [tokens]
    top_ids: torch.Tensor  # [layers + 1, tokens, k]
    top_probs: torch.Tensor  # [layers + 1, tokens, k]
    top_pieces: list[list[list[str]]]  # [layers + 1][tokens][k]
    next_prob: torch.Tensor  # [layers + 1, tokens - 1]: probability of the token that really comes next
    logits_last: torch.Tensor  # [tokens, vocab]: the last entry's logits (the model's own output)

    def table(self, position: int) -> str:
        """A Markdown table: for the token at ``position``, each layer's top-k guesses for the next token."""
        T = self.top_ids.shape[1]
        check_number("position", position, low=0, high=T - 1, integer=True, fix=f"pick 0..{T - 1}")
        k = self.top_ids.shape[2]
        head = tr("| after | {columns} |", columns=" | ".join(f"#{i + 1}" for i in range(k))) + "\n"
        head += "|---" * (k + 1) + "|\n"
        rows = [f"| {name} | " + " | ".join("`" + repr(p).replace("|", "\\|") + f"` {float(q):.3g}" for p, q in
                                            zip(self.top_pieces[s][position], self.top_probs[s, position])) + " |"
                for s, name in enumerate(self.stage_labels())]
        return head + "\n".join(rows)

    def stage_labels(self) -> list[str]:
        """``layer_names`` in the reader's language ("embeddings", "block 0", ... in English)."""
        return [tr("embeddings") if s == 0 else tr("block {i}", i=s - 1) for s in range(len(self.layer_names))]

    def __repr__(self) -> str:
        n, T, k = self.top_ids.shape
        labels = self.stage_labels()
        return tr("LogitLens({n} stages ({first} .. {last}) x {T} positions, top {k})", n=n, first=labels[0],
                  last=labels[-1], T=T, k=k)


def logit_lens(model: Model, residual: torch.Tensor, ids: list[int] | None = None, *, k: int = 5) -> LogitLens:
    """Apply the final norm and the LM head to the residual after every layer ``[layers + 1, tokens, d_model]``."""
    check_number("k", k, low=1, high=50, integer=True, fix="ask for a few top predictions")
    if residual.dim() != 3 or residual.shape[-1] != model.info.d_model:
        raise bad_value("residual", tuple(residual.shape), "[layers + 1, tokens, d_model]",
                        "pass Patterns.residual (record 'embeddings' and 'residual')")
    norm, head = _hf.final_norm_tensors(model), _hf.head_weight(model)  # head [vocab, d_model]
    with torch.inference_mode():
        h = F.layer_norm(residual.to(head.device, head.dtype), (head.shape[1],), norm.weight, norm.bias, norm.eps)
        logits = F.linear(h, head).float()  # [layers + 1, tokens, vocab]
        probs = logits.softmax(-1)
        top_p, top_i = probs.topk(k, dim=-1)
    next_prob = torch.zeros(residual.shape[0], max(residual.shape[1] - 1, 0))
    if ids is not None and len(ids) > 1:
        nxt = torch.tensor(ids[1:], device=probs.device)
        next_prob = probs[:, :-1].gather(-1, nxt.view(1, -1, 1).expand(probs.shape[0], -1, 1))[..., 0].cpu()
    names = ["embeddings"] + [f"block {i}" for i in range(residual.shape[0] - 1)]
    pieces = [] if ids is None else [piece_text(model.tokenizer, i) for i in ids]
    top_pieces = [[[piece_text(model.tokenizer, int(i)) for i in pos] for pos in layer] for layer in top_i.cpu()]
    return LogitLens(names, pieces, top_i.cpu(), top_p.cpu(), top_pieces, next_prob, logits[-1].cpu())
