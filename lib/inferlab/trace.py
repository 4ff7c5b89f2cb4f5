"""A ``Trace`` holds one run: the prompt, the tokens, what was recorded at each step, and the times.

It keeps the run's settings (a ``GenerationConfig``) and the model's facts (a ``ModelInfo``) as they are. It
converts to plain Python (``to_dict``) and JSON (``to_json``), and back (``Trace.from_dict``), so a figure or a
test can use a run without the model: both directions follow the dataclasses' own fields (``plain`` and
``from_plain``), so a new field travels without a line written for it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import torch

from .cache import CacheSnapshot
from .errors import bad_value, check_number
from .generation import GenerationConfig
from .i18n import tr
from .models import Model, ModelInfo
from .plain import from_plain, plain
from .sampling import SamplingStep
from .timing import Latency
from .tokens import piece_text

RECORD_KINDS = ("embeddings", "attention", "residual", "cache", "sampling")


def parse_record(record) -> tuple[str, ...]:
    """``None`` -> nothing, ``"all"`` -> every kind, or a name / list of names from ``RECORD_KINDS``."""
    if record is None or record is False:
        return ()
    if (isinstance(record, str) and record == "all") or record is True:
        return RECORD_KINDS
    if isinstance(record, str):
        names: tuple = (record,)
    elif isinstance(record, (list, tuple, set, frozenset)):
        names = tuple(record)
    else:
        raise TypeError(f"record must be None, 'all', a name or a list of names from {list(RECORD_KINDS)}, "
                        f"got {type(record).__name__} {record!r:.40}. Fix: e.g. record=('attention', 'cache').")
    bad = [n for n in names if n not in RECORD_KINDS]
    if bad:
        raise bad_value("record", record, f"None, 'all', or names from {list(RECORD_KINDS)}",
                        "e.g. record=('attention', 'cache')")
    return tuple(n for n in RECORD_KINDS if n in names)


@dataclass
class StepRecord:
    """One forward pass: the prefill (index 0) or one decode step, and what it produced."""

    index: int
    kind: str  # "prefill" or "decode"
    input_ids: list[int]  # what went through the model this step
    position: int  # position of the first input token
    token_id: int  # the token chosen after this step
    t_start: float  # seconds since the request
    t_end: float  # the chosen id is on the host
    attention: list[torch.Tensor] | None = None  # per layer [heads, query_pos, key_pos]
    residual: torch.Tensor | None = None  # [layers + 1, query_pos, d_model]: embeddings, then each block
    cache: CacheSnapshot | None = None
    sampling: SamplingStep | None = None

    @property
    def seconds(self) -> float:
        """Wall time of this step."""
        return self.t_end - self.t_start

    def __repr__(self) -> str:
        extra = [k for k in ("attention", "residual", "cache", "sampling") if getattr(self, k) is not None]
        facts = {"kind": self.kind, "index": self.index, "n": len(self.input_ids), "position": self.position,
                 "token": self.token_id, "ms": self.seconds * 1e3}
        if extra:
            return tr("StepRecord({kind} #{index}, {n} input token(s) at position {position}, chose {token}, "
                      "{ms:.2f} ms, recorded {recorded})", recorded="/".join(extra), **facts)
        return tr("StepRecord({kind} #{index}, {n} input token(s) at position {position}, chose {token}, "
                  "{ms:.2f} ms)", **facts)


@dataclass
class Trace:
    """Everything about one generation. Times are seconds since the request (before tokenization)."""

    prompt: str
    prompt_ids: list[int]
    prompt_pieces: list[str]
    generated_ids: list[int] = field(default_factory=list)
    generated_pieces: list[str] = field(default_factory=list)  # each token alone (hex bytes for part of a char)
    shown_pieces: list[str] = field(default_factory=list)  # what the stream showed at each token (never U+FFFD)
    text: str = ""
    stop_reason: str = ""
    steps: list[StepRecord] = field(default_factory=list)
    tokenize_seconds: float = 0.0
    token_times: list[float] = field(default_factory=list)
    embeddings: dict[str, torch.Tensor] | None = None  # "tok", "pos", "sum": [T, d_model] (prompt)
    recorded: tuple[str, ...] = ()
    config: GenerationConfig | None = None  # the run's settings
    model_info: ModelInfo | None = None  # the model that ran it
    runner: str = "engine"  # what ran it: "engine", or the fast path's description

    @classmethod
    def start(cls, model: Model, prompt: str, ids: list[int], config: GenerationConfig, *,
              tokenize_seconds: float, recorded: tuple[str, ...] = (), runner: str = "engine") -> Trace:
        """An empty trace for a run of ``config`` on ``prompt`` (its ``ids``): how every runner begins one."""
        return cls(prompt=prompt, prompt_ids=list(ids), prompt_pieces=[piece_text(model.tokenizer, i) for i in ids],
                   tokenize_seconds=tokenize_seconds, recorded=tuple(recorded), config=config,
                   model_info=model.info, runner=runner)

    def add_token(self, token_id: int, piece: str, t: float, shown: str = "") -> None:
        """Append one generated token, its text piece, the time its id was on the host, and what was shown then."""
        self.generated_ids.append(token_id)
        self.generated_pieces.append(piece)
        self.shown_pieces.append(shown)
        self.token_times.append(t)

    @property
    def latency(self) -> Latency:
        """TTFT, TPOT, ITL and E2E of this run (TPOT excludes the first token)."""
        return Latency.from_times(0.0, self.token_times)

    @property
    def all_ids(self) -> list[int]:
        """Prompt ids followed by generated ids."""
        return self.prompt_ids + self.generated_ids

    def _need(self, kind: str) -> None:
        if kind not in self.recorded:
            raise ValueError(f"{kind} was not recorded in this trace (recorded: {list(self.recorded) or 'nothing'}). "
                             f"Fix: run generate(..., record=({kind!r},)) or record='all'.")

    def _head(self, layer, head) -> tuple[int, int]:
        """``(layer, head)`` checked against what was recorded (a negative index would count from the end)."""
        self._need("attention")
        layers, heads = len(self.steps[0].attention), int(self.steps[0].attention[0].shape[0])
        check_number("layer", layer, low=0, high=layers - 1, integer=True, fix=f"pick a layer 0..{layers - 1}")
        check_number("head", head, low=0, high=heads - 1, integer=True, fix=f"pick a head 0..{heads - 1}")
        return int(layer), int(head)

    def attention(self, layer: int, head: int) -> torch.Tensor:
        """The prefill pattern ``[query_pos, key_pos]`` (T x T, lower-triangular) for one head."""
        layer, head = self._head(layer, head)
        return self.steps[0].attention[layer][head]

    def decode_rows(self, layer: int, head: int) -> list[torch.Tensor]:
        """Each decode step's single query row over the grown cache, as made (lengths T+1, T+2, ...)."""
        layer, head = self._head(layer, head)
        return [s.attention[layer][head][-1] for s in self.steps[1:]]

    def cache_bytes(self) -> list[int]:
        """Total KV-cache bytes after each step."""
        self._need("cache")
        return [s.cache.total_bytes for s in self.steps]

    def __repr__(self) -> str:
        facts = {"prompt": len(self.prompt_ids), "generated": len(self.generated_ids),
                 "stop": self.stop_reason or tr("not run"), "recorded": list(self.recorded)}
        if self.token_times and self.recorded:
            return tr("Trace({prompt} prompt tokens -> {generated} generated ({stop}), TTFT {ttft:.1f} ms, "
                      "recorded {recorded})", ttft=self.token_times[0] * 1e3, **facts)
        if self.token_times:
            return tr("Trace({prompt} prompt tokens -> {generated} generated ({stop}), TTFT {ttft:.1f} ms, "
                      "recorded nothing)", ttft=self.token_times[0] * 1e3, **facts)
        if self.recorded:
            return tr("Trace({prompt} prompt tokens -> {generated} generated ({stop}), recorded {recorded})", **facts)
        return tr("Trace({prompt} prompt tokens -> {generated} generated ({stop}), recorded nothing)", **facts)

    # ------------------------------------------------------------------ plain data
    def to_dict(self) -> dict:
        """Plain Python (lists, numbers, strings), JSON-ready; ``latency`` added for readers without the library."""
        return {**plain(self), "latency": self.latency.to_dict() if self.token_times else None}

    def to_json(self, **kwargs) -> str:
        """JSON text of ``to_dict()``."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: dict) -> Trace:
        """Rebuild a trace (tensors, settings and model facts included) from ``to_dict()`` output."""
        if not isinstance(d, dict):
            raise bad_value("d", type(d).__name__, "the dict that Trace.to_dict() returned",
                            "pass trace.to_dict() or json.loads(trace.to_json())")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in d and
                   f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise bad_value("d", f"a dict without {missing}", "the dict that Trace.to_dict() returned",
                            "pass trace.to_dict() or json.loads(trace.to_json())")
        try:
            return from_plain(cls, d)
        except (TypeError, KeyError, ValueError, IndexError) as exc:
            raise bad_value("d", f"{type(exc).__name__}: {exc}", "the dict that Trace.to_dict() returned",
                            "pass trace.to_dict() or json.loads(trace.to_json()), unchanged") from None
