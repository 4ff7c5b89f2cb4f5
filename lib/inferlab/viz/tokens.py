"""Token views: coloured chips (HTML), BPE merge tables (HTML) and token-cost bars (plotly).

The chip views are plain HTML with inline styles only (no ``<style>`` block, no script), so they show
in JupyterLab, in a static HTML export and on GitHub. Every chip has a ``title``: hover shows its id,
its bytes and the character they belong to.

    >>> from inferlab import tokens, viz                  # doctest: +SKIP
    >>> viz.tokens.chips(tokens.tokenize(m.tokenizer, "Hello, world!"))   # 4 chips
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go
from IPython.display import HTML

from ..tokens import BYTE_TO_SYMBOL, BPEWork, Piece, TextCost, Tokenized, symbol_bytes, visible
from . import PALETTE, base_layout, require

MAX_CHIPS = 3000
_BOX = ("display:inline-block;margin:2px 1px;padding:1px 5px;border-radius:5px;white-space:pre;"
        "vertical-align:top;text-align:center;font-family:Menlo,Consolas,monospace;color:#111")
_SMALL = "display:block;font-size:9px;color:#555;line-height:1.2"


def _chip(body: str, title: str, color: str, *, small: str = "", dashed: bool = False, bold: bool = False) -> str:
    border = f"{'2px' if bold else '1px'} {'dashed' if dashed else 'solid'} {color}"
    extra = f'<span style="{_SMALL}">{html.escape(small)}</span>' if small else ""
    return (f'<span class="il-chip" title="{html.escape(title, quote=True)}" '
            f'style="{_BOX};background:{color}2e;border:{border}">'
            f'<span style="font-size:14px;line-height:1.5">{html.escape(body)}</span>{extra}</span>')


def chip_html(piece: Piece, *, show_ids: bool = True) -> str:
    """One token as a chip: its text (or bytes ``e4 bb`` + the character, when it holds part of one)."""
    color = PALETTE[piece.index % len(PALETTE)]
    small = str(piece.id) if show_ids else ""
    if piece.partial:
        small = f"of {visible(piece.chars)}" + (f" · {piece.id}" if show_ids else "")
    chip = _chip(piece.label, piece.describe(), color, small=small, dashed=piece.partial, bold=piece.special)
    return chip + "<br>" * (piece.text.count("\n"))  # a newline token also breaks the line


def chips_html(pieces: Sequence[Piece] | Tokenized, *, show_ids: bool = True, max_chips: int = MAX_CHIPS) -> str:
    """Chips for a token sequence: one coloured box per token; dashed boxes hold part of a character.

    Args:
        pieces: a ``Tokenized`` (from ``inferlab.tokens.tokenize``) or its ``pieces``.
        show_ids: print each token's id under it.
        max_chips: draw at most this many (a note says how many were left out).
    """
    if isinstance(pieces, Tokenized):
        pieces = pieces.pieces
    require(all(isinstance(p, Piece) for p in pieces),
            "chips_html needs Piece objects: pass inferlab.tokens.tokenize(tokenizer, text)")
    shown = [chip_html(p, show_ids=show_ids) for p in pieces[:max_chips]]
    if len(pieces) > max_chips:
        shown.append(f'<span style="color:#555"> ... {len(pieces) - max_chips:,} more tokens not drawn</span>')
    return f'<div class="il-chips" style="line-height:1.3;padding:4px 0">{"".join(shown)}</div>'


def stats_html(t: Tokenized) -> str:
    """One line of counts: tokens, characters, bytes, characters per token, bytes per token."""
    return (f'<div style="font-family:sans-serif;font-size:13px;color:#333">'
            f"<b>{t.n_tokens:,}</b> tokens · {t.n_chars:,} characters · {t.n_bytes:,} UTF-8 bytes · "
            f"<b>{t.chars_per_token:.2f}</b> characters/token · <b>{t.bytes_per_token:.2f}</b> bytes/token</div>")


def chips(t: Tokenized, *, show_ids: bool = True, with_stats: bool = True) -> HTML:
    """Chips plus the counts line, ready to display in a notebook cell."""
    require(isinstance(t, Tokenized), "chips needs a Tokenized: pass inferlab.tokens.tokenize(tokenizer, text)")
    return HTML((stats_html(t) if with_stats else "") + chips_html(t, show_ids=show_ids))


# ----------------------------------------------------------------------------- BPE, step by step
def _symbol_chip(symbol: str, i: int, *, highlight: bool = False) -> str:
    raw = symbol_bytes(symbol)
    title = f"symbol {symbol!r} = bytes {raw.hex(' ')}"
    color = "#E45756" if highlight else PALETTE[i % len(PALETTE)]
    return _chip(symbol, title, color, bold=highlight)


def byte_map_html(work: BPEWork) -> str:
    """Table: each UTF-8 byte of the chunk, its hex, and the symbol GPT-2 writes it as."""
    require(isinstance(work, BPEWork), "byte_map_html needs a BPEWork: pass inferlab.tokens.bpe_steps(word)")
    char_of = [ch for ch in work.word for _ in ch.encode("utf-8")]
    cells = "".join(
        f'<td style="padding:2px 6px;text-align:center">{b:02x}<br><b>{html.escape(BYTE_TO_SYMBOL[b])}</b>'
        f'<br><span style="color:#777">{html.escape(visible(c))}</span></td>'
        for b, c in zip(work.utf8, char_of))
    head = '<td style="padding:2px 6px;color:#555">byte (hex)<br>symbol<br>character</td>'
    return f'<table style="border-collapse:collapse;font-family:monospace"><tr>{head}{cells}</tr></table>'


def merge_table_html(work: BPEWork, upto: int | None = None) -> str:
    """Every merge in order: rank in merges.txt, the pair joined, the word after it (new symbol in red).

    Args:
        work: from ``inferlab.tokens.bpe_steps(word)``.
        upto: show only the first ``upto`` merges (for a stepper); ``None`` shows them all.
    """
    require(isinstance(work, BPEWork), "merge_table_html needs a BPEWork: pass inferlab.tokens.bpe_steps(word)")
    steps = work.steps if upto is None else work.steps[:upto]
    row = ('<tr><td style="padding:2px 8px;color:#555">{}</td><td style="padding:2px 8px">{}</td>'
           '<td style="padding:2px 8px">{}</td></tr>')
    rows = [row.format("start", "one symbol per byte", "".join(_symbol_chip(s, i) for i, s in enumerate(work.initial)))]
    for k, st in enumerate(steps, 1):
        joined = st.pair[0] + st.pair[1]
        after = "".join(_symbol_chip(s, i, highlight=(s == joined)) for i, s in enumerate(st.symbols))
        what = f"rank {st.rank:,}: {html.escape(st.pair[0])} + {html.escape(st.pair[1])}"
        rows.append(row.format(f"merge {k}", what + (f" (x{st.count})" if st.count > 1 else ""), after))
    done = upto is None or upto >= len(work.steps)
    end = (f"no pair left in merges.txt: ids {list(work.ids)}" if done
           else f"{len(work.steps) - len(steps)} more merge(s) to go")
    rows.append(row.format("end" if done else "...", html.escape(end), ""))
    return ('<table style="border-collapse:collapse;font-family:sans-serif;font-size:13px">'
            '<tr style="color:#555"><th>step</th><th>pair joined (lowest rank first)</th><th>word after</th></tr>'
            + "".join(rows) + "</table>")


# ----------------------------------------------------------------------------- cost across scripts
_METRICS = {"tokens_per_char": "tokens per character", "chars_per_token": "characters per token",
            "bytes_per_token": "UTF-8 bytes per token", "n_tokens": "tokens (for the whole text)"}


def cost_bars(costs: Sequence[TextCost], metric: str = "tokens_per_char", *, title: str | None = None,
              x_title: str = "text") -> go.Figure:
    """Bar chart of what each text costs in tokens (``inferlab.tokens.costs`` gives the input).

    Args:
        costs: one ``TextCost`` per text (a language, a prompt).
        metric: ``"tokens_per_char"``, ``"chars_per_token"``, ``"bytes_per_token"`` or ``"n_tokens"``.
    """
    require(len(costs) > 0, "cost_bars needs at least one TextCost: pass inferlab.tokens.costs(tokenizer, texts)")
    require(metric in _METRICS, f"metric={metric!r} is not one of {list(_METRICS)}")
    values = [getattr(c, metric) for c in costs]
    hover = [f"{c.name}<br>{c.n_tokens} tokens, {c.n_chars} characters, {c.n_bytes} bytes<br>"
             f"{c.tokens_per_char:.2f} tokens/char, {c.bytes_per_token:.2f} bytes/token" for c in costs]
    fig = go.Figure(go.Bar(x=[c.name for c in costs], y=values, marker_color=PALETTE[0], hovertext=hover,
                           hoverinfo="text", text=[f"{v:.2f}" if isinstance(v, float) else str(v) for v in values],
                           textposition="outside"))
    return base_layout(fig, title or f"{_METRICS[metric].capitalize()}, GPT-2 tokenizer", x=x_title,
                       y=_METRICS[metric], height=380)
