"""Named capture points, registered for one run and always removed (also when the run raises).

Capture names (batch 0 is kept; shapes below drop the batch axis):

- ``embed.tok``            token embeddings ``wte[ids]``            ``[T, d_model]``
- ``embed.pos``            position embeddings ``wpe[positions]``   ``[T, d_model]``
- ``embed.sum``            the first residual-stream vectors         ``[T, d_model]``
- ``blocks.{i}.attn.pattern``  attention probabilities             ``[heads, query_pos, key_pos]``
- ``blocks.{i}.resid_post``    residual stream after block ``i``      ``[T, d_model]``

Attention probabilities need the eager attention kernel (SDPA never materializes them), so
``capture(..., kinds={"attention"})`` switches the model to eager for the duration and back after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from . import _hf

KINDS = ("embeddings", "attention", "residual")


def active_hook_count(model: torch.nn.Module) -> int:
    """How many forward hooks are registered anywhere in ``model`` (0 after every run)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@contextlib.contextmanager
def capture(model: torch.nn.Module, kinds: Iterable[str]) -> Iterator[dict[str, torch.Tensor]]:
    """Register the hooks for ``kinds`` and yield the dict they write into (name -> tensor).

    Each forward overwrites the entries; copy out what you need between forwards.

    >>> with capture(m.hf, {"attention"}) as cap:          # doctest: +SKIP
    ...     m.hf(ids)
    ...     cap["blocks.0.attn.pattern"].shape               # [heads, T, T]
    """
    kinds = set(kinds)
    unknown = kinds - set(KINDS)
    if unknown:
        raise ValueError(f"kinds={sorted(unknown)} are not capture kinds; allowed: {list(KINDS)}. "
                         "Fix: drop the unknown names.")
    store: dict[str, torch.Tensor] = {}
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def keep(name: str):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            store[name] = tensor[0].detach()
        return hook

    with contextlib.ExitStack() as stack:
        try:
            if "embeddings" in kinds:
                handles.append(_hf.token_embedding(model).register_forward_hook(keep("embed.tok")))
                handles.append(_hf.position_embedding(model).register_forward_hook(keep("embed.pos")))

                def first_block_input(_module, args, kwargs):
                    hidden = args[0] if args else kwargs["hidden_states"]
                    store["embed.sum"] = hidden[0].detach()
                handles.append(_hf.blocks(model)[0].register_forward_pre_hook(first_block_input,
                                                                               with_kwargs=True))
            if "attention" in kinds:
                stack.enter_context(_hf.attention_implementation(model, "eager"))
                for i, block in enumerate(_hf.blocks(model)):
                    def attn_hook(_module, _inputs, output, name=f"blocks.{i}.attn.pattern"):
                        weights = output[1]
                        if weights is None:
                            raise RuntimeError("attention weights were not returned; the eager kernel is "
                                               "required to record them")
                        store[name] = weights[0].detach()
                    handles.append(block.attn.register_forward_hook(attn_hook))
            if "residual" in kinds:
                for i, block in enumerate(_hf.blocks(model)):
                    handles.append(block.register_forward_hook(keep(f"blocks.{i}.resid_post")))
            yield store
        finally:
            for h in handles:
                h.remove()
