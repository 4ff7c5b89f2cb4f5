"""Named capture points, registered for one forward pass and always removed (also when it raises).

Capture names (one sequence is recorded, so shapes have no batch axis):

- ``embed.tok``                 token embeddings ``wte[ids]``            ``[tokens, d_model]``
- ``embed.pos``                 position embeddings ``wpe[positions]``   ``[tokens, d_model]``
- ``embed.sum``                 the first residual-stream vectors         ``[tokens, d_model]``
- ``blocks.{i}.attn.pattern``   attention probabilities                  ``[heads, query_pos, key_pos]``
- ``blocks.{i}.resid_post``     residual stream after block ``i``         ``[tokens, d_model]``

Build names with ``attn_pattern(i)`` and ``resid_post(i)``; read them back with ``Captures.attention()``
and ``Captures.residual()``.

Attention probabilities need the eager attention kernel (SDPA never materializes them), so a capture
of ``"attention"`` switches the model to eager for its duration and back after.

Runs that overlap stay apart: a capture holds the model's lock (``_hf.model_lock``), which every forward
pass also takes, so another thread's forward waits until the capture ends instead of running with the
eager kernel or the hooks of someone else's recording; two threads recording at once take turns. A capture
serves the thread that opened it. Hold a capture around one forward pass at a time (as the engine does),
not across a ``yield``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

import torch

from . import _hf
from .errors import bad_value

CAPTURE_KINDS = ("embeddings", "attention", "residual")
EMBED_TOK, EMBED_POS, EMBED_SUM = "embed.tok", "embed.pos", "embed.sum"



def attn_pattern(layer: int) -> str:
    """Capture name of block ``layer``'s attention probabilities."""
    return f"blocks.{layer}.attn.pattern"


def resid_post(layer: int) -> str:
    """Capture name of the residual stream after block ``layer``."""
    return f"blocks.{layer}.resid_post"


class Captures(dict):
    """What one capture recorded: capture name -> tensor (see the module docstring for the names)."""

    def __init__(self, n_layer: int) -> None:
        super().__init__()
        self.n_layer = n_layer

    def attention(self) -> list[torch.Tensor]:
        """Per layer ``[heads, query_pos, key_pos]``."""
        return [self[attn_pattern(i)] for i in range(self.n_layer)]

    def residual(self) -> torch.Tensor:
        """``[layers + 1, tokens, d_model]``: the embeddings, then the stream after each block."""
        return torch.stack([self[EMBED_SUM]] + [self[resid_post(i)] for i in range(self.n_layer)])

    def embeddings(self) -> dict[str, torch.Tensor]:
        """``{"tok", "pos", "sum"}``, each ``[tokens, d_model]``."""
        return {"tok": self[EMBED_TOK], "pos": self[EMBED_POS], "sum": self[EMBED_SUM]}


def active_hook_count(model) -> int:
    """How many forward hooks are registered anywhere in ``model`` (0 after every run)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in _hf.module(model).modules())


def check_kinds(kinds: Iterable[str]) -> set[str]:
    """``kinds`` as a set, or a ``ValueError`` naming the unknown ones."""
    if isinstance(kinds, str):
        kinds = {kinds}
    kinds = set(kinds)
    unknown = kinds - set(CAPTURE_KINDS)
    if unknown:
        raise bad_value("kinds", sorted(unknown), f"names from {list(CAPTURE_KINDS)}", "drop the unknown names")
    return kinds


@contextlib.contextmanager
def capture(model, kinds: Iterable[str]) -> Iterator[Captures]:
    """Register the hooks for ``kinds`` and yield the ``Captures`` they write into.

    Each forward overwrites the entries; copy out what you need between forwards. One sequence at a
    time: a forward with ``batch > 1`` raises a ``ValueError`` (record one prompt per run).

    ``model``: an inferlab ``Model`` (what ``load`` returns).

    >>> with capture(m, {"attention"}) as cap:             # doctest: +SKIP
    ...     il.forward_full(m, ids)
    ...     cap.attention()[0].shape                         # [heads, query_pos, key_pos]
    """
    kinds = check_kinds(kinds)
    points = _hf.capture_points(model)
    store = Captures(len(points.blocks))
    owner = threading.get_ident()
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def mine(tensor: torch.Tensor, name: str) -> bool:
        if threading.get_ident() != owner:  # another thread's forward on the same model: not ours
            return False
        if tensor.shape[0] != 1:
            raise bad_value("batch", int(tensor.shape[0]), f"1 while recording {name}",
                            "record one prompt per run (drop record=..., or loop over the prompts)")
        return True

    def keep(name: str):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            if mine(tensor, name):
                store[name] = tensor[0].detach()
        return hook

    with _hf.model_lock(model), contextlib.ExitStack() as stack:
        try:
            if "embeddings" in kinds:
                handles.append(points.token_embedding.register_forward_hook(keep(EMBED_TOK)))
                handles.append(points.position_embedding.register_forward_hook(keep(EMBED_POS)))

                def first_block_input(_module, args, kwargs):
                    hidden = _hf.block_input(args, kwargs)
                    if mine(hidden, EMBED_SUM):
                        store[EMBED_SUM] = hidden[0].detach()
                handles.append(points.blocks[0].register_forward_pre_hook(first_block_input, with_kwargs=True))
            if "attention" in kinds:
                stack.enter_context(_hf.attention_implementation(model, "eager"))

                def keep_probs(name: str):
                    def hook(_module, _inputs, output):
                        if threading.get_ident() != owner:  # another thread's forward: not ours to judge
                            return
                        weights = _hf.attention_probs(output)
                        if weights is None:
                            raise RuntimeError("attention weights were not returned; the eager kernel is "
                                               "required to record them")
                        if mine(weights, name):
                            store[name] = weights[0].detach()
                    return hook
                for i, attn in enumerate(points.attentions):
                    handles.append(attn.register_forward_hook(keep_probs(attn_pattern(i))))
            if "residual" in kinds:
                for i, block in enumerate(points.blocks):
                    handles.append(block.register_forward_hook(keep(resid_post(i))))
            yield store
        finally:
            for h in handles:
                h.remove()


@contextlib.contextmanager
def zero_heads(model, off: dict[int, list[int]]) -> Iterator[None]:
    """Zero ablation: heads ``off[layer]`` add nothing to the residual stream for forwards run inside the block.

    A head's mixed values ``[batch, tokens, head_dim]`` are set to 0 before the output projection (its
    bias stays). Serialized with captures by the model's lock; the hooks are removed on exit, always.
    ``inferlab.heads.heads_off`` checks the heads and calls this.
    """
    hd = _hf.shape_facts(model).head_dim
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def zero(heads: list[int]):
        def hook(_module, args):
            x = args[0].clone()  # [batch, tokens, heads * head_dim]: the heads side by side
            for h in heads:
                x[..., h * hd:(h + 1) * hd] = 0
            return (x, *args[1:])
        return hook

    with _hf.model_lock(model):
        try:
            for layer, heads in off.items():
                handles.append(_hf.head_mask_point(model, layer).register_forward_pre_hook(zero(heads)))
            yield
        finally:
            for h in handles:
                h.remove()
