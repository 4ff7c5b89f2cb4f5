"""What each attention head does: kinds of heads, how focused they are, and the logit lens.

    pat = Patterns.from_trace(il.generate(m, "To be, or not", 4, record=("embeddings", "attention", "residual")))
    scores = head_scores(m, pat)                  # previous-token, first-token, induction [layers, heads]
    bits = attention_entropy(pat.attention)       # [layers, heads]: how spread out each head looks
    lens = logit_lens(m, pat.residual)            # what each layer would predict

Scores and entropies take attention ``[..., query_pos, key_pos]`` and drop the last two axes; the
residual stream is ``[layers + 1, tokens, d_model]`` (the embeddings, then the output of each block).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import _hf
from .attention import Patterns, record_patterns
from .errors import bad_value, check_number
from .models import Model

HEAD_KINDS = ("previous", "first", "induction")


# --------------------------------------------------------------------- kinds of heads
def _mean_at(attention: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    return attention[..., queries, keys].mean(dim=-1)


def previous_token_score(attention: torch.Tensor) -> torch.Tensor:
    """Mean weight from each query (position >= 1) to the token just before it: ``[..., query_pos, key_pos]``
    -> ``[...]``."""
    q = torch.arange(1, attention.shape[-1])
    return _mean_at(attention, q, q - 1)


def first_token_score(attention: torch.Tensor) -> torch.Tensor:
    """Mean weight from each query (position >= 1) to position 0: ``[..., query_pos, key_pos]`` -> ``[...]``."""
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
        if kind not in HEAD_KINDS:
            raise bad_value("kind", kind, f"one of {list(HEAD_KINDS)}", "pick one of those")
        s = getattr(self, kind)
        flat = int(s.argmax())
        return flat // s.shape[1], flat % s.shape[1], float(s.flatten()[flat])

    def __repr__(self) -> str:
        tops = ", ".join(f"{k}: L{a}H{b}={c:.2f}" for k in HEAD_KINDS for a, b, c in [self.top(k)])
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
    """Entropy in bits of each query row, averaged over queries >= 1: ``[..., query_pos, key_pos]`` -> ``[...]``.

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
    pieces: list[str]  # the input tokens, [tokens]
    top_ids: torch.Tensor  # [layers + 1, tokens, k]
    top_probs: torch.Tensor  # [layers + 1, tokens, k]
    top_pieces: list[list[list[str]]]  # [layers + 1][tokens][k]
    next_prob: torch.Tensor  # [layers + 1, tokens - 1]: probability of the token that really comes next
    logits_last: torch.Tensor  # [tokens, vocab]: the last entry's logits (the model's own output)

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
    """Apply the final norm and the LM head to the residual after every layer ``[layers + 1, tokens, d_model]``."""
    check_number("k", k, low=1, high=50, integer=True, fix="ask for a few top predictions")
    if residual.dim() != 3 or residual.shape[-1] != model.info.d_model:
        raise bad_value("residual", tuple(residual.shape), "[layers + 1, tokens, d_model]",
                        "pass Patterns.residual (record 'embeddings' and 'residual')")
    norm, head = _hf.final_norm_tensors(model.hf), _hf.head_weight(model.hf)  # head [vocab, d_model]
    with torch.inference_mode():
        h = F.layer_norm(residual.to(head.device, head.dtype), (head.shape[1],), norm.weight, norm.bias, norm.eps)
        logits = F.linear(h, head).float()  # [layers + 1, tokens, vocab]
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
