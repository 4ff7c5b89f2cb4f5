"""How the fast path holds GPT-2's weights: one ``Proj`` per matrix, one ``BlockWeights`` per block.

Each layout (``WEIGHTS``) keeps the model's own ``[in, out]`` tensors and adds at most one copy per matrix:

- ``"tied"``: the model's own tensors only (bitwise the engine's logits).
- ``"transposed"``: plus a ``[d_model, vocab]`` copy of the LM head (the decoder holds it, not a ``Proj``).
- ``"packed"``: every matrix pre-packed for oneDNN (``torch.ops.mkldnn._reorder_linear_weight``, what
  ``torch.compile`` does with frozen weights), each product on all cores, the GELU inside its product. Packed
  for at least two rows (``PACKED_ROWS``): one row is padded to two, because oneDNN's one-row kernel streams
  the weights slower than its two-row one (on a 2-core AMD EPYC, GPT-2's batch-1 step, alternating runs after a
  warm-up: 17.1-20.1 ms padded against 19.2-22.5 ms unpadded, logits equal to 2e-6).
- ``"rows"``: each block matrix as a plain ``[out, in]`` copy, for the compiled reductions ``(W * x).sum(-1)``.

A prompt's products (many rows) always run as matrix-matrix products on the model's own layout into buffers
reused by every block (``PromptScratch``): the layouts are for one row at a time (see ``inferlab.fast``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import _hf
from ..models import Model

WEIGHTS = ("packed", "rows", "transposed", "tied")
PACKED_ROWS = 2  # "packed" products take at least this many rows (see the module doc)


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's tanh GELU, written exactly as Hugging Face's ``NewGELUActivation`` (same rounding)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gelu_new_(y: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """``gelu_new(y)`` written into ``y`` (``scratch``: a tensor of ``y``'s shape to use): the same operations on
    the same values as ``gelu_new``, so bitwise the same, without its eight fresh tensors."""
    t = torch.pow(y, 3.0, out=scratch)
    t.mul_(0.044715).add_(y).mul_(math.sqrt(2.0 / math.pi)).tanh_().add_(1.0)
    return y.mul_(0.5).mul_(t)


class PromptScratch:
    """Where a prompt's products write: one ``[rows, width]`` buffer per width (and use), made on first use and
    reused by every block, since the blocks' products have the same shapes (see the module doc).

    ``exact``: the GELU as Hugging Face computes it (``gelu_new_``, bitwise), else PyTorch's one-pass tanh GELU
    (``F.gelu(approximate="tanh")``: the same function, rounded differently, one kernel instead of eight).
    """

    def __init__(self, rows: int, like: torch.Tensor, exact: bool = True) -> None:
        self.rows, self.like, self.exact, self._buffers = rows, like, exact, {}

    def buffer(self, width: int, use: str = "product") -> torch.Tensor:
        if (width, use) not in self._buffers:
            self._buffers[width, use] = self.like.new_empty(self.rows, width)
        return self._buffers[width, use]

    def gelu_(self, y: torch.Tensor) -> torch.Tensor:
        """GPT-2's GELU on ``y`` in place."""
        if self.exact:
            return gelu_new_(y, self.buffer(y.shape[1], "gelu"))
        return torch.ops.aten.gelu_(y, approximate="tanh")


def onednn_packing(dtype: torch.dtype = torch.float32) -> bool:
    """Whether this PyTorch can pre-pack ``dtype`` weights for oneDNN on the CPU (x86 CPUs, usually)."""
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(16, 16, dtype=dtype), 1)
        x = torch.ones(1, 16, dtype=dtype)
        return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "").shape == (1, 16)
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def linear_onednn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, gelu: bool = False) -> torch.Tensor:
    """``x @ w.T + b`` by oneDNN (``w`` ``[out, in]``, plain or pre-packed); GELU applied inside the product."""
    return torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu" if gelu else "none", [], "tanh" if gelu else "")


def linear_packed(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, gelu: bool = False) -> torch.Tensor:
    """``linear_onednn`` on weights packed for ``PACKED_ROWS`` rows: fewer rows are padded (copies of the last)
    and the extra rows of the result dropped, so one row takes the faster kernel (see the module doc)."""
    n = x.shape[0]
    if n >= PACKED_ROWS:
        return linear_onednn(x, w, b, gelu)
    return linear_onednn(torch.cat([x, x[-1:].expand(PACKED_ROWS - n, -1)]), w, b, gelu)[:n]


@dataclass(frozen=True)
class Proj:
    """One projection ``y = x @ W + b`` (``x`` ``[rows, in]``): the model's ``W`` ``[in, out]``, maybe pre-packed."""

    w: torch.Tensor  # [in, out]: Hugging Face's Conv1D layout, used as it is
    b: torch.Tensor  # [out]
    packed: torch.Tensor | None = None  # oneDNN's own layout of W.T (a copy)
    rows: torch.Tensor | None = None  # W.T as a contiguous [out, in] copy (one row per output)
    onednn: bool = False  # eager products on ``rows`` through oneDNN (it takes the plain layout too)

    def __call__(self, x: torch.Tensor, gelu: bool = False, gemv: bool = False,
                 prompt: PromptScratch | None = None) -> torch.Tensor:
        if prompt is not None:  # many rows: a matrix-matrix product on the model's own layout (module doc)
            width = self.w.shape[1]
            y = torch.addmm(self.b, x, self.w, out=prompt.buffer(width))
            return prompt.gelu_(y) if gelu else y
        if self.rows is not None:
            if gemv:  # one input row, as a reduction the compiler streams (see the module doc)
                y = ((self.rows * x).sum(-1) + self.b).view(1, -1)
            elif self.onednn and not torch.compiler.is_compiling():  # eager steps: as fast as "packed"
                return linear_onednn(x, self.rows, self.b, gelu)
            else:
                y = F.linear(x, self.rows, self.b)
            return gelu_new(y) if gelu else y
        if self.packed is not None:
            return linear_packed(x, self.packed, self.b, gelu)
        y = torch.addmm(self.b, x, self.w)
        return gelu_new(y) if gelu else y


@dataclass(frozen=True)
class BlockWeights:
    """One block's tensors (views of the model's own, plus packed copies when asked)."""

    ln1_w: torch.Tensor  # [d_model]
    ln1_b: torch.Tensor
    qkv: Proj  # [d_model, 3 * d_model]
    proj: Proj  # [d_model, d_model]
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor
    fc: Proj  # [d_model, 4 * d_model]
    out: Proj  # [4 * d_model, d_model]


def block_weights(model: Model, *, pack: bool = False, rows: bool = False, onednn: bool = False,
                  batch: int = 1) -> list[BlockWeights]:
    """Every block's tensors, with the copies ``pack`` (oneDNN's layout) or ``rows`` (``[out, in]``) asks for."""
    if not _hf.follows_plain_gpt2(model):
        raise ValueError("FastDecoder follows GPT-2's published config (gelu_new, plain 1/sqrt(head_dim) scaling). "
                         "Fix: use inferlab.generate for this model.")

    def proj(p: _hf.ProjTensors) -> Proj:
        w, b = p.weight, p.bias
        packed = torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), max(batch, PACKED_ROWS)) if pack else None
        return Proj(w, b, packed,
                    w.t().contiguous() if rows else None, onednn)

    return [BlockWeights(t.ln1.weight, t.ln1.bias, proj(t.qkv), proj(t.attn_out), t.ln2.weight, t.ln2.bias,
                         proj(t.fc), proj(t.mlp_out))
            for t in _hf.block_tensors(model)]
