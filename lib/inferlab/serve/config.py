"""A server's settings as one dataclass (``ServeConfig``), checked when made, as ``GenerationConfig`` is."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import bad_value, check_number
from ..fast.layouts import check_serve_weights

POLICIES = ("static", "continuous")


@dataclass(frozen=True)
class ServeConfig:
    """A server's settings (vLLM's names in brackets): ``policy``, ``max_batch`` requests at once
    (``max_num_seqs``), KV blocks of ``block_size`` positions (``block_size``), ``kv_blocks`` of them (what
    ``gpu_memory_utilization`` decides), ``prefill_chunk`` prompt tokens per iteration at most (``None``: whole
    prompts; ``enable_chunked_prefill`` with ``max_num_batched_tokens``, which counts decodes too), ``prefix_cache``
    (``enable_prefix_caching``). ``kv_blocks=None``: ``run`` makes room for ``max_batch`` of its longest request."""

    policy: str = "continuous"
    max_batch: int = 8
    block_size: int = 16
    kv_blocks: int | None = None
    prefill_chunk: int | None = None
    prefix_cache: bool = False
    weights: str = "auto"  # the products' weight layout (serve.paged): "auto", "packed" or "model"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise bad_value("policy", self.policy, f"one of {list(POLICIES)}",
                            "use 'continuous' (admit at every iteration) or 'static' (batch by batch)")
        check_number("max_batch", self.max_batch, low=1, integer=True, fix="run at least one request at a time")
        check_number("block_size", self.block_size, low=1, high=1024, integer=True,
                     fix="use 16 (vLLM's default) or another power of two")
        if self.kv_blocks is not None:
            check_number("kv_blocks", self.kv_blocks, low=1, integer=True, fix="give the KV memory in blocks, e.g. 256")
        if self.prefill_chunk is not None:
            check_number("prefill_chunk", self.prefill_chunk, low=1, integer=True,
                         fix="use None for whole prompts, or a number of tokens such as 64")
        check_serve_weights(self.weights)
        if not isinstance(self.prefix_cache, bool):
            raise TypeError(f"prefix_cache must be True or False, got {self.prefix_cache!r}. Fix: pass "
                            "prefix_cache=True to share common prompt openings, False not to.")
