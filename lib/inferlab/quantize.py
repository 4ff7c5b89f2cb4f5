"""Quantization: the same model with fewer bytes per weight, and what it costs in quality.

A decode step reads every weight once, so fewer bytes per weight should mean a faster step (the
roofline's memory floor moves down) if the kernels can use them. Kinds, all made from a copy:

- ``fp32``: the original, 4 bytes per weight.
- ``bf16`` / ``fp16``: ``model.to(dtype)``, 2 bytes (activations and the KV cache too).
- ``int8``: PyTorch's dynamic quantization (``torch.ao.quantization.quantize_dynamic``): each
  projection becomes an ``nn.Linear`` (``W`` ``[out, in]``) whose weight is stored as int8 with one
  scale per output channel; activations are quantized on the fly. The LM head gets an int8 copy; the
  tied token table stays fp32 for the embedding lookup.
- ``int4``: weight-only, groups of 32 weights share a scale and an offset (round to nearest), run by
  PyTorch's own CPU kernel ``aten._weight_int4pack_mm_for_cpu`` (activations in bf16). CPU only here.

``parts`` picks what int8/int4 quantize: the blocks' projections and the LM head (``"all"``), or one
of the two. ``perplexity`` measures quality on held-out text: exp(mean next-token loss).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from . import _hf
from .engine import forward_full
from .errors import bad_value
from .i18n import tr
from .models import Model
from .paths import heldout_text

WEIGHT_FORMATS = ("fp32", "bf16", "fp16", "int8", "int4")
PARTS = ("all", "blocks", "head")  # what int8/int4 quantize: blocks = every block's four projections
INT4_GROUP = 32
_FLOATS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Int4Linear(torch.nn.Module):
    """``y = x @ W.T + b`` with ``W`` ``[out, in]`` stored as 4-bit integers in groups of ``INT4_GROUP``.

    Each group of 32 input weights keeps a scale and an offset: ``w = (q - 8) * scale + zero``,
    ``q`` in 0..15. Output rows are padded to a multiple of 16 for the packed layout.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        n, k = weight.shape
        if k % INT4_GROUP:
            raise bad_value("in_features", k, f"a multiple of {INT4_GROUP}", "keep this layer in a float dtype")
        self.out_features, pad = n, (-n) % 16
        w = F.pad(weight.detach().float(), (0, 0, 0, pad)).reshape(n + pad, k // INT4_GROUP, INT4_GROUP)
        low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
        scale = (high - low).clamp(min=1e-8) / 15
        q = torch.clamp(torch.round((w - low) / scale), 0, 15).to(torch.int32).reshape(n + pad, k)
        self.register_buffer("packed", torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1))
        zero = low + 8 * scale
        sz = torch.stack([scale.reshape(n + pad, -1), zero.reshape(n + pad, -1)], -1)  # [out, groups, 2]
        self.register_buffer("scales_zeros", sz.transpose(0, 1).contiguous().to(torch.bfloat16))
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.reshape(-1, shape[-1]).to(torch.bfloat16), self.packed,
                                                        INT4_GROUP, self.scales_zeros)
        y = y[:, : self.out_features].float()
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features)


def int4_supported(device: torch.device | str = "cpu") -> bool:
    """Whether this PyTorch has the int4 CPU kernel and it runs (a 16 x 32 probe)."""
    if torch.device(device).type != "cpu" or not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
        return False
    try:
        Int4Linear(torch.randn(16, INT4_GROUP), None)(torch.randn(1, INT4_GROUP))
    except (RuntimeError, NotImplementedError):
        return False
    return True


def available_kinds(device: torch.device | str = "cpu") -> tuple[str, ...]:
    """The kinds that run on ``device`` with this stack (int8/int4 are CPU kernels here)."""
    kinds = ["fp32", "bf16", "fp16"]
    if torch.device(device).type == "cpu":
        kinds.append("int8")
        if int4_supported(device):
            kinds.append("int4")
    return tuple(kinds)


def as_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> torch.nn.Linear:
    """``y = x @ weight.T + bias`` as an ``nn.Linear`` (a copy of ``weight`` ``[out, in]``)."""
    n_out, n_in = weight.shape
    lin = torch.nn.Linear(n_in, n_out, bias=bias is not None, dtype=weight.dtype, device=weight.device)
    with torch.no_grad():
        lin.weight.copy_(weight)
        if bias is not None:
            lin.bias.copy_(bias)
    return lin


def as_int8(weight: torch.Tensor, bias: torch.Tensor | None) -> torch.nn.Module:
    """``as_linear`` quantized by ``torch.ao``'s dynamic int8 (one scale per output channel)."""
    with warnings.catch_warnings():  # torch.ao says: eager-mode quantization moves to torchao
        warnings.simplefilter("ignore")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        wrapped = torch.nn.Sequential(as_linear(weight, bias))
        return quantize_dynamic(wrapped, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)[0]


def stored_bytes(module: torch.nn.Module) -> int:
    """Bytes of all weights held: parameters, buffers and packed quantized weights (shared ones once)."""
    seen: dict[int, int] = {}
    for t in [*module.parameters(), *module.buffers()]:
        seen[t.data_ptr()] = t.numel() * t.element_size()
    for m in module.modules():
        packed = getattr(m, "_packed_params", None)
        if packed is not None and hasattr(packed, "_weight_bias"):  # torch.ao's quantized Linear
            w, b = packed._weight_bias()
            scales = ((w.q_per_channel_scales(), w.q_per_channel_zero_points())
                      if w.qscheme() == torch.per_channel_affine else ())
            seen[id(m)] = (w.numel() * w.element_size() + sum(s.numel() * s.element_size() for s in scales)
                           + (0 if b is None else b.numel() * b.element_size()))
    return sum(seen.values())


def step_bytes(model: Model) -> int:
    """Bytes one decode step reads: everything but the embedding tables, of which it reads one row each."""
    wte, wpe = _hf.embedding_tensors(model)
    tables = sum(t.numel() * t.element_size() for t in (wte, wpe))
    rows = sum(t.shape[1] * t.element_size() for t in (wte, wpe))
    # A tied head reads the whole wte table: count it back in.
    stored = stored_bytes(_hf.module(model))
    return stored - tables + rows + (wte.numel() * wte.element_size() if _hf.tied_head(model) else 0)


@dataclass(frozen=True)
class Quantized:
    """One quantized copy: the model, how it was made, and its bytes."""

    kind: str
    model: Model
    method: str
    weight_bytes: int  # all stored weights (the fp32 embedding table included for int8/int4)
    step_bytes: int  # what one decode step reads

    def __repr__(self) -> str:
        return tr("Quantized({kind}: {stored:.1f} MB stored, {read:.1f} MB read per decode step; {method})",
                  kind=self.kind, stored=self.weight_bytes / 1e6, read=self.step_bytes / 1e6, method=self.method)


def _method(kind: str, parts: str) -> str:
    """How the ``kind`` copy was made (``parts``: which projections), in the reader's language."""
    if kind == "fp32":
        return tr("the original weights")
    if kind in _FLOATS:
        return f"model.to({_FLOATS[kind]})"  # code: the same in every language
    if kind == "int8":
        return {"all": tr("torch.ao.quantization.quantize_dynamic, int8 per output channel, every Linear and the "
                          "LM head"),
                "blocks": tr("torch.ao.quantization.quantize_dynamic, int8 per output channel, the blocks' "
                             "projections only"),
                "head": tr("torch.ao.quantization.quantize_dynamic, int8 per output channel, the LM head only")}[parts]
    return {"all": tr("weight-only int4, groups of {group}, aten._weight_int4pack_mm_for_cpu (bf16 activations)",
                      group=INT4_GROUP),
            "blocks": tr("weight-only int4, groups of {group}, aten._weight_int4pack_mm_for_cpu (bf16 activations), "
                         "the blocks' projections only", group=INT4_GROUP),
            "head": tr("weight-only int4, groups of {group}, aten._weight_int4pack_mm_for_cpu (bf16 activations), "
                       "the LM head only", group=INT4_GROUP)}[parts]


def quantize(model: Model, kind: str, *, parts: str = "all") -> Quantized:
    """A quantized copy of ``model`` (the original is untouched) that ``inferlab.generate`` can run.

    Args:
        model: from ``inferlab.load()`` in float32.
        kind: one of ``available_kinds(model.device)``.
        parts: for int8/int4, ``"all"``, ``"blocks"`` (every block's projections) or ``"head"`` (the
            LM head only). 16-bit kinds convert the whole model.

    >>> q = quantize(m, "int8"); q.step_bytes / quantize(m, "fp32").step_bytes    # doctest: +SKIP
    >>> quantize(m, "int8", parts="head")                                        # doctest: +SKIP
    """
    kinds = available_kinds(model.device)
    if kind not in kinds:
        raise bad_value("kind", kind, f"one of {kinds} on {model.device}",
                        "pick another kind (int8/int4 use CPU kernels in this PyTorch)")
    if parts not in PARTS or (kind in _FLOATS and parts != "all"):
        raise bad_value("parts", parts, f"one of {PARTS} for int8/int4, 'all' for {tuple(_FLOATS)}",
                        "leave parts='all' unless you quantize to int8 or int4")
    module = _hf.copy_module(model)
    if kind in _FLOATS:
        module = module.to(_FLOATS[kind])
    copy = Model(module, tokenizer=model.tokenizer, info=model.info)  # its own info below, once its bytes are known
    if kind == "int8":
        _hf.replace_projections(copy, as_int8, blocks=parts != "head", head=parts != "blocks")
    elif kind == "int4":
        _hf.replace_projections(copy, Int4Linear, blocks=parts != "head", head=parts != "blocks")
    method = _method(kind, parts)
    module.eval()
    dtype = _FLOATS.get(kind, torch.float32)
    copy.info = replace(model.info, dtype=dtype, weight_bytes=stored_bytes(module),
                        notes=(*model.info.notes, f"quantized: {kind} ({method})"))
    return Quantized(kind, copy, method, copy.info.weight_bytes, step_bytes(copy))


@dataclass(frozen=True)
class Perplexity:
    """Quality on held-out text: mean next-token loss (nats) and its exponential."""

    nats_per_token: float
    tokens: int  # predicted tokens

    @property
    def perplexity(self) -> float:
        """exp(mean loss): how many equally likely choices the model is, on average, unsure between."""
        return math.exp(self.nats_per_token)

    def __repr__(self) -> str:
        return tr("Perplexity({perplexity:.2f}, {nats:.4f} nats/token over {tokens} tokens)",
                  perplexity=self.perplexity, nats=self.nats_per_token, tokens=self.tokens)


def perplexity(model: Model, text: str | None = None, *, window: int | None = None) -> Perplexity:
    """Perplexity of ``model`` on ``text`` (default: ``heldout_text()``), in non-overlapping windows.

    Args:
        window: tokens per forward (default the context length); each window predicts its own tokens.
    """
    ids = model.encode(heldout_text() if text is None else text)
    window = window or model.info.n_ctx
    if len(ids) < 2 or not 2 <= window <= model.info.n_ctx:
        raise bad_value("text/window", (len(ids), window), f"at least 2 tokens and 2 <= window <= {model.info.n_ctx}",
                        "pass a longer text or a smaller window")
    total, count = 0.0, 0
    for start in range(0, len(ids) - 1, window):
        chunk = ids[start : start + window + 1]
        if len(chunk) < 2:
            break
        logits = forward_full(model, [chunk[:-1]])[0].float()  # [T, vocab]
        target = torch.tensor(chunk[1:], device=logits.device)
        total += float(F.cross_entropy(logits, target, reduction="sum"))
        count += len(chunk) - 1
    return Perplexity(total / count, count)
