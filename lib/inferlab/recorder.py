"""What one run records, kept beside the engine's loop: hooks around each forward, per-step records.

The engine's loop reads like the articles (prefill, then sample, emit, stop?, decode); a ``Recorder``
is handed each forward pass and each chosen token and fills the ``Trace``:

- ``"attention"``, ``"residual"``, ``"embeddings"``: hooks registered around one forward pass at a time
  (``hooks.capture``), copied out at once, so runs that overlap never see each other's tensors;
- ``"cache"``: a ``CacheSnapshot`` after each step; ``"sampling"``: each filter's effect.

Recording keeps tensors (attention: ``layers x heads x query_pos x key_pos`` floats per step; the residual
stream: ``(layers + 1) x tokens x d_model``); the recorder checks their estimate against ``max_record_bytes``
before the run starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager

from .cache import KVCache
from .hooks import CAPTURE_KINDS, capture
from .i18n import tr
from .models import Model
from .sampling import SamplingStep
from .trace import StepRecord, Trace, parse_record
from .units import format_bytes

DEFAULT_MAX_RECORD_BYTES = 512 * 2**20


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


def record_bytes(kinds, n_layer: int, n_head: int, d_model: int, prompt_tokens: int, new_tokens: int = 1,
                 use_cache: bool = True) -> dict[str, int]:
    """Bytes of float32 tensors a run recording ``kinds`` keeps, per kind (the tensors' estimate; shapes are cheap).

    ``residual``: ``[layers + 1, tokens, d_model]`` per step: the prompt's rows, then one row per decode step
    (without the cache, every step the whole sequence again). ``embeddings``: three ``[T, d_model]`` tables.
    """
    out: dict[str, int] = {}
    if "attention" in kinds:
        out["attention"] = attention_bytes(n_layer, n_head, prompt_tokens, new_tokens, use_cache)
    if "residual" in kinds:
        rows = prompt_tokens + new_tokens - 1 if use_cache else sum(prompt_tokens + i for i in range(new_tokens))
        out["residual"] = (n_layer + 1) * rows * d_model * 4
    if "embeddings" in kinds or "residual" in kinds:
        out["embeddings"] = 3 * prompt_tokens * d_model * 4
    return out


def check_record_bytes(need: dict[str, int], limit, *, prompt_tokens: int, new_tokens: int, use_cache: bool) -> None:
    """Refuse, before any forward pass, a recording whose tensors would exceed ``limit`` (``max_record_bytes``)."""
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral):
        raise TypeError(f"max_record_bytes must be an integer number of bytes, got {type(limit).__name__} "
                        f"{limit!r}. Fix: e.g. max_record_bytes=256 * 2**20 for 256 MiB.")
    total = sum(need.values())
    if total <= limit:
        return
    parts = ", ".join(f"{kind} {format_bytes(n)}" for kind, n in need.items())
    facts = {"prompt": prompt_tokens, "new": new_tokens, "need": format_bytes(total), "parts": parts,
             "limit": int(limit), "limit_text": format_bytes(limit)}
    why = "" if use_cache else tr(" (use_cache=False keeps the whole sequence again every step)")
    raise ValueError(tr("recording for {prompt} prompt tokens + {new} new ones needs about {need} ({parts}){why}; "
                        "the limit is max_record_bytes={limit:,} ({limit_text}). Fix: shorten the prompt or "
                        "max_new_tokens, record fewer kinds, or raise max_record_bytes.", why=why, **facts))


class Recorder:
    """Records one run of the engine into its ``Trace`` (made per run, never shared between runs).

    Args:
        model: the model the run uses.
        record: ``None``, ``"all"``, or names from ``trace.RECORD_KINDS``.
        prompt_tokens, new_tokens, use_cache: the run's size, for the memory estimate.
        max_record_bytes: refuse (before any forward pass) a run whose recorded tensors (attention, residual
            stream, embeddings) would exceed this.
    """

    def __init__(self, model: Model, record, *, prompt_tokens: int, new_tokens: int, use_cache: bool,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.model = model
        self.kinds = parse_record(record)
        info = model.info
        check_record_bytes(record_bytes(self.kinds, info.n_layer, info.n_head, info.d_model, prompt_tokens,
                                        new_tokens, use_cache),
                           max_record_bytes, prompt_tokens=prompt_tokens, new_tokens=new_tokens, use_cache=use_cache)
        self.prompt_tokens, self.use_cache = prompt_tokens, use_cache
        self.hook_kinds = {k for k in self.kinds if k in CAPTURE_KINDS}
        if "residual" in self.hook_kinds:
            self.hook_kinds.add("embeddings")  # the residual stream starts at embed.sum
        self._captured: dict = {}

    def wants(self, kind: str) -> bool:
        """Whether this run records ``kind``."""
        return kind in self.kinds

    @contextmanager
    def capturing(self) -> Iterator[None]:
        """Around one forward pass: this run's hooks are attached only while it runs, and what they saw is kept."""
        if not self.hook_kinds:
            yield
            return
        with capture(self.model, self.hook_kinds) as cap:
            yield
            self._captured = {}
            if "attention" in self.kinds:
                self._captured["attention"] = [a.float().cpu() for a in cap.attention()]
            if "residual" in self.kinds:
                self._captured["residual"] = cap.residual().float().cpu()
            if "embeddings" in self.kinds:
                self._captured["embeddings"] = {k: v.float().cpu() for k, v in cap.embeddings().items()}

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
