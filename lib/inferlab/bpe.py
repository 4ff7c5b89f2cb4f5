"""GPT-2's byte-level BPE by hand, in plain Python (minGPT's ``bpe.py``): slow, readable, exact.

``BPE`` reads ``vocab.json`` + ``merges.txt`` and re-implements the tokenizer: pre-tokenize, map each
byte to a printable symbol, merge neighbouring pairs in rank order, look up the ids.
``bpe_steps(" world")`` returns the UTF-8 bytes, the byte -> symbol mapping and every merge (minGPT's
``encode_and_show_work``). The tests prove it gives the real tokenizer's ids.

    >>> bpe_steps(" world").ids                            # doctest: +SKIP
    (995,)
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import regex

from .errors import bad_value, check_utf8
from .i18n import tr
from .paths import BUNDLED_DIR

SPECIAL_TOKENS = {"<|endoftext|>": 50256}
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
