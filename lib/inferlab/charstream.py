"""Characters and tokens: what one meaning costs in Chinese and in English, and when a streamed character is whole.

GPT-2's byte-level BPE learned its merges mostly from English web text. A Chinese character is three UTF-8
bytes, and the vocabulary merged only some of those byte triples into one token, so a character costs one
to three tokens and one token may hold only part of a character. This module measures both sides of that:

- ``compare(tokenizer, pairs)``: the same meaning in English and in Chinese, counted in characters, UTF-8
  bytes and tokens (``PairCost``); ``per_character(tokenized)``: how many tokens each character touches;
  ``PairCost.what_it_costs``: what the difference means for prefill, the context window and writing time.
- ``follow(tokenizer, events)``: a streamed generation step by step (``CharStep``): each token's bytes,
  the bytes held back because their character is not complete yet, and the text the stream showed.
  Printing each token on its own would show U+FFFD (�) for the pieces; ``il.stream`` holds them back.

    >>> pairs = compare(m.tokenizer, {"q": ("What is quantum computing?", "什么是量子计算？")})  # doctest: +SKIP
    >>> cs = follow(m.tokenizer, il.stream(m, "床前明月光，", max_new_tokens=12))            # doctest: +SKIP
    >>> cs                                                                                   # doctest: +SKIP
    CharStream(12 tokens -> 7 characters, 4 arrived over several tokens, U+FFFD shown 0 times)
"""

from __future__ import annotations

import codecs
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .bpe import symbol_bytes
from .cost import Shape, prefill_cost
from .errors import bad_value, check_number
from .i18n import tr
from .tokens import TextCost, Tokenized, costs

REPLACEMENT = "\ufffd"  # what a decoder shows for bytes that are not (yet) a whole character


# ----------------------------------------------------------------------------- one meaning, two languages
@dataclass(frozen=True)
class PairCost:
    """One meaning written in English and in Chinese, and what each text costs (``TextCost``)."""

    name: str
    en_text: str
    zh_text: str
    en: TextCost
    zh: TextCost

    @property
    def ratio(self) -> float:
        """Chinese tokens per English token, for the same meaning."""
        return self.zh.n_tokens / self.en.n_tokens

    def what_it_costs(self, shape: Shape, n_ctx: int, tpot: float) -> str:
        """Markdown bullets: prefill work, share of the context window, and time to write each text.

        Args:
            shape: the model's shape (``il.cost.Shape.from_info(m.info)``), for prefill FLOPs.
            n_ctx: the model's context length in tokens (``m.info.n_ctx``).
            tpot: seconds per output token measured on this machine (``trace.latency.tpot``).
        """
        check_number("n_ctx", n_ctx, low=1, integer=True, fix="pass m.info.n_ctx")
        check_number("tpot", tpot, low=0, low_open=True, fix="pass a measured TPOT in seconds, e.g. "
                     "il.generate(m, prompt, max_new_tokens=16).latency.tpot")
        en, zh = self.en, self.zh
        flops_en, flops_zh = (prefill_cost(shape, c.n_tokens).flops for c in (en, zh))
        return "\n".join([
            "- " + tr("**Prefill** reads {zh} tokens for the Chinese and {en} for the English: {zh_mflop:,.0f} vs "
                      "{en_mflop:,.0f} MFLOP on the loaded model's shape ({ratio:.1f}x the work).",
                      zh=zh.n_tokens, en=en.n_tokens, zh_mflop=flops_zh / 1e6, en_mflop=flops_en / 1e6,
                      ratio=flops_zh / flops_en),
            "- " + tr("**Context**: {zh_share:.2%} vs {en_share:.2%} of the model's {n_ctx:,}-token window. At these "
                      "rates the window holds about {zh_fit:,} Chinese characters or {en_fit:,} English ones.",
                      zh_share=zh.n_tokens / n_ctx, en_share=en.n_tokens / n_ctx, n_ctx=n_ctx,
                      zh_fit=int(n_ctx / zh.tokens_per_char), en_fit=int(n_ctx / en.tokens_per_char)),
            "- " + tr("**Writing** it as an answer at this machine's TPOT ({tpot_ms:.1f} ms per token): "
                      "{zh_ms:,.0f} ms for the Chinese vs {en_ms:,.0f} ms for the English. A reader sees {zh_cps:,.0f} "
                      "Chinese or {en_cps:,.0f} English characters per second (TPOT x tokens per character).",
                      tpot_ms=tpot * 1e3, zh_ms=zh.n_tokens * tpot * 1e3, en_ms=en.n_tokens * tpot * 1e3,
                      zh_cps=1 / (tpot * zh.tokens_per_char), en_cps=1 / (tpot * en.tokens_per_char)),
        ])

    def __repr__(self) -> str:
        return tr("PairCost({name!r}: English {en} tokens for {en_chars} chars, Chinese {zh} tokens for {zh_chars} "
                  "chars, x{ratio:.2f})", name=self.name, en=self.en.n_tokens, en_chars=self.en.n_chars,
                  zh=self.zh.n_tokens, zh_chars=self.zh.n_chars, ratio=self.ratio)


def compare(tokenizer, pairs: Mapping[str, tuple[str, str]]) -> list[PairCost]:
    """Characters, UTF-8 bytes and tokens of each ``name: (english, chinese)`` pair with one meaning."""
    if not isinstance(pairs, Mapping) or not pairs:
        raise bad_value("pairs", pairs, "a non-empty dict name -> (english, chinese)",
                        "e.g. {'question': ('What is quantum computing?', '什么是量子计算？')}")
    out = []
    for name, pair in pairs.items():
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise bad_value(f"pairs[{name!r}]", pair, "two texts: (english, chinese)",
                            "give the English text first and the Chinese text second")
        en, zh = costs(tokenizer, {"English": pair[0], "Chinese": pair[1]})
        out.append(PairCost(name, pair[0], pair[1], en, zh))
    return out


def per_character(tokenized: Tokenized) -> dict[int, int]:
    """How many characters touch 1, 2, 3 ... tokens: ``{1: 9, 2: 4, 3: 2}`` (a character cut over tokens
    touches each of them)."""
    char_at = [i for i, ch in enumerate(tokenized.text) for _ in ch.encode("utf-8")]  # byte -> character
    touched: Counter[int] = Counter()
    for piece in tokenized.pieces:
        touched.update(set(char_at[piece.start:piece.end]))
    return dict(sorted(Counter(touched[i] for i in range(len(tokenized.text))).items()))


# ----------------------------------------------------------------------------- a stream, byte by byte
@dataclass(frozen=True)
class CharStep:
    """One streamed token: its bytes, what still waits for the rest of a character, and what the reader saw."""

    index: int
    token_id: int
    raw: bytes       # the bytes this token stands for (b"" for a special token: it adds no text)
    held: bytes      # bytes of an incomplete character still waiting after this step
    shown: str       # the text the stream showed at this step ("" while it waits)
    completed: str   # the characters whose last byte arrived with this token
    joined: str      # the first of them when its bytes came over several tokens, else ""
    span: int        # how many tokens ``joined``'s bytes came in (0: none)
    alone: str       # this token decoded on its own, as a naive stream would print it

    def __repr__(self) -> str:
        return tr("CharStep(#{index} id={id} bytes {raw} held {held} shows {shown!r})", index=self.index,
                  id=self.token_id, raw=self.raw.hex(" ") or "-", held=self.held.hex(" ") or "-", shown=self.shown)


@dataclass(frozen=True)
class CharStream:
    """A streamed generation, token by token (``CharStep``s), with the counts that tell its story."""

    steps: tuple[CharStep, ...]

    text = property(lambda self: "".join(s.shown for s in self.steps), doc="Everything the stream showed.")
    n_tokens = property(lambda self: len(self.steps))
    n_chars = property(lambda self: sum(len(s.completed) for s in self.steps), doc="Characters completed.")
    n_joined = property(lambda self: sum(bool(s.joined) for s in self.steps),
                        doc="Characters whose bytes came over several tokens.")
    n_waits = property(lambda self: sum(bool(s.held) and not s.shown for s in self.steps),
                       doc="Steps at which the stream showed nothing because it held an incomplete character back.")
    shown_replacements = property(lambda self: self.text.count(REPLACEMENT), doc="U+FFFD the stream showed.")
    alone_replacements = property(lambda self: sum(s.alone.count(REPLACEMENT) for s in self.steps),
                                  doc="U+FFFD a stream printing each token on its own would have shown.")
    unfinished = property(lambda self: self.steps[-1].held if self.steps else b"",
                          doc="Bytes of a character the generation stopped in the middle of (b'' if none).")

    def __repr__(self) -> str:
        return tr("CharStream({n_tokens} tokens -> {n_chars} characters, {n_joined} arrived over several tokens, "
                  "U+FFFD shown {shown} times)", n_tokens=self.n_tokens, n_chars=self.n_chars, n_joined=self.n_joined,
                  shown=self.shown_replacements)


def follow(tokenizer, events: Iterable) -> CharStream:
    """Lay a stream out token by token: bytes in, bytes held back, text shown, characters completed.

    Args:
        tokenizer: the model's GPT-2 tokenizer (``m.tokenizer``).
        events: the ``TokenEvent``s of one generation: an ``il.stream(...)`` (run, or run now) or a list.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # UTF-8's own rule for "complete"
    special = set(getattr(tokenizer, "all_special_ids", ()))
    steps, since = [], 0  # since: the step at which the bytes now held back began
    for index, event in enumerate(events):
        if not (hasattr(event, "token_id") and hasattr(event, "text")):
            raise TypeError(f"events must hold TokenEvents (with .token_id and .text), got {type(event).__name__}. "
                            "Fix: pass il.stream(m, prompt, ...) or the list of its events.")
        token = int(event.token_id)
        before = decoder.getstate()[0]
        raw = b"" if token in special else symbol_bytes(tokenizer.convert_ids_to_tokens(token))
        completed = decoder.decode(raw)
        held = decoder.getstate()[0]
        joined = completed[:1] if before and completed[:1] not in ("", REPLACEMENT) else ""
        span = index - since + 1 if joined else 0
        if held and (not before or completed):
            since = index  # a new incomplete character began in this token
        steps.append(CharStep(index, token, raw, held, event.text, completed, joined, span,
                              tokenizer.decode([token])))
    if not steps:
        raise bad_value("events", [], "at least one TokenEvent", "generate at least one token (max_new_tokens >= 1)")
    return CharStream(tuple(steps))
