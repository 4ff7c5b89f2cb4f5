"""How the fast path holds GPT-2's weights: one ``Proj`` per matrix, one ``BlockWeights`` per block.

Each layout (``WEIGHTS``) keeps the model's own ``[in, out]`` tensors and adds at most one copy per matrix:

- ``"tied"``: the model's own tensors only (bitwise the engine's logits).
- ``"transposed"``: plus a ``[d_model, vocab]`` copy of the LM head (the decoder holds it, not a ``Proj``).
- ``"packed"``: every matrix pre-packed for oneDNN (``torch.ops.mkldnn._reorder_linear_weight``, what
  ``torch.compile`` does with frozen weights), each product on all cores, the GELU inside its product. Each
  product runs at the row count that streamed fastest on this machine (a ``RowPlan``, measured by
  ``fast.rows.packed_rows``, on whole steps where a decoder runs them): fewer rows are padded to that count
  (copies of the last row) and the extra results dropped, so a batch-1 step can run oneDNN's four-row kernels when
  they read the weights faster than its one-row kernels. Which count wins differs by product and by CPU (on a 2-core
  AMD EPYC, GPT-2's shape, one morning: the QKV product 0.36 ms for one row, 0.28 ms padded to four), so it is
  measured, never assumed; where padding does not pay, the product runs its rows as they are. The weights themselves are
  packed for at least two rows (``pack``): packed for one, they ran a verify's or a server's several rows slower.
- ``"rows"``: each block matrix as a plain ``[out, in]`` copy, for the compiled reductions ``(W * x).sum(-1)``.

A prompt's products (many rows) always run as matrix-matrix products on the model's own layout into buffers
reused by every block (``PromptScratch``): the layouts are for one row at a time (see ``inferlab.fast``).

``inferlab.serve`` takes its products from here too (``block_weights``), and names its choice in the same terms
(``SERVE_WEIGHTS``): ``"packed"`` is the layout above, ``"model"`` the model's own tensors (``"tied"``'s products),
``"auto"`` packed wherever oneDNN can pack (``resolve_weights``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from .. import _hf
from ..errors import bad_value
from ..i18n import tr
from ..models import Model

WEIGHTS = ("packed", "rows", "transposed", "tied")
PRODUCTS = ("qkv", "attn_out", "fc", "mlp_out", "head")  # a step's kinds of product, in the order it runs them
# the row counts a packed product is measured at (``fast.rows.packed_rows``). Eight rows lost every whole step and
# nearly every product it was timed at on the course's 2-core EPYC (GPT-2's shape, 2026-12-07: batch-1 steps padded
# to 8 took 26.9-31.9 ms against 21.8-25.3 padded to 4), and measuring it made each plan take half as long again
ROW_COUNTS = (1, 2, 4)


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


# serve's weights (``inferlab.serve``): "packed" as above, "model" the model's own [in, out] tensors (the products
# "tied" runs), "auto" packed where ``onednn_packing`` says this CPU can
SERVE_WEIGHTS = ("auto", "packed", "model")


def check_serve_weights(weights: str) -> None:
    """Refuse a ``weights`` that is not one of ``SERVE_WEIGHTS``, naming the choices."""
    if weights not in SERVE_WEIGHTS:
        raise bad_value("weights", weights, f"one of {list(SERVE_WEIGHTS)}",
                        "use 'auto' (packed where this CPU allows), 'packed' or 'model' (the model's own tensors)")


def resolve_weights(weights: str, like: torch.Tensor) -> str:
    """``"packed"`` or ``"model"`` for serve's ``weights`` (``"auto"``: packed where oneDNN packs ``like``'s dtype
    on a CPU)."""
    check_serve_weights(weights)
    can_pack = like.device.type == "cpu" and onednn_packing(like.dtype)
    if weights == "packed" and not can_pack:
        raise bad_value("weights", weights, f"'model' or 'auto' on {like.device.type} with {like.dtype} weights",
                        "oneDNN cannot pack these weights here: use weights='auto' or 'model'")
    return "packed" if weights == "packed" or (weights == "auto" and can_pack) else "model"


def linear_onednn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, gelu: bool = False) -> torch.Tensor:
    """``x @ w.T + b`` by oneDNN (``w`` ``[out, in]``, plain or pre-packed); GELU applied inside the product."""
    return torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu" if gelu else "none", [], "tanh" if gelu else "")


def linear_packed(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, gelu: bool = False,
                  rows: int = 1) -> torch.Tensor:
    """``linear_onednn`` on weights packed for ``rows`` rows: fewer rows are padded to ``rows`` (copies of the
    last) and the extra rows of the result dropped, so a few rows take the kernel that streams fastest here
    (see the module doc). Each row's result is the unpadded product's, to float32 rounding."""
    n = x.shape[0]
    if n >= rows:
        return linear_onednn(x, w, b, gelu)
    if n == 1:  # one row repeated: a view oneDNN reads as it is (a copy of the row cost more than the product's rest)
        return linear_onednn(x.expand(rows, -1), w, b, gelu)[:1]
    return linear_onednn(torch.cat([x, x[-1:].expand(rows - n, -1)]), w, b, gelu)[:n]


PACK_AT_LEAST = 2  # weights are packed for at least this many rows, whatever the rows a product is padded to


def pack(w_out_in: torch.Tensor, rows: int) -> torch.Tensor:
    """oneDNN's own layout of ``w_out_in`` (``[out, in]``) for products of ``rows`` rows (a copy), packed for at least
    ``PACK_AT_LEAST``: the same weights also run a verify's few rows, a server's decode batch and its prompt chunks,
    and a matrix packed for one row ran those far slower (2-core AMD EPYC, 12 fc matrices of GPT-2's shape, interleaved:
    8 rows 7.1 ms against 4.9-5.4 packed for 2-64 rows, 64 rows 21.1 against 18.1-18.3), while one row ran about as
    fast on a matrix packed for two."""
    return torch.ops.mkldnn._reorder_linear_weight(w_out_in.contiguous(), max(rows, PACK_AT_LEAST))


@dataclass(frozen=True)
class RowPlan:
    """The rows each packed product runs with (``PRODUCTS`` -> count): fewer rows are padded to it.

    ``RowPlan.unpadded(batch)``: every product at the batch's own row count (no padding)."""

    rows: dict[str, int]

    @classmethod
    def unpadded(cls, batch: int) -> RowPlan:
        return cls(dict.fromkeys(PRODUCTS, batch))

    @classmethod
    def uniform(cls, rows: int) -> RowPlan:
        """Every product at ``rows`` rows (a whole step on one kernel: what a batch of ``rows`` runs)."""
        return cls(dict.fromkeys(PRODUCTS, rows))

    def __getitem__(self, product: str) -> int:
        return self.rows[product]

    def padded(self, batch: int) -> dict[str, int]:
        """The products this plan pads for ``batch`` rows, and to how many."""
        return {p: r for p, r in self.rows.items() if r > batch}

    def summary(self, batch: int = 1) -> str:
        """One line: ``"qkv 1 -> 4, head 1 -> 4 rows"``, or that nothing is padded."""
        padded = self.padded(batch)
        if not padded:
            return tr("no product padded")
        return tr("padded: {items} rows", items=", ".join(f"{p} {batch} -> {r}" for p, r in padded.items()))


@dataclass(frozen=True)
class Proj:
    """One projection ``y = x @ W + b`` (``x`` ``[rows, in]``): the model's ``W`` ``[in, out]``, maybe pre-packed."""

    w: torch.Tensor  # [in, out]: Hugging Face's Conv1D layout, used as it is
    b: torch.Tensor  # [out]
    packed: torch.Tensor | None = None  # oneDNN's own layout of W.T (a copy), for ``pad_rows`` rows
    rows: torch.Tensor | None = None  # W.T as a contiguous [out, in] copy (one row per output)
    onednn: bool = False  # eager products on ``rows`` through oneDNN (it takes the plain layout too)
    pad_rows: int = 1  # ``packed`` products of fewer rows are padded to this many (``RowPlan``)

    def __call__(self, x: torch.Tensor, gelu: bool = False, gemv: bool = False,
                 prompt: PromptScratch | None = None, rows: int | None = None) -> torch.Tensor:
        """``rows``: pad a packed product to this many rows instead of ``pad_rows`` (serve: its rows vary)."""
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
            return linear_packed(x, self.packed, self.b, gelu, self.pad_rows if rows is None else rows)
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


def check_plain_gpt2(model: Model) -> None:
    """Refuse a model whose block is not GPT-2's as published: the fast path and serve re-implement that block."""
    if not _hf.follows_plain_gpt2(model):
        raise bad_value("model", model.info.name, "a GPT-2 as published (tanh GELU, 1/sqrt(head_dim) attention scale)",
                        "use inferlab.generate for this model: the fast path and serve's paged forward re-implement "
                        "GPT-2's published block, and this one changes it")


def replan(blocks: list[BlockWeights], plan: RowPlan) -> list[BlockWeights]:
    """The same blocks, the same packed tensors, with each product padded to ``plan``'s rows: oneDNN runs any row
    count on a packed matrix (on the course's 2-core EPYC the layouts packed for 2 to 64 rows gave bitwise the same
    products), so trying another plan on a whole step costs no new copy of the weights."""
    def proj(p: Proj, name: str) -> Proj:
        return replace(p, pad_rows=plan[name]) if p.packed is not None else p

    return [replace(b, qkv=proj(b.qkv, "qkv"), proj=proj(b.proj, "attn_out"), fc=proj(b.fc, "fc"),
                    out=proj(b.out, "mlp_out")) for b in blocks]


def block_weights(model: Model, *, packed: RowPlan | None = None, rows: bool = False,
                  onednn: bool = False) -> list[BlockWeights]:
    """Every block's tensors, with the copies ``packed`` (oneDNN's layout, each product for its plan's row count)
    or ``rows`` (``[out, in]``) asks for."""
    check_plain_gpt2(model)

    def proj(p: _hf.ProjTensors, name: str) -> Proj:
        w, b = p.weight, p.bias
        if packed is not None:
            return Proj(w, b, pack(w.t(), packed[name]), None, onednn, packed[name])
        return Proj(w, b, None, w.t().contiguous() if rows else None, onednn)

    return [BlockWeights(t.ln1.weight, t.ln1.bias, proj(t.qkv, "qkv"), proj(t.attn_out, "attn_out"), t.ln2.weight,
                         t.ln2.bias, proj(t.fc, "fc"), proj(t.mlp_out, "mlp_out"))
            for t in _hf.block_tensors(model)]
