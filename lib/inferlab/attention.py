"""Attention, opened up: one layer by hand, kinds of heads, entropy, and the logit lens.

    pat  = Patterns.from_trace(il.generate(m, "To be, or not", 4, record=("embeddings", "attention", "residual")))
    hand = layer_by_hand(m, pat.residual[0], layer=0)   # Q, K, V, scores, mask, softmax, output: every step
    check_layer(hand, pat)                              # equals the recorded probabilities and block output
    scores = head_scores(m, pat)                        # previous-token, first-token, induction [layers, heads]
    lens = logit_lens(m, pat.residual)                  # what each layer would predict

Shapes: attention ``[layers, heads, query_pos, key_pos]``; residual ``[layers + 1, T, d_model]`` (the
embeddings, then the output of each block); one head's pattern ``[query_pos, key_pos]``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from . import _hf
from .engine import DEFAULT_MAX_ATTENTION_BYTES, as_ids, forward_full, prefill
from .errors import bad_value, check_number
from .hooks import capture
from .models import Model
from .timing import clock, summarize
from .trace import Trace

KINDS = ("previous", "first", "induction")


# --------------------------------------------------------------------- HF access used only here
# These read GPT-2 block internals; they belong in _hf.py (kept here, one place, until moved there).
def _attention_scale(block: torch.nn.Module) -> float:
    """The factor on QK^T: 1/sqrt(head_dim), divided by (layer + 1) when the config asks for it."""
    return float(block.attn.scaling)


def _norms_and_mlp(block: torch.nn.Module) -> tuple[torch.nn.LayerNorm, torch.nn.LayerNorm, torch.nn.Module]:
    """A block's ``ln_1`` (before attention), ``ln_2`` (before the MLP) and its MLP."""
    return block.ln_1, block.ln_2, block.mlp


# --------------------------------------------------------------------- recorded patterns
def _need_attention(trace: Trace) -> None:
    if not isinstance(trace, Trace) or "attention" not in trace.recorded:
        raise ValueError("attention was not recorded in this trace. Fix: generate(m, prompt, record=("
                         "'embeddings', 'attention', 'residual')).")


@dataclass
class Patterns:
    """Attention probabilities (and the residual stream) of one forward pass over ``ids``."""

    ids: list[int]
    pieces: list[str]
    attention: torch.Tensor  # [layers, heads, query_pos, key_pos]
    residual: torch.Tensor | None = None  # [layers + 1, T, d_model]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(layers, heads, T, T)``."""
        return tuple(self.attention.shape)

    def __repr__(self) -> str:
        L, H, T, _ = self.shape
        return f"Patterns({T} tokens, {L} layers x {H} heads, attention [{L}, {H}, {T}, {T}])"

    @classmethod
    def from_trace(cls, trace: Trace) -> Patterns:
        """The prefill step of a ``generate(..., record=("attention", ...))`` run."""
        _need_attention(trace)
        step = trace.steps[0]
        return cls(list(trace.prompt_ids), list(trace.prompt_pieces), torch.stack(step.attention),
                   step.residual)


def attention_bytes(n_layer: int, n_head: int, tokens: int) -> int:
    """Bytes to keep every fp32 attention probability of one T x T prefill: layers x heads x T^2 x 4."""
    return n_layer * n_head * tokens * tokens * 4


def record_patterns(model: Model, ids, *, max_attention_bytes: int = DEFAULT_MAX_ATTENTION_BYTES) -> Patterns:
    """One forward pass over token ids (no sampling), recording attention and the residual stream.

    Refuses, before running, when the probabilities would need more than ``max_attention_bytes``.
    """
    t = as_ids(model, ids)[:1]
    if t.shape[1] > model.info.n_ctx:
        raise bad_value("ids", f"{t.shape[1]} tokens", f"at most n_ctx={model.info.n_ctx} tokens",
                        "shorten the text")
    need = attention_bytes(model.info.n_layer, model.info.n_head, t.shape[1])
    if need > max_attention_bytes:
        raise ValueError(
            f"recording attention for {t.shape[1]} tokens needs {need / 2**20:.1f} MiB (layers x heads x T^2 x "
            f"4 bytes); the limit is max_attention_bytes={max_attention_bytes / 2**20:.1f} MiB. Fix: use fewer "
            "tokens or raise max_attention_bytes.")
    with capture(model.hf, {"embeddings", "attention", "residual"}) as store:
        forward_full(model, t)
        attention = torch.stack([store[f"blocks.{i}.attn.pattern"] for i in range(model.info.n_layer)])
        residual = torch.stack([store["embed.sum"]] +
                               [store[f"blocks.{i}.resid_post"] for i in range(model.info.n_layer)])
    ids_list = [int(i) for i in t[0]]
    return Patterns(ids_list, [model.decode([i]) for i in ids_list], attention.float().cpu(),
                    residual.float().cpu())


# --------------------------------------------------------------------- one layer by hand
@dataclass
class LayerByHand:
    """Every intermediate of one block, computed step by step from its own weights."""

    layer: int
    scale: float  # 1 / sqrt(head_dim)
    x_in: torch.Tensor  # [T, d_model]           the residual stream entering the block
    x_norm: torch.Tensor  # [T, d_model]         ln_1(x_in)
    qkv: torch.Tensor  # [T, 3*d_model]          x_norm @ W_qkv + b_qkv (one fused matmul)
    q: torch.Tensor  # [heads, T, head_dim]      queries, split into heads
    k: torch.Tensor  # [heads, T, head_dim]      keys
    v: torch.Tensor  # [heads, T, head_dim]      values
    scores: torch.Tensor  # [heads, T, T]        q @ k^T * scale
    mask: torch.Tensor  # [T, T] bool            True where key_pos <= query_pos
    masked: torch.Tensor  # [heads, T, T]        scores with -inf above the diagonal
    probs: torch.Tensor  # [heads, T, T]         softmax over key_pos: each row sums to 1
    mixed: torch.Tensor  # [heads, T, head_dim]  probs @ v: a weighted sum of values per head
    merged: torch.Tensor  # [T, d_model]         heads side by side again
    attn_out: torch.Tensor  # [T, d_model]       merged @ W_proj + b_proj
    resid_mid: torch.Tensor  # [T, d_model]      x_in + attn_out
    out: torch.Tensor  # [T, d_model]            resid_mid + mlp(ln_2(resid_mid)): the block's output

    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """``(name, shape)`` of every tensor, in the order they are computed."""
        return [(f.name, tuple(getattr(self, f.name).shape)) for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)]

    def __repr__(self) -> str:
        rows = "\n".join(f"  {name:<10} {list(shape)}" for name, shape in self.shapes())
        return f"LayerByHand(layer {self.layer}, scale {self.scale:.4f})\n{rows}"


def layer_by_hand(model: Model, x_in: torch.Tensor, layer: int) -> LayerByHand:
    """Run block ``layer`` step by step on ``x_in`` ``[T, d_model]`` (the residual entering it), in fp32.

    >>> hand = layer_by_hand(m, pat.residual[0], layer=0)    # doctest: +SKIP
    >>> hand.probs.shape                                      # doctest: +SKIP
    torch.Size([5, 13, 13])
    """
    n_layer, n_head = model.info.n_layer, model.info.n_head
    check_number("layer", layer, low=0, high=n_layer - 1, integer=True, fix=f"pick a layer 0..{n_layer - 1}")
    if x_in.dim() != 2 or x_in.shape[1] != model.info.d_model:
        raise bad_value("x_in", tuple(x_in.shape), f"[T, d_model] with d_model={model.info.d_model}",
                        "pass one layer's residual, e.g. pat.residual[layer]")
    block = _hf.blocks(model.hf)[layer]
    ln_1, ln_2, mlp = _norms_and_mlp(block)
    w_qkv, b_qkv, c_proj = _hf.qkv_weights(block)
    p = next(block.parameters())
    with torch.inference_mode():
        x = x_in.to(p.device, torch.float32)
        T, d = x.shape
        hd = d // n_head
        x_norm = F.layer_norm(x, (d,), ln_1.weight.float(), ln_1.bias.float(), ln_1.eps)
        qkv = x_norm @ w_qkv.float() + b_qkv.float()  # Conv1D stores [in, out], so x @ W
        q, k, v = (t.view(T, n_head, hd).transpose(0, 1) for t in qkv.split(d, dim=1))
        scale = _attention_scale(block)
        scores = (q @ k.transpose(-1, -2)) * scale
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        masked = scores.masked_fill(~mask, float("-inf"))
        probs = masked.softmax(dim=-1)
        mixed = probs @ v
        merged = mixed.transpose(0, 1).reshape(T, d)
        attn_out = merged @ c_proj.weight.float() + c_proj.bias.float()
        resid_mid = x + attn_out
        mlp_in = F.layer_norm(resid_mid, (d,), ln_2.weight.float(), ln_2.bias.float(), ln_2.eps)
        out = resid_mid + mlp(mlp_in.to(p.dtype)).float()  # the MLP is not this notebook's topic: run it as is
    steps = (x, x_norm, qkv, q, k, v, scores, mask, masked, probs, mixed, merged, attn_out, resid_mid, out)
    return LayerByHand(layer, scale, *(t.detach().cpu() for t in steps))  # in field order


@dataclass(frozen=True)
class LayerCheck:
    """Largest differences between the hand computation and what the model recorded."""

    layer: int
    probs_max_diff: float  # against the recorded attention probabilities
    output_max_diff: float  # against the block's own output (residual after the block)

    def ok(self, tol: float = 1e-5) -> bool:
        """Both differences within ``tol``."""
        return self.probs_max_diff <= tol and self.output_max_diff <= tol

    def __repr__(self) -> str:
        return (f"LayerCheck(layer {self.layer}: probabilities differ by at most {self.probs_max_diff:.1e}, "
                f"block output by at most {self.output_max_diff:.1e})")


def check_layer(hand: LayerByHand, patterns: Patterns) -> LayerCheck:
    """Compare ``hand`` with the recorded probabilities and the recorded output of the same block."""
    if patterns.residual is None:
        raise ValueError("the residual stream was not recorded. Fix: record=('embeddings', 'attention', "
                         "'residual') in generate(), or use record_patterns().")
    recorded = patterns.attention[hand.layer]
    return LayerCheck(hand.layer, float((hand.probs - recorded).abs().max()),
                      float((hand.out - patterns.residual[hand.layer + 1]).abs().max()))


# --------------------------------------------------------------------- kinds of heads
def _mean_at(attention: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    return attention[..., queries, keys].mean(dim=-1)


def previous_token_score(attention: torch.Tensor) -> torch.Tensor:
    """Mean weight from each query (position >= 1) to the token just before it; ``[..., T, T]`` -> ``[...]``."""
    q = torch.arange(1, attention.shape[-1])
    return _mean_at(attention, q, q - 1)


def first_token_score(attention: torch.Tensor) -> torch.Tensor:
    """Mean weight from each query (position >= 1) to position 0; ``[..., T, T]`` -> ``[...]``."""
    q = torch.arange(1, attention.shape[-1])
    return _mean_at(attention, q, torch.zeros_like(q))


def induction_score(attention: torch.Tensor, repeat_len: int, offset: int = 0) -> torch.Tensor:
    """On ``prefix(offset) + R + R`` (R of ``repeat_len`` tokens): mean weight from each token of the
    second copy to the token after its earlier occurrence (key = query - repeat_len + 1)."""
    q = torch.arange(offset + repeat_len, offset + 2 * repeat_len)
    return _mean_at(attention, q, q - repeat_len + 1)


def uniform_baseline(queries: torch.Tensor) -> float:
    """The score a head would get by spreading weight evenly over every allowed key: mean 1/(q+1)."""
    return float((1.0 / (queries.double() + 1)).mean())


@dataclass
class HeadScores:
    """Per-head scores ``[layers, heads]`` for each kind, and the repeated random sequence used."""

    previous: torch.Tensor
    first: torch.Tensor
    induction: torch.Tensor
    baseline: dict[str, float]  # what evenly spread attention would score, per kind
    repeated: Patterns  # BOS + R + R, recorded
    repeat_len: int

    def top(self, kind: str) -> tuple[int, int, float]:
        """``(layer, head, score)`` of the highest-scoring head of ``kind``."""
        if kind not in KINDS:
            raise bad_value("kind", kind, f"one of {list(KINDS)}", "pick one of those")
        s = getattr(self, kind)
        flat = int(s.argmax())
        return flat // s.shape[1], flat % s.shape[1], float(s.flatten()[flat])

    def __repr__(self) -> str:
        tops = ", ".join(f"{k}: L{a}H{b}={c:.2f}" for k in KINDS for a, b, c in [self.top(k)])
        return f"HeadScores([{self.previous.shape[0]}, {self.previous.shape[1]}], top {tops})"


def random_repeated_ids(model: Model, repeat_len: int, seed: int = 0) -> list[int]:
    """``<|endoftext|>`` + R + R, with R ``repeat_len`` distinct random token ids (fixed by ``seed``)."""
    check_number("repeat_len", repeat_len, low=2, high=(model.info.n_ctx - 1) // 2, integer=True,
                 fix="pick a length that fits twice in the context")
    g = torch.Generator().manual_seed(seed)
    r = torch.randperm(model.info.vocab_size - 1, generator=g)[:repeat_len]
    r = (r + (r >= model.eos_id).long()).tolist()  # every id except <|endoftext|>
    return [model.eos_id, *r, *r]


def head_scores(model: Model, patterns: Patterns, *, repeat_len: int = 20, seed: int = 0) -> HeadScores:
    """Score every head: previous and first token on ``patterns``; induction on a repeated random sequence."""
    T = patterns.shape[2]
    if T < 2:
        raise bad_value("patterns", f"{T} token(s)", "at least 2 tokens", "use a longer prompt")
    repeated = record_patterns(model, random_repeated_ids(model, repeat_len, seed))
    q_text = torch.arange(1, T)
    q_ind = torch.arange(1 + repeat_len, 1 + 2 * repeat_len)
    return HeadScores(
        previous=previous_token_score(patterns.attention), first=first_token_score(patterns.attention),
        induction=induction_score(repeated.attention, repeat_len, offset=1),
        baseline={"previous": uniform_baseline(q_text), "first": uniform_baseline(q_text),
                  "induction": uniform_baseline(q_ind)},
        repeated=repeated, repeat_len=repeat_len)


def attention_entropy(attention: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of each query row, averaged over queries >= 1: ``[..., T, T]`` -> ``[...]``.

    0 bits: all weight on one key. log2(q+1) bits: spread evenly over every allowed key.
    """
    p = attention[..., 1:, :].double()
    h = -(p * torch.log2(p.clamp_min(1e-30))).sum(-1)
    return h.mean(-1).float()


def uniform_entropy(tokens: int) -> float:
    """The entropy (bits) ``attention_entropy`` gives for evenly spread attention over ``tokens`` positions."""
    return float(torch.log2(torch.arange(2, tokens + 1, dtype=torch.float64)).mean())


# --------------------------------------------------------------------- logit lens
@dataclass
class LogitLens:
    """What the model would predict if it stopped after each layer (final norm + LM head on the residual)."""

    layer_names: list[str]  # "embeddings", "block 0", ...
    pieces: list[str]  # the input tokens, [T]
    top_ids: torch.Tensor  # [layers + 1, T, k]
    top_probs: torch.Tensor  # [layers + 1, T, k]
    top_pieces: list[list[list[str]]]  # [layers + 1][T][k]
    next_prob: torch.Tensor  # [layers + 1, T - 1]: probability of the token that really comes next
    logits_last: torch.Tensor  # [T, vocab]: the last entry's logits (the model's own output)

    def table(self, position: int) -> str:
        """A Markdown table: for the token at ``position``, each layer's top-k guesses for the next token."""
        T = self.top_ids.shape[1]
        check_number("position", position, low=0, high=T - 1, integer=True, fix=f"pick 0..{T - 1}")
        k = self.top_ids.shape[2]
        head = "| after | " + " | ".join(f"#{i + 1}" for i in range(k)) + " |\n" + "|---" * (k + 1) + "|\n"
        rows = [f"| {name} | " + " | ".join("`" + repr(p).replace("|", "\\|") + f"` {float(q):.3g}" for p, q in
                                            zip(self.top_pieces[s][position], self.top_probs[s, position])) + " |"
                for s, name in enumerate(self.layer_names)]
        return head + "\n".join(rows)

    def __repr__(self) -> str:
        n, T, k = self.top_ids.shape
        return f"LogitLens({n} stages ({self.layer_names[0]} .. {self.layer_names[-1]}) x {T} positions, top {k})"


def logit_lens(model: Model, residual: torch.Tensor, ids: list[int] | None = None, *, k: int = 5) -> LogitLens:
    """Apply ``ln_f`` and the LM head to the residual after every layer ``[layers + 1, T, d_model]``."""
    check_number("k", k, low=1, high=50, integer=True, fix="ask for a few top predictions")
    if residual.dim() != 3 or residual.shape[-1] != model.info.d_model:
        raise bad_value("residual", tuple(residual.shape), "[layers + 1, T, d_model]",
                        "pass Patterns.residual (record 'embeddings' and 'residual')")
    head, norm = _hf.lm_head(model.hf), _hf.final_norm(model.hf)
    dtype = next(head.parameters()).dtype
    with torch.inference_mode():
        logits = head(norm(residual.to(model.device, dtype))).float()
        probs = logits.softmax(-1)
        top_p, top_i = probs.topk(k, dim=-1)
    next_prob = torch.zeros(residual.shape[0], max(residual.shape[1] - 1, 0))
    if ids is not None and len(ids) > 1:
        nxt = torch.tensor(ids[1:], device=probs.device)
        next_prob = probs[:, :-1].gather(-1, nxt.view(1, -1, 1).expand(probs.shape[0], -1, 1))[..., 0].cpu()
    names = ["embeddings"] + [f"block {i}" for i in range(residual.shape[0] - 1)]
    pieces = [] if ids is None else [model.decode([i]) for i in ids]
    top_pieces = [[[model.decode([int(i)]) for i in pos] for pos in layer] for layer in top_i.cpu()]
    return LogitLens(names, pieces, top_i.cpu(), top_p.cpu(), top_pieces, next_prob, logits[-1].cpu())


# --------------------------------------------------------------------- decode rows and cost
def decode_rows_max_diff(model: Model, trace: Trace) -> float:
    """Largest gap between each decode step's recorded row and the same row of one uncached forward pass."""
    _need_attention(trace)
    if len(trace.steps) < 2:
        raise ValueError("the trace has no decode step. Fix: generate at least 2 tokens.")
    full = record_patterns(model, trace.all_ids[:-1]).attention  # [layers, heads, T', T']
    diffs = []
    for step in trace.steps[1:]:
        row = torch.stack(step.attention)[:, :, -1]  # [layers, heads, position + 1]
        diffs.append(float((row - full[:, :, step.position, : step.position + 1]).abs().max()))
    return max(diffs)


@dataclass
class KernelTimes:
    """Seconds of one forward pass over ``tokens`` tokens, per attention kernel (after warm-up)."""

    tokens: int
    seconds: dict[str, list[float]]  # "sdpa", "eager", "eager + recording" -> one entry per repeat
    attention_bytes: int  # what recording every probability of this pass keeps

    def median(self, name: str) -> float:
        """Median seconds of ``name``."""
        return summarize(self.seconds[name]).median

    def __repr__(self) -> str:
        parts = ", ".join(f"{n} {self.median(n) * 1e3:.2f} ms" for n in self.seconds)
        return f"KernelTimes({self.tokens} tokens, medians: {parts})"


def _kernel(model: Model, name: str) -> contextlib.AbstractContextManager:
    """Run under one attention setup: "sdpa", "eager", or "eager + recording" (eager with capture hooks)."""
    if name == "eager + recording":
        return capture(model.hf, {"attention"})
    return _hf.attention_implementation(model.hf, name)


def time_attention_kernels(model: Model, ids, *, repeats: int = 5, warmup: int = 2) -> KernelTimes:
    """Time one prefill forward pass with SDPA, eager attention, and eager + recording the probabilities.

    Each kernel is warmed up (``warmup`` untimed runs); then the timed runs take turns (sdpa, eager,
    recording, sdpa, ...) so that a busy machine slows all three alike. Compare the medians.
    """
    check_number("repeats", repeats, low=1, integer=True, fix="use at least one repeat")
    check_number("warmup", warmup, low=0, integer=True, fix="use 0 or more warm-up runs")
    t = as_ids(model, ids)[:1]
    names = ("sdpa", "eager", "eager + recording")
    seconds: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(-warmup, repeats):
        for name in names:
            with _kernel(model, name):
                start = clock(model.device)
                prefill(model, t)  # the real first job: every position through every layer
                if rep >= 0:
                    seconds[name].append(clock(model.device) - start)
    return KernelTimes(t.shape[1], seconds, attention_bytes(model.info.n_layer, model.info.n_head, t.shape[1]))
