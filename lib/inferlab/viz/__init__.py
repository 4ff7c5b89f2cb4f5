"""Figures: plain data in, a plotly ``Figure`` out. They never take a model, never run it, never display themselves.

Importing this package changes nothing global. Every figure gets the course's template from ``base_layout``
(so it looks the same anywhere). A notebook calls ``setup_notebook()`` once, in its first code cell, to
choose how figures are shown:

- In Jupyter (Lab, Notebook, nbval, nbconvert): ``plotly_mimetype`` (plotly's own default in a Jupyter
  kernel, so the stored outputs are the same with or without the call). JupyterLab draws it with the
  ``jupyterlab-plotly`` extension that ships inside the ``plotly`` package, offline. The stored notebooks
  stay small (no 4.8 MB copy of plotly.js in every notebook); the offline HTML edition
  (``python -m inferlab.tools.export_html``) embeds the local plotly.js once per page.
- In Google Colab: ``colab`` (plotly's own guess there depends on an environment variable Colab may not set).

Submodules by topic: ``viz.tokens``, ``viz.embeddings``, ``viz.attention``, ``viz.roofline``,
``viz.kvcache``, ``viz.sampling``, ``viz.latency``, ``viz.speed``, ``viz.serve``, ``viz.long_context``.

Every word a figure shows goes through ``i18n.tr`` when the figure is built, so a figure speaks the language
chosen at that moment (``il.set_language("zh")``); the font list falls back to a CJK font for Chinese.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from ..i18n import tr

TEMPLATE = "plotly_white"
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC")
RENDERER_ENV = "INFERLAB_PLOTLY_RENDERER"
MODEBAR_PX = 36  # pixels from a figure's top to below plotly's toolbar (the modebar, drawn at the top right)
# plotly.js's own default (the English look stays), then CJK fonts for Chinese text (Linux, macOS, Windows).
FONT = ('"Open Sans", verdana, arial, "Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Micro Hei", "PingFang SC", '
        '"Microsoft YaHei", sans-serif')


def setup_notebook() -> str:
    """Choose how this notebook shows figures; returns the renderer's name. Call it once per notebook.

    Sets plotly's default renderer (``INFERLAB_PLOTLY_RENDERER`` overrides; Colab gets ``colab``, everything
    else ``plotly_mimetype``) and the default template (so figures built without ``base_layout`` match). In a
    live kernel, a cell still running after 10 s then shows a line counting its seconds (``progress``). It prints
    one line when other programs keep the machine busy (``timing.busy_note``). And it spares the kernel a parser
    nothing here uses (``_skip_iri_grammar``).

    >>> from inferlab import viz                 # doctest: +SKIP
    >>> viz.setup_notebook()                     # doctest: +SKIP
    'plotly_mimetype'
    """
    if os.environ.get(RENDERER_ENV):
        renderer = os.environ[RENDERER_ENV]
    elif "google.colab" in sys.modules:
        renderer = "colab"
    else:
        renderer = "plotly_mimetype"
    _skip_iri_grammar()
    pio.renderers.default = renderer
    pio.templates.default = TEMPLATE
    from ..progress import watch_slow_cells

    watch_slow_cells()  # a cell still running after 10 s shows a line counting the seconds (live kernels only)
    from ..timing import busy_note

    note = busy_note()  # a busy machine makes the timing notebooks crawl: say so once, here
    if note:
        print(note)
    return renderer


def _skip_iri_grammar() -> None:
    """Spare a notebook's first cell 1.2-2.6 s: plotly's renderers import nbformat (to check its version before
    showing a figure), nbformat imports jsonschema, and jsonschema, finding the optional ``rfc3987_syntax``
    installed (JupyterLab's ``jupyter-events`` brings it), builds a parser for IRIs when imported. Nothing in a
    notebook validates an IRI, so unless something imported it already it is marked absent in this kernel, which
    jsonschema handles (that one format goes unchecked). Measured on the 2-core VM: 1.24 s of the 4.3 s setup cell."""
    sys.modules.setdefault("rfc3987_syntax", None)  # None: ``import rfc3987_syntax`` raises ImportError


def base_layout(fig: go.Figure, title: str, x: str | None = None, y: str | None = None,
                height: int | None = None) -> go.Figure:
    """Common styling: the course's template and font, a title, axis titles (with units/shapes), a compact margin.

    The caller passes text already in the reader's language (``tr("...")``).
    """
    # The title starts below the band where plotly's toolbar appears on hover (it hid the end of long or two-line
    # titles: a title's extra lines grow upwards from where plotly anchors it), and the axes make room for their
    # tick labels (long token labels were clipped). The padding is in pixels, whatever the figure's height.
    lines = title.count("<br>")
    pad = MODEBAR_PX + 12 * lines
    fig.update_layout(template=TEMPLATE, title={"text": title, "yref": "container", "y": 1, "yanchor": "top",
                                                "pad": {"t": pad}},
                      font={"family": FONT}, margin={"l": 60, "r": 20, "t": max(60, pad + 28 + 20 * lines), "b": 50})
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    if x is not None:
        fig.update_xaxes(title_text=x)
    if y is not None:
        fig.update_yaxes(title_text=y)
    if height is not None:
        fig.update_layout(height=height)
    return fig


def rgba(hex_color: str, alpha: float) -> str:
    """``"#4C78A8"``, 0.3 -> ``"rgba(76,120,168,0.3)"``: a palette colour made see-through (bands, fills)."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def require(condition: bool, message: str) -> None:
    """Check a figure's input early and say how to fix it (``message`` already translated with ``tr``)."""
    if not condition:
        raise ValueError(message)


def character_at(full: bytes, a: int, b: int) -> str:
    """The character(s) whose UTF-8 bytes ``full[a:b]`` are part of: widened back to the first byte and on to the
    last. ``""`` where the text ends inside the character (the bytes are all there is)."""
    while a > 0 and 0x80 <= full[a] < 0xC0:  # back to the first byte of the character
        a -= 1
    while b < len(full) and 0x80 <= full[b] < 0xC0:  # on to its last
        b += 1
    try:
        return full[a:b].decode("utf-8")
    except UnicodeDecodeError:
        return ""


_BYTE = re.compile(r"⟨([0-9a-f]{2})⟩")


def piece_characters(pieces: Sequence[str]) -> list[str]:
    """For each piece of one token sequence, the character its bytes are part of; ``""`` for a piece of whole
    characters and for a character the sequence leaves unfinished.

    The pieces are spelled as ``tokens.piece_text`` spells them (a trace's, a recorded pattern's): bytes of part of
    a character as ``⟨e7⟩``. The bytes of the pieces around tell which character: ``["⟨e7⟩", "⟨9f⟩⟨a5⟩"]`` ->
    ``["知", "知"]``. Label a token with ``name_character(label, chars)``.
    """
    split = [_BYTE.split(p) for p in pieces]  # text, hex, text, hex, ..., text
    raws = [b"".join(t.encode("utf-8") + bytes.fromhex(h) for t, h in zip(parts[::2], [*parts[1::2], ""]))
            for parts in split]
    full, out, start = b"".join(raws), [], 0
    for piece, raw, parts in zip(pieces, raws, split):
        # the bytes themselves, not the plain text around them, point at the character
        a, b = start + len(parts[0].encode("utf-8")), start + len(raw) - len(parts[-1].encode("utf-8"))
        start += len(raw)
        out.append(character_at(full, a, b) if "⟨" in piece else "")
    return out


def name_character(label: str, chars: str) -> str:
    """A token's ``label`` naming the character its bytes are part of, as 01's chips do: ``'⟨e7⟩' of 知``
    (``属于`` in Chinese); ``label`` unchanged when ``chars`` is ``""``."""
    return f"{label} {tr('of {chars}', chars=show_token(chars))}" if chars else label


def show_token(piece: str) -> str:
    """A token's text made visible: spaces as '·', newlines as '⏎', tabs as '→'."""
    return piece.replace(" ", "·").replace("\n", "⏎").replace("\t", "→").replace("\r", "␍")


def text_width(text: str) -> int:
    """Columns ``text`` takes on screen: 2 for a wide (CJK) character, 1 for others (``len`` counts both as 1)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` columns (see ``text_width``), ending in "…" when something was cut."""
    if text_width(text) <= width:
        return text
    out, used = "", 1  # the "…" takes one column
    for ch in text:
        used += text_width(ch)
        if used > width:
            break
        out += ch
    return out + "…"
