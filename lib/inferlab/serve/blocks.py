"""The paged KV cache's bookkeeping: a pool of fixed-size blocks, a block table per request, shared prefixes.

vLLM's idea (PagedAttention, SOSP 2023): instead of reserving one contiguous stretch of KV memory per
request, as long as the longest answer could be, the memory is cut into blocks of ``block_size`` token
positions, and each request holds a *block table*: the list of blocks that hold its positions
``0 .. block_size - 1``, ``block_size .. 2 * block_size - 1``, and so on. A request takes a block only
when its tokens reach it, so at most one block per request is partly empty.

Prefix caching (vLLM's automatic prefix caching): a *full* block is named by its tokens and everything
before them. A new request whose prompt starts with the same tokens takes those blocks too (their
reference count goes up) instead of computing them again. A freed block keeps its name until it is
handed out again, so a later request can still find it; the least recently freed is reused first.

This module only counts; the key and value tensors live in ``serve.paged``. Token positions only: no
tensors, no model.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..i18n import tr


@dataclass(frozen=True)
class BlockKey:
    """Names a full block: its tokens, and (by hash) every token before them. Equal keys, equal keys and values."""

    before: int  # hash of the previous block's key (0 for a request's first block)
    tokens: tuple[int, ...]


class BlockPool:
    """``num_blocks`` blocks of ``block_size`` positions; which are free, and which each request holds.

    ``tables[request_id]`` is that request's block table (block ids in position order); ``refs[b]`` how many
    tables hold block ``b``. With ``prefix_cache`` full blocks are remembered by ``BlockKey``.

    >>> pool = BlockPool(8, 16)
    >>> pool.grow(0, 20), pool.tables[0], pool.used_blocks    # 20 positions -> 2 blocks
    (True, [0, 1], 2)
    >>> pool.release(0); pool.used_blocks
    0
    """

    def __init__(self, num_blocks: int, block_size: int, *, prefix_cache: bool = False) -> None:
        self.num_blocks, self.block_size, self.prefix_cache = num_blocks, block_size, prefix_cache
        self.refs = [0] * num_blocks
        self.tables: dict[int, list[int]] = {}
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # least recently freed first
        self._key_of: dict[int, BlockKey] = {}  # block -> the key it is remembered by (full blocks only)
        self._block_of: dict[BlockKey, int] = {}  # key -> block
        self.hit_tokens = 0  # positions taken from the prefix cache instead of computed, over the pool's life

    # ------------------------------------------------------------------ counting
    @property
    def free_blocks(self) -> int:
        """Blocks no request holds (a remembered one among them can still be found by its key)."""
        return len(self._free)

    @property
    def used_blocks(self) -> int:
        """Blocks held by at least one request."""
        return self.num_blocks - len(self._free)

    def blocks_for(self, positions: int) -> int:
        """Blocks needed to hold ``positions`` token positions."""
        return -(-positions // self.block_size)

    # ------------------------------------------------------------------ taking and giving back
    def _take(self) -> int:
        block, _ = self._free.popitem(last=False)
        key = self._key_of.pop(block, None)  # handed out again: its old contents will be overwritten
        if key is not None:
            del self._block_of[key]
        self.refs[block] = 1
        return block

    def grow(self, request_id: int, positions: int) -> bool:
        """Make ``request_id``'s table hold ``positions`` positions; all the blocks needed, or none (``False``)."""
        table = self.tables.setdefault(request_id, [])
        missing = self.blocks_for(positions) - len(table)
        if missing > len(self._free):
            return False
        table.extend(self._take() for _ in range(missing))
        return True

    def release(self, request_id: int) -> None:
        """Give back every block of ``request_id``'s table (a shared block stays with its other holders)."""
        for block in reversed(self.tables.pop(request_id, [])):  # the last block first: the prefix stays longest
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self._free[block] = None

    # ------------------------------------------------------------------ prefix caching
    def keys(self, tokens: list[int], full_blocks: int) -> list[BlockKey]:
        """The keys of the first ``full_blocks`` blocks of ``tokens``."""
        out, before, bs = [], 0, self.block_size
        for i in range(full_blocks):
            key = BlockKey(before, tuple(tokens[i * bs:(i + 1) * bs]))
            out.append(key)
            before = hash(key)  # tuples of ints hash the same in every run (no per-process salt)
        return out

    def cached_prefix(self, tokens: list[int]) -> list[int]:
        """The remembered blocks that hold the longest full-block prefix of ``tokens`` (at least one token left
        to compute: its logits choose the next token)."""
        if not self.prefix_cache:
            return []
        out = []
        for key in self.keys(tokens, (len(tokens) - 1) // self.block_size):
            block = self._block_of.get(key)
            if block is None:
                break
            out.append(block)
        return out

    def free_after_sharing(self, blocks: list[int]) -> int:
        """Free blocks left once ``blocks`` are shared (a remembered block nobody holds stops being free)."""
        return len(self._free) - sum(1 for b in blocks if self.refs[b] == 0)

    def share(self, request_id: int, blocks: list[int]) -> None:
        """Start ``request_id``'s (empty) table with the remembered ``blocks`` of its prefix."""
        if self.tables.get(request_id):
            raise ValueError(f"request {request_id} already holds blocks; share a prefix only into an empty table")
        for block in blocks:
            if self.refs[block] == 0:
                del self._free[block]
            self.refs[block] += 1
        self.tables[request_id] = list(blocks)
        self.hit_tokens += len(blocks) * self.block_size

    def remember(self, request_id: int, tokens: list[int], computed: int) -> None:
        """Name the full blocks of ``request_id`` whose ``computed`` positions are written, so others can share them."""
        if not self.prefix_cache:
            return
        table = self.tables[request_id]
        for block, key in zip(table, self.keys(tokens, computed // self.block_size), strict=False):
            if block not in self._key_of and key not in self._block_of:  # the same tokens twice: keep the first
                self._key_of[block] = key
                self._block_of[key] = block

    # ------------------------------------------------------------------ the invariants, for tests and notebooks
    def problems(self) -> list[str]:
        """Broken invariants, in words (empty when the books balance): every reference counted, no free block
        held, no block held twice unless it is a remembered full block of a shared prefix."""
        out, holders = [], [0] * self.num_blocks
        for rid, table in self.tables.items():
            if len(set(table)) != len(table):
                out.append(f"request {rid} holds a block twice: {table}")
            for b in table:
                holders[b] += 1
        for b in range(self.num_blocks):
            if holders[b] != self.refs[b]:
                out.append(f"block {b}: {self.refs[b]} references counted, {holders[b]} tables hold it")
            if (b in self._free) != (holders[b] == 0):
                out.append(f"block {b}: {'free' if b in self._free else 'not free'} with {holders[b]} holders")
            if holders[b] > 1 and b not in self._key_of:
                out.append(f"block {b} is held by {holders[b]} requests but is no cached prefix block")
        return out

    def __repr__(self) -> str:
        return tr("BlockPool({used}/{n} blocks of {size} positions in use, {tables} block tables, {cached} cached "
                  "blocks)", used=self.used_blocks, n=self.num_blocks, size=self.block_size, tables=len(self.tables),
                  cached=len(self._key_of))
