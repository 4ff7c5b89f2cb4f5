"""One forward pass over many requests at once, their keys and values kept in blocks (paged attention).

Each iteration the scheduler hands over a list of ``Segment``s: for each running request, the tokens to
run now (a whole prompt, a chunk of one, or the one newest token of a decode) and its block table. They
are laid end to end in one ``[tokens, d_model]`` matrix, so every projection and MLP product of the
block is a single matrix product over all of them: the weights are read once per iteration, whatever
the number of requests (article 000: decode is limited by reading the weights; this is why servers batch).

Attention is the one step that must keep requests apart. The keys and values live per layer in one
tensor of ``[blocks * block_size, heads, head_dim]`` *slots*; position ``p`` of a request is slot
``table[p // block_size] * block_size + p % block_size``. Before the attention call each request's
positions are gathered from its blocks into a contiguous ``[heads, key_pos, head_dim]`` (vLLM reads the
blocks inside its kernel instead; gathering keeps this readable, and costs one copy of the context per
layer). The decodes go through one padded attention call, or two when their contexts differ widely (the short
ones padded to the longest short one: ``_split_by_length``); each prompt chunk through its own.

The arithmetic is Hugging Face's ``GPT2Block`` on the model's own tensors, and the products are the fast path's
(``fast.layouts.block_weights``: one ``Proj`` per matrix, one packer). ``weights="model"`` runs them on the model's
own ``[in, out]`` weights (``addmm``, the engine's products in the engine's order); ``"packed"`` on copies
pre-packed for oneDNN, the fast path's ``"packed"`` layout (notebook 08), GELU inside the product, a product of a
few rows padded to the count the ``RowPlan`` of that many rows found fastest; ``"auto"`` (the default) takes
``"packed"`` wherever oneDNN can pack the model's weights (float32 on most x86 CPUs;
``fast.layouts.resolve_weights``). Why it matters for serving: on the model's own layout a product of 2 to 16 rows
streamed the weights far slower than one of 1 row, so batching bought little. GPT-2's paged decode step at batch 1,
2, 4, 8, 16 on a 2-core AMD EPYC (2 threads): 47, 79, 79, 95, 231 ms on the model's layout; 19, 23, 23, 25, 37 ms
packed. With greedy settings both give the tokens ``il.generate`` gives (``tests/test_serve.py`` runs both).
Static batching's padding rows run through ``forward`` too, in scratch blocks past the pool's (``serve.padded``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import _hf
from ..fast import layouts
from ..fast.rows import packed_rows
from ..models import Model


@dataclass(frozen=True)
class Segment:
    """One request's share of an iteration: ``tokens`` at positions ``start ..``, and its block table."""

    tokens: tuple[int, ...]
    start: int  # position of tokens[0] (the positions before it are already in the blocks)
    table: tuple[int, ...]  # block ids, in position order, covering start + len(tokens) positions
    logits: bool  # whether the last token's logits are wanted (the segment reaches the request's end)


class PagedKV:
    """Keys and values of every layer in ``num_blocks`` blocks of ``block_size`` positions, run by ``forward``.

    ``k[layer]``, ``v[layer]``: ``[num_blocks * block_size, heads, head_dim]`` (one row per slot).
    """

    def __init__(self, model: Model, num_blocks: int, block_size: int, weights: str = "auto") -> None:
        info = model.info
        self.model, self.num_blocks, self.block_size = model, num_blocks, block_size
        self.wte, self.wpe = _hf.embedding_tensors(model)  # [vocab, d_model], [n_ctx, d_model]
        self.weights = layouts.resolve_weights(weights, self.wte)
        # "packed": an iteration's rows vary, so each product of T rows is padded to the count the plan of T rows
        # found fastest (``fast.rows.packed_rows``, measured once per machine for every T under the largest
        # ``layouts.ROW_COUNTS``; from there on the products run their rows as they are)
        self.plans = ({t: packed_rows(model, batch=t) for t in range(1, layouts.ROW_COUNTS[-1])}
                      if self.weights == "packed" else {})
        self.packed = self.plans.get(1)
        self.blocks = layouts.block_weights(model, packed=self.packed)
        self.head = _hf.head_weight(model)  # [vocab, d_model]
        self.head_packed = layouts.pack(self.head, self.packed["head"]) if self.packed is not None else None
        self.final_norm = _hf.final_norm_tensors(model)
        self.eps = self.final_norm.eps  # GPT-2: one eps for every norm
        self.n_head, self.head_dim, self.d = info.n_head, info.head_dim, info.d_model
        self.scale = info.head_dim ** -0.5  # as Hugging Face passes it to SDPA
        # One more block than the pool's: the padding rows' scratch (``serve.padded``), never in a block table
        shape = ((num_blocks + 1) * block_size, info.n_head, info.head_dim)
        self.k = [torch.zeros(shape, dtype=self.wte.dtype, device=self.wte.device) for _ in self.blocks]
        self.v = [torch.zeros_like(t) for t in self.k]

    def rows(self, t: int) -> layouts.RowPlan:
        """The rows each product of ``t`` rows runs with: its measured plan, else ``t`` itself (no padding)."""
        return self.plans.get(t) or layouts.RowPlan.unpadded(t)

    @property
    def nbytes(self) -> int:
        """Bytes of every block's keys and values (allocated once, used or not)."""
        return sum(t.numel() * t.element_size() for t in [*self.k, *self.v])

    def slots(self, table: tuple[int, ...], start: int, stop: int) -> list[int]:
        """The slot of each position ``start .. stop - 1`` of a request with block table ``table``."""
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in range(start, stop)]

    @torch.inference_mode()
    def forward(self, segments: list[Segment]) -> torch.Tensor:
        """Run every segment's tokens; write their keys and values to their slots; return the logits
        ``[segments wanting logits, vocab]`` at each such segment's last token, in segment order."""
        device = self.wte.device
        ids, positions, write = [], [], []
        for s in segments:
            ids += s.tokens
            positions += range(s.start, s.start + len(s.tokens))
            write += self.slots(s.table, s.start, s.start + len(s.tokens))
        ids_t = torch.tensor(ids, device=device)
        write_t = torch.tensor(write, device=device)
        plan = _AttentionPlan(self, segments, device)
        x = F.embedding(ids_t, self.wte) + F.embedding(torch.tensor(positions, device=device), self.wpe)  # [T, d]
        with _hf.model_lock(self.model):  # no other thread's forward while a head is switched off (hooks.py)
            for i, w in enumerate(self.blocks):
                x = self._block(i, w, x, write_t, plan)
            last = torch.tensor(plan.logit_rows, device=device, dtype=torch.long)
            norm = self.final_norm
            h = F.layer_norm(x.index_select(0, last), (self.d,), norm.weight, norm.bias, norm.eps)
            if self.head_packed is not None and len(h):  # (no segment may want logits: a chunk mid-prompt)
                return layouts.linear_packed(h, self.head_packed, None, rows=self.rows(len(h))["head"])
            return F.linear(h, self.head)  # [segments wanting logits, vocab]

    # Copied from transformers' GPT2Block.forward: the same arithmetic as fast.decoder.FastDecoder._block and
    # attention.layer_by_hand, on every request's tokens at once; only the attention (_AttentionPlan) keeps them
    # apart. tests/test_serve.py checks its logits against prefill's.
    def _block(self, i: int, w: layouts.BlockWeights, x: torch.Tensor, write: torch.Tensor,
               plan: _AttentionPlan) -> torch.Tensor:
        """GPT-2's block on ``x`` ``[tokens, d_model]``: its keys and values written to the slots ``write``."""
        T, d = x.shape
        rows = self.rows(T)
        h = F.layer_norm(x, (d,), w.ln1_w, w.ln1_b, self.eps)
        q, k, v = w.qkv(h, rows=rows["qkv"]).split(d, dim=1)  # each [tokens, d_model]
        q, k, v = (t.reshape(T, self.n_head, self.head_dim) for t in (q, k, v))  # [tokens, heads, head_dim]
        self.k[i].index_copy_(0, write, k)  # into the blocks first: a token attends to itself too
        self.v[i].index_copy_(0, write, v)
        a = plan.attend(q, self.k[i], self.v[i], self.scale)  # [tokens, heads, head_dim]
        x = x + w.proj(a.reshape(T, d), rows=rows["attn_out"])
        h = F.layer_norm(x, (d,), w.ln2_w, w.ln2_b, self.eps)
        return x + w.out(w.fc(h, gelu=True, rows=rows["fc"]), rows=rows["mlp_out"])


class _AttentionPlan:
    """Which slots each segment's queries read, worked out once per iteration and used by every layer."""

    def __init__(self, kv: PagedKV, segments: list[Segment], device) -> None:
        self.logit_rows, self.chunks, decodes, row = [], [], [], 0
        for s in segments:
            n, stop = len(s.tokens), s.start + len(s.tokens)
            slots = kv.slots(s.table, 0, stop)  # every position up to the segment's last
            if n == 1:
                decodes.append((row, slots))
            else:  # a prompt or a chunk of one: causal inside it, everything before it visible
                mask = None
                if s.start:  # query i (position start + i) sees keys 0 .. start + i; SDPA's is_causal would align
                    q_pos = torch.arange(s.start, stop, device=device).view(-1, 1)  # the other corner
                    mask = torch.arange(stop, device=device).view(1, -1) <= q_pos  # [query_pos, key_pos]
                self.chunks.append((row, n, torch.tensor(slots, device=device), mask))
            row += n
            if s.logits:
                self.logit_rows.append(row - 1)
        self.decode_groups = [_decode_group(g, device) for g in _split_by_length(decodes)]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        """Attention for every query row of ``q`` ``[tokens, heads, head_dim]`` over its own request's slots."""
        out = torch.empty_like(q)
        for row, n, slots, mask in self.chunks:
            keys, values = (t.index_select(0, slots).transpose(0, 1) for t in (k, v))  # gather: [heads, key_pos, hd]
            qs = q[row:row + n].transpose(0, 1)  # [heads, query_pos, head_dim]
            a = F.scaled_dot_product_attention(qs.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), attn_mask=mask,
                                               is_causal=mask is None, scale=scale)
            out[row:row + n] = a[0].transpose(0, 1)
        for rows, slots, mask in self.decode_groups:
            # index_select on the flat slot list, then a view: advanced indexing (t[slots]) took ~8x longer on a CPU
            b, n = slots.shape
            keys, values = (t.index_select(0, slots.view(-1)).view(b, n, *t.shape[1:]).transpose(1, 2)
                            for t in (k, v))  # [batch, heads, key_pos, head_dim]
            qs = q.index_select(0, rows).unsqueeze(2)  # [batch, heads, 1, head_dim]
            a = F.scaled_dot_product_attention(qs, keys, values, attn_mask=mask, scale=scale)
            out.index_copy_(0, rows, a.squeeze(2))
        return out


def _split_by_length(decodes: list[tuple[int, list[int]]]) -> list[list[tuple[int, list[int]]]]:
    """The decode rows ``(row, slots)`` in one group, or two (shorter contexts, longer ones) where that gathers a
    quarter fewer slots. One attention call pads every row's keys to the longest context: with requests that
    started at different times (continuous batching), a new one's 20 positions are gathered as the oldest one's
    200, and the gather (a copy of every layer's keys and values) is most of a decode step's attention."""
    if len(decodes) < 4:
        return [decodes] if decodes else []
    ordered = sorted(decodes, key=lambda d: len(d[1]))
    lengths = [len(sl) for _, sl in ordered]
    n, longest = len(ordered), lengths[-1]
    cost, cut = min((i * lengths[i - 1] + (n - i) * longest, i) for i in range(1, n))
    return [ordered[:cut], ordered[cut:]] if cost <= 0.75 * n * longest else [decodes]


def _decode_group(group: list[tuple[int, list[int]]], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(rows, slots [rows, longest], mask)`` for one attention call: every row's slots padded to the group's
    longest with slot 0, masked out (``mask`` None when the rows are equally long)."""
    longest = max(len(sl) for _, sl in group)
    rows = torch.tensor([r for r, _ in group], device=device, dtype=torch.long)
    slots = torch.tensor([sl + [0] * (longest - len(sl)) for _, sl in group], device=device)
    mask = None
    if any(len(sl) != longest for _, sl in group):
        lengths = torch.tensor([len(sl) for _, sl in group], device=device).view(-1, 1)
        mask = (torch.arange(longest, device=device) < lengths).view(len(group), 1, 1, -1)
    return rows, slots, mask
