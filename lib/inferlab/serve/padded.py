"""Static batching's padding: the work ``generate()`` on a padded batch does that serves no one.

``ServeConfig.policy="static"`` is the baseline continuous batching is measured against, so it must cost what a
padded batch costs. Two kinds of row compute and are thrown away:

- **prompt padding**: a batch's first forward reads every prompt as long as its longest (pad tokens before the
  shorter ones; none with ``prefill_chunk``, since a padded batch reads prompts whole);
- **finished rows**: a request that is done keeps its row in every decode step, attending over the batch's whole
  length, until the batch's longest answer is done.

Both run through ``PagedKV.forward`` like a request's tokens, in scratch blocks past the pool's (``padding``), which
no block table holds. ``reserve_padding`` makes them before the clock starts: growing them inside a timed run would
copy the whole pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .paged import PagedKV, Segment
from .requests import Live, Request


def reserve_padding(kv: PagedKV, positions: int) -> None:
    """Room in ``kv`` for padding rows up to ``positions`` long: scratch blocks past the pool's, which no request
    holds. Grows every layer's keys and values (a copy of the whole pool), so call it before the clock starts."""
    blocks = -(-positions // kv.block_size)
    have = kv.k[0].shape[0] // kv.block_size - kv.num_blocks
    if blocks > have:
        extra = (blocks - have) * kv.block_size
        kv.k = [torch.cat([t, t.new_zeros((extra, *t.shape[1:]))]) for t in kv.k]
        kv.v = [torch.cat([t, t.new_zeros((extra, *t.shape[1:]))]) for t in kv.v]


def padding(kv: PagedKV, token: int, n: int = 1, start: int = 0) -> Segment:
    """``n`` positions from ``start`` that compute like a request's and serve no one, as in a padded batch:
    ``n=1`` a finished request's row in a decode step (``generate()`` keeps running it, attending over the
    batch's whole length ``start``, until the longest answer is done), ``n > 1`` the pad tokens that make a
    short prompt as long as the batch's longest. It reads and writes only the scratch blocks
    (``reserve_padding`` first: this never grows them, which would copy the pool inside a timed run)."""
    blocks = -(-(start + n) // kv.block_size)
    if (kv.num_blocks + blocks) * kv.block_size > kv.k[0].shape[0]:
        raise RuntimeError(f"padding of {start + n} positions: call reserve_padding({start + n}) first")
    return Segment((token,) * n, start, tuple(range(kv.num_blocks, kv.num_blocks + blocks)), False)


def prompt_padding(runs: list[tuple[Live, int]], prefill_chunk: int | None) -> list[int]:
    """The pad tokens a padded ``generate()`` puts before each shorter prompt of the batch it starts, every row as
    long as the longest (none with ``prefill_chunk``: a padded batch reads prompts whole)."""
    longest = max(n for _, n in runs)  # (runs is never empty: the scheduler raises first)
    return [] if prefill_chunk else [longest - n for _, n in runs if n < longest]


@dataclass
class StaticPadding:
    """The padding of the static batch now running: ``rows`` gives each iteration's padding segments."""

    kv: PagedKV
    token: int  # what a padding row runs (the end-of-text id, as a padded batch's pad token)
    prefill_chunk: int | None
    batch_rows: int = 0  # the rows of the batch now running (its finished requests' rows still run)

    def reserve(self, requests: list[Request]) -> None:
        """Scratch for the longest request's last position, before the clock starts."""
        reserve_padding(self.kv, max(len(r.prompt_ids) + r.max_new_tokens for r in requests))

    def rows(self, running: int, runs: list[tuple[Live, int]], starting: bool) -> tuple[list[Segment], int, int]:
        """This iteration's padding segments, the finished requests' rows among them, and the prompt pad tokens.

        ``running``: requests in the batch after scheduling; ``runs``: the schedule; ``starting``: the batch's
        first forward (its prompts are padded to the longest)."""
        self.batch_rows = max(self.batch_rows, running) if running else 0
        finished = self.batch_rows - running
        pads = prompt_padding(runs, self.prefill_chunk) if starting else []
        segments = [padding(self.kv, self.token, n) for n in pads]
        if finished:  # at the batch's longest position, as generate() runs them
            segments += [padding(self.kv, self.token, start=max(lv.computed for lv, _ in runs))] * finished
        return segments, finished, sum(pads)
