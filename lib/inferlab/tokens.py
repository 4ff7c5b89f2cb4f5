"""Tokens: text -> pieces -> ids -> text, every byte shown, and GPT-2's byte-level BPE done by hand.

Two halves:

- ``tokenize(tokenizer, text)`` asks the real tokenizer and returns ``Piece``s that know their bytes
  (``e4 bb``) and the character(s) those bytes belong to, so a piece holding part of a character is
  shown as bytes, never as the replacement character.
- ``BPE`` re-implements GPT-2's tokenizer in plain Python from ``vocab.json`` + ``merges.txt``
  (slow, readable; minGPT's ``encode_and_show_work``): ``bpe_steps(" world")`` returns the UTF-8
  bytes, the byte -> symbol mapping and every merge in rank order. The tests prove it gives the real
  tokenizer's ids.

    >>> t = tokenize(m.tokenizer, "Hello, world!")        # doctest: +SKIP
    >>> t.ids                                             # doctest: +SKIP
    [15496, 11, 995, 0]
"""

from __future__ import annotations

import functools
import itertools
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import regex

from .errors import bad_value
from .i18n import tr
from .paths import BUNDLED_DIR

MAX_CHARS = 20_000  # longer text: the chip view would be unreadable and slow
SPECIAL_TOKENS = {"<|endoftext|>": 50256}
_HIDDEN = {"Cc", "Cf", "Zs", "Zl", "Zp"}  # control, format (zero-width joiner...), other spaces
# GPT-2's pre-tokenizer (openai/gpt-2 encoder.py): contractions, letters, digits, other, whitespace.
# BPE never merges across these chunks, so a leading space stays with the word after it.
GPT2_SPLIT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> symbol map: each of the 256 byte values gets one printable character.

    Printable bytes stand for themselves (``b"a"`` -> ``"a"``); the others (space, control bytes,
    ``0x80``-``0xff``) are moved to code points from 256 up, so a space becomes ``"Ġ"`` and a newline
    ``"Ċ"``. The vocabulary is written in these symbols, which is why ``" world"`` appears as ``"Ġworld"``.
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_SYMBOL = bytes_to_unicode()
SYMBOL_TO_BYTE = {s: b for b, s in BYTE_TO_SYMBOL.items()}


def symbol_bytes(symbol: str) -> bytes:
    """A vocabulary entry (``"Ġworld"``) -> the bytes it stands for (``b" world"``)."""
    if symbol in SPECIAL_TOKENS:
        return symbol.encode("utf-8")
    return bytes(SYMBOL_TO_BYTE[c] for c in symbol)


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


def check_utf8(name: str, text) -> str:
    """Refuse a non-string, or a string with no UTF-8 bytes (a lone surrogate): BPE works on UTF-8 bytes.

    A lone surrogate (``"\ud800"``) is half of a character outside the Basic Multilingual Plane, such as
    an emoji, left behind when a string is cut between the two halves of a UTF-16 pair.
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string, got {type(text).__name__}. Fix: pass the text in quotes.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = text if len(text) <= 40 else text[max(0, exc.start - 10):exc.start + 10]
        raise bad_value(name, shown, tr("text that can be written as UTF-8 (whole characters only)"),
                        tr("remove the lone surrogate U+{code:04X} at character {position} (half of an emoji or "
                           "other character, left by cutting a string), or paste the whole character again",
                           code=ord(text[exc.start]), position=exc.start)) from None
    return text


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


# ----------------------------------------------------------------------------- BPE by hand
@dataclass(frozen=True)
class MergeStep:
    """One merge: the pair with the lowest rank among the word's neighbours, joined everywhere."""

    rank: int                    # line in merges.txt (0 = learned first = applied first)
    pair: tuple[str, str]
    count: int                   # how many places in the word it joined
    symbols: tuple[str, ...]     # the word after this merge

    def __repr__(self) -> str:
        return tr("MergeStep(rank {rank}: {left!r} + {right!r} -> {symbols})", rank=self.rank, left=self.pair[0],
                  right=self.pair[1], symbols=" ".join(self.symbols))


@dataclass(frozen=True)
class BPEWork:
    """Byte-level BPE of one pre-tokenized chunk, step by step."""

    word: str
    utf8: bytes
    initial: tuple[str, ...]     # one symbol per byte
    steps: tuple[MergeStep, ...]
    ids: tuple[int, ...]

    @property
    def final(self) -> tuple[str, ...]:
        return self.steps[-1].symbols if self.steps else self.initial

    def __repr__(self) -> str:
        return tr("BPEWork({word!r}: {nbytes} bytes -> {merges} merges -> {final} = ids {ids})", word=self.word,
                  nbytes=len(self.utf8), merges=len(self.steps), final=list(self.final), ids=list(self.ids))


class BPE:
    """GPT-2's tokenizer in plain Python: pre-tokenize, map bytes to symbols, merge by rank, look up ids."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.vocab = vocab
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.id_to_symbol = {i: s for s, i in vocab.items()}

    @classmethod
    def from_folder(cls, folder: str | Path | None = None) -> BPE:
        """Read ``vocab.json`` and ``merges.txt`` (default: the bundled model's folder, GPT-2's own files)."""
        if folder is None:
            folder = BUNDLED_DIR
        folder = Path(folder)
        if not (folder / "vocab.json").is_file() or not (folder / "merges.txt").is_file():
            raise FileNotFoundError(f"folder={str(folder)!r} lacks vocab.json and merges.txt. Fix: pass a folder "
                                    "that has both (the bundled model's has), or leave folder=None.")
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        lines = (folder / "merges.txt").read_text(encoding="utf-8").split("\n")
        merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
        return cls(vocab, merges)

    @staticmethod
    def pretokenize(text: str) -> list[str]:
        """Cut text into the chunks BPE works on (words with their leading space, digits, punctuation, spaces)."""
        return GPT2_SPLIT.findall(text)

    def work(self, word: str) -> BPEWork:
        """Merge one chunk, recording every step (the classic openai/gpt-2 loop)."""
        check_utf8("word", word)
        if not word:
            raise bad_value("word", word, "a non-empty chunk of text", "pass e.g. ' world'")
        utf8 = word.encode("utf-8")
        symbols = tuple(BYTE_TO_SYMBOL[b] for b in utf8)
        initial, steps = symbols, []
        while len(symbols) > 1:
            pairs = set(itertools.pairwise(symbols))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break  # no neighbouring pair was ever merged in training: done
            merged, i, count = [], 0, 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    merged.append(symbols[i] + symbols[i + 1])
                    i, count = i + 2, count + 1
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = tuple(merged)
            steps.append(MergeStep(self.ranks[best], best, count, symbols))
        return BPEWork(word, utf8, initial, tuple(steps), tuple(self.vocab[s] for s in symbols))

    def encode_and_show_work(self, text: str) -> list[BPEWork]:
        """``work`` for every chunk of ``text`` (special tokens are kept whole, as the real tokenizer does).

        The name is minGPT's: the ids (``[i for w in works for i in w.ids]``) with every step that made them.
        """
        check_utf8("text", text)
        out = []
        for part in regex.split("(" + "|".join(regex.escape(s) for s in SPECIAL_TOKENS) + ")", text):
            if part in SPECIAL_TOKENS:
                sym = (part,)
                out.append(BPEWork(part, part.encode("utf-8"), sym, (), (SPECIAL_TOKENS[part],)))
            elif part:
                out.extend(self.work(chunk) for chunk in self.pretokenize(part))
        return out

    def encode(self, text: str) -> list[int]:
        """Text -> ids, the slow readable way (same ids as ``tokenizer.encode``)."""
        return [i for w in self.encode_and_show_work(text) for i in w.ids]

    def decode(self, ids) -> str:
        """Ids -> text (bytes joined first, so pieces of one character come back together)."""
        unknown = [i for i in ids if int(i) not in self.id_to_symbol]
        if unknown:
            raise bad_value("ids", unknown[:5], f"ids of this vocabulary (0..{len(self.vocab) - 1})",
                            "pass ids made by this tokenizer's encode()")
        return b"".join(symbol_bytes(self.id_to_symbol[int(i)]) for i in ids).decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=1)
def gpt2_bpe() -> BPE:
    """The hand-written BPE on GPT-2's files (read once, ~0.1 s)."""
    return BPE.from_folder()


def bpe_steps(word: str) -> BPEWork:
    """Show the work for one chunk: ``bpe_steps(" world")``. Several chunks: ``gpt2_bpe().encode_and_show_work``."""
    check_utf8("word", word)
    chunks = BPE.pretokenize(word) if word else []
    if len(chunks) != 1 or chunks[0] != word:
        raise bad_value("word", word, tr("exactly one pre-token chunk (a word with at most one leading space)"),
                        tr("it splits into {chunks}; use gpt2_bpe().encode_and_show_work(text) for several chunks",
                           chunks=chunks))
    return gpt2_bpe().work(word)


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
