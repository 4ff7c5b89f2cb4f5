"""Attention, opened up: the recorded patterns, and one layer computed by hand from its weights.

    pat  = Patterns.from_trace(il.generate(m, "To be, or not", 4, record=("embeddings", "attention", "residual")))
    hand = layer_by_hand(m, pat.residual[0], layer=0)   # Q, K, V, scores, mask, softmax, output: every step
    check_layer(hand, pat)                              # equals the recorded probabilities and block output

What the heads do (kinds of heads, entropy, the logit lens) is in ``inferlab.heads``.

Shapes: attention ``[layers, heads, query_pos, key_pos]``; residual ``[layers + 1, tokens, d_model]``
(the embeddings, then the output of each block); one head's pattern ``[query_pos, key_pos]``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from . import _hf
from .engine import DEFAULT_MAX_RECORD_BYTES, forward_full
from .errors import bad_value, check_number
from .hooks import capture
from .i18n import tr
from .models import Model, as_ids
from .recorder import check_record_bytes, record_bytes  # one estimate (A.attention_bytes in 03)
from .tokens import piece_text
from .trace import Trace


# --------------------------------------------------------------------- recorded patterns
def _need_attention(trace: Trace) -> None:
    if not isinstance(trace, Trace) or "attention" not in trace.recorded:
        raise ValueError("attention was not recorded in this trace. Fix: generate(m, prompt, record=("
                         "'embeddings', 'attention', 'residual')).")


@dataclass
class Patterns:
    """Attention probabilities (and the residual stream) of one forward pass over ``ids``."""

    ids: list[int]
    pieces: list[str]
    attention: torch.Tensor  # [layers, heads, query_pos, key_pos]
    residual: torch.Tensor | None = None  # [layers + 1, tokens, d_model]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(layers, heads, query_pos, key_pos)`` sizes: ``(layers, heads, T, T)`` for T tokens."""
        return tuple(self.attention.shape)

    def __repr__(self) -> str:
        L, H, T, _ = self.shape
        return tr("Patterns({T} tokens, {L} layers x {H} heads, attention [{L}, {H}, {T}, {T}])", T=T, L=L, H=H)

    @classmethod
    def from_trace(cls, trace: Trace) -> Patterns:
        """The prefill step of a ``generate(..., record=("attention", ...))`` run."""
        _need_attention(trace)
        step = trace.steps[0]
        return cls(list(trace.prompt_ids), list(trace.prompt_pieces), torch.stack(step.attention),
                   step.residual)


def record_patterns(model: Model, ids, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Patterns:
    """One forward pass over token ids (no sampling), recording attention and the residual stream.

    Refuses, before running, when the recorded tensors would need more than ``max_record_bytes``.
    """
    t = as_ids(model, ids)[:1]
    if t.shape[1] > model.info.n_ctx:
        raise bad_value("ids", tr("{n} tokens", n=t.shape[1]),
                        tr("at most the context length, n_ctx={n_ctx} tokens", n_ctx=model.info.n_ctx),
                        tr("shorten the text"))
    info = model.info
    check_record_bytes(record_bytes({"attention", "residual"}, info.n_layer, info.n_head, info.d_model, t.shape[1]),
                       max_record_bytes, prompt_tokens=t.shape[1], new_tokens=1, use_cache=True)
    with capture(model, {"embeddings", "attention", "residual"}) as store:
        forward_full(model, t)
        attention = torch.stack(store.attention())  # [layers, heads, query_pos, key_pos]
        residual = store.residual()  # [layers + 1, tokens, d_model]
    ids_list = [int(i) for i in t[0]]
    return Patterns(ids_list, [piece_text(model.tokenizer, i) for i in ids_list], attention.float().cpu(),
                    residual.float().cpu())


# --------------------------------------------------------------------- one layer by hand
@dataclass
class LayerByHand:
    """Every intermediate of one block, computed step by step from its own weights."""

    layer: int
    scale: float  # 1 / sqrt(head_dim)
    x_in: torch.Tensor  # [tokens, d_model]                  the residual stream entering the block
    x_norm: torch.Tensor  # [tokens, d_model]                LayerNorm(x_in), the norm before attention
    qkv: torch.Tensor  # [tokens, 3*d_model]                 x_norm @ W_qkv + b_qkv (one fused matmul)
    q: torch.Tensor  # [heads, tokens, head_dim]             queries, split into heads
    k: torch.Tensor  # [heads, tokens, head_dim]             keys
    v: torch.Tensor  # [heads, tokens, head_dim]             values
    scores: torch.Tensor  # [heads, query_pos, key_pos]      q @ k^T * scale
    mask: torch.Tensor  # [query_pos, key_pos] bool          True where key_pos <= query_pos
    masked: torch.Tensor  # [heads, query_pos, key_pos]      scores with -inf above the diagonal
    probs: torch.Tensor  # [heads, query_pos, key_pos]       softmax over key_pos: each row sums to 1
    mixed: torch.Tensor  # [heads, tokens, head_dim]         probs @ v: a weighted sum of values per head
    merged: torch.Tensor  # [tokens, d_model]                heads side by side again
    attn_out: torch.Tensor  # [tokens, d_model]              merged @ W_proj + b_proj
    resid_mid: torch.Tensor  # [tokens, d_model]             x_in + attn_out
    out: torch.Tensor  # [tokens, d_model]                   resid_mid + MLP(LayerNorm(resid_mid)): the output

    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """``(name, shape)`` of every tensor, in the order they are computed."""
        return [(f.name, tuple(getattr(self, f.name).shape)) for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)]

    def __repr__(self) -> str:
        rows = "\n".join(f"  {name:<10} {list(shape)}" for name, shape in self.shapes())
        return tr("LayerByHand(layer {layer}, scale {scale:.4f})", layer=self.layer, scale=self.scale) + "\n" + rows


# Copied from transformers' GPT2Block.forward, step by step for teaching: the same arithmetic as
# fast.decoder.FastDecoder._block and serve.paged's _block; tests/test_attention.py checks it against the model.
def layer_by_hand(model: Model, x_in: torch.Tensor, layer: int) -> LayerByHand:
    """Run block ``layer`` step by step on ``x_in`` ``[tokens, d_model]`` (the residual entering it), in fp32.

    >>> hand = layer_by_hand(m, pat.residual[0], layer=0)    # doctest: +SKIP
    >>> hand.probs.shape                                      # doctest: +SKIP
    torch.Size([5, 13, 13])
    """
    n_layer, n_head = model.info.n_layer, model.info.n_head
    check_number("layer", layer, low=0, high=n_layer - 1, integer=True, fix=f"pick a layer 0..{n_layer - 1}")
    if x_in.dim() != 2 or x_in.shape[1] != model.info.d_model:
        raise bad_value("x_in", tuple(x_in.shape), f"[tokens, d_model] with d_model={model.info.d_model}",
                        "pass one layer's residual, e.g. pat.residual[layer]")
    w = _hf.block_tensors(model)[layer]  # plain tensors; projections stored [in, out], so x @ W + b

    def norm(x: torch.Tensor, n: _hf.NormTensors) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), n.weight.float(), n.bias.float(), n.eps)

    def project(x: torch.Tensor, p: _hf.ProjTensors) -> torch.Tensor:  # x @ W + b, in one call as GPT-2 does
        return torch.addmm(p.bias.float(), x, p.weight.float())

    with torch.inference_mode():
        x = x_in.to(w.qkv.weight.device, torch.float32)
        T, d = x.shape
        hd = d // n_head
        x_norm = norm(x, w.ln1)
        qkv = project(x_norm, w.qkv)
        q, k, v = (t.view(T, n_head, hd).transpose(0, 1) for t in qkv.split(d, dim=1))
        scale = w.attention_scale
        scores = (q @ k.transpose(-1, -2)) * scale
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        masked = scores.masked_fill(~mask, float("-inf"))
        probs = masked.softmax(dim=-1)
        mixed = probs @ v
        merged = mixed.transpose(0, 1).reshape(T, d)
        attn_out = project(merged, w.attn_out)
        resid_mid = x + attn_out
        out = resid_mid + project(w.activation(project(norm(resid_mid, w.ln2), w.fc)), w.mlp_out)  # the MLP
    steps = (x, x_norm, qkv, q, k, v, scores, mask, masked, probs, mixed, merged, attn_out, resid_mid, out)
    return LayerByHand(layer, scale, *(t.detach().cpu() for t in steps))  # in field order


@dataclass(frozen=True)
class LayerCheck:
    """Largest differences between the hand computation and what the model recorded."""

    layer: int
    probs_max_diff: float  # against the recorded attention probabilities
    output_max_diff: float  # against the block's own output (residual after the block)

    def ok(self, tol: float = 1e-5) -> bool:
        """Both differences within ``tol``."""
        return self.probs_max_diff <= tol and self.output_max_diff <= tol

    def __repr__(self) -> str:
        return tr("LayerCheck(layer {layer}: probabilities differ by at most {probs:.1e}, block output by at most "
                  "{output:.1e})", layer=self.layer, probs=self.probs_max_diff, output=self.output_max_diff)


def check_layer(hand: LayerByHand, patterns: Patterns) -> LayerCheck:
    """Compare ``hand`` with the recorded probabilities and the recorded output of the same block."""
    if patterns.residual is None:
        raise ValueError("the residual stream was not recorded. Fix: record=('embeddings', 'attention', "
                         "'residual') in generate(), or use record_patterns().")
    recorded = patterns.attention[hand.layer]
    return LayerCheck(hand.layer, float((hand.probs - recorded).abs().max()),
                      float((hand.out - patterns.residual[hand.layer + 1]).abs().max()))


# --------------------------------------------------------------------- decode rows and cost
def decode_rows_max_diff(model: Model, trace: Trace) -> float:
    """Largest gap between each decode step's recorded row and the same row of one uncached forward pass."""
    _need_attention(trace)
    if len(trace.steps) < 2:
        raise ValueError("the trace has no decode step. Fix: generate at least 2 tokens.")
    full = record_patterns(model, trace.all_ids[:-1]).attention  # [layers, heads, query_pos, key_pos]
    diffs = []
    for step in trace.steps[1:]:
        row = torch.stack(step.attention)[:, :, -1]  # [layers, heads, key_pos]: keys 0..position
        diffs.append(float((row - full[:, :, step.position, : step.position + 1]).abs().max()))
    return max(diffs)
