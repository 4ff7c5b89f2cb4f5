"""The offline HTML edition: every executed notebook as a web page, figures embedded, no CDN.

    python -m inferlab.tools.export_html            # writes site/ (index.html + one page per notebook)
    python -m inferlab.tools.export_html --out DIR [--root COURSE] [notebooks/01_tokens.ipynb ...]

It reads the notebooks as stored (executed, on the bundled model), so it needs no kernel and takes
seconds. Plotly figures are stored as ``application/vnd.plotly.v1+json``; each becomes a ``<div>``
drawn by the local copy of plotly.js that ships in the ``plotly`` package (written once as
``plotly.min.js`` next to the pages). Live widgets need a kernel, so in the HTML edition they are
replaced by a note; every notebook also shows its figures statically.

The notebooks and the default ``site/`` folder are those of the course folder the command runs in
(found as ``notebook_tools check`` finds it). Every notebook is read before anything is written, and the
pages are built in a temporary folder beside ``--out`` and moved in at the end, so a bad notebook or a
bad ``--out`` ends with one line naming it, exit status 1, and nothing half-written.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .notebook_tools import NotebookError, find_root, notebooks_in, read_notebook, shown

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ('<div class="inferlab-widget-note" style="border:1px dashed #bbb;padding:6px;color:#666">'
               "Interactive widget: open this notebook in JupyterLab to use it.</div>")


def plotly_js_path() -> Path:
    """The plotly.js bundle inside the installed ``plotly`` package."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _figure_html(spec: dict, div_id: str) -> str:
    data = json.dumps(spec.get("data", []))
    layout = json.dumps(spec.get("layout", {}))
    config = json.dumps({"responsive": True, **spec.get("config", {})})
    height = spec.get("layout", {}).get("height", 450)
    return (f'<div id="{div_id}" class="plotly-graph-div" style="height:{height}px;width:100%"></div>'
            f'<script type="text/javascript">Plotly.newPlot("{div_id}", {data}, {layout}, {config});</script>')


def prepare(nb, stem: str):
    """Turn plotly outputs into embeddable HTML and widget views into notes (in the given notebook object)."""
    count = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_MIME in data:
                count += 1
                data["text/html"] = _figure_html(data[PLOTLY_MIME], f"{stem}-fig-{count}")
                del data[PLOTLY_MIME]
                data.pop("text/plain", None)
            elif WIDGET_MIME in data:
                data.pop(WIDGET_MIME)
                data["text/html"] = WIDGET_NOTE
                data.pop("text/plain", None)
    nb.metadata.pop("widgets", None)
    return nb, count


def check_out_dir(out_dir: Path) -> Path:
    """Refuse an ``--out`` that is a file or lies under a file; returns its nearest existing folder."""
    for folder in (out_dir, *out_dir.parents):
        if folder.exists() and not folder.is_dir():
            raise NotebookError(f"--out {out_dir}: {folder} is a file, not a folder. "
                                "Fix: pass a folder name (it is created if missing), e.g. --out site.")
        if folder.exists():
            return folder
    return Path.cwd()


def _pages(notebooks: list[Path]) -> dict[Path, object]:
    """Every notebook read, or ``NotebookError`` naming each one that cannot be (one line each)."""
    read, errors = {}, []
    for path in notebooks:
        try:
            read[path] = read_notebook(path)
        except NotebookError as e:
            errors.append(str(e))
    if errors:
        raise NotebookError("\n".join(errors))
    return read


def export(out_dir: Path, notebooks: list[Path]) -> list[tuple[str, int]]:
    """Write one page per notebook, ``index.html`` and ``plotly.min.js`` into ``out_dir``."""
    from nbconvert import HTMLExporter

    existing = check_out_dir(Path(out_dir))
    out_dir = Path(out_dir).absolute()
    books = _pages(notebooks)
    exporter = HTMLExporter(template_name="lab")
    pages = []
    # Build beside --out (same disk, so the final moves are renames); nothing appears there until the end.
    build = Path(tempfile.mkdtemp(dir=existing, prefix=f".{out_dir.name}.partial-"))
    try:
        shutil.copy(plotly_js_path(), build / "plotly.min.js")
        for path, nb in books.items():
            nb, n_figs = prepare(nb, path.stem)
            body, _ = exporter.from_notebook_node(nb)
            # Load the local plotly.js before the first figure's script runs.
            body = body.replace("<head>", '<head>\n<script src="plotly.min.js"></script>', 1)
            (build / f"{path.stem}.html").write_text(body, encoding="utf-8")
            pages.append((path.stem, n_figs))
        items = "\n".join(f'<li><a href="{html.escape(s)}.html">{html.escape(s)}</a> ({n} figures)</li>'
                          for s, n in pages)
        (build / "index.html").write_text(
            "<!doctype html><html><head><meta charset='utf-8'><title>inferlab: the course</title></head>"
            "<body style='font-family:sans-serif;max-width:50em;margin:2em auto'>"
            "<h1>inferlab: how a language model answers a prompt</h1>"
            "<p>The offline edition of the course: every notebook as executed on the bundled model. "
            "Works without a network. To run the cells and use the widgets, open the notebooks in JupyterLab.</p>"
            f"<ol>{items}</ol></body></html>", encoding="utf-8")
        if out_dir.exists():
            for page in build.iterdir():
                os.replace(page, out_dir / page.name)
        else:
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            os.replace(build, out_dir)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return pages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferlab.tools.export_html",
                                 description="Export every executed notebook to offline HTML.")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: site/ in the course folder)")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb of the course folder")
    ap.add_argument("--root", type=Path, default=None,
                    help="the course folder (default: the nearest folder at or above here holding notebooks/)")
    args = ap.parse_args(argv)
    out = args.out
    try:
        root = None if args.notebooks and args.out else (args.root or find_root())
        out = out or root / "site"
        notebooks = args.notebooks or notebooks_in(root)
        if not notebooks:
            raise NotebookError(f"{shown(root / 'notebooks')}: holds no .ipynb files.")
        pages = export(out, notebooks)
    except NotebookError as e:
        print(e, file=sys.stderr)
        return 1
    except OSError as e:  # e.g. no permission to write beside --out, or the disk is full
        print(f"--out {out}: cannot write there ({e.strerror or e}). Fix: choose a folder you can write to.",
              file=sys.stderr)
        return 1
    for stem, n in pages:
        print(f"{out / (stem + '.html')}: {n} figures")
    print(f"open {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
