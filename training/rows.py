"""Training rows: random windows of the token streams, the two languages mixed per batch, and the rows that teach
copying (repeated spans, copy rows, passage rows), each drawn from one seeded ``torch.Generator`` so a run's data
are the same on any machine. Batches are ``x`` ``[batch, tokens + 1]`` or ``(x, targets)`` with -100 where a row
learns nothing (``loop.train_loop`` reads both).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch


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

