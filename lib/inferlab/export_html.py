"""The offline HTML edition: every executed notebook as a web page, figures embedded, no CDN.

    python -m inferlab.export_html            # writes site/ (index.html + one page per notebook)
    python -m inferlab.export_html --out DIR

It reads the notebooks as stored (executed, on the bundled model), so it needs no kernel and takes
seconds. Plotly figures are stored as ``application/vnd.plotly.v1+json``; each becomes a ``<div>``
drawn by the local copy of plotly.js that ships in the ``plotly`` package (written once as
``plotly.min.js`` next to the pages). Live widgets need a kernel, so in the HTML edition they are
replaced by a note; every notebook also shows its figures statically.
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def export(out_dir: Path, notebooks: list[Path]) -> list[tuple[str, int]]:
    """Write one page per notebook, ``index.html`` and ``plotly.min.js`` into ``out_dir``."""
    import nbformat
    from nbconvert import HTMLExporter

    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(plotly_js_path(), out_dir / "plotly.min.js")
    exporter = HTMLExporter(template_name="lab")
    pages = []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        nb, n_figs = prepare(nb, path.stem)
        body, _ = exporter.from_notebook_node(nb)
        # Load the local plotly.js before the first figure's script runs.
        body = body.replace("<head>", '<head>\n<script src="plotly.min.js"></script>', 1)
        (out_dir / f"{path.stem}.html").write_text(body, encoding="utf-8")
        pages.append((path.stem, n_figs))
    items = "\n".join(f'<li><a href="{html.escape(s)}.html">{html.escape(s)}</a> ({n} figures)</li>'
                      for s, n in pages)
    (out_dir / "index.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>inferlab: the course</title></head>"
        "<body style='font-family:sans-serif;max-width:50em;margin:2em auto'>"
        "<h1>inferlab: how a language model answers a prompt</h1>"
        "<p>The offline edition of the course: every notebook as executed on the bundled model. "
        "Works without a network. To run the cells and use the widgets, open the notebooks in JupyterLab.</p>"
        f"<ol>{items}</ol></body></html>", encoding="utf-8")
    return pages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Export every executed notebook to offline HTML.")
    ap.add_argument("--out", type=Path, default=ROOT / "site", help="output folder (default: site/)")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb")
    args = ap.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for stem, n in export(args.out, notebooks):
        print(f"{args.out / (stem + '.html')}: {n} figures")
    print(f"open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
