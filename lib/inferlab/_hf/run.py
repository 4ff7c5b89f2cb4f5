"""Running a loaded model: its lock, the module behind a ``Model``, the KV caches, one forward, the attention kernel.

Every function here that takes a model takes the course's ``Model`` (from ``inferlab.load()``); ``module()`` refuses a
raw ``transformers`` module, so the library hands the ``Model`` itself and never the Hugging Face object inside it.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from transformers import Cache, DynamicCache, GPT2LMHeadModel, StaticCache

if TYPE_CHECKING:  # annotations only: models and cache import this package, not the other way round
    from ..cache import KVCache
    from ..models import Model

_LOCKS: weakref.WeakKeyDictionary[torch.nn.Module, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def module(model: Model) -> GPT2LMHeadModel:
    """The ``transformers`` module behind an inferlab ``Model``: the one place the library unwraps it.

    Anything but a ``Model`` is refused (a raw module too: the door takes the course's object, so a learner's
    ``m.transformers_module()`` cannot slip past the checks a ``Model`` carries).
    """
    inner = getattr(model, "_module", None)
    if isinstance(model, torch.nn.Module) or not isinstance(inner, GPT2LMHeadModel):
        raise TypeError(f"model must be a Model from il.load(), got {type(model).__name__}. Fix: pass the Model "
                        "itself (m = il.load(); il.generate(m, ...)), not m.transformers_module() or a module "
                        "built with transformers.")
    return inner


def _lock(hf: torch.nn.Module) -> threading.RLock:
    """The lock of the module itself (``model_lock`` once ``module`` has unwrapped it)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(hf)
        if lock is None:
            lock = _LOCKS[hf] = threading.RLock()
        return lock


def model_lock(model: Model) -> threading.RLock:
    """The model's lock: every forward here holds it, and so does anything that changes the model for a while
    (a recording's eager kernel and hooks, a head switched off). So a thread's plain forward never runs while
    another thread has the model in a changed state, and never sees it. Re-entrant: a thread may nest them."""
    return _lock(module(model))


# ----------------------------------------------------------------------------- caches
def new_cache(model: Model) -> DynamicCache:
    """An empty growing KV cache: one layer entry per block, filled on the first forward."""
    return DynamicCache(config=module(model).config)


def new_static_cache(model: Model, max_tokens: int, batch: int = 1) -> StaticCache:
    """A pre-allocated KV cache of ``max_tokens`` positions (no reallocation while decoding)."""
    return StaticCache(config=module(model).config, max_cache_len=max_tokens, max_batch_size=batch)


def cache_tensors(cache: Cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``(keys, values)``, each ``[batch, heads, tokens, head_dim]`` (static: all slots)."""
    return [(layer.keys, layer.values) for layer in cache.layers if layer.keys is not None]


def cache_length(cache: Cache) -> int:
    """How many positions the cache holds."""
    return int(cache.get_seq_length())


def cache_crop(cache: Cache, tokens: int) -> None:
    """Keep the first ``tokens`` positions of a ``DynamicCache`` (transformers 5: ``crop(-n)`` removes the last n)."""
    cache.crop(tokens - cache_length(cache))


def _unwrap_cache(cache: KVCache | Cache | None) -> Cache | None:
    """The Hugging Face cache a forward runs on: inside the course's ``KVCache``, or one that ``new_cache`` /
    ``new_static_cache`` made (a prefill's first call); anything else is refused."""
    inner = getattr(cache, "_hf_cache", cache)  # inferlab's KVCache wraps HF's cache
    if cache is not None and not isinstance(inner, Cache):
        raise TypeError(f"cache must be the KVCache that prefill returned (or None), got {type(cache).__name__}. "
                        "Fix: logits, cache = il.prefill(model, ids) first, then pass that cache.")
    return inner


# ----------------------------------------------------------------------------- forward
def forward(model: Model, ids: torch.Tensor, cache: KVCache | Cache | None = None, *,
            use_cache: bool = True, cache_position: torch.Tensor | None = None,
            last_only: bool = False) -> tuple[torch.Tensor, Cache | None]:
    """Run ``ids`` ``[batch, T]`` through the model; returns logits ``[batch, T, vocab]`` and the cache.

    ``cache``: the course's ``KVCache``, an empty cache from ``new_cache``/``new_static_cache``, or ``None``.
    With ``last_only`` only the last position goes through the LM head (``[batch, 1, vocab]``).
    """
    hf, cache = module(model), _unwrap_cache(cache)
    if hf.training:  # dropout on: every run would give other logits, silently
        raise ValueError("the model is in training mode (dropout is on, so the same input gives different logits "
                         "each run). Fix: m.transformers_module().eval() puts it back in inference mode.")
    kwargs = {}
    if cache_position is not None:
        kwargs["cache_position"] = cache_position
        kwargs["position_ids"] = cache_position.unsqueeze(0)
    with _lock(hf):
        out = hf(input_ids=ids, cache=cache, use_cache=use_cache, logits_to_keep=1 if last_only else 0, **kwargs)
    return out.logits, (out.cache if use_cache else None)


# ----------------------------------------------------------------------------- the attention kernel
@contextlib.contextmanager
def attention_implementation(model: Model, name: str) -> Iterator[None]:
    """Temporarily switch the attention kernel ("eager" returns probabilities; "sdpa" does not)."""
    hf = module(model)
    with _lock(hf):  # no other thread's forward runs with the kernel switched
        before = hf.config._attn_implementation
        if before == name:
            yield
            return
        hf.set_attn_implementation(name)
        try:
            yield
        finally:
            hf.set_attn_implementation(before)


def current_attention(model: Model) -> str:
    """The attention kernel in use ("sdpa", "eager", ...)."""
    return module(model).config._attn_implementation
