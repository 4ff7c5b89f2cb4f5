"""Sliders over T and the tile size: the slow-memory bytes eager and tiled attention move (``flash``'s counts).

Counting only: nothing runs in a callback but two formulas, so it answers at once at any T.

    >>> traffic_explorer(heads=12, head_dim=64)      # doctest: +SKIP
"""

from __future__ import annotations

import ipywidgets as w

from ..flash import eager_traffic, tiled_traffic
from ..i18n import tr
from ..units import format_bytes
from . import message, titled

LENGTHS = tuple(2**i for i in range(8, 17))  # 256 .. 65,536
BLOCKS = (16, 32, 64, 128, 256)


def traffic_text(T: int, block: int, heads: int = 12, head_dim: int = 64) -> str:
    """One reading of the counts: eager and tiled bytes at ``T`` with square tiles of ``block``."""
    eager = eager_traffic(T, head_dim, heads=heads)
    tiled = tiled_traffic(T, head_dim, heads=heads, block_q=block, block_k=block)
    return tr("T = {T:,}, tiles of {block}: eager moves {eager} (the score matrices alone {scores}), tiled {tiled}: "
              "{x:.1f}x less. One head's tiles need {fast} of fast memory at once.", T=T, block=block,
              eager=format_bytes(eager.bytes), scores=format_bytes(eager.score_bytes), tiled=format_bytes(tiled.bytes),
              x=eager.bytes / tiled.bytes, fast=format_bytes(tiled.fast_bytes))


def traffic_explorer(heads: int = 12, head_dim: int = 64) -> w.VBox:
    """A T slider (256 to 65,536) and a tile-size slider; the counted bytes of both versions, redrawn at once."""
    length = w.SelectionSlider(options=LENGTHS, value=4096, description="T", continuous_update=True)
    block = w.SelectionSlider(options=BLOCKS, value=64, description=tr("tile size"), continuous_update=True,
                              style={"description_width": "initial"})
    info = w.HTML()

    def redraw(_=None) -> None:
        info.value = message(traffic_text(length.value, block.value, heads, head_dim), "info")

    length.observe(redraw, names="value")
    block.observe(redraw, names="value")
    redraw()
    return titled(w.VBox([w.HBox([length, block]), info]),
                  tr("Attention traffic explorer ({heads} heads x {d}): run the cell to use the sliders", heads=heads,
                     d=head_dim))
