"""Tokens: text -> pieces -> ids -> text, every byte shown (GPT-2's BPE done by hand is ``bpe.py``).

``tokenize(tokenizer, text)`` asks the real tokenizer and returns ``Piece``s that know their bytes
(``e4 bb``) and the character(s) those bytes belong to, so a piece holding part of a character is
shown as bytes, never as the replacement character. ``costs`` compares texts' token counts and
``chat_text`` shows the one text a chat model reads.

    >>> t = tokenize(m.tokenizer, "Hello, world!")        # doctest: +SKIP
    >>> t.ids                                             # doctest: +SKIP
    [15496, 11, 995, 0]
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from .bpe import symbol_bytes
from .errors import bad_value, check_utf8
from .i18n import tr

MAX_CHARS = 20_000  # longer text: the chip view would be unreadable and slow
_HIDDEN = {"Cc", "Cf", "Zs", "Zl", "Zp"}  # control, format (zero-width joiner...), other spaces



def piece_text(tokenizer, token_id: int) -> str:
    """One token's text; a token that holds only part of a character shows its bytes, e.g. ``'⟨e5⟩⟨ba⟩'``.

    ``tokenizer.decode([token_id])`` prints such a token as U+FFFD (the replacement character): GPT-2's
    byte-level vocabulary cuts a Chinese character (three UTF-8 bytes) across tokens.
    """
    text = tokenizer.decode([int(token_id)])
    if "\ufffd" not in text:
        return text
    try:
        raw = symbol_bytes(tokenizer.convert_ids_to_tokens(int(token_id)))
        return raw.decode("utf-8")  # whole characters after all (a token that *is* U+FFFD, say)
    except (KeyError, TypeError):  # not a byte-level vocabulary entry: keep what decode said
        return text
    except UnicodeDecodeError:
        return "".join(f"⟨{b:02x}⟩" for b in raw)


_SHOWN = {" ": "·", "\n": "⏎", "\t": "→", "\r": "␍"}


def visible(text: str) -> str:
    """Invisible characters made visible: space '·', newline '⏎', tab '→', others as ``⟨U+200D⟩``."""
    return "".join(_SHOWN.get(ch) or (f"⟨U+{ord(ch):04X}⟩" if unicodedata.category(ch) in _HIDDEN else ch)
                   for ch in text)


# ----------------------------------------------------------------------------- the real tokenizer
@dataclass(frozen=True)
class Piece:
    """One token of a text: its id, its bytes, and the whole character(s) those bytes belong to."""

    index: int    # position in the token sequence
    id: int
    symbol: str   # how the vocabulary spells it ("Ġworld")
    raw: bytes    # the bytes it stands for (b" world")
    start: int    # byte offsets into the text's UTF-8: raw == text.encode()[start:end]
    end: int
    chars: str    # the characters these bytes are (part of)
    partial: bool  # True when the bytes are not whole characters (one character cut across tokens)
    special: bool = False

    @property
    def hex(self) -> str:
        """The bytes as hex pairs, e.g. ``'e4 bb'``."""
        return self.raw.hex(" ")

    @property
    def text(self) -> str:
        """The decoded text, or ``''`` for a piece that is only part of a character."""
        return "" if self.partial else self.raw.decode("utf-8")

    @property
    def label(self) -> str:
        """What a chip shows: the visible text, or the hex bytes for part of a character."""
        return self.hex if self.partial else visible(self.text)

    def describe(self) -> str:
        """One line for hover text: id, text or bytes, and the character they belong to."""
        points = " ".join(f"U+{ord(c):04X}" for c in self.chars)
        facts = {"index": self.index, "id": self.id, "hex": self.hex}
        if self.partial:
            return tr("token {index}: id {id}, bytes {hex}, part of {chars!r} ({points})", chars=self.chars,
                      points=points, **facts)
        if self.special:
            return tr("token {index}: id {id}, {text!r}, bytes {hex} (special token)", text=self.text, **facts)
        return tr("token {index}: id {id}, {text!r}, bytes {hex}", text=self.text, **facts)

    def __repr__(self) -> str:
        if self.partial:
            return tr("Piece({id}, {label!r}, part of {chars!r})", id=self.id, label=self.label, chars=self.chars)
        return f"Piece({self.id}, {self.label!r})"


@dataclass(frozen=True)
class Tokenized:
    """A text cut into ``Piece``s, with counts: tokens, characters, UTF-8 bytes."""

    text: str
    pieces: tuple[Piece, ...]

    @property
    def ids(self) -> list[int]:
        return [p.id for p in self.pieces]

    n_tokens = property(lambda self: len(self.pieces))
    n_chars = property(lambda self: len(self.text))
    n_bytes = property(lambda self: len(self.text.encode("utf-8")))
    chars_per_token = property(lambda self: self.n_chars / self.n_tokens)
    bytes_per_token = property(lambda self: self.n_bytes / self.n_tokens)
    tokens_per_char = property(lambda self: self.n_tokens / self.n_chars)

    def __repr__(self) -> str:
        shown = " ".join(repr(p.label) for p in self.pieces[:8]) + (" ..." if self.n_tokens > 8 else "")
        return tr("Tokenized({tokens} tokens, {chars} chars, {nbytes} bytes, {per_token:.2f} chars/token: {shown})",
                  tokens=self.n_tokens, chars=self.n_chars, nbytes=self.n_bytes, per_token=self.chars_per_token,
                  shown=shown)


def check_text(text, max_chars: int = MAX_CHARS) -> str:
    """Refuse what a tokenizer view cannot show well: non-strings, empty text, very long text, broken text."""
    check_utf8("text", text)
    if not text:
        raise bad_value("text", text, tr("at least one character"), tr("type some text, e.g. 'Hello, world!'"))
    if len(text) > max_chars:
        raise bad_value("text", tr("<{n:,} characters>", n=len(text)), tr("at most {n:,} characters", n=max_chars),
                        tr("shorten the text (or pass a larger max_chars)"))
    return text


def tokenize(tokenizer, text: str, *, max_chars: int = MAX_CHARS) -> Tokenized:
    """Cut ``text`` with the real tokenizer and describe every piece (bytes, characters, special).

    Args:
        tokenizer: GPT-2's tokenizer (``m.tokenizer``); any byte-level BPE tokenizer works.
        text: 1 to ``max_chars`` characters.
    """
    check_text(text, max_chars)
    ids = list(tokenizer(text, add_special_tokens=False).input_ids)
    symbols = tokenizer.convert_ids_to_tokens(ids)
    special_ids = set(getattr(tokenizer, "all_special_ids", []))
    data = text.encode("utf-8")
    char_at = [i for i, ch in enumerate(text) for _ in ch.encode("utf-8")]  # byte offset -> char index
    pieces, start = [], 0
    for index, (tid, sym) in enumerate(zip(ids, symbols)):
        raw = symbol_bytes(sym)
        end = start + len(raw)
        if data[start:end] != raw:
            raise ValueError("the tokens' bytes do not add up to the text; inferlab.tokens expects GPT-2's "
                             "byte-level BPE (no normalization). Fix: use the model's own GPT-2 tokenizer.")
        first, last = char_at[start], char_at[end - 1]
        whole = (start == 0 or char_at[start - 1] != first) and (end == len(data) or char_at[end] != last)
        pieces.append(Piece(index, tid, sym, raw, start, end, text[first:last + 1], not whole, tid in special_ids))
        start = end
    return Tokenized(text, tuple(pieces))


@dataclass(frozen=True)
class TextCost:
    """What one text costs in tokens (for comparing languages or prompts)."""

    name: str
    n_tokens: int
    n_chars: int
    n_bytes: int

    tokens_per_char = property(lambda self: self.n_tokens / self.n_chars)
    chars_per_token = property(lambda self: self.n_chars / self.n_tokens)
    bytes_per_token = property(lambda self: self.n_bytes / self.n_tokens)


def costs(tokenizer, texts: Mapping[str, str]) -> list[TextCost]:
    """Token counts for each named text: ``costs(tok, SAME_MEANING)``."""
    out = []
    for name, text in texts.items():
        t = tokenize(tokenizer, text)
        out.append(TextCost(name, t.n_tokens, t.n_chars, t.n_bytes))
    return out


# One meaning in several scripts (ordinary phrasings of "Good morning! The weather is very nice today.").
SAME_MEANING = {
    "English": "Good morning! The weather is very nice today.",
    "Spanish": "¡Buenos días! Hoy hace muy buen tiempo.",
    "German": "Guten Morgen! Das Wetter ist heute sehr schön.",
    "Russian": "Доброе утро! Сегодня очень хорошая погода.",
    "Greek": "Καλημέρα! Ο καιρός είναι πολύ ωραίος σήμερα.",
    "Arabic": "صباح الخير! الطقس جميل جدا اليوم.",
    "Hindi": "सुप्रभात! आज मौसम बहुत अच्छा है।",
    "Chinese": "早上好！今天天气很好。",
    "Japanese": "おはようございます！今日はとても良い天気です。",
    "Korean": "좋은 아침입니다! 오늘 날씨가 아주 좋네요.",
}

# Ready-made examples for the type-any-text box.
EXAMPLES = {
    "English prose": "Machines only read numbers, so text is first cut into tokens.",
    "Chinese": "什么是量子计算？机器只懂数字。",
    "Japanese": "推論はどのように動くのですか？",
    "Code": "def add(a, b):\n    return a + b\n",
    "Numbers": "In 2024, 1234567 + 89 = 1234656 and pi ≈ 3.14159.",
    "Emoji": "I love pizza 🍕🍕! Family: 👨‍👩‍👧 Flags: 🇫🇷",
    "Repeated spaces": "a  b    c        d\n\n\nend",
}


# ----------------------------------------------------------------------------- what a chat model sees
# ChatML, the format of Qwen and (earlier) OpenAI's chat models, written as the Jinja template a chat model's
# tokenizer carries. GPT-2 has no chat template (it was never trained on conversations): pass this one.
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")


def chat_text(tokenizer, messages: list[dict[str, str]], template: str = CHATML, *,
              add_generation_prompt: bool = True) -> str:
    """The one text a chat model reads for ``messages``: Hugging Face's ``apply_chat_template`` with ``template``.

    >>> chat_text(tok, [{"role": "user", "content": "Hi"}])   # doctest: +SKIP
    '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'

    Args:
        tokenizer: any Hugging Face tokenizer (``m.tokenizer``).
        messages: ``[{"role": "system" | "user" | "assistant", "content": "..."}, ...]``.
        template: a Jinja chat template (default: ChatML).
        add_generation_prompt: end with the opening of the assistant's turn, where the model writes next.
    """
    good = isinstance(messages, list) and messages and all(
        isinstance(x, dict) and isinstance(x.get("role"), str) and isinstance(x.get("content"), str)
        for x in messages)
    if not good:
        raise bad_value("messages", messages, 'a non-empty list of {"role": ..., "content": ...} dicts (strings)',
                        'e.g. [{"role": "user", "content": "What is a token?"}]')
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)
