"""The offline HTML edition: every executed notebook as a web page, figures embedded, no CDN.

    python -m inferlab.tools.export_html            # writes site/ (index.html + one page per notebook)
    python -m inferlab.tools.export_html --out DIR [--root COURSE] [notebooks/01_tokens.ipynb ...]

It reads the notebooks as stored (executed, on the bundled model), so it needs no kernel and takes
seconds. Plotly figures are stored as ``application/vnd.plotly.v1+json``; each becomes a ``<div>``
drawn by the local copy of plotly.js that ships in the ``plotly`` package (written once as
``plotly.min.js`` next to the pages). Math is turned into MathML at export time, links between notebooks
point to the pages, progress bars are dropped and interactive views show a note with the figures they
held when stored (see ``offline_page``): the pages load nothing from a network. ``docs/GLOSSARY.md``
becomes ``glossary.html``, which the notebooks link to.

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
from .offline_page import math_to_mathml, rewrite_links, static_view, strip_cdn_scripts, widget_state

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


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
    """Make ``nb`` (changed in place) ready for a static page; returns it and its number of figures.

    Plotly outputs become embeddable HTML, Markdown math becomes MathML, widget outputs become their
    static view (or disappear: progress bars).
    """
    count = 0
    state = widget_state(nb.metadata)

    def figure(spec: dict) -> str:
        nonlocal count
        count += 1
        return _figure_html(spec, f"{stem}-fig-{count}")

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = math_to_mathml(cell.source)
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_MIME in data:
                data["text/html"] = figure(data.pop(PLOTLY_MIME))
                data.pop("text/plain", None)
            elif WIDGET_MIME in data:
                view = static_view(data, state, figure)
                if view is None:
                    continue
                out["data"] = {"text/html": view}
            elif "text/markdown" in data:
                data["text/markdown"] = math_to_mathml("".join(data["text/markdown"]))
            kept.append(out)
        if cell.cell_type == "code":
            cell.outputs = kept
            if cell.metadata.get("jupyter", {}).get("source_hidden"):  # collapsed in JupyterLab: prose, not code
                cell.metadata["transient"] = {"remove_source": True}
    nb.metadata.pop("widgets", None)
    return nb, count


def _page(exporter, nb) -> str:
    body, _ = exporter.from_notebook_node(nb)
    body = rewrite_links(strip_cdn_scripts(body))
    # Load the local plotly.js before the first figure's script runs.
    return body.replace("<head>", '<head>\n<script src="plotly.min.js"></script>', 1)


def glossary_page(exporter, glossary: Path) -> str:
    """``docs/GLOSSARY.md`` as a page styled like the notebooks (one Markdown cell, math and links converted)."""
    import nbformat

    text = glossary.read_text(encoding="utf-8")
    return _page(exporter, nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(math_to_mathml(text))]))


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


def export(out_dir: Path, notebooks: list[Path], glossary: Path | None = None) -> list[tuple[str, int]]:
    """Write one page per notebook, ``index.html``, ``plotly.min.js`` and ``glossary.html`` into ``out_dir``.

    ``glossary`` defaults to ``docs/GLOSSARY.md`` of the course the first notebook belongs to (skipped if absent).
    """
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
            (build / f"{path.stem}.html").write_text(_page(exporter, nb), encoding="utf-8")
            pages.append((path.stem, n_figs))
        items = "\n".join(f'<li><a href="{html.escape(s)}.html">{html.escape(s)}</a> ({n} figures)</li>'
                          for s, n in pages)
        extra = ""
        glossary = glossary or Path(notebooks[0]).absolute().parent.parent / "docs" / "GLOSSARY.md"
        if glossary.is_file():
            (build / "glossary.html").write_text(glossary_page(exporter, glossary), encoding="utf-8")
            extra = '<p><a href="glossary.html">Glossary</a>: every term of the course in a sentence or two.</p>'

        (build / "index.html").write_text(
            "<!doctype html><html><head><meta charset='utf-8'><title>inferlab: the course</title></head>"
            "<body style='font-family:sans-serif;max-width:50em;margin:2em auto'>"
            "<h1>inferlab: how a language model answers a prompt</h1>"
            "<p>The offline edition of the course: every notebook as executed on the bundled model. "
            "Works without a network. To run the cells and use the widgets, open the notebooks in JupyterLab.</p>"
            f"<ol>{items}</ol>{extra}</body></html>", encoding="utf-8")
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
