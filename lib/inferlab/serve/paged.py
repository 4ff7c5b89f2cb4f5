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
layer). The decodes go through one padded attention call; each prompt chunk through its own.

The arithmetic is Hugging Face's ``GPT2Block`` on the model's own tensors (``_hf.block_tensors``), as in
``inferlab.fast``: same products (``addmm`` on the ``[in, out]`` weights), same order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import _hf
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

    def __init__(self, model: Model, num_blocks: int, block_size: int) -> None:
        info = model.info
        self.model, self.num_blocks, self.block_size = model, num_blocks, block_size
        self.blocks = _hf.block_tensors(model)
        self.wte, self.wpe = _hf.embedding_tensors(model)  # [vocab, d_model], [n_ctx, d_model]
        self.head = _hf.head_weight(model)  # [vocab, d_model]
        self.final_norm = _hf.final_norm_tensors(model)
        self.n_head, self.head_dim, self.d = info.n_head, info.head_dim, info.d_model
        shape = (num_blocks * block_size, info.n_head, info.head_dim)
        self.k = [torch.zeros(shape, dtype=self.wte.dtype, device=self.wte.device) for _ in self.blocks]
        self.v = [torch.zeros_like(t) for t in self.k]

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
            return F.linear(h, self.head)  # [segments wanting logits, vocab]

    def _block(self, i: int, w, x: torch.Tensor, write: torch.Tensor, plan: _AttentionPlan) -> torch.Tensor:
        """GPT-2's block on ``x`` ``[tokens, d_model]`` (Hugging Face's ``GPT2Block``, on plain tensors)."""
        T, d = x.shape
        h = F.layer_norm(x, (d,), w.ln1.weight, w.ln1.bias, w.ln1.eps)
        q, k, v = torch.addmm(w.qkv.bias, h, w.qkv.weight).split(d, dim=1)  # each [tokens, d_model]
        q, k, v = (t.view(T, self.n_head, self.head_dim) for t in (q, k, v))  # [tokens, heads, head_dim]
        self.k[i].index_copy_(0, write, k)  # into the blocks first: a token attends to itself too
        self.v[i].index_copy_(0, write, v)
        a = plan.attend(q, self.k[i], self.v[i], w.attention_scale)  # [tokens, heads, head_dim]
        x = x + torch.addmm(w.attn_out.bias, a.reshape(T, d), w.attn_out.weight)
        h = F.layer_norm(x, (d,), w.ln2.weight, w.ln2.bias, w.ln2.eps)
        return x + torch.addmm(w.mlp_out.bias, w.activation(torch.addmm(w.fc.bias, h, w.fc.weight)), w.mlp_out.weight)


class _AttentionPlan:
    """Which slots each segment's queries read, worked out once per iteration and used by every layer."""

    def __init__(self, kv: PagedKV, segments: list[Segment], device) -> None:
        self.logit_rows, self.chunks, decode_rows, decode_slots, row = [], [], [], [], 0
        for s in segments:
            n, stop = len(s.tokens), s.start + len(s.tokens)
            slots = kv.slots(s.table, 0, stop)  # every position up to the segment's last
            if n == 1:
                decode_rows.append(row)
                decode_slots.append(slots)
            else:  # a prompt or a chunk of one: causal inside it, everything before it visible
                mask = None
                if s.start:  # query i (position start + i) sees keys 0 .. start + i; SDPA's is_causal would align
                    q_pos = torch.arange(s.start, stop, device=device).view(-1, 1)  # the other corner
                    mask = torch.arange(stop, device=device).view(1, -1) <= q_pos  # [query_pos, key_pos]
                self.chunks.append((row, n, torch.tensor(slots, device=device), mask))
            row += n
            if s.logits:
                self.logit_rows.append(row - 1)
        self.decode_rows = torch.tensor(decode_rows, device=device, dtype=torch.long)
        self.decode_slots = self.decode_mask = None
        if decode_slots:  # pad every decode's slot list to the longest; the padding is masked out
            longest = max(len(s) for s in decode_slots)
            self.decode_slots = torch.tensor([s + [0] * (longest - len(s)) for s in decode_slots], device=device)
            if any(len(s) != longest for s in decode_slots):
                lengths = torch.tensor([len(s) for s in decode_slots], device=device).view(-1, 1)
                self.decode_mask = (torch.arange(longest, device=device) < lengths).view(len(decode_slots), 1, 1, -1)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        """Attention for every query row of ``q`` ``[tokens, heads, head_dim]`` over its own request's slots."""
        out = torch.empty_like(q)
        for row, n, slots, mask in self.chunks:
            keys, values = (t.index_select(0, slots).transpose(0, 1) for t in (k, v))  # gather: [heads, key_pos, hd]
            qs = q[row:row + n].transpose(0, 1)  # [heads, query_pos, head_dim]
            a = F.scaled_dot_product_attention(qs.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), attn_mask=mask,
                                               is_causal=mask is None, scale=scale)
            out[row:row + n] = a[0].transpose(0, 1)
        if self.decode_slots is not None:
            # index_select on the flat slot list, then a view: advanced indexing (t[slots]) took ~8x longer on a CPU
            b, n = self.decode_slots.shape
            keys, values = (t.index_select(0, self.decode_slots.view(-1)).view(b, n, *t.shape[1:]).transpose(1, 2)
                            for t in (k, v))  # [batch, heads, key_pos, head_dim]
            qs = q.index_select(0, self.decode_rows).unsqueeze(2)  # [batch, heads, 1, head_dim]
            a = F.scaled_dot_product_attention(qs, keys, values, attn_mask=self.decode_mask, scale=scale)
            out.index_copy_(0, self.decode_rows, a.squeeze(2))
        return out
