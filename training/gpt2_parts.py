"""The one training module that names GPT-2's internals (``transformer.h``, ``c_attn``, ``lm_head``, ``wte``,
``n_embd``...): training builds and edits the raw ``GPT2LMHeadModel``, which the course's ``Model`` door
(``inferlab._hf``) deliberately hides, so the names a transformers rename would break are gathered here, and
``tests/test_layers.py`` refuses them in every other module of ``training/``.

It holds the model's shape (``size_of``, ``saved_shape``, ``shape``), the parts the loop and the head guide reach
(``final_hidden``, ``output_logits``, ``block_prefixes``, ``attention_projection``), and the vocabulary surgery of
the speed trick and of a warm start (``restricted_copy``, ``warm_start``, ``silence_blocks``, ``unseen_row``,
``full_vocabulary``).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from .corpus import EOT


def size_of(context: int, width: int, layers: int, heads: int, attn_dropout: float = 0.1) -> dict:
    """GPT2Config's size arguments (and the <|endoftext|> ids) for a model of this shape."""
    return {"n_positions": context, "n_embd": width, "n_layer": layers, "n_head": heads,
            "bos_token_id": EOT, "eos_token_id": EOT, "attn_pdrop": attn_dropout}


def never_trained_rows(wte: torch.Tensor) -> torch.Tensor:
    """Which rows of a saved model's embedding table were never trained: a mask over its ids.

    This script's phase 2 gives every id missing from the training data one shared row (``unseen_row``), so
    those ids are the ones whose row is the table's most repeated row; a table without a repeated row has none.
    """
    _, inverse, counts = torch.unique(wte, dim=0, return_inverse=True, return_counts=True)
    if int(counts.max()) < 2:
        return torch.zeros(len(wte), dtype=torch.bool)
    return inverse == int(counts.argmax())


def restricted_copy(full: GPT2LMHeadModel, used: torch.Tensor, size: dict) -> GPT2LMHeadModel:
    """The same model with its tied embedding cut down to the rows ``used`` (phase 1 of a warm start)."""
    small = GPT2LMHeadModel(GPT2Config(vocab_size=len(used), **size))
    sd = {k: v for k, v in full.state_dict().items() if "wte" not in k and "lm_head" not in k}
    small.load_state_dict(sd, strict=False)
    with torch.no_grad():
        small.transformer.wte.weight[:] = full.transformer.wte.weight[used]
    small.tie_weights()
    return small


def silence_blocks(model: GPT2LMHeadModel, first: int) -> None:
    """Zero the two output projections of blocks ``first`` onwards (those ``--grow-layers`` appended).

    A block adds its attention's and its MLP's outputs to the residual stream; with both projections at zero it
    adds nothing, so the grown model computes exactly what the starting one did, its heads in their places. The
    projections' gradients are not zero, so the new blocks start learning at the first step.
    """
    with torch.no_grad():
        for block in model.transformer.h[first:]:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                proj.weight.zero_()
                proj.bias.zero_()


def unseen_row(h: torch.Tensor, seen_lse: torch.Tensor, count: int, leak: float = 0.01) -> torch.Tensor:
    """One embedding row ``[d_model]`` for all ``count`` never-seen ids, fitted so that together they cost the
    seen ids about ``leak`` nats per token on the final hidden states ``h`` ``[tokens, d_model]``.

    ``seen_lse`` ``[tokens]`` is the log-sum-exp of the seen ids' logits. Starts at the zero row (logit 0)
    and takes Adam steps on ``mean(softplus(h @ row + log(count) - seen_lse))`` (the nats lost to the
    unseen ids) until that falls under ``leak``: low enough after English and after Chinese, not lower.
    """
    row = torch.zeros(h.shape[1], device=h.device, requires_grad=True)
    opt = torch.optim.Adam([row], lr=0.05)
    for _ in range(1000):
        lost = torch.nn.functional.softplus(h @ row + math.log(count) - seen_lse).mean()
        if lost.item() < leak:
            break
        opt.zero_grad()
        lost.backward()
        opt.step()
    return row.detach()


def full_vocabulary(small: GPT2LMHeadModel, used: torch.Tensor, size: dict, x: torch.Tensor,
                    fit_unseen: bool) -> GPT2LMHeadModel:
    """Phase 2's model: ``small``'s layers, its embedding rows scattered back to the ids ``used``.

    Every other row (ids that never occur in the training data) gets one shared vector whose logits are
    low on the final hidden states of ``small`` on ``x`` ``[batch, tokens]`` (ids of ``small``); the full
    softmax then tunes them. From scratch, the vector points away from the mean hidden state (how the
    starting checkpoint was made). With ``fit_unseen`` (a warm start on two languages, where one direction
    is not low after both) it is fitted by ``unseen_row``.
    """
    device = next(small.parameters()).device
    full = GPT2LMHeadModel(GPT2Config(vocab_size=EOT + 1, **size)).to(device)
    sd = {k: v for k, v in small.state_dict().items() if "wte" not in k and "lm_head" not in k}
    full.load_state_dict(sd, strict=False)
    used = used.to(device)
    with torch.no_grad():
        h = small.transformer(input_ids=x.to(device)).last_hidden_state.reshape(-1, size["n_embd"])
        logits = small.lm_head(h)
    if fit_unseen:
        row = unseen_row(h, torch.logsumexp(logits, -1), EOT + 1 - len(used))
    else:
        mean_dir = h.mean(0) / h.mean(0).norm()
        low = logits.min(dim=-1).values.mean()  # a typical lowest logit
        row = mean_dir * (low / (h @ mean_dir).mean()).item()
    with torch.no_grad():
        full.transformer.wte.weight[:] = row
        full.transformer.wte.weight[used] = small.transformer.wte.weight
    full.tie_weights()
    return full



def new_model(vocab_size: int, size: dict) -> GPT2LMHeadModel:
    """A freshly initialised model of ``size`` (``size_of``'s keys) with ``vocab_size`` rows."""
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, **size))


def saved_shape(folder: Path) -> tuple[int, int]:
    """``(layers, heads)`` of the model saved in ``folder`` (read from its config, without loading weights)."""
    config = GPT2Config.from_pretrained(folder)
    return config.n_layer, config.n_head


def shape(config: dict) -> dict[str, int]:
    """A stored config dict (``training_stats.json``'s ``config``) in plain words: layers, heads, width, context."""
    return {"layers": config["n_layer"], "heads": config["n_head"], "width": config["n_embd"],
            "context": config["n_positions"]}


def context_of(size: dict) -> int:
    """The context length (positions) of a ``size_of`` dict."""
    return size["n_positions"]


def vocab_size(model: GPT2LMHeadModel) -> int:
    return model.config.vocab_size


def head_count(model: GPT2LMHeadModel) -> int:
    return model.config.n_head


def attention_projection(model: GPT2LMHeadModel, layer: int) -> torch.nn.Module:
    """Block ``layer``'s q, k, v projection (``c_attn``): its output holds every head's queries and keys."""
    return model.transformer.h[layer].attn.c_attn


def block_prefixes(model: GPT2LMHeadModel, last: int) -> set[str]:
    """The parameter-name prefixes of the last ``last`` blocks (those ``--grow-layers`` appended)."""
    n_layer = model.config.n_layer
    return {f"transformer.h.{i}." for i in range(n_layer - last, n_layer)}


def final_hidden(model: GPT2LMHeadModel, ids: torch.Tensor) -> torch.Tensor:
    """The final hidden states ``[batch, tokens, d_model]`` (after the last layer norm), without the output layer."""
    return model.transformer(input_ids=ids).last_hidden_state


def output_logits(model: GPT2LMHeadModel, hidden: torch.Tensor) -> torch.Tensor:
    """The output layer (tied to the token embedding) on ``hidden``."""
    return model.lm_head(hidden)


def warm_start(base: GPT2LMHeadModel, used: torch.Tensor, remap: torch.Tensor, attn_dropout: float,
               grow_layers: int | None) -> tuple[GPT2LMHeadModel, dict, int]:
    """Phase 1's model from a saved one (``--init``): ``(model, size, new ids)``.

    ``base``'s shape (more layers with ``grow_layers``, the appended blocks silent), its embedding cut down to the
    ids ``used`` (``remap``: an id's row there). Ids the starting checkpoint never saw (the poems' ids, for an
    English-only start) have rows that are all one vector (pushed low in its phase 2), so the model could not tell
    them apart. They start afresh, as in GPT-2's initialisation; ids it trained on (a bilingual start's poems too)
    keep their rows.
    """
    small = {k: getattr(base.config, k) for k in ("n_positions", "n_embd", "n_layer", "n_head")}
    small |= {"bos_token_id": EOT, "eos_token_id": EOT, "attn_pdrop": attn_dropout}
    if grow_layers is not None:
        small["n_layer"] = grow_layers
    model = restricted_copy(base, used, small)
    silence_blocks(model, base.config.n_layer)
    new = used[never_trained_rows(base.transformer.wte.weight.detach())[used]]
    with torch.no_grad():
        fresh = torch.randn(len(new), small["n_embd"]) * base.config.initializer_range
        model.transformer.wte.weight[remap[new]] = fresh
    return model, small, len(new)


def load_saved(folder: Path) -> GPT2LMHeadModel:
    """A saved model (``--init``), in float32."""
    return GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32)
