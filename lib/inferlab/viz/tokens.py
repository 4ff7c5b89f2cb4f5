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

from ..bpe import BYTE_TO_SYMBOL, BPEWork, symbol_bytes
from ..i18n import tr
from ..tokens import Piece, TextCost, Tokenized, visible
from . import PALETTE, base_layout, require

MAX_CHIPS = 3000
# After the Latin fonts, CJK ones (Linux, macOS, Windows): a Chinese character gets a Chinese font, not a box.
# (Views whose only font is a generic family, sans-serif or monospace, get one from the browser's own fallback.)
_MONO = "Menlo,Consolas,'Noto Sans Mono CJK SC','Noto Sans CJK SC','WenQuanYi Micro Hei','PingFang SC',monospace"
_BOX = ("display:inline-block;margin:2px 1px;padding:1px 5px;border-radius:5px;white-space:pre;"
        f"vertical-align:top;text-align:center;font-family:{_MONO};color:#111")
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
        small = tr("of {chars}", chars=visible(piece.chars)) + (f" · {piece.id}" if show_ids else "")
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
            tr("chips_html needs Piece objects: pass inferlab.tokens.tokenize(tokenizer, text)"))
    shown = [chip_html(p, show_ids=show_ids) for p in pieces[:max_chips]]
    if len(pieces) > max_chips:
        more = tr("... {n:,} more tokens not drawn", n=len(pieces) - max_chips)
        shown.append(f'<span style="color:#555"> {html.escape(more)}</span>')
    return f'<div class="il-chips" style="line-height:1.3;padding:4px 0">{"".join(shown)}</div>'


def stats_html(t: Tokenized) -> str:
    """One line of counts: tokens, characters, bytes, characters per token, bytes per token."""
    counts = tr("<b>{tokens:,}</b> tokens · {chars:,} characters · {bytes:,} UTF-8 bytes · "
                "<b>{chars_per_token:.2f}</b> characters/token · <b>{bytes_per_token:.2f}</b> bytes/token",
                tokens=t.n_tokens, chars=t.n_chars, bytes=t.n_bytes, chars_per_token=t.chars_per_token,
                bytes_per_token=t.bytes_per_token)
    return f'<div style="font-family:sans-serif;font-size:13px;color:#333">{counts}</div>'


def chips(t: Tokenized, *, show_ids: bool = True, with_stats: bool = True) -> HTML:
    """Chips plus the counts line, ready to display in a notebook cell."""
    require(isinstance(t, Tokenized), tr("chips needs a Tokenized: pass inferlab.tokens.tokenize(tokenizer, text)"))
    return HTML((stats_html(t) if with_stats else "") + chips_html(t, show_ids=show_ids))


# ----------------------------------------------------------------------------- BPE, step by step
def _symbol_chip(symbol: str, i: int, *, highlight: bool = False) -> str:
    raw = symbol_bytes(symbol)
    title = tr("symbol {symbol!r} = bytes {hex}", symbol=symbol, hex=raw.hex(" "))
    color = "#E45756" if highlight else PALETTE[i % len(PALETTE)]
    return _chip(symbol, title, color, bold=highlight)


def byte_map_html(work: BPEWork) -> str:
    """Table: each UTF-8 byte of the chunk, its hex, and the symbol GPT-2 writes it as."""
    require(isinstance(work, BPEWork), tr("byte_map_html needs a BPEWork: pass inferlab.bpe.bpe_steps(word)"))
    char_of = [ch for ch in work.word for _ in ch.encode("utf-8")]
    cells = "".join(
        f'<td style="padding:2px 6px;text-align:center">{b:02x}<br><b>{html.escape(BYTE_TO_SYMBOL[b])}</b>'
        f'<br><span style="color:#777">{html.escape(visible(c))}</span></td>'
        for b, c in zip(work.utf8, char_of))
    head = f'<td style="padding:2px 6px;color:#555">{tr("byte (hex)<br>symbol<br>character")}</td>'
    return f'<table style="border-collapse:collapse;font-family:monospace"><tr>{head}{cells}</tr></table>'


def merge_table_html(work: BPEWork, upto: int | None = None) -> str:
    """Every merge in order: rank in merges.txt, the pair joined, the word after it (new symbol in red).

    Args:
        work: from ``inferlab.bpe.bpe_steps(word)``.
        upto: show only the first ``upto`` merges (for a stepper); ``None`` shows them all.
    """
    require(isinstance(work, BPEWork), tr("merge_table_html needs a BPEWork: pass inferlab.bpe.bpe_steps(word)"))
    steps = work.steps if upto is None else work.steps[:upto]
    row = ('<tr><td style="padding:2px 8px;color:#555">{}</td><td style="padding:2px 8px">{}</td>'
           '<td style="padding:2px 8px">{}</td></tr>')
    rows = [row.format(tr("start"), tr("one symbol per byte"),
                       "".join(_symbol_chip(s, i) for i, s in enumerate(work.initial)))]
    for k, st in enumerate(steps, 1):
        joined = st.pair[0] + st.pair[1]
        after = "".join(_symbol_chip(s, i, highlight=(s == joined)) for i, s in enumerate(st.symbols))
        what = tr("rank {rank:,}: {left} + {right}", rank=st.rank, left=html.escape(st.pair[0]),
                  right=html.escape(st.pair[1]))
        rows.append(row.format(tr("merge {k}", k=k), what + (f" (x{st.count})" if st.count > 1 else ""), after))
    done = upto is None or upto >= len(work.steps)
    end = (tr("no pair left in merges.txt: ids {ids}", ids=list(work.ids)) if done
           else tr("{n} more merge(s) to go", n=len(work.steps) - len(steps)))
    rows.append(row.format(tr("end") if done else "...", html.escape(end), ""))
    header = tr("<th>step</th><th>pair joined (lowest rank first)</th><th>word after</th>")
    return ('<table style="border-collapse:collapse;font-family:sans-serif;font-size:13px">'
            f'<tr style="color:#555">{header}</tr>' + "".join(rows) + "</table>")


# ----------------------------------------------------------------------------- cost across scripts
_METRICS = ("tokens_per_char", "chars_per_token", "bytes_per_token", "n_tokens")


def _metric_text(metric: str) -> tuple[str, str]:
    """(axis title, default figure title) of one metric, in the reader's language."""
    return {"tokens_per_char": (tr("tokens per character"), tr("Tokens per character, GPT-2 tokenizer")),
            "chars_per_token": (tr("characters per token"), tr("Characters per token, GPT-2 tokenizer")),
            "bytes_per_token": (tr("UTF-8 bytes per token"), tr("UTF-8 bytes per token, GPT-2 tokenizer")),
            "n_tokens": (tr("tokens (for the whole text)"), tr("Tokens (for the whole text), GPT-2 tokenizer"))}[metric]


def text_name(name: str) -> str:
    """A text's name from ``tokens.SAME_MEANING`` / ``tokens.EXAMPLES`` (English keys) in the reader's language."""
    names = {"English": tr("English"), "Spanish": tr("Spanish"), "German": tr("German"), "Russian": tr("Russian"),
             "Greek": tr("Greek"), "Arabic": tr("Arabic"), "Hindi": tr("Hindi"), "Chinese": tr("Chinese"),
             "Japanese": tr("Japanese"), "Korean": tr("Korean"), "English prose": tr("English prose"),
             "Code": tr("Code"), "Numbers": tr("Numbers"), "Emoji": tr("Emoji"),
             "Repeated spaces": tr("Repeated spaces")}
    return names.get(name, name)


def cost_bars(costs: Sequence[TextCost], metric: str = "tokens_per_char", *, title: str | None = None,
              x_title: str | None = None) -> go.Figure:
    """Bar chart of what each text costs in tokens (``inferlab.tokens.costs`` gives the input).

    Args:
        costs: one ``TextCost`` per text (a language, a prompt).
        metric: ``"tokens_per_char"``, ``"chars_per_token"``, ``"bytes_per_token"`` or ``"n_tokens"``.
    """
    require(len(costs) > 0, tr("cost_bars needs at least one TextCost: pass inferlab.tokens.costs(tokenizer, texts)"))
    require(metric in _METRICS, tr("metric={metric!r} is not one of {allowed}", metric=metric, allowed=list(_METRICS)))
    values = [getattr(c, metric) for c in costs]
    names = [text_name(c.name) for c in costs]
    hover = [name + "<br>" + tr("{tokens} tokens, {chars} characters, {bytes} bytes<br>"
                                  "{tokens_per_char:.2f} tokens/char, {bytes_per_token:.2f} bytes/token",
                                  tokens=c.n_tokens, chars=c.n_chars, bytes=c.n_bytes,
                                  tokens_per_char=c.tokens_per_char, bytes_per_token=c.bytes_per_token)
             for name, c in zip(names, costs)]
    axis, default_title = _metric_text(metric)
    fig = go.Figure(go.Bar(x=names, y=values, marker_color=PALETTE[0], hovertext=hover,
                           hoverinfo="text", text=[f"{v:.2f}" if isinstance(v, float) else str(v) for v in values],
                           textposition="outside"))
    return base_layout(fig, title or default_title, x=x_title or tr("text"), y=axis, height=380)
