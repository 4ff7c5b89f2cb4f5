"""The fast path: batch-1 decoding with nothing in the step but the forward and the sample.

The engine (``engine.py``) calls Hugging Face's ``GPT2LMHeadModel.forward`` every step: masks, cache
objects and output classes are rebuilt each time. ``FastDecoder`` runs the same arithmetic on the
model's weights (plain tensors from ``_hf.block_tensors``) with a pre-allocated KV cache (per layer
``[batch, heads, max_tokens, head_dim]``), a ten-line block and SDPA attention. More tricks, each a switch:

- ``weights``: how the matrices are held for the matrix-vector products. ``"tied"``: the model's own
  tensors (bitwise the engine's logits). ``"transposed"``: plus a ``[d_model, vocab]`` copy of the LM
  head, GPT-2's largest matrix, which some matrix libraries stream faster than ``F.linear(h, wte)``.
  ``"packed"``: every matrix pre-packed for oneDNN (``torch.ops.mkldnn._reorder_linear_weight``, what
  ``torch.compile`` does with frozen weights), each product on all cores, the GELU inside its product.
  ``"rows"``: each block matrix as a plain ``[out, in]`` copy, for the compiled reductions below.
  ``"auto"`` (the default) measures them here and keeps the fastest (``inferlab.fast_choice``): no
  layout wins on every CPU. Copies cost memory (``extra_bytes``).
- ``compile=True``: ``torch.compile`` of a fixed-shape step (the cache read whole, empty slots masked).
  With ``"rows"`` each product is written as ``(W * x).sum(-1)`` and the attention as sums: Inductor
  turns the step into streaming loops, each fused with the bias, norm or GELU around it, no Python
  between operators.
- The prompt (prefill) always runs eagerly, and its products are matrix-matrix products on the model's
  own ``[in, out]`` weights (``torch.addmm``, as Hugging Face's ``Conv1D``), whatever the layout: the
  layouts above are for one row at a time. Measured here (GPT-2 small, 256 tokens, 2 threads), oneDNN's
  batch-1 packing ran the prompt's products at 133 GFLOP/s against 153 for ``addmm``, and its fused GELU
  cost more than the separate one. The products write into buffers made once per prompt and reused by
  every block (``PromptScratch``), and the GELU and the residual adds work in place: a fresh
  multi-megabyte tensor per operation cost about a tenth of the prefill here (GPT-2 small, 256
  tokens: 441 -> 412 ms median, interleaved), with the same operations in the same order, so the
  logits stay bitwise the engine's. Every layout but ``"tied"`` (the bitwise one) then takes PyTorch's
  one-pass tanh GELU for the prompt instead of Hugging Face's eight operations: about 4% of the
  prefill here, same greedy tokens.
- ``cuda_graph`` (CUDA only, on by default there): the fixed-shape step is recorded once as a CUDA
  graph and replayed, so hundreds of kernel launches cost one.

Greedy and seeded output is token-for-token that of ``inferlab.generate`` (``tests/test_fast.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import _hf, fast_choice
from .engine import as_ids
from .errors import bad_value
from .generation import GenerationConfig, TextAssembler, next_text
from .i18n import tr
from .models import Model
from .sampling import SamplingConfig, sample
from .timing import clock
from .tokens import piece_text
from .trace import Trace

WEIGHTS = ("packed", "rows", "transposed", "tied")


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
            return linear_onednn(x, self.packed, self.b, gelu)
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
        return Proj(w, b, torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), batch) if pack else None,
                    w.t().contiguous() if rows else None, onednn)

    return [BlockWeights(t.ln1.weight, t.ln1.bias, proj(t.qkv), proj(t.attn_out), t.ln2.weight, t.ln2.bias,
                         proj(t.fc), proj(t.mlp_out))
            for t in _hf.block_tensors(model)]


class FastDecoder:
    """Pre-allocated cache + a hand-written GPT-2 step over the model's own weights.

    Args:
        model: from ``inferlab.load()`` (GPT-2 family).
        max_tokens: cache slots (prompt + new tokens must fit); default the context length.
        batch: sequences decoded together (all the same length).
        weights: ``"auto"``: the fastest layout *measured* here (``inferlab.fast_choice``: a few steps of
            each candidate, remembered per machine and shape; ``.choice`` says which won and by how
            much), or ``"packed"``, ``"rows"``, ``"transposed"``, ``"tied"`` (see the module docstring).
        compile: ``torch.compile`` the fixed-shape step (tens of seconds the first time). With ``"auto"``
            the compiled step is one candidate: an eager layout that steps faster here wins instead.
        cuda_graph: record the fixed-shape step as a CUDA graph (CUDA only; ``None``: on for CUDA).

    >>> fast = FastDecoder(m, max_tokens=128)                    # doctest: +SKIP
    >>> fast.generate("ROMEO.", max_new_tokens=20).latency       # doctest: +SKIP
    """

    def __init__(self, model: Model, max_tokens: int | None = None, *, batch: int = 1, weights: str = "auto",
                 compile: bool = False, cuda_graph: bool | None = None) -> None:
        info = model.info
        self.model, self.batch = model, batch
        self.max_tokens = max_tokens or model.info.n_ctx
        if not 1 <= self.max_tokens <= model.info.n_ctx:
            raise bad_value("max_tokens", max_tokens, f"1 <= max_tokens <= n_ctx ({model.info.n_ctx})",
                            "size the cache for prompt + new tokens")
        device = model.device
        if cuda_graph and device.type != "cuda":
            raise bad_value("cuda_graph", cuda_graph, "True only on a CUDA device", "leave cuda_graph=None")
        onednn = device.type == "cpu" and onednn_packing(model.info.dtype)  # also takes plain [out, in] weights
        self.choice: fast_choice.Choice | None = None
        if weights == "auto":  # measured on this machine, not decided by rule (see inferlab.fast_choice)
            choice, winner = fast_choice.choose(
                model, lambda w, c: FastDecoder(model, self.max_tokens, batch=batch, weights=w, compile=c,
                                                cuda_graph=cuda_graph),
                batch=batch, compile=compile, onednn=onednn, max_tokens=self.max_tokens)
            if winner is not None:  # adopt the measured decoder whole: compiling it again would cost as much
                vars(self).update(vars(winner))
                self.choice = choice
                return
            weights, compile, self.choice = choice.weights, choice.compiled, choice
        if weights not in WEIGHTS or (weights == "packed" and not (onednn and not compile)):
            raise bad_value("weights", weights, f"'auto' or one of {WEIGHTS} ('packed': CPU with oneDNN, not compiled)",
                            "leave weights='auto'")
        self.weights = weights
        self._onednn = onednn
        self.blocks = block_weights(model, pack=weights == "packed", rows=weights == "rows", onednn=onednn,
                                    batch=batch)
        self._gemv = weights == "rows" and batch == 1 and compile  # decode products as reductions (module doc)
        self.wte, self.wpe = _hf.embedding_tensors(model)  # [vocab, d_model], [n_ctx, d_model]
        self.head = _hf.head_weight(model)  # [vocab, d_model]: GPT-2's head is wte itself (tied)
        ln_f = _hf.final_norm_tensors(model)
        self.lnf_w, self.lnf_b, self.eps = ln_f.weight, ln_f.bias, ln_f.eps  # GPT-2: one eps for every norm
        self.n_head, self.d = info.n_head, info.d_model
        self.scale = info.head_dim ** -0.5  # as Hugging Face passes it to SDPA
        self.head_t = self.head.t().contiguous() if weights == "transposed" else None  # [d_model, vocab]
        self.head_packed = torch.ops.mkldnn._reorder_linear_weight(self.head, batch) if weights == "packed" else None
        # one [batch, heads, slots, head_dim] tensor per layer, not views of one big tensor: a compiled
        # step then writes the new K, V in place instead of copying a layer's whole cache every step
        shape = (batch, info.n_head, self.max_tokens, info.head_dim)
        self.k = [torch.zeros(shape, dtype=self.wte.dtype, device=device) for _ in range(info.n_layer)]
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
        mode = tr("compiled") if self.compiled else tr("eager")
        mode += " + CUDA graph" if self.cuda_graph else ""
        chosen = tr(", chosen: {summary}", summary=self.choice.summary()) if self.choice is not None else ""
        return tr("FastDecoder({name}, {mode}, weights {weights}, batch {batch}, {tokens}/{max_tokens} slots used, "
                  "+{mb:.1f} MB{chosen})", name=self.model.info.name, mode=mode, weights=self.weights,
                  batch=self.batch, tokens=self.tokens, max_tokens=self.max_tokens, mb=self.extra_bytes / 1e6,
                  chosen=chosen)

    # ------------------------------------------------------------------ the arithmetic
    def _block(self, i: int, x: torch.Tensor, pos, n: int | None, mask,
               prompt: PromptScratch | None = None) -> torch.Tensor:
        """One block on ``x`` ``[batch, tokens, d_model]`` (updated in place: the residual stream); writes K, V at
        ``pos`` (slice or index tensor). ``prompt``: the buffers of a prompt's matrix-matrix products."""
        w, (B, T, d) = self.blocks[i], x.shape
        gemv = self._gemv and n is None  # the compiled batch-1 step
        h = F.layer_norm(x, (d,), w.ln1_w, w.ln1_b, self.eps)
        qkv = w.qkv(h.view(-1, d), gemv=gemv, prompt=prompt).view(B, T, 3 * d)
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2)  # each [batch, heads, tokens, head_dim]
                   for t in qkv.split(d, dim=2))
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
        x += w.proj(a.view(-1, d), gemv=gemv, prompt=prompt).view(B, T, d)
        h = F.layer_norm(x, (d,), w.ln2_w, w.ln2_b, self.eps)
        x += w.out(w.fc(h.view(-1, d), gelu=True, gemv=gemv, prompt=prompt), gemv=gemv, prompt=prompt).view(B, T, d)
        return x

    def _attend_fixed(self, q, k, v, mask) -> torch.Tensor:
        """One query ``[batch, heads, 1, head_dim]`` over every cache slot ``[batch, heads, max_tokens, head_dim]``;
        ``mask`` ``[1, 1, 1, max_tokens]`` (True for filled slots)."""
        if not self._gemv:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        # softmax(q k^T * scale) v written as broadcasts and sums, so Inductor fuses it into two loops
        s = ((k * q).sum(-1) * self.scale).unsqueeze(2)  # [batch, heads, 1, key_pos]: key_pos = every slot
        p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        return (p.transpose(-1, -2) * v).sum(2, keepdim=True)  # [batch, heads, 1, head_dim]

    def _logits(self, x: torch.Tensor, gemv: bool = False) -> torch.Tensor:
        """Last position's ``[batch, d_model]`` -> logits ``[batch, vocab]``."""
        return self.logits_head(F.layer_norm(x[:, -1], (self.d,), self.lnf_w, self.lnf_b, self.eps), gemv)

    def logits_head(self, h: torch.Tensor, gemv: bool = False) -> torch.Tensor:
        """The LM head's product in this decoder's layout: ``h`` ``[batch, d_model]`` -> ``[batch, vocab]``."""
        if gemv:
            return (self.head * h).sum(-1).view(1, -1)
        if self.head_packed is not None:
            return linear_onednn(h, self.head_packed, None)
        if self.weights == "rows" and self._onednn and not torch.compiler.is_compiling():
            return linear_onednn(h, self.head, None)
        return h @ self.head_t if self.head_t is not None else F.linear(h, self.head)

    def _forward(self, ids: torch.Tensor, start: int) -> torch.Tensor:
        """Eager forward of ``ids`` ``[batch, tokens]`` at positions ``start .. start + tokens - 1``."""
        n = start + ids.shape[1]
        x = F.embedding(ids, self.wte) + F.embedding(torch.arange(start, n, device=ids.device), self.wpe)
        # prefill: matrix-matrix products into reused buffers; only "tied" promises the engine's logits bitwise
        prompt = PromptScratch(ids.numel(), x, exact=self.weights == "tied") if ids.shape[1] > 1 else None
        for i in range(len(self.blocks)):
            x = self._block(i, x, slice(start, n), n, None, prompt)
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
        """Reset the cache and read the prompt ``[batch, tokens]``; returns the last logits ``[batch, vocab]``."""
        ids = as_ids(self.model, ids)
        if ids.shape[0] != self.batch or ids.shape[1] > self.max_tokens:
            raise bad_value("ids", tuple(ids.shape),
                            f"[{self.batch}, tokens] with tokens <= max_tokens={self.max_tokens}",
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
    def generate(self, prompt: str, max_new_tokens: int | None = None, sampling: SamplingConfig | None = None, *,
                 config: GenerationConfig | None = None, **settings) -> Trace:
        """``inferlab.generate`` on the fast path (batch 1, no recording); returns a ``Trace``.

        Takes the same settings as ``inferlab.generate`` (a ``GenerationConfig`` or its fields as
        keywords). The trace has the ids, text and token times (``.latency``) but no per-step records.
        """
        device = self.model.device
        t_req = clock(device)
        config = GenerationConfig.from_arguments(config, max_new_tokens, sampling, **settings)
        ids = config.check(self.model, prompt)
        if not config.use_cache:
            raise bad_value("use_cache", False, "True on the fast path (its cache is the point)",
                            "use inferlab.generate(..., use_cache=False) to decode without a cache")
        if self.batch != 1 or len(ids) + config.max_new_tokens > self.max_tokens:
            raise bad_value("max_new_tokens", config.max_new_tokens,
                            f"prompt ({len(ids)}) + max_new_tokens <= max_tokens={self.max_tokens} with batch=1",
                            "build a FastDecoder(model, max_tokens=...) large enough, with batch=1")
        generator = config.sampling.generator(device if device.type == "cuda" else "cpu")
        text = TextAssembler(self.model.tokenizer, config.stop_strings)
        trace = Trace(prompt=prompt, prompt_ids=ids, prompt_pieces=[piece_text(self.model.tokenizer, i) for i in ids],
                      tokenize_seconds=clock(device) - t_req, settings={**config.to_dict(), "fast_path": repr(self)},
                      model=self.model.info.summary())
        # Copied in spirit from engine._loop: the same four moves, on the fast step.
        logits = self.prefill([ids])                                                  # prefill, once
        for index in range(config.max_new_tokens):
            token = int(sample(logits[0], config.sampling, generator))                # sample
            t_emit = clock(device) - t_req                                            # emit
            piece, stop = next_text(self.model, config, text, token, index)
            trace.add_token(token, piece_text(self.model.tokenizer, token), t_emit, piece)
            if stop is not None:                                                      # stop?
                trace.stop_reason, trace.text = stop, text.text
                return trace
            logits = self.step(token)                                                 # decode
        raise AssertionError("unreachable: next_text stops at max_new_tokens")
