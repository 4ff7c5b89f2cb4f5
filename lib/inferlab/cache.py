"""The KV cache as an object the caller holds and can look into.

Each layer keeps the keys and values of every token seen so far, shaped
``[batch, heads, tokens, head_dim]``. A decode step appends one position per layer and attends over
all of them, instead of recomputing the whole history.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from . import _hf
from .errors import bad_value
from .i18n import tr
from .plain import plain


@dataclass(frozen=True)
class CacheSnapshot:
    """What the cache holds at one moment: shapes and bytes (no tensors, cheap to keep per step)."""

    tokens: int
    layer_shapes: tuple[tuple[int, int, int, int], ...]  # per layer, keys [batch, heads, tokens, head_dim]
    bytes_per_layer: tuple[int, ...]  # keys + values
    total_bytes: int
    dtype: str
    allocated_bytes: int = 0  # what the cache occupies: total_bytes, or every slot of a static cache


    def __repr__(self) -> str:
        shape = self.layer_shapes[0] if self.layer_shapes else ()
        return tr("CacheSnapshot({tokens} tokens, {layers} layers x K,V {shape}, {nbytes:,} bytes {dtype})",
                  tokens=self.tokens, layers=len(self.layer_shapes), shape=list(shape), nbytes=self.total_bytes,
                  dtype=self.dtype)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


class KVCache:
    """A growing per-layer key/value store (wraps Hugging Face's ``DynamicCache`` or ``StaticCache``).

    ``cache.layers[i]`` is ``(keys, values)``, each ``[batch, heads, tokens, head_dim]``;
    ``cache.tokens`` is how many positions are held; ``cache.nbytes`` what they occupy.
    A static (pre-allocated) cache reports its full allocated size in ``nbytes``.
    A cache belongs to the model that filled it (``decode_step`` refuses another model's cache).
    """

    def __init__(self, hf_cache, model, *, static: bool = False) -> None:
        self._hf_cache = hf_cache  # Hugging Face's cache object: only _hf reads it
        self.static = static
        self._owner = weakref.ref(_hf.module(model))
        self._n_ctx = model.info.n_ctx

    def check_owner(self, model) -> None:
        """Raise a clear error unless this cache was filled by ``model``."""
        if self._owner() is not _hf.module(model):
            raise bad_value("cache", self, f"a cache filled by this model ({model.info.name})",
                            "prefill the prompt with the same model you decode with")

    @property
    def batch(self) -> int:
        """Sequences held (the first axis of every key and value tensor)."""
        layers = self.layers
        return int(layers[0][0].shape[0]) if layers else 0

    @property
    def capacity(self) -> int:
        """Positions this cache can hold: the allocated slots (static) or the model's context length."""
        layers = self.layers
        return int(layers[0][0].shape[2]) if self.static and layers else self._n_ctx

    @property
    def tokens(self) -> int:
        """Positions held (the context the next decode step attends over)."""
        return _hf.cache_length(self._hf_cache)

    @property
    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer ``(keys, values)``, each ``[batch, heads, tokens, head_dim]``."""
        return _hf.cache_tensors(self._hf_cache)

    @property
    def nbytes(self) -> int:
        """Bytes of all keys and values (allocated size for a static cache)."""
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)

    def crop(self, tokens: int) -> None:
        """Keep the first ``tokens`` positions of every layer and forget the rest (speculative decoding's rollback:
        the guesses the target rejected). A step after ``crop(n)`` equals a step after a fresh prefill of ``n``."""
        if self.static:
            raise bad_value("cache", "a static cache", "a dynamic cache (crop frees positions)",
                            "prefill without static_tokens to get a cache that can be cropped")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= self.tokens:
            raise bad_value("tokens", tokens, tr("an integer from 0 to the {n} positions held", n=self.tokens),
                            tr("crop to a length the cache holds"))
        _hf.cache_crop(self._hf_cache, tokens)

    def snapshot(self) -> CacheSnapshot:
        """Shapes and bytes now (for a static cache, the shapes cover the filled positions only)."""
        layers = self.layers
        n = self.tokens
        shapes, sizes = [], []
        for k, _v in layers:
            shape = (k.shape[0], k.shape[1], n if self.static else k.shape[2], k.shape[3])
            shapes.append(tuple(int(s) for s in shape))
            per = k.element_size() * shape[0] * shape[1] * shape[2] * shape[3]
            sizes.append(2 * per)
        dtype = str(layers[0][0].dtype).removeprefix("torch.") if layers else "none"
        return CacheSnapshot(n, tuple(shapes), tuple(sizes), sum(sizes), dtype, self.nbytes)

    def __repr__(self) -> str:
        kind = "static" if self.static else "dynamic"
        layers = self.layers
        shape = list(layers[0][0].shape) if layers else []
        return tr("KVCache({kind}, {tokens} tokens, {layers} layers, K/V per layer {shape} "
                  "[batch, heads, tokens, head_dim], {nbytes:,} bytes)", kind=kind, tokens=self.tokens,
                  layers=len(layers), shape=shape, nbytes=self.nbytes)
