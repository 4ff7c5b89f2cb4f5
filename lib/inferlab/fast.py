"""The fast path: batch-1 decoding with nothing in the step but the forward and the sample.

The engine (``engine.py``) calls Hugging Face's ``GPT2LMHeadModel.forward`` every step: masks, cache
objects and output classes are rebuilt each time. ``FastDecoder`` runs the same arithmetic on the
model's weights with a pre-allocated KV cache (per layer ``[batch, heads, max_tokens, head_dim]``),
a ten-line block and SDPA attention. More tricks, each a switch:

- ``weights``: how the matrices are held for the CPU's matrix-vector products. ``"tied"`` uses the
  model's own tensors (bitwise the engine's logits). ``"transposed"`` adds a ``[d_model, vocab]`` copy
  of the LM head: on CPUs, ``h @ W`` in that layout streams much faster than ``F.linear(h, wte)``
  (about 2x with MKL on x86), and the head is GPT-2's largest matrix. ``"packed"`` gives every
  matrix to oneDNN pre-packed (``torch.ops.mkldnn._reorder_linear_weight``, what ``torch.compile``
  does with frozen weights), so each product streams its weights on all cores (and the MLP's GELU
  runs inside its product). ``"rows"`` keeps each block matrix as a plain ``[out, in]`` copy, which
  oneDNN also takes (as fast, and the LM head needs no copy) and which the compiled step below reads
  as reductions. Copies cost memory (``extra_bytes``).
- ``compile=True``: ``torch.compile`` of a decode step with fixed shapes (the cache is read whole,
  with a mask over the empty slots), so the compiler can fuse the norms and activations. With
  ``"rows"`` weights (the default when compiling on a CPU at batch 1) each matrix-vector product is
  written as ``(W * x).sum(-1)`` and the attention as sums too: Inductor turns the whole step into
  streaming loops, each product fused with the bias, norm or GELU around it, with no Python between
  operators. On the course's 2-core test machine the whole step reads GPT-2's weights at about 90%
  of the copy bandwidth, where oneDNN's matrix-vector kernels alone reach about 70% (``python -m
  inferlab.bench --profile``). The prompt still runs eagerly, its products through oneDNN.
- ``cuda_graph`` (CUDA only, on by default there): the fixed-shape step is recorded once as a CUDA
  graph and replayed, so hundreds of kernel launches cost one.

Greedy and seeded output is token-for-token that of ``inferlab.generate`` (``tests/test_fast.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import _hf
from .engine import _check_prompt, _sampling_from, as_ids
from .errors import bad_value
from .models import Model
from .sampling import SamplingConfig, sample
from .timing import clock
from .trace import Trace

WEIGHTS = ("packed", "rows", "transposed", "tied")


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's tanh GELU, written exactly as Hugging Face's ``NewGELUActivation`` (same rounding)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


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


@dataclass(frozen=True)
class Proj:
    """One projection ``y = x @ W + b`` (``x`` ``[rows, in]``): the model's ``W`` ``[in, out]``, maybe pre-packed."""

    w: torch.Tensor  # [in, out]: Hugging Face's Conv1D layout, used as it is
    b: torch.Tensor  # [out]
    packed: torch.Tensor | None = None  # oneDNN's own layout of W.T (a copy)
    rows: torch.Tensor | None = None  # W.T as a contiguous [out, in] copy (one row per output)
    onednn: bool = False  # eager products on ``rows`` through oneDNN (it takes the plain layout too)

    def __call__(self, x: torch.Tensor, gelu: bool = False, gemv: bool = False) -> torch.Tensor:
        if self.rows is not None:
            if gemv:  # one input row, as a reduction the compiler streams (see the module doc)
                y = ((self.rows * x).sum(-1) + self.b).view(1, -1)
            elif self.onednn and not torch.compiler.is_compiling():  # the prompt: as fast as "packed"
                return linear_onednn(x, self.rows, self.b, gelu)
            else:
                y = F.linear(x, self.rows, self.b)
            return gelu_new(y) if gelu else y
        if self.packed is not None:
            return linear_onednn(x, self.packed, self.b, gelu)
        y = torch.addmm(self.b, x, self.w)
        return gelu_new(y) if gelu else y


@dataclass(frozen=True)
class BlockWeights:
    """One block's tensors (views of the model's own, plus packed copies when asked)."""

    ln1_w: torch.Tensor
    ln1_b: torch.Tensor
    qkv: Proj  # [d_model, 3 * d_model]
    proj: Proj  # [d_model, d_model]
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor
    fc: Proj  # [d_model, 4 * d_model]
    out: Proj  # [4 * d_model, d_model]


def block_weights(hf, *, pack: bool = False, rows: bool = False, onednn: bool = False,
                  batch: int = 1) -> list[BlockWeights]:
    """The plain tensors of every block. Module names are GPT-2's (``ln_1``, ``attn.c_attn``, ...)."""
    cfg = hf.config
    if cfg.activation_function != "gelu_new" or cfg.reorder_and_upcast_attn or cfg.scale_attn_by_inverse_layer_idx:
        raise ValueError("FastDecoder follows GPT-2's published config (gelu_new, plain 1/sqrt(head_dim) scaling). "
                         "Fix: use inferlab.generate for this model.")

    def proj(conv) -> Proj:
        w, b = conv.weight.detach(), conv.bias.detach()
        return Proj(w, b, torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), batch) if pack else None,
                    w.t().contiguous() if rows else None, onednn)

    out = []
    for blk in _hf.blocks(hf):
        _, _, c_proj = _hf.qkv_weights(blk)
        out.append(BlockWeights(blk.ln_1.weight, blk.ln_1.bias, proj(blk.attn.c_attn), proj(c_proj),
                                blk.ln_2.weight, blk.ln_2.bias, proj(blk.mlp.c_fc), proj(blk.mlp.c_proj)))
    return out


class FastDecoder:
    """Pre-allocated cache + a hand-written GPT-2 step over the model's own weights.

    Args:
        model: from ``inferlab.load()`` (GPT-2 family).
        max_tokens: cache slots (prompt + new tokens must fit); default the context length.
        batch: sequences decoded together (all the same length).
        weights: ``"auto"`` (compiled on a CPU at batch 1: ``"rows"``; else ``"packed"`` on CPUs that
            can, with more than one thread, ``"transposed"`` on other CPUs, ``"tied"`` elsewhere),
            ``"packed"``, ``"rows"``, ``"transposed"`` or ``"tied"`` (see the module docstring).
        compile: ``torch.compile`` the fixed-shape step (tens of seconds the first time).
        cuda_graph: record the fixed-shape step as a CUDA graph (CUDA only; ``None``: on for CUDA).

    >>> fast = FastDecoder(m, max_tokens=128)                    # doctest: +SKIP
    >>> fast.generate("ROMEO.", max_new_tokens=20).latency       # doctest: +SKIP
    """

    def __init__(self, model: Model, max_tokens: int | None = None, *, batch: int = 1, weights: str = "auto",
                 compile: bool = False, cuda_graph: bool | None = None) -> None:
        cfg = model.hf.config
        self.model, self.batch = model, batch
        self.max_tokens = max_tokens or model.info.n_ctx
        if not 1 <= self.max_tokens <= model.info.n_ctx:
            raise bad_value("max_tokens", max_tokens, f"1 <= max_tokens <= n_ctx ({model.info.n_ctx})",
                            "size the cache for prompt + new tokens")
        device = model.device
        onednn = device.type == "cpu" and onednn_packing(model.info.dtype)  # also takes plain [out, in] weights
        can_pack = onednn and not compile
        if weights == "auto":  # oneDNN wins by spreading each product over cores; on one, MKL's GEMV does
            many = torch.get_num_threads() > 1
            weights = ("rows" if compile and device.type == "cpu" and batch == 1 else
                       "packed" if can_pack and many else "transposed" if device.type == "cpu" else "tied")
        if weights not in WEIGHTS or (weights == "packed" and not can_pack):
            raise bad_value("weights", weights, f"'auto' or one of {WEIGHTS} ('packed': CPU with oneDNN, not compiled)",
                            "leave weights='auto'")
        if cuda_graph and device.type != "cuda":
            raise bad_value("cuda_graph", cuda_graph, "True only on a CUDA device", "leave cuda_graph=None")
        self.weights = weights
        self._onednn = onednn
        self.blocks = block_weights(model.hf, pack=weights == "packed", rows=weights == "rows", onednn=onednn,
                                    batch=batch)
        self._gemv = weights == "rows" and batch == 1 and compile  # decode products as reductions (module doc)
        self.wte, self.wpe = _hf.token_embedding(model.hf).weight, _hf.position_embedding(model.hf).weight
        ln_f = _hf.final_norm(model.hf)
        self.lnf_w, self.lnf_b, self.eps = ln_f.weight, ln_f.bias, cfg.layer_norm_epsilon
        self.n_head, self.d = cfg.n_head, cfg.n_embd
        self.scale = (cfg.n_embd // cfg.n_head) ** -0.5  # as Hugging Face passes it to SDPA
        wte = self.wte.detach()
        self.head_t = wte.t().contiguous() if weights == "transposed" else None  # [d_model, vocab]
        self.head_packed = torch.ops.mkldnn._reorder_linear_weight(wte, batch) if weights == "packed" else None
        # one [batch, heads, slots, head_dim] tensor per layer, not views of one big tensor: a compiled
        # step then writes the new K, V in place instead of copying a layer's whole cache every step
        shape = (batch, cfg.n_head, self.max_tokens, cfg.n_embd // cfg.n_head)
        self.k = [torch.zeros(shape, dtype=self.wte.dtype, device=device) for _ in range(cfg.n_layer)]
        self.v = [torch.zeros_like(t) for t in self.k]
        self.tokens = 0
        self.compiled = compile
        self.cuda_graph = (device.type == "cuda") if cuda_graph is None else cuda_graph
        self._static_step = torch.compile(self._step_fixed, fullgraph=True, dynamic=False) if compile else None
        self._graph = None

    @property
    def extra_bytes(self) -> int:
        """Memory this decoder adds to the model's: the KV cache and any weight copies."""
        projs = [p for b in self.blocks for p in (b.qkv, b.proj, b.fc, b.out)]
        copies = [self.head_t, self.head_packed] + [p.packed for p in projs] + [p.rows for p in projs]
        return sum(t.numel() * t.element_size() for t in [*self.k, *self.v, *copies] if t is not None)

    def __repr__(self) -> str:
        mode = "compiled" if self.compiled else "eager"
        mode += " + CUDA graph" if self.cuda_graph else ""
        return (f"FastDecoder({self.model.info.name}, {mode}, weights {self.weights}, batch {self.batch}, "
                f"{self.tokens}/{self.max_tokens} slots used, +{self.extra_bytes / 1e6:.1f} MB)")

    # ------------------------------------------------------------------ the arithmetic
    def _block(self, i: int, x: torch.Tensor, pos, n: int | None, mask) -> torch.Tensor:
        """One block on ``x`` ``[batch, T, d_model]``; writes K, V at ``pos`` (slice or index tensor)."""
        w, (B, T, d) = self.blocks[i], x.shape
        gemv = self._gemv and n is None  # the compiled batch-1 step
        h = F.layer_norm(x, (d,), w.ln1_w, w.ln1_b, self.eps)
        qkv = w.qkv(h.view(-1, d), gemv=gemv).view(B, T, 3 * d)
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2) for t in qkv.split(d, dim=2))  # [B, H, T, hd]
        if n is None:  # fixed shapes: write at the position tensor, attend over every slot with a mask
            self.k[i].index_copy_(2, pos, k)
            self.v[i].index_copy_(2, pos, v)
            a = self._attend_fixed(q, self.k[i], self.v[i], mask)
        else:  # eager: write the slots, attend over the n filled ones (causal inside a prompt)
            self.k[i][:, :, pos] = k
            self.v[i][:, :, pos] = v
            a = F.scaled_dot_product_attention(q, self.k[i][:, :, :n], self.v[i][:, :, :n], is_causal=T > 1,
                                               scale=self.scale)
        a = a.transpose(1, 2).reshape(B, T, d)
        x = w.proj(a.view(-1, d), gemv=gemv).view(B, T, d) + x
        h = F.layer_norm(x, (d,), w.ln2_w, w.ln2_b, self.eps)
        return w.out(w.fc(h.view(-1, d), gelu=True, gemv=gemv), gemv=gemv).view(B, T, d) + x

    def _attend_fixed(self, q, k, v, mask) -> torch.Tensor:
        """One query ``[B, H, 1, hd]`` over every cache slot ``[B, H, S, hd]``; ``mask`` ``[1, 1, 1, S]``."""
        if not self._gemv:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        # softmax(q k^T * scale) v written as broadcasts and sums, so Inductor fuses it into two loops
        s = ((k * q).sum(-1) * self.scale).unsqueeze(2)  # [B, H, 1, S]
        p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        return (p.transpose(-1, -2) * v).sum(2, keepdim=True)  # [B, H, 1, hd]

    def _logits(self, x: torch.Tensor, gemv: bool = False) -> torch.Tensor:
        """Last position's ``[batch, d_model]`` -> logits ``[batch, vocab]``."""
        h = F.layer_norm(x[:, -1], (self.d,), self.lnf_w, self.lnf_b, self.eps)
        if gemv:
            return (self.wte * h).sum(-1).view(1, -1)
        if self.head_packed is not None:
            return linear_onednn(h, self.head_packed, None)
        if self.weights == "rows" and self._onednn and not torch.compiler.is_compiling():
            return linear_onednn(h, self.wte, None)
        return h @ self.head_t if self.head_t is not None else F.linear(h, self.wte)

    def _forward(self, ids: torch.Tensor, start: int) -> torch.Tensor:
        """Eager forward of ``ids`` ``[batch, T]`` at positions ``start..start+T-1``."""
        n = start + ids.shape[1]
        x = F.embedding(ids, self.wte) + F.embedding(torch.arange(start, n, device=ids.device), self.wpe)
        for i in range(len(self.blocks)):
            x = self._block(i, x, slice(start, n), n, None)
        return self._logits(x)

    def _step_fixed(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Fixed-shape decode step (for compile / CUDA graphs): ``token`` ``[batch, 1]``, ``pos`` ``[1]``."""
        x = F.embedding(token, self.wte) + F.embedding(pos, self.wpe)
        mask = (torch.arange(self.max_tokens, device=pos.device) <= pos).view(1, 1, 1, -1)
        for i in range(len(self.blocks)):
            x = self._block(i, x, pos, None, mask)
        return self._logits(x, gemv=self._gemv)

    # ------------------------------------------------------------------ prefill and decode
    @torch.inference_mode()
    def prefill(self, ids) -> torch.Tensor:
        """Reset the cache and read the prompt ``[batch, T]``; returns the last logits ``[batch, vocab]``."""
        ids = as_ids(self.model, ids)
        if ids.shape[0] != self.batch or ids.shape[1] > self.max_tokens:
            raise bad_value("ids", tuple(ids.shape), f"[{self.batch}, T] with T <= max_tokens={self.max_tokens}",
                            "build the FastDecoder with a matching batch and a larger max_tokens")
        if self.cuda_graph and self._graph is None:
            self._capture()
        self.tokens = ids.shape[1]
        return self._forward(ids, 0)

    @torch.inference_mode()
    def step(self, token) -> torch.Tensor:
        """One decode step for ``token`` (``int`` or ``[batch]``); returns logits ``[batch, vocab]``."""
        if self.tokens >= self.max_tokens:
            raise bad_value("max_tokens", self.max_tokens, f"more than the {self.tokens} positions used",
                            "build the FastDecoder with a larger max_tokens")
        t = torch.as_tensor(token, dtype=torch.long, device=self.wte.device).reshape(self.batch, 1)
        pos, self.tokens = self.tokens, self.tokens + 1
        if self._graph is not None:
            self._tok.copy_(t)
            self._pos.fill_(pos)
            self._graph.replay()
            return self._out
        if self._static_step is not None:
            return self._static_step(t, torch.tensor([pos], device=t.device))
        return self._forward(t, pos)

    def _capture(self) -> None:
        """Record one fixed-shape step as a CUDA graph (after warm-up runs on a side stream)."""
        step = self._static_step or self._step_fixed
        self._tok = torch.zeros(self.batch, 1, dtype=torch.long, device=self.wte.device)
        self._pos = torch.zeros(1, dtype=torch.long, device=self.wte.device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(3):
                step(self._tok, self._pos)
        torch.cuda.current_stream().wait_stream(stream)
        self._graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self._graph):
            self._out = step(self._tok, self._pos)
        for t in self.k + self.v:
            t.zero_()

    # ------------------------------------------------------------------ the loop
    def generate(self, prompt: str, max_new_tokens: int = 40, sampling: SamplingConfig | None = None, *,
                 temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                 seed: int | None = None, stop_at_eos: bool = True) -> Trace:
        """``inferlab.generate`` on the fast path (batch 1, no recording, no stop strings); returns a ``Trace``.

        The trace has the ids, text and token times (``.latency``) but no per-step records.
        """
        device = self.model.device
        t_req = clock(device)
        ids = _check_prompt(self.model, prompt, max_new_tokens)
        if self.batch != 1 or len(ids) + max_new_tokens > self.max_tokens:
            raise bad_value("max_new_tokens", max_new_tokens,
                            f"prompt ({len(ids)}) + max_new_tokens <= max_tokens={self.max_tokens} with batch=1",
                            "build a FastDecoder(model, max_tokens=...) large enough, with batch=1")
        config = _sampling_from(sampling, temperature, top_k, top_p, seed)
        generator = config.generator(device if device.type == "cuda" else "cpu")
        t_tok = clock(device)
        out, times = [], []
        logits = self.prefill([ids])
        for _ in range(max_new_tokens):
            token = int(sample(logits[0], config, generator))
            times.append(clock(device) - t_req)
            out.append(token)
            if (stop_at_eos and token == self.model.eos_id) or len(out) == max_new_tokens:
                break
            logits = self.step(token)
        trace = Trace(prompt=prompt, prompt_ids=ids, prompt_pieces=[self.model.decode([i]) for i in ids],
                      generated_ids=out, generated_pieces=[self.model.decode([i]) for i in out],
                      text=self.model.tokenizer.decode(out, skip_special_tokens=True),
                      stop_reason="stop token" if out[-1] == self.model.eos_id and stop_at_eos else "max_new_tokens",
                      tokenize_seconds=t_tok - t_req, token_times=times,
                      settings={"max_new_tokens": max_new_tokens, "temperature": config.temperature,
                                "top_k": config.top_k, "top_p": config.top_p, "seed": config.seed,
                                "stop_at_eos": stop_at_eos, "fast_path": repr(self)})
        return trace
