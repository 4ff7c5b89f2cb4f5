"""What one run records, kept beside the engine's loop: hooks around each forward, per-step records.

The engine's loop reads like the articles (prefill, then sample, emit, stop?, decode); a ``Recorder``
is handed each forward pass and each chosen token and fills the ``Trace``:

- ``"attention"``, ``"residual"``, ``"embeddings"``: hooks registered around one forward pass at a time
  (``hooks.capture``), copied out at once, so runs that overlap never see each other's tensors;
- ``"cache"``: a ``CacheSnapshot`` after each step; ``"sampling"``: each filter's effect.

Recording attention keeps ``layers x heads x query_pos x key_pos`` floats per step; the recorder checks
that estimate against ``max_attention_bytes`` before the run starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TypeVar

from .cache import KVCache
from .hooks import CAPTURE_KINDS, capture
from .i18n import tr
from .models import Model
from .sampling import SamplingStep
from .trace import StepRecord, Trace, parse_record
from .units import format_bytes

DEFAULT_MAX_ATTENTION_BYTES = 512 * 2**20
T = TypeVar("T")


def attention_bytes(n_layer: int, n_head: int, prompt_tokens: int, new_tokens: int = 1, use_cache: bool = True) -> int:
    """Bytes of float32 attention probabilities a recorded run keeps (one prefill alone: ``new_tokens=1``).

    With the cache, prefill keeps ``T x T`` per head and each decode step one row over the grown cache
    (``T + 1``, ``T + 2``, ...). Without it, every step recomputes and keeps the full square.
    """
    per_cell = n_layer * n_head * 4
    if use_cache:
        cells = prompt_tokens * prompt_tokens + sum(prompt_tokens + i for i in range(1, new_tokens))
    else:
        cells = sum((prompt_tokens + i) ** 2 for i in range(new_tokens))
    return per_cell * cells


class Recorder:
    """Records one run of the engine into its ``Trace`` (made per run, never shared between runs).

    Args:
        model: the model the run uses.
        record: ``None``, ``"all"``, or names from ``trace.RECORD_KINDS``.
        prompt_tokens, new_tokens, use_cache: the run's size, for the attention estimate.
        max_attention_bytes: refuse (before any forward pass) a run whose attention would exceed this.
    """

    def __init__(self, model: Model, record, *, prompt_tokens: int, new_tokens: int, use_cache: bool,
                 max_attention_bytes: int = DEFAULT_MAX_ATTENTION_BYTES) -> None:
        self.model = model
        self.kinds = parse_record(record)
        if isinstance(max_attention_bytes, bool) or not isinstance(max_attention_bytes, numbers.Integral):
            raise TypeError(f"max_attention_bytes must be an integer number of bytes, got "
                            f"{type(max_attention_bytes).__name__} {max_attention_bytes!r}. "
                            "Fix: e.g. max_attention_bytes=256 * 2**20 for 256 MiB.")
        if "attention" in self.kinds:
            need = attention_bytes(model.info.n_layer, model.info.n_head, prompt_tokens, new_tokens, use_cache)
            if need > max_attention_bytes:
                sizes = {"prompt": prompt_tokens, "new": new_tokens, "need": format_bytes(need),
                         "limit": max_attention_bytes, "limit_text": format_bytes(max_attention_bytes)}
                if use_cache:
                    raise ValueError(tr(
                        "recording attention for {prompt} prompt tokens + {new} new ones needs about {need} (layers x "
                        "heads x query_pos x key_pos x 4 bytes); the limit is max_attention_bytes={limit:,} "
                        "({limit_text}). Fix: shorten the prompt or max_new_tokens, drop 'attention' from record, or "
                        "raise max_attention_bytes.", **sizes))
                raise ValueError(tr(
                    "recording attention for {prompt} prompt tokens + {new} new ones needs about {need} (layers x "
                    "heads x query_pos x key_pos x 4 bytes) (use_cache=False keeps a full T x T square every step); "
                    "the limit is max_attention_bytes={limit:,} ({limit_text}). Fix: shorten the prompt or "
                    "max_new_tokens, drop 'attention' from record, or raise max_attention_bytes.", **sizes))
        self.prompt_tokens, self.use_cache = prompt_tokens, use_cache
        self.hook_kinds = {k for k in self.kinds if k in CAPTURE_KINDS}
        if "residual" in self.hook_kinds:
            self.hook_kinds.add("embeddings")  # the residual stream starts at embed.sum
        self._captured: dict = {}

    def wants(self, kind: str) -> bool:
        """Whether this run records ``kind``."""
        return kind in self.kinds

    def forward(self, fn: Callable[..., T], *args) -> T:
        """Run one forward pass ``fn(*args)`` with this run's hooks attached only while it runs."""
        if not self.hook_kinds:
            return fn(*args)
        with capture(self.model, self.hook_kinds) as cap:
            out = fn(*args)
            self._captured = {}
            if "attention" in self.kinds:
                self._captured["attention"] = [a.float().cpu() for a in cap.attention()]
            if "residual" in self.kinds:
                self._captured["residual"] = cap.residual().float().cpu()
            if "embeddings" in self.kinds:
                self._captured["embeddings"] = {k: v.float().cpu() for k, v in cap.embeddings().items()}
        return out

    def step(self, trace: Trace, index: int, sequence: list[int], t_start: float, t_end: float,
             sampling: SamplingStep | None, cache: KVCache | None) -> None:
        """Record step ``index`` (the forward that chose ``sequence[-1]``) with what it captured, into ``trace``.

        With the cache, step 0 read the prompt and each later step the one token before the new one; without
        it, every step read the whole sequence so far from position 0.
        """
        prompt = sequence[:self.prompt_tokens]
        if not self.use_cache:
            inputs, position = sequence[:-1], 0
        elif index == 0:
            inputs, position = prompt, 0
        else:
            inputs, position = [sequence[-2]], len(sequence) - 2
        step = StepRecord(index=index, kind="prefill" if index == 0 else "decode", input_ids=inputs,
                          position=position, token_id=sequence[-1], t_start=t_start, t_end=t_end, sampling=sampling,
                          attention=self._captured.get("attention"), residual=self._captured.get("residual"))
        if index == 0 and "embeddings" in self._captured:
            trace.embeddings = self._captured["embeddings"]
        if "cache" in self.kinds and cache is not None:
            step.cache = cache.snapshot()
        self._captured = {}
        trace.steps.append(step)
