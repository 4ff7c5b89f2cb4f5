"""FlashAttention, readable: attention computed tile by tile with an online softmax, and the bytes it saves.

    steps = online_softmax_steps([2.0, 1.0, 3.0])   # one row: running max, running sum, rescale at each step
    out = tiled_attention(q, k, v, block_q=64, block_k=64)   # == SDPA(is_causal=True), no T x T matrix
    decode_attention(q_new, k_cache, v_cache)                 # one new token against a grouped KV cache
    tiled_traffic(1024, 64), eager_traffic(1024, 64)          # slow-memory bytes each version moves
    kv_heads_table(cost.published_shape("gpt2"))              # KV bytes per token with 12, 4, 1 KV heads

Shapes (nanoGPT's vocabulary): queries ``[batch, heads, T, head_dim]``; keys and values
``[batch, kv_heads, T, head_dim]`` with ``heads`` a multiple of ``kv_heads`` (grouped-query attention; 1 KV
head is multi-query attention). One tile of scores is ``[block_q, block_k]``; the full ``[T, T]`` matrix of
the eager version is never built.

The byte counts follow the accounting of FlashAttention (Dao et al. 2022, Theorem 2: standard attention moves
Theta(N d + N^2) elements through slow memory, the tiled one Theta(N^2 d^2 / M) for a fast memory of M elements),
for the loop order written here: queries outside, keys inside (FlashAttention-2's order, so each output row is
written once and the running max and sum never leave fast memory).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .cost import Shape, kv_bytes_per_token
from .errors import bad_value, check_number
from .i18n import tr
from .units import format_bytes


# --------------------------------------------------------------------- the online softmax, one row
@dataclass(frozen=True)
class SoftmaxStep:
    """One step of the online softmax: a chunk of scores read, the running max and sum updated."""

    start: int  # first position of the chunk in the row
    scores: tuple[float, ...]  # the chunk's raw scores
    max_before: float  # running max before this chunk (-inf at the start)
    max_after: float  # running max after it
    rescale: float  # exp(max_before - max_after): what the old sum (and a partial output) is multiplied by
    sum_after: float  # running sum of exp(score - max_after) over every score read so far

    def __repr__(self) -> str:
        return tr("SoftmaxStep(positions {start}..{end}: max {before:.4g} -> {after:.4g}, rescale {rescale:.4g}, "
                  "sum {total:.4g})", start=self.start, end=self.start + len(self.scores) - 1,
                  before=self.max_before, after=self.max_after, rescale=self.rescale, total=self.sum_after)


@dataclass(frozen=True)
class OnlineSoftmax:
    """Every step of one row's online softmax, and the probabilities it ends with (== ``torch.softmax``)."""

    steps: tuple[SoftmaxStep, ...]
    probs: tuple[float, ...]

    def __repr__(self) -> str:
        return "\n".join([tr("OnlineSoftmax({n} steps, final max {m:.4g}, final sum {s:.4g})", n=len(self.steps),
                             m=self.steps[-1].max_after, s=self.steps[-1].sum_after),
                          *(f"  {step!r}" for step in self.steps)])


def online_softmax_steps(scores: Sequence[float] | torch.Tensor, block: int = 1) -> OnlineSoftmax:
    """Softmax of one row read ``block`` scores at a time, in one pass (Milakov & Gimelshein 2018).

    >>> r = online_softmax_steps([2.0, 1.0, 3.0])
    >>> [round(s.rescale, 4) for s in r.steps]   # the max moved at 2.0 (from -inf) and at 3.0
    [0.0, 1.0, 0.3679]
    """
    row = torch.as_tensor(scores, dtype=torch.float64).flatten()
    if row.numel() == 0 or not bool(torch.isfinite(row).all()):
        raise bad_value("scores", list(row.tolist())[:8], "a non-empty row of finite numbers",
                        "pass one row of attention scores (masked positions left out, not -inf)")
    check_number("block", block, low=1, integer=True, fix="read at least one score per step (1 shows every score)")
    steps, m, total = [], -math.inf, 0.0
    for start in range(0, row.numel(), block):
        chunk = row[start:start + block]
        new_m = max(m, float(chunk.max()))
        rescale = math.exp(m - new_m)  # exp(-inf) = 0 on the first step: there was no sum to keep
        total = total * rescale + float(torch.exp(chunk - new_m).sum())
        steps.append(SoftmaxStep(start, tuple(chunk.tolist()), m, new_m, rescale, total))
        m = new_m
    return OnlineSoftmax(tuple(steps), tuple((torch.exp(row - m) / total).tolist()))


# --------------------------------------------------------------------- attention: eager and tiled
def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise bad_value("q, k, v", (tuple(q.shape), tuple(k.shape), tuple(v.shape)),
                        "4-D tensors [batch, heads, T, head_dim]", "add the missing batch or head axis (unsqueeze)")
    B, H, T, D = q.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[2:] != (T, D):
        raise bad_value("k, v", (tuple(k.shape), tuple(v.shape)),
                        tr("both [{B}, kv_heads, {T}, {D}] to match q {q}", B=B, T=T, D=D, q=list(q.shape)),
                        tr("give keys and values the batch, length and head_dim of the queries"))
    if k.shape[1] < 1 or H % k.shape[1]:
        raise bad_value("kv_heads", k.shape[1], tr("a divisor of the {H} query heads", H=H),
                        tr("use as many KV heads as query heads, or a divisor of it (grouped-query attention)"))


def eager_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention the textbook way: the whole ``[batch, heads, T, T]`` score matrix, masked, softmaxed."""
    _check_qkv(q, k, v)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # each query head's own K/V
    T = q.shape[2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # [batch, heads, T, T]
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v


def _is_causal_mask(mask, T: int) -> bool:
    """Whether ``mask`` is the boolean ``[T, T]`` lower triangle (True where a query may see a key)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape[-2:]) != (T, T):
        return False
    return bool((mask == torch.ones(T, T, dtype=torch.bool, device=mask.device).tril()).all())


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_q: int = 64, block_k: int = 64,
                    is_causal: bool = True, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Causal attention in ``[block_q, block_k]`` tiles with an online softmax: FlashAttention's forward pass.

    q ``[batch, heads, T, head_dim]``; k, v ``[batch, kv_heads, T, head_dim]`` (``heads`` a multiple of
    ``kv_heads``). Returns ``[batch, heads, T, head_dim]``, equal to
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` on repeated K/V to rounding. Only the causal
    mask is built: ``is_causal=False``, or an ``attn_mask`` other than the causal ``[T, T]`` one, is refused.

    >>> q = k = v = torch.randn(1, 12, 100, 64)
    >>> out = tiled_attention(q, k, v, block_q=32, block_k=32)     # 32 does not divide 100: the last tile is short
    """
    if is_causal is not True:
        raise bad_value("is_causal", is_causal, tr("True (only the causal mask is built here)"),
                        tr("use F.scaled_dot_product_attention for a non-causal or custom mask"))
    check_number("block_q", block_q, low=1, integer=True, fix=tr("pick a tile of at least one query row, e.g. 64"))
    check_number("block_k", block_k, low=1, integer=True, fix=tr("pick a tile of at least one key, e.g. 64"))
    _check_qkv(q, k, v)
    B, H, T, D = q.shape
    if attn_mask is not None and not _is_causal_mask(attn_mask, T):
        raise bad_value("attn_mask", f"{attn_mask.dtype} {list(attn_mask.shape)}", f"None or the causal mask "
                        f"torch.ones({T}, {T}, dtype=torch.bool).tril()", "leave attn_mask out (the causal mask is "
                        "built in), or use F.scaled_dot_product_attention for another mask")
    G = H // k.shape[1]  # query heads per KV head: they share each K/V tile
    qg = q.reshape(B, k.shape[1], G, T, D) / math.sqrt(D)  # [batch, kv_heads, group, T, head_dim]
    kg, vg = k.unsqueeze(2), v.unsqueeze(2)  # [batch, kv_heads, 1, T, head_dim]: broadcast over the group
    out = torch.empty_like(qg)
    for qs in range(0, T, block_q):
        qe = min(qs + block_q, T)
        qi = qg[..., qs:qe, :]  # [.., Bq, head_dim]: one query tile, held in fast memory
        m = torch.full((*qi.shape[:-1], 1), -math.inf, dtype=q.dtype, device=q.device)  # running max per row
        ell = torch.zeros_like(m)  # running sum of exp(score - m) per row
        acc = torch.zeros_like(qi)  # output rows, not yet divided by the sum
        for ks in range(0, qe, block_k):  # causal: keys after this tile's last query are never read
            ke = min(ks + block_k, qe)
            s = qi @ kg[..., ks:ke, :].transpose(-1, -2)  # [.., Bq, Bk]: one tile of scores
            if ke > qs + 1:  # the tile reaches above the diagonal: hide keys later than each query
                later = torch.arange(ks, ke, device=q.device) > torch.arange(qs, qe, device=q.device)[:, None]
                s = s.masked_fill(later, -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)  # key 0 is in every row's first tile, so m_new is finite
            rescale = torch.exp(m - m_new)  # earlier partial sums and outputs were scaled to the old max
            ell = ell * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ vg[..., ks:ke, :]
            m = m_new
        out[..., qs:qe, :] = acc / ell
    return out.reshape(B, H, T, D)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One new token per sequence against a cache of (grouped) keys and values: the read of a decode step.

    q ``[batch, heads, 1, head_dim]``; k, v ``[batch, kv_heads, context, head_dim]`` (``heads`` a multiple of
    ``kv_heads``). Each group of ``heads // kv_heads`` query heads reads its KV head once, broadcast and never
    copied, so fewer KV heads read fewer bytes. No mask: the new token sees every cached position. Returns
    ``[batch, heads, 1, head_dim]``, equal to SDPA over K/V repeated for each query head.
    """
    if q.dim() != 4 or q.shape[2] != 1:
        raise bad_value("q", tuple(q.shape), "[batch, heads, 1, head_dim]: one new token per sequence",
                        "pass the new token's queries only (q[:, :, -1:])")
    if k.dim() != 4 or k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise bad_value("k, v", (tuple(k.shape), tuple(v.shape)), f"both [{q.shape[0]}, kv_heads, context, "
                        f"{q.shape[3]}]", "give keys and values the batch and head_dim of the queries")
    B, H, _, D = q.shape
    if H % k.shape[1]:
        raise bad_value("kv_heads", k.shape[1], tr("a divisor of the {H} query heads", H=H),
                        tr("use as many KV heads as query heads, or a divisor of it (grouped-query attention)"))
    qg = q.reshape(B, k.shape[1], H // k.shape[1], D) / math.sqrt(D)  # [batch, kv_heads, group, head_dim]
    p = (qg @ k.transpose(-1, -2)).softmax(dim=-1)  # [batch, kv_heads, group, context]
    return (p @ v).reshape(B, H, 1, D)


# --------------------------------------------------------------------- bytes through slow memory
@dataclass(frozen=True)
class Traffic:
    """Bytes one attention forward moves between slow memory (HBM, RAM) and fast memory (SRAM, cache).

    ``fast_bytes``: the working set one (batch, head) needs in fast memory at once (tiled; 0 for eager, which
    streams). ``score_bytes``: the ``[T, T]`` matrices stored in slow memory (eager; 0 for tiled).
    """

    version: str  # "tiled" or "eager"
    T: int
    head_dim: int
    heads: int
    batch: int
    read_bytes: int
    written_bytes: int
    fast_bytes: int
    score_bytes: int
    block_q: int = 0
    block_k: int = 0

    @property
    def bytes(self) -> int:
        """Everything moved: read + written."""
        return self.read_bytes + self.written_bytes

    def __repr__(self) -> str:
        return tr("Traffic({version}, T={T}, head_dim={d}, {heads} heads: {total} through slow memory ({read} read, "
                  "{written} written))", version=self.version, T=self.T, d=self.head_dim,
                  heads=self.heads * self.batch, total=format_bytes(self.bytes), read=format_bytes(self.read_bytes),
                  written=format_bytes(self.written_bytes))


def _check_shape(T: int, head_dim: int, heads: int, batch: int, bytes_per_element: int) -> None:
    for name, value in (("T", T), ("head_dim", head_dim), ("heads", heads), ("batch", batch),
                        ("bytes_per_element", bytes_per_element)):
        check_number(name, value, low=1, integer=True, fix=f"{name} counts something: use at least 1")


def tiled_traffic(T: int, head_dim: int, *, heads: int = 1, batch: int = 1, block_q: int = 64, block_k: int = 64,
                  bytes_per_element: int = 4) -> Traffic:
    """Slow-memory bytes of ``tiled_attention`` (causal) with these tiles.

    Per (batch, head): Q read once (T d), O written once (T d); the query tile ending at row ``qe`` reads keys
    and values 0..qe-1 (2 qe d). Running max and sum stay in fast memory. K/V are counted per query head (a
    GPU kernel gives each head its own block), so fewer KV heads shrink the cache, not this count.
    """
    _check_shape(T, head_dim, heads, batch, bytes_per_element)
    check_number("block_q", block_q, low=1, integer=True, fix="pick a tile of at least one query row, e.g. 64")
    check_number("block_k", block_k, low=1, integer=True, fix="pick a tile of at least one key, e.g. 64")
    d, n = head_dim, heads * batch
    keys_read = sum(min(qs + block_q, T) for qs in range(0, T, block_q))  # keys each query tile streams
    read = (T * d + 2 * keys_read * d) * n  # Q, then K and V
    fast = block_q * d * 2 + 2 * block_k * d + block_q * block_k + 2 * block_q  # Q, acc; K, V; scores; max, sum
    e = bytes_per_element
    return Traffic("tiled", T, d, heads, batch, read * e, T * d * n * e, fast * e, 0, block_q, block_k)


def eager_traffic(T: int, head_dim: int, *, heads: int = 1, batch: int = 1, bytes_per_element: int = 4) -> Traffic:
    """Slow-memory bytes of standard attention (FlashAttention paper, Algorithm 0): S, then P, stored in full.

    Per (batch, head): read Q, K (2 T d), write S (T^2); read S, write P (2 T^2); read P, V (T^2 + T d), write O
    (T d): 4 T d + 4 T^2 elements. (PyTorch's eager mask pass adds another read and write of T^2; not counted.)
    """
    _check_shape(T, head_dim, heads, batch, bytes_per_element)
    d, n, e = head_dim, heads * batch, bytes_per_element
    read = (2 * T * d + T * T + T * T + T * d) * n
    written = (T * T + T * T + T * d) * n
    return Traffic("eager", T, d, heads, batch, read * e, written * e, 0, T * T * n * e)


# --------------------------------------------------------------------- fewer KV heads, a smaller cache
@dataclass(frozen=True)
class KvHeads:
    """KV cache size of one model shape with ``kv_heads`` key/value heads."""

    kv_heads: int
    kind: str  # "MHA" (one KV head per query head), "GQA" (groups), "MQA" (one KV head)
    bytes_per_token: int
    bytes_at_n_ctx: int  # one sequence filling the context window

    def __repr__(self) -> str:
        return tr("KvHeads({kind}, {kv_heads} KV heads: {kib:.1f} KiB per token, {mib:.1f} MiB at full context)",
                  kind=self.kind, kv_heads=self.kv_heads, kib=self.bytes_per_token / 1024,
                  mib=self.bytes_at_n_ctx / 2**20)


def kv_heads_table(shape: Shape, kv_heads: Sequence[int] = (12, 4, 1)) -> list[KvHeads]:
    """KV bytes per token (``cost.kv_bytes_per_token``) of ``shape`` with each count of KV heads.

    >>> [r.bytes_per_token for r in kv_heads_table(Shape("gpt2", 12, 12, 768, 50257, 1024))]
    [73728, 24576, 6144]
    """
    if isinstance(kv_heads, (int, str)) or not kv_heads:
        raise bad_value("kv_heads", kv_heads, "a non-empty list of head counts", "e.g. kv_heads=(12, 4, 1)")
    rows = []
    for h in kv_heads:
        check_number("kv_heads", h, low=1, high=shape.n_head, integer=True,
                     fix=f"use a divisor of the {shape.n_head} query heads")
        if shape.n_head % h:
            raise bad_value("kv_heads", h, f"a divisor of the {shape.n_head} query heads",
                            "each KV head serves an equal group of query heads")
        per_token = kv_bytes_per_token(dataclasses.replace(shape, n_kv_head=h))
        kind = "MHA" if h == shape.n_head else "MQA" if h == 1 else "GQA"
        rows.append(KvHeads(int(h), kind, per_token, per_token * shape.n_ctx))
    return rows
