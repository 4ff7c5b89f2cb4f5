"""A loaded model as plain tensors and named points: its shape, its weights, projections swapped, where hooks go.

GPT-2's module names (``transformer.h``, ``c_attn``, ``ln_f`` ...) are read here so that nothing else names them.
Every function takes the course's ``Model``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import GPT2Config
from transformers.pytorch_utils import Conv1D

from .run import module

if TYPE_CHECKING:  # annotations only: models imports this package, not the other way round
    from ..models import Model


# ----------------------------------------------------------------------------- shape facts
@dataclass(frozen=True)
class ShapeFacts:
    """The numbers ``ModelInfo`` and the fast path need, read from the config in one place."""

    n_layer: int
    n_head: int
    d_model: int
    head_dim: int  # d_model // n_head
    n_ctx: int  # positions in the position table (the context length)
    vocab_size: int
    layer_norm_eps: float
    activation: str  # the MLP's activation by Hugging Face's name (GPT-2: "gelu_new", the tanh GELU)

    @classmethod
    def from_config(cls, cfg: GPT2Config) -> ShapeFacts:
        """Read from a GPT-2 config (``shape_facts`` for a ``Model``, ``load.loaded_shape`` while loading)."""
        return cls(n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.n_embd, head_dim=cfg.n_embd // cfg.n_head,
                   n_ctx=cfg.n_positions, vocab_size=cfg.vocab_size, layer_norm_eps=cfg.layer_norm_epsilon,
                   activation=cfg.activation_function)


def shape_facts(model: Model) -> ShapeFacts:
    """The model's shape: layers, heads, widths, context, vocabulary, norm epsilon and activation."""
    return ShapeFacts.from_config(module(model).config)


def follows_plain_gpt2(model: Model) -> bool:
    """Whether the config is GPT-2 as published: tanh GELU, one ``1/sqrt(head_dim)`` attention scale, no
    re-ordered attention. A hand-written GPT-2 block (``fast.py``) is exact only for these."""
    cfg = module(model).config
    return (cfg.activation_function == "gelu_new" and cfg.scale_attn_weights
            and not cfg.scale_attn_by_inverse_layer_idx and not cfg.reorder_and_upcast_attn)


# ----------------------------------------------------------------------------- weights as plain tensors
@dataclass(frozen=True)
class NormTensors:
    """A LayerNorm as plain tensors: ``F.layer_norm(x, (d_model,), weight, bias, eps)``."""

    weight: torch.Tensor  # [d_model]
    bias: torch.Tensor  # [d_model]
    eps: float


@dataclass(frozen=True)
class ProjTensors:
    """One projection as plain tensors: ``y = x @ weight + bias`` for ``x`` ``[tokens, in]``."""

    weight: torch.Tensor  # [in, out]: GPT-2's Conv1D layout (nn.Linear stores the transpose)
    bias: torch.Tensor  # [out]


@dataclass(frozen=True)
class BlockTensors:
    """One transformer block's weights: detached views of the model's own tensors (don't write to them)."""

    ln1: NormTensors  # before attention
    qkv: ProjTensors  # [d_model, 3 * d_model]: queries, keys and values side by side
    attn_out: ProjTensors  # [d_model, d_model]: the merged heads back into the residual stream
    ln2: NormTensors  # before the MLP
    fc: ProjTensors  # [d_model, d_mlp]: the MLP's first product (d_mlp = 4 * d_model in GPT-2)
    mlp_out: ProjTensors  # [d_mlp, d_model]
    attention_scale: float  # the factor on q @ k^T: 1/sqrt(head_dim) in GPT-2
    activation: Callable[[torch.Tensor], torch.Tensor]  # between fc and mlp_out (GPT-2: the tanh GELU)


def _norm(ln: torch.nn.LayerNorm) -> NormTensors:
    return NormTensors(ln.weight.detach(), ln.bias.detach(), float(ln.eps))


def _proj(layer: torch.nn.Module) -> ProjTensors:
    if isinstance(layer, Conv1D):
        return ProjTensors(layer.weight.detach(), layer.bias.detach())
    if isinstance(layer, torch.nn.Linear):  # already swapped (e.g. quantize.as_linear): nn.Linear stores W.T
        return ProjTensors(layer.weight.detach().t(), layer.bias.detach())
    raise ValueError(f"a projection is a {type(layer).__name__}, not plain float weights (a quantized copy?). "
                     "Fix: use the original model from inferlab.load().")


def block_tensors(model: Model) -> list[BlockTensors]:
    """Every block's weights, in order, as plain tensors (``[in, out]`` projections: ``x @ W + b``)."""
    return [BlockTensors(_norm(b.ln_1), _proj(b.attn.c_attn), _proj(b.attn.c_proj), _norm(b.ln_2),
                         _proj(b.mlp.c_fc), _proj(b.mlp.c_proj), float(b.attn.scaling), b.mlp.act)
            for b in module(model).transformer.h]


def final_norm_tensors(model: Model) -> NormTensors:
    """The LayerNorm after the last block (``ln_f``), applied before the LM head."""
    return _norm(module(model).transformer.ln_f)


def embedding_tensors(model: Model) -> tuple[torch.Tensor, torch.Tensor]:
    """The token table ``[vocab, d_model]`` and the position table ``[n_ctx, d_model]`` (detached views)."""
    hf = module(model)
    return hf.transformer.wte.weight.detach(), hf.transformer.wpe.weight.detach()


def head_weight(model: Model) -> torch.Tensor:
    """The LM head ``[vocab, d_model]``: logits = ``h @ W.T``. GPT-2 ties it to the token table (same tensor)."""
    head = module(model).lm_head
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        raise ValueError(f"the LM head is a {type(head).__name__}, not a plain weight (a quantized copy?). "
                         "Fix: use the original model from inferlab.load().")
    return head.weight.detach()


def tied_head(model: Model) -> bool:
    """Whether the LM head reads the token table itself (GPT-2's tied weights; not after swapping the head)."""
    hf = module(model)
    head = hf.lm_head
    return isinstance(head, torch.nn.Linear) and head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()


# ----------------------------------------------------------------------------- swapping projections
def replace_projections(model: Model, make: Callable[[torch.Tensor, torch.Tensor | None], torch.nn.Module],
                        *, blocks: bool = True, head: bool = False) -> None:
    """Replace projections in place by ``make(weight, bias)``, ``weight`` ``[out, in]`` (nn.Linear's layout).

    ``blocks``: every block's four (qkv, attention out, MLP in, MLP out); ``head``: the LM head (``bias``
    None). The new module maps ``[..., in]`` to ``[..., out]``. For quantized copies: use on a copy.
    """
    hf = module(model)
    if blocks:
        for b in hf.transformer.h:
            for parent, name in ((b.attn, "c_attn"), (b.attn, "c_proj"), (b.mlp, "c_fc"), (b.mlp, "c_proj")):
                p = _proj(getattr(parent, name))
                setattr(parent, name, make(p.weight.t(), p.bias))
    if head:
        hf.lm_head = make(head_weight(model), None)


# ----------------------------------------------------------------------------- capture points (hooks.py)
@dataclass(frozen=True)
class CapturePoints:
    """The modules ``hooks.capture`` registers on, found by GPT-2's names here so nothing else names them."""

    token_embedding: torch.nn.Module  # output [batch, tokens, d_model]
    position_embedding: torch.nn.Module  # output [batch, tokens, d_model] (or [1, tokens, d_model])
    blocks: tuple[torch.nn.Module, ...]  # input/output hidden states [batch, tokens, d_model]
    attentions: tuple[torch.nn.Module, ...]  # output (mixed, probs [batch, heads, query_pos, key_pos])


def capture_points(model: Model) -> CapturePoints:
    """Where the named capture points live in a GPT-2 model."""
    hf = module(model)
    blocks = tuple(hf.transformer.h)
    return CapturePoints(hf.transformer.wte, hf.transformer.wpe, blocks, tuple(b.attn for b in blocks))


def block_input(args: tuple, kwargs: dict) -> torch.Tensor:
    """The hidden states ``[batch, tokens, d_model]`` a block's forward pre-hook receives."""
    return args[0] if args else kwargs["hidden_states"]


def attention_probs(output) -> torch.Tensor | None:
    """The probabilities ``[batch, heads, query_pos, key_pos]`` in an attention module's output (eager only)."""
    return output[1] if isinstance(output, tuple) and len(output) > 1 else None


# ----------------------------------------------------------------------------- head ablation
def head_mask_point(model: Model, layer: int) -> torch.nn.Module:
    """The module whose input is block ``layer``'s heads side by side, ``[batch, tokens, heads * head_dim]``
    (head ``h`` in columns ``h * head_dim`` to ``(h + 1) * head_dim``): the attention's output projection.

    A forward pre-hook on it can switch heads off before they are mixed back into the residual stream.
    """
    return module(model).transformer.h[layer].attn.c_proj
