"""How long each notebook takes, measured from the stored notebooks: ``python -m inferlab.tools.reading_time``.

A notebook's time is what a learner reads plus what they wait for:

- **Words.** The markdown cells plus the text the stored outputs show (narration as Markdown, printed results,
  ``repr`` lines; not stderr, which holds progress lines and warnings). English is read at **130 words per
  minute**: Brysbaert's meta-analysis puts silent reading of English non-fiction at 238 wpm (Brysbaert 2019,
  *J. Memory and Language* 109, 104047), and studying technical text, with formulas and numbers to check, runs
  at about half that; 130 wpm is also the rate the course's fidelity review used. Chinese is read at **240
  characters per minute**. Brysbaert finds that readers of other languages take in the same *message* at about
  the same rate as English readers, so the Chinese rate is the English one times the Chinese characters this
  course's translation uses per English word: 1.83 across all notebooks when this was written (the tool prints
  the current ratio; :func:`chars_per_word`), and 130 x 1.83 = 238, rounded to 240. It stays below the
  259.5 characters per minute that "Visual requirement for Chinese reading with normal vision" measured as
  Chinese students' fastest reading (RSVP), as studying should. Latin words inside Chinese text (code names,
  English terms) count at the English rate.
- **Figures and views.** Each stored figure (plotly, or an image) costs 0.75 min to read; each interactive view
  (an ipywidgets output) 1.5 min to try; each code cell 0.3 min to read. These are the review's rates too.
- **Run time.** The sum of the code cells' execution times as the stored run recorded them (cell metadata
  ``execution``: ``iopub.execute_input`` to ``shell.execute_reply``): the minutes a learner waits on the same
  machine.

The total leaves out the exercises (they take as long as a learner chooses). It prints one table, both editions::

    python -m inferlab.tools.reading_time            # the course folder you are in
    python -m inferlab.tools.reading_time --root PATH
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from . import Parser
from .notebook_files import NotebookError, find_root, notebooks_in, shown

WORDS_PER_MIN = 130      # English, studied (see the module docstring for the sources)
CJK_CHARS_PER_MIN = 240  # Chinese, studied: the English rate x the translation's characters per word
FIGURE_MIN = 0.75
VIEW_MIN = 1.5
CODE_CELL_MIN = 0.3

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’.\-_]*")
_FIGURE_TYPES = ("application/vnd.plotly.v1+json", "image/png", "image/svg+xml", "image/jpeg")
_VIEW_TYPE = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class ReadingTime:
    """One notebook's reading time and what it is made of."""

    notebook: str      # file name, e.g. "03_attention.ipynb"
    edition: str       # "en" or "zh"
    words: int         # Latin-script words (markdown and shown outputs)
    cjk_chars: int     # Chinese characters (0 in the English edition, as a rule)
    figures: int
    views: int
    code_cells: int
    run_s: float       # the stored run's execution time, summed over code cells

    @property
    def reading_min(self) -> float:
        """Minutes to read the text, the figures, the views and the code (not the run time)."""
        return (self.words / WORDS_PER_MIN + self.cjk_chars / CJK_CHARS_PER_MIN + self.figures * FIGURE_MIN
                + self.views * VIEW_MIN + self.code_cells * CODE_CELL_MIN)

    @property
    def total_min(self) -> float:
        """Reading plus the stored run's execution time."""
        return self.reading_min + self.run_s / 60

    @property
    def number(self) -> str:
        """The notebook's two-digit number ("03")."""
        return self.notebook[:2]

    def __repr__(self) -> str:
        return (f"ReadingTime({self.edition}/{self.notebook}: {self.words:,} words, {self.cjk_chars:,} characters, "
                f"{self.figures} figures, {self.views} views, run {self.run_s / 60:.1f} min, "
                f"total {self.total_min:.0f} min)")


def _text_of(cell: dict) -> list[str]:
    """The text a reader reads in one cell: markdown source, or what its stored outputs show."""
    source = "".join(cell.get("source", ""))
    if cell.get("cell_type") == "markdown":
        return [source]
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            if out.get("name") != "stderr":  # progress lines and warnings are not read
                texts.append("".join(out.get("text", "")))
            continue
        data = out.get("data", {})
        if any(k in data for k in _FIGURE_TYPES) or _VIEW_TYPE in data:
            continue  # counted as a figure or a view, not as words (a view's text/plain is a placeholder)
        for kind in ("text/markdown", "text/plain"):
            if kind in data:
                texts.append("".join(data[kind]))
                break
    return texts


def _run_seconds(cell: dict) -> float:
    stamps = cell.get("metadata", {}).get("execution", {})
    start, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
    if not start or not end:
        return 0.0
    seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
               - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    return max(seconds, 0.0)


def reading_time(path: Path) -> ReadingTime:
    """Measure one stored notebook (see the module docstring for the rates).

    >>> reading_time(Path("notebooks/03_attention.ipynb")).total_min  # doctest: +SKIP
    63.2
    """
    path = Path(path)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NotebookError(f"{shown(path)}: cannot be read as a notebook ({type(e).__name__}: {e}). "
                            "Fix: pass a .ipynb file of the course.") from None
    words = chars = figures = views = code_cells = 0
    run_s = 0.0
    for cell in cells:
        for text in _text_of(cell):
            chars += len(_CJK.findall(text))
            words += len(_WORD.findall(text))
        if cell.get("cell_type") != "code":
            continue
        code_cells += 1
        run_s += _run_seconds(cell)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            views += _VIEW_TYPE in data
            figures += _VIEW_TYPE not in data and any(k in data for k in _FIGURE_TYPES)
    edition = "zh" if path.parent.name == "zh" else "en"
    return ReadingTime(path.name, edition, words, chars, figures, views, code_cells, run_s)


def course(root: Path) -> list[ReadingTime]:
    """Every notebook of the course folder ``root``, English edition first."""
    return [reading_time(p) for p in notebooks_in(root)]


def chars_per_word(times: list[ReadingTime]) -> float | None:
    """Chinese characters per English word, over the notebooks both editions have: the Chinese edition's
    characters against the English edition's words less the Latin words the Chinese text keeps."""
    en = {t.notebook: t for t in times if t.edition == "en"}
    pairs = [(en[t.notebook], t) for t in times if t.edition == "zh" and t.notebook in en]
    words = sum(e.words - z.words for e, z in pairs)
    return sum(z.cjk_chars for _, z in pairs) / words if words > 0 else None


def rounded(minutes: float, step: int = 5) -> int:
    """``minutes`` to the nearest ``step`` (at least ``step``): what the README and 00's map print."""
    return max(step, int(step * round(minutes / step)))


def table(times: list[ReadingTime]) -> str:
    """One Markdown table: per notebook and edition, what it is made of and its minutes."""
    lines = ["| Notebook | Edition | Words | Chinese chars | Figures | Views | Code cells | Run min | Total min "
             "| Rounded |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in times:
        lines.append(f"| {t.notebook} | {t.edition} | {t.words:,} | {t.cjk_chars:,} | {t.figures} | {t.views} "
                     f"| {t.code_cells} | {t.run_s / 60:.1f} | {t.total_min:.1f} | {rounded(t.total_min)} |")
    for edition in sorted({t.edition for t in times}):
        total = sum(t.total_min for t in times if t.edition == edition)
        lines.append(f"\n{edition}: {total:.0f} minutes in all ({total / 60:.1f} hours), exercises not included.")
    ratio = chars_per_word(times)
    if ratio is not None:
        lines.append(f"\nChinese characters per English word: {ratio:.2f} (the Chinese rate, {CJK_CHARS_PER_MIN} per "
                     f"minute, assumes about {CJK_CHARS_PER_MIN / WORDS_PER_MIN:.2f}).")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m inferlab.tools.reading_time",
                                description="Reading time of every stored notebook, both editions.")
    p.add_argument("--root", type=Path, help="the course folder (default: the one you are in)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        times = course(args.root or find_root())
    except NotebookError as e:
        print(e, file=sys.stderr)
        return 1
    if not times:
        print(f"{shown(args.root or find_root())}: notebooks/ holds no .ipynb files. "
              "Fix: pass --root the top folder of the course.", file=sys.stderr)
        return 1
    print(table(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
