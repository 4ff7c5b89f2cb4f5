"""``FastDecoder``: GPT-2's decode step written by hand over the model's own weights, with a pre-allocated cache.

The arithmetic (``_block``: layer norm, QKV, SDPA attention over the cache, out projection, MLP) is the
block of Hugging Face's ``GPT2Block`` again, on plain tensors (``_hf.block_tensors``), with one
``[batch, heads, max_tokens, head_dim]`` K and V tensor per layer written in place. The weight layouts
are ``fast.layouts``; which one ``weights="auto"`` takes is measured by ``fast.choice``. Above the
arithmetic, ``prefill`` and ``step`` are the two jobs, and ``generate`` is ``inferlab.generate``'s loop on them.

Greedy and seeded output is token-for-token that of ``inferlab.generate`` (``tests/test_fast.py``). ``extend``
and ``crop`` are speculative decoding's verify and roll-back on the same cache. One piece (just over 300 lines) on
purpose: the arithmetic, the cache it writes and the jobs that call it share every field.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from .. import _hf
from ..errors import bad_value, check_number
from ..generation import GenerationConfig, TextAssembler, stop_reason
from ..i18n import tr
from ..models import Model, as_ids, check_model
from ..sampling import SamplingConfig, draw
from ..timing import clock
from ..tokens import piece_text
from ..trace import Trace
from .choice import PROMPT_TOKENS, Choice, choose
from .layouts import (
    WEIGHTS,
    PromptScratch,
    RowPlan,
    block_weights,
    linear_onednn,
    linear_packed,
    onednn_packing,
    pack,
    replan,
)
from .rows import packed_rows

VERIFY_ROWS = 8  # the rows a verify's packed head is packed for (any count runs; 2-9 rows ran in about one's time)


class FastDecoder:
    """Pre-allocated cache + a hand-written GPT-2 step over the model's own weights.

    Args:
        model: from ``inferlab.load()`` (GPT-2 family).
        max_tokens: cache slots (prompt + new tokens must fit); default the context length.
        batch: sequences decoded together (all the same length).
        weights: ``"auto"``: the fastest layout *measured* here (``inferlab.fast.choice``: a few steps of
            each candidate, remembered per machine and shape; ``.choice`` says which won and by how
            much), or ``"packed"``, ``"rows"``, ``"transposed"``, ``"tied"`` (see ``inferlab.fast``).
        compile: ``torch.compile`` the fixed-shape step (tens of seconds the first time). With ``"auto"``
            the compiled step is one candidate: an eager layout that steps faster here wins instead.
        cuda_graph: record the fixed-shape step as a CUDA graph (CUDA only; ``None``: on for CUDA).

    >>> fast = FastDecoder(m, max_tokens=128)                    # doctest: +SKIP
    >>> fast.generate("ROMEO.", max_new_tokens=20).latency       # doctest: +SKIP
    """

    def __init__(self, model: Model, max_tokens: int | None = None, *, batch: int = 1, weights: str = "auto",
                 compile: bool = False, cuda_graph: bool | None = None) -> None:
        check_model(model)
        info = model.info
        self.model, self.batch = model, batch
        if max_tokens is not None:  # 0 is not "the default": it is a cache with no room
            check_number("max_tokens", max_tokens, low=1, high=model.info.n_ctx, integer=True,
                         fix="size the cache for prompt + new tokens, or leave max_tokens=None for the context length")
        self.max_tokens = model.info.n_ctx if max_tokens is None else int(max_tokens)
        device = model.device
        if cuda_graph and device.type != "cuda":
            raise bad_value("cuda_graph", cuda_graph, "True only on a CUDA device", "leave cuda_graph=None")
        onednn = device.type == "cpu" and onednn_packing(model.info.dtype)  # also takes plain [out, in] weights
        self.choice: Choice | None = None
        if weights == "auto":  # measured on this machine, not decided by rule (see inferlab.fast.choice)
            choice, winner = choose(
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
        # "packed": packed once; the rows each product is padded to are measured below (``_measure_plan``)
        self.rows_plan: RowPlan | None = RowPlan.unpadded(batch) if weights == "packed" else None
        self.blocks = block_weights(model, packed=self.rows_plan, rows=weights == "rows", onednn=onednn)
        self._gemv = weights == "rows" and batch == 1 and compile  # decode products as reductions (see fast.layouts)
        self.wte, self.wpe = _hf.embedding_tensors(model)  # [vocab, d_model], [n_ctx, d_model]
        self.head = _hf.head_weight(model)  # [vocab, d_model]: GPT-2's head is wte itself (tied)
        ln_f = _hf.final_norm_tensors(model)
        self.lnf_w, self.lnf_b, self.eps = ln_f.weight, ln_f.bias, ln_f.eps  # GPT-2: one eps for every norm
        self.n_head, self.d = info.n_head, info.d_model
        self.scale = info.head_dim ** -0.5  # as Hugging Face passes it to SDPA
        self.head_t = self.head.t().contiguous() if weights == "transposed" else None  # [d_model, vocab]
        self.head_packed = pack(self.head, self.rows_plan["head"]) if self.rows_plan is not None else None
        # one [batch, heads, slots, head_dim] tensor per layer, not views of one big tensor: a compiled
        # step then writes the new K, V in place instead of copying a layer's whole cache every step
        shape = (batch, info.n_head, self.max_tokens, info.head_dim)
        self.k = [torch.zeros(shape, dtype=self.wte.dtype, device=device) for _ in range(info.n_layer)]
        self.v = [torch.zeros_like(t) for t in self.k]
        self._head_many = None  # the head packed for a verify's rows (``_head_rows``), made on first use
        self.tokens = 0
        self.compiled = compile
        self.cuda_graph = (device.type == "cuda") if cuda_graph is None else cuda_graph
        self._static_step = torch.compile(self._step_fixed, fullgraph=True, dynamic=False) if compile else None
        self._graph = None
        if self.rows_plan is not None:  # the rows each product streams fastest at here, measured once per machine
            self._measure_plan()

    def _measure_plan(self) -> None:
        """Take the ``RowPlan`` ``fast.rows.packed_rows`` finds fastest here, checked on whole steps of this decoder
        (a few cached positions, rewound before each step) where its cache has room for them."""
        n = min(PROMPT_TOKENS, self.max_tokens - 1)

        def step(plan: RowPlan) -> None:
            if self.tokens == 0:
                self.prefill([[self.model.eos_id] * n] * self.batch)
            self._use_plan(plan)
            self.step_again(n)

        self._use_plan(packed_rows(self.model, batch=self.batch, step=step if n >= 1 else None))
        self.tokens = 0

    def step_again(self, position: int) -> torch.Tensor:
        """Rewind to ``position`` and decode token 0 there for every sequence: the same work on every call, which is
        what a timing repeats (the layout choice, the row plans, ``measure.step_floor``)."""
        self.tokens = position
        return self.step([0] * self.batch)

    def _use_plan(self, plan: RowPlan) -> None:
        """Pad each packed product (and the head) to ``plan``'s rows, on the same packed weights."""
        self.rows_plan, self.blocks = plan, replan(self.blocks, plan)

    @property
    def extra_bytes(self) -> int:
        """Memory this decoder adds to the model's: the KV cache and any weight copies."""
        projs = [p for b in self.blocks for p in (b.qkv, b.proj, b.fc, b.out)]
        copies = [self.head_t, self.head_packed, self._head_many] + [p.packed for p in projs] + [p.rows for p in projs]
        return sum(t.numel() * t.element_size() for t in [*self.k, *self.v, *copies] if t is not None)

    @property
    def layout(self) -> str:
        """The weight layout in words: ``"transposed"``, ``"packed (padded: qkv 1 -> 4 rows)"`` ..."""
        return self.weights + (f" ({self.rows_plan.summary(self.batch)})" if self.rows_plan is not None else "")

    def __repr__(self) -> str:
        mode = tr("compiled") if self.compiled else tr("eager")
        mode += " + CUDA graph" if self.cuda_graph else ""
        chosen = tr(", chosen: {summary}", summary=self.choice.summary()) if self.choice is not None else ""
        if self.rows_plan is not None:
            chosen += f"; {self.rows_plan.summary(self.batch)}"
        return tr("FastDecoder({name}, {mode}, weights {weights}, batch {batch}, {tokens}/{max_tokens} slots used, "
                  "+{mb:.1f} MB{chosen})", name=self.model.info.name, mode=mode, weights=self.weights,
                  batch=self.batch, tokens=self.tokens, max_tokens=self.max_tokens, mb=self.extra_bytes / 1e6,
                  chosen=chosen)

    # ------------------------------------------------------------------ the arithmetic
    # Copied from transformers' GPT2Block.forward (ln_1, c_attn, attention, c_proj, ln_2, MLP): the same arithmetic
    # as attention.layer_by_hand and serve.paged's _block; tests/test_fast.py checks it against the model's logits.
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
        else:  # eager: write the slots, attend over the n filled ones (causal inside a prompt; ``mask`` after a cache)
            self.k[i][:, :, pos] = k
            self.v[i][:, :, pos] = v
            a = F.scaled_dot_product_attention(q, self.k[i][:, :, :n], self.v[i][:, :, :n], attn_mask=mask,
                                               is_causal=T > 1 and mask is None, scale=self.scale)
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
            return linear_packed(h, self.head_packed, None, rows=self.rows_plan["head"])
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

    @torch.inference_mode()
    def extend(self, ids) -> torch.Tensor:
        """Several new tokens ``[batch, tokens]`` against the cache in one forward; logits at every one of them
        ``[batch, tokens, vocab]`` (speculative decoding's verify). The products take the decode layouts, whose
        kernels run a few rows in about the time of one (``inferlab.speculative.verify_cost`` measures it)."""
        ids = as_ids(self.model, ids)
        start, T = self.tokens, ids.shape[1]
        if ids.shape[0] != self.batch or start + T > self.max_tokens:
            raise bad_value("ids", tuple(ids.shape), f"[{self.batch}, tokens] with {start} + tokens <= "
                            f"max_tokens={self.max_tokens}", "build the FastDecoder with a larger max_tokens")
        n = start + T
        x = F.embedding(ids, self.wte) + F.embedding(torch.arange(start, n, device=ids.device), self.wpe)
        # query i (position start + i) sees every cached key and the new keys up to its own
        mask = torch.arange(n, device=ids.device).view(1, -1) <= torch.arange(start, n, device=ids.device).view(-1, 1)
        for i in range(len(self.blocks)):
            x = self._block(i, x, slice(start, n), n, mask.view(1, 1, T, n))
        self.tokens = n
        h = F.layer_norm(x, (self.d,), self.lnf_w, self.lnf_b, self.eps).view(-1, self.d)
        return (self.logits_head(h) if len(h) == 1 else self._head_rows(h)).view(self.batch, T, -1)

    def _head_rows(self, h: torch.Tensor) -> torch.Tensor:
        """The LM head for several rows. A layout chosen for one row can be the slowest for five: on a 2-core EPYC
        the bundled model's transposed head took 1.3 ms for one row and 5.9 ms for five, a head packed by oneDNN
        1.6-1.9 ms for one to five (2.8 for nine). So a verify's rows take a packed copy, made on first use."""
        if not self._onednn or self.head_packed is not None:
            return self.logits_head(h)
        if self._head_many is None:
            self._head_many = pack(self.head, VERIFY_ROWS)  # the one packer
        return linear_onednn(h, self._head_many, None)

    def crop(self, tokens: int) -> None:
        """Forget every position from ``tokens`` on (rejected guesses): the next token is written at ``tokens``."""
        check_number("tokens", tokens, low=0, high=self.tokens, integer=True,
                     fix="crop to a length the cache holds (at most .tokens)")
        self.tokens = int(tokens)

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
        vocab = self.model.info.vocab_size
        if isinstance(token, numbers.Integral) and not isinstance(token, bool) and 0 <= token < vocab:
            t = torch.tensor([[int(token)]] * self.batch, device=self.wte.device)  # the common case, checked cheaply
        else:  # tensors, lists; floats, out-of-range ids and wrong counts are refused by the engine's check
            if isinstance(token, torch.Tensor):
                token = token.reshape(-1)
            elif isinstance(token, numbers.Number):
                token = [token]
            t = as_ids(self.model, token)
            t = t.reshape(-1, 1)
            if t.shape[0] != self.batch:
                raise bad_value("token", f"{t.shape[0]} token(s)", f"one token per sequence ({self.batch})",
                                "pass the tokens chosen for every sequence of the batch, shaped [batch]")
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
        trace = Trace.start(self.model, prompt, ids, config, tokenize_seconds=clock(device) - t_req, runner=repr(self))
        # Copied in spirit from engine._loop: the same four moves, on the fast step.
        logits = self.prefill([ids])                                                  # prefill, once
        for index in range(config.max_new_tokens):
            token = int(draw(logits[0], config.sampling, generator))                  # sample
            t_emit = clock(device) - t_req                                            # emit
            stop = stop_reason(self.model, config, token, index)
            piece = text.add(token, final=stop is not None)
            stop = text.stopped or stop
            trace.add_token(token, piece_text(self.model.tokenizer, token), t_emit, piece)
            if stop is not None:                                                      # stop?
                trace.stop_reason, trace.text = stop, text.text
                return trace
            logits = self.step(token)                                                 # decode
        raise AssertionError("unreachable: stop_reason stops at max_new_tokens")
