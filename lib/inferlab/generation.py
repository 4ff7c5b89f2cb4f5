"""The settings of one generation, the streamed event, and the text a learner may see so far.

``GenerationConfig`` holds every setting with Hugging Face's names (``max_new_tokens``, ``temperature``,
``top_k``, ``top_p``, ``stop_strings``, ``use_cache`` ...) and checks each one before any forward pass.
``TextAssembler`` turns generated ids into text the way serving engines stream it: an incomplete
character (byte-level BPE splits some characters over tokens) and the start of a possible stop string
are held back until they are settled, so a streamed piece never shows U+FFFD or a stop string.
"""

from __future__ import annotations

import codecs
import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from .bpe import symbol_bytes
from .errors import bad_value, check_number, check_utf8
from .i18n import tr
from .models import Model
from .plain import plain
from .sampling import GREEDY, SamplingConfig

_SAMPLING_KEYWORDS = tuple(f.name for f in dataclasses.fields(SamplingConfig))  # temperature, top_k, top_p, seed
CACHE_IMPLEMENTATIONS = ("dynamic", "static")


@dataclass(frozen=True)
class TokenEvent:
    """One streamed token: its id, the text it adds (may be "" while held back), and when it arrived."""

    index: int
    token_id: int
    text: str
    t: float  # seconds since the request
    step_seconds: float

    def __repr__(self) -> str:
        return tr("TokenEvent(#{index} id={id} {text!r} at {ms:.1f} ms)", index=self.index, id=self.token_id,
                  text=self.text, ms=self.t * 1e3)


def _strict_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}. "
                        f"Fix: pass {name}=True or {name}=False (a string such as 'False' counts as true).")
    return value


def _stop_strings(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise TypeError(f"stop_strings must be a string or a list of strings, got {value!r:.60}. "
                        "Fix: e.g. stop_strings=['\\n\\n'] (to stop on token ids use stop_token_ids=).")
    if any(s == "" for s in value):
        raise bad_value("stop_strings", list(value), "non-empty strings", "drop the empty string")
    return tuple(value)


def _token_ids(value) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"stop_token_ids must be a list of integer token ids, got {value!r:.60}. "
                        "Fix: e.g. stop_token_ids=[198] (model.encode('\\n') gives a text's ids).")
    bad = [v for v in value if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise TypeError(f"stop_token_ids must hold integer token ids, got {bad!r:.60}. "
                        "Fix: use model.encode(text) to find a token's id (an int, not a string or float).")
    return tuple(int(v) for v in value)


@dataclass(frozen=True)
class GenerationConfig:
    """Every setting of one generation (Hugging Face's ``GenerationConfig`` names).

    ``sampling`` holds ``temperature``/``top_k``/``top_p``/``seed`` (also readable here as properties).
    Each field is checked when the config is made; ``check(model, prompt)`` checks it against a model.

    >>> GenerationConfig(max_new_tokens=20, sampling=SamplingConfig(temperature=0.8, seed=1),
    ...                  stop_strings=("\\n\\n",))                       # doctest: +SKIP
    """

    max_new_tokens: int = 40
    sampling: SamplingConfig = GREEDY
    stop_strings: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    stop_at_eos: bool = True
    use_cache: bool = True
    cache_implementation: str = "dynamic"  # "static": pre-allocate prompt + max_new_tokens positions

    def __post_init__(self) -> None:
        check_number("max_new_tokens", self.max_new_tokens, low=1, integer=True,
                     fix=tr("ask for at least one new token"))
        object.__setattr__(self, "max_new_tokens", int(self.max_new_tokens))  # np.int64(20): stored as 20
        if not isinstance(self.sampling, SamplingConfig):
            raise TypeError(f"sampling must be a SamplingConfig, got {type(self.sampling).__name__}. "
                            "Fix: il.SamplingConfig(temperature=0.8, top_p=0.95), or give temperature= directly.")
        object.__setattr__(self, "stop_strings", _stop_strings(self.stop_strings))
        object.__setattr__(self, "stop_token_ids", _token_ids(self.stop_token_ids))
        _strict_bool("stop_at_eos", self.stop_at_eos)
        _strict_bool("use_cache", self.use_cache)
        if self.cache_implementation not in CACHE_IMPLEMENTATIONS:
            raise bad_value("cache_implementation", self.cache_implementation, f"one of {list(CACHE_IMPLEMENTATIONS)}",
                            "use 'dynamic' (grows each step) or 'static' (allocated once, after the prompt)")
        if self.cache_implementation == "static" and not self.use_cache:  # two settings that contradict each other
            raise bad_value("cache_implementation", "'static' with use_cache=False",
                            "'static' only with use_cache=True (a cache that is not used cannot be pre-allocated)",
                            "drop cache_implementation='static', or leave use_cache=True")

    temperature = property(lambda self: self.sampling.temperature, doc="The sampling temperature (0: greedy).")
    top_k = property(lambda self: self.sampling.top_k, doc="Top-k (0: off).")
    top_p = property(lambda self: self.sampling.top_p, doc="Top-p (1: off).")
    seed = property(lambda self: self.sampling.seed, doc="The sampling seed (None: unseeded).")

    @classmethod
    def from_arguments(cls, config: GenerationConfig | None = None, max_new_tokens: int | None = None,
                       sampling: SamplingConfig | None = None, **settings) -> GenerationConfig:
        """The config that ``generate(model, prompt, max_new_tokens, sampling, config=..., **settings)`` means.

        Keywords override ``config``'s fields; ``temperature``/``top_k``/``top_p``/``seed`` build the
        ``SamplingConfig`` (they cannot be combined with ``sampling=``).
        """
        if config is not None and not isinstance(config, GenerationConfig):
            raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}. "
                            "Fix: il.GenerationConfig(max_new_tokens=20, ...), or pass the settings as keywords.")
        if "stop" in settings:
            raise TypeError("stop= is now called stop_strings= (Hugging Face's name). "
                            f"Fix: stop_strings={settings['stop']!r:.40}.")
        fields = {f.name for f in dataclasses.fields(cls)} - {"sampling"}
        unknown = sorted(set(settings) - fields - set(_SAMPLING_KEYWORDS))
        if unknown:
            allowed = sorted(fields | set(_SAMPLING_KEYWORDS))
            raise TypeError(f"unknown setting(s) {unknown}; the settings are {allowed}. Fix: check the spelling.")
        knobs = {k: settings.pop(k) for k in _SAMPLING_KEYWORDS if settings.get(k) is not None}
        for k in _SAMPLING_KEYWORDS:
            settings.pop(k, None)
        base = config or cls()
        if sampling is not None:
            if knobs:
                raise bad_value("sampling", sampling, f"either sampling= or {sorted(knobs)} as keywords, not both",
                                "put them in the SamplingConfig (e.g. SamplingConfig(temperature=...)) or drop "
                                "sampling=")
            settings["sampling"] = sampling
        elif knobs:
            start = base.sampling if config is not None and not base.sampling.greedy else SamplingConfig()
            settings["sampling"] = dataclasses.replace(start, **knobs)
        if max_new_tokens is not None:
            settings["max_new_tokens"] = max_new_tokens
        return dataclasses.replace(base, **settings)

    def check(self, model: Model, prompt) -> list[int]:
        """Check the prompt and settings against ``model``; returns the prompt's token ids."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__} {prompt!r:.60}. "
                            "Fix: pass text; to start from token ids use prefill(model, ids).")
        if not prompt:
            raise bad_value("prompt", prompt, tr("a non-empty string"), tr("type at least one character"))
        check_utf8("prompt", prompt)
        vocab = model.info.vocab_size
        bad = [t for t in self.stop_token_ids if not 0 <= t < vocab]
        if bad:
            raise bad_value("stop_token_ids", bad, f"token ids in [0, {vocab})", "use model.encode(text) to find a "
                            "token's id")
        ids = model.encode(prompt)
        limit = model.info.n_ctx
        if len(ids) >= limit:
            raise bad_value("prompt", tr("{start}... ({n:,} tokens)", start=prompt[:30], n=len(ids)),
                            tr("at most {most:,} tokens, so that one new token fits in the model's "
                               "{limit:,}-token context", most=limit - 1, limit=limit),
                            tr("shorten the prompt by at least {n:,} tokens", n=len(ids) - limit + 1))
        if len(ids) + self.max_new_tokens > limit:
            raise ValueError(tr(
                "prompt ({n:,} tokens) + max_new_tokens ({new:,}) = {total:,} exceeds the model's context length "
                "of {limit:,} tokens. Fix: shorten the prompt or use max_new_tokens <= {most:,}.", n=len(ids),
                new=self.max_new_tokens, total=len(ids) + self.max_new_tokens, limit=limit, most=limit - len(ids)))
        return ids

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


def _partial_stop(text: str, stop_strings: Sequence[str]) -> int:
    """Length of the longest end of ``text`` that could still grow into a stop string."""
    best = 0
    for s in stop_strings:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


class TextAssembler:
    """Generated ids -> the text that is safe to show so far (``add`` returns each new piece).

    Works on the tokens' bytes, as serving engines' incremental detokenizers do: a character whose bytes
    are not all there yet is held back until its last byte arrives, and any ending that could be the start
    of a stop string until it is settled. So the stream never shows U+FFFD (�) for a character cut between
    tokens. Bytes that can never form a character are left out and counted in ``invalid_bytes`` (a small
    model sometimes writes a byte sequence that is not UTF-8; a decoder would print U+FFFD for it). When the
    run ends inside a character (``final`` with bytes still missing), ``unfinished`` is 1 and the text ends at
    the last whole character. When a stop string appears, ``stop_hit`` names it and ``text`` is cut before it.
    """

    def __init__(self, tokenizer, stop_strings: Sequence[str] = ()) -> None:
        self.tokenizer, self.stop_strings = tokenizer, tuple(stop_strings)
        self.ids: list[int] = []
        self.text = ""
        self.shown = 0
        self.stop_hit: str | None = None
        self.unfinished = 0
        self.invalid_bytes = 0
        self._bytes = b""
        self._special = set(getattr(tokenizer, "all_special_ids", ()))  # skipped, as decode(skip_special_tokens)

    def add(self, token: int, *, final: bool = False) -> str:
        """Take one more token; return the text it makes safe to show (``final``: show all that is left)."""
        self.ids.append(token)
        if token not in self._special:
            self._bytes += symbol_bytes(self.tokenizer.convert_ids_to_tokens(token))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")  # holds an incomplete tail back
        text = decoder.decode(self._bytes)
        pending = decoder.getstate()[0]
        self.invalid_bytes = len(self._bytes) - len(text.encode("utf-8")) - len(pending)
        hits = sorted((text.find(s), s) for s in self.stop_strings if s in text)
        if hits:
            at, self.stop_hit = hits[0]
            self.text = text[:at]
            return self._show(len(self.text))
        self.text = text
        if final:  # a character still missing bytes will never get them: it is left out
            self.unfinished = int(bool(pending))
            return self._show(len(text))
        return self._show(len(text) - _partial_stop(text, self.stop_strings))

    @property
    def stopped(self) -> str | None:
        """Why the text ends, once a stop string appeared in it (``"stop string '...'"``); else None."""
        return None if self.stop_hit is None else f"stop string {self.stop_hit!r}"

    def _show(self, upto: int) -> str:
        upto = max(upto, self.shown)
        piece, self.shown = self.text[self.shown:upto], upto
        return piece


def stop_reason(model: Model, config: GenerationConfig, token: int, index: int) -> str | None:
    """Why the answer ends after ``token`` (the ``index``-th new one): a stop token, or ``max_new_tokens``; else None.

    Stop tokens: ``<|endoftext|>`` (unless ``stop_at_eos=False``) and ``stop_token_ids``. Stop *strings* are
    found in the text, by ``TextAssembler``.
    """
    if token in config.stop_token_ids or (config.stop_at_eos and token == model.eos_id):
        return "stop token"
    return "max_new_tokens" if index + 1 == config.max_new_tokens else None
