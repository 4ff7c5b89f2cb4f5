"""The offline HTML edition: every executed notebook as a web page, figures embedded, no CDN.

    python -m inferlab.tools.export_html            # writes site/: index.html, a page per notebook, zh/ in Chinese
    python -m inferlab.tools.export_html --out DIR [--root COURSE] [notebooks/01_tokens.ipynb ...]

It reads the notebooks as stored (executed, on the bundled model), so it needs no kernel and takes
seconds. Plotly figures are stored as ``application/vnd.plotly.v1+json``; each becomes a ``<div>``
drawn by the local copy of plotly.js that ships in the ``plotly`` package (written once as
``plotly.min.js`` next to the pages). Math is turned into MathML at export time, links between notebooks
point to the pages, progress bars are dropped and interactive views show a note with the figures they
held when stored (see ``offline_page``): the pages load nothing from a network. ``notebooks/GLOSSARY.md``
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

from . import offline_page
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


def prepare(nb, stem: str, lang: str = "en"):
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
                view = static_view(data, state, figure, lang)
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


def _page(exporter, nb, source: str) -> str:
    """One HTML page; ``source`` is the notebook's repository path (links and plotly.js are found from there)."""
    body, _ = exporter.from_notebook_node(nb)
    body = rewrite_links(strip_cdn_scripts(body), source)
    depth = (offline_page.site_path(source) or "x.html").count("/")
    # Load the local plotly.js (one copy, at the top of the site) before the first figure's script runs.
    return body.replace("<head>", f'<head>\n<script src="{"../" * depth}plotly.min.js"></script>', 1)


def glossary_page(exporter, glossary: Path, source: str = "notebooks/GLOSSARY.md") -> str:
    """A glossary (``notebooks/GLOSSARY.md`` or its Chinese twin) as a page styled like the notebooks."""
    import nbformat

    text = glossary.read_text(encoding="utf-8")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(math_to_mathml(text))])
    return _page(exporter, nb, source)


def repo_path(notebook: Path) -> str:
    """``notebooks/zh/NN.ipynb`` for a Chinese-edition notebook, else ``notebooks/NN.ipynb``."""
    notebook = Path(notebook).absolute()
    if notebook.parent.name == "zh" and notebook.parent.parent.name == "notebooks":
        return f"notebooks/zh/{notebook.name}"
    return f"notebooks/{notebook.name}"


def title_of(nb, fallback: str) -> str:
    """The notebook's first Markdown heading (``# 00 · Start here ...``), or ``fallback``."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


INDEX_TEXT = {
    "en": {"lang": "en", "title": "inferlab: the course", "h1": "inferlab: how a language model answers a prompt",
           "intro": "The offline edition of the course: every notebook as executed on the bundled model. "
                    "Works without a network. To run the cells and use the widgets, open the notebooks in JupyterLab.",
           "switch": '<a href="zh/index.html" lang="zh">中文版</a>',
           "figures": "figures", "glossary": "Glossary",
           "glossary_more": ": every term of the course in a sentence or two."},
    "zh": {"lang": "zh-CN", "title": "inferlab：课程", "h1": "inferlab：大语言模型如何回答一个提示",
           "intro": "课程的离线版：每个 notebook 都在随附的小模型上执行过，无需联网即可阅读。"
                    "要运行代码、使用交互控件，请在 JupyterLab 中打开 notebook。",
           "switch": '<a href="../index.html" lang="en">English</a>',
           "figures": "张图", "glossary": "术语表", "glossary_more": "：课程中的每个术语，一两句话说清。"},
}


def index_page(lang: str, pages: list[tuple[str, str, int]], has_glossary: bool) -> str:
    """The index of one language: the switch to the other language, the notebooks in order, the glossary."""
    t = INDEX_TEXT[lang]
    items = "\n".join(f'<li><a href="{html.escape(stem)}.html">{html.escape(title)}</a> ({n} {t["figures"]})</li>'
                      for stem, title, n in pages)
    extra = f'<p><a href="glossary.html">{t["glossary"]}</a>{t["glossary_more"]}</p>' if has_glossary else ""
    return (f"<!doctype html><html lang='{t['lang']}'><head><meta charset='utf-8'><title>{t['title']}</title></head>"
            "<body style='font-family:sans-serif;max-width:50em;margin:2em auto'>"
            f"<p class='inferlab-language-switch' style='text-align:right'>{t['switch']}</p>"
            f"<h1>{t['h1']}</h1><p>{t['intro']}</p><ol>{items}</ol>{extra}</body></html>")


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

    Chinese-edition notebooks (``notebooks/zh/``) go to ``out_dir/zh/`` with their own index and glossary
    (``notebooks/zh/GLOSSARY.md``); each index links to the other language. ``glossary`` is the English glossary
    file (default: ``notebooks/GLOSSARY.md`` of the course the first notebook belongs to; skipped if absent; the
    Chinese one is ``zh/GLOSSARY.md`` beside it).
    Returns (page path without ``.html``, e.g. ``zh/01_tokens``, number of figures) per notebook.
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
        by_lang: dict[str, list[tuple[str, str, int]]] = {"en": [], "zh": []}
        for path, nb in books.items():
            source = repo_path(path)
            lang = "zh" if source.startswith("notebooks/zh/") else "en"
            title = title_of(nb, path.stem)
            nb, n_figs = prepare(nb, path.stem, lang)
            target = build / offline_page.site_path(source)
            target.parent.mkdir(exist_ok=True)
            target.write_text(_page(exporter, nb, source), encoding="utf-8")
            pages.append((source.removeprefix("notebooks/").removesuffix(".ipynb"), n_figs))
            by_lang[lang].append((path.stem, title, n_figs))
        first = Path(notebooks[0]).absolute()
        root = first.parents[2] if repo_path(first).startswith("notebooks/zh/") else first.parents[1]
        english = Path(glossary).absolute() if glossary else root / "notebooks" / "GLOSSARY.md"
        for lang, source in (("en", "notebooks/GLOSSARY.md"), ("zh", "notebooks/zh/GLOSSARY.md")):
            if lang == "zh" and not by_lang["zh"]:
                continue
            gloss = english if lang == "en" else english.parent / "zh" / "GLOSSARY.md"
            if gloss.is_file():
                target = build / offline_page.site_path(source)
                target.parent.mkdir(exist_ok=True)
                target.write_text(glossary_page(exporter, gloss, source), encoding="utf-8")
            folder = build if lang == "en" else build / "zh"
            folder.mkdir(exist_ok=True)
            (folder / "index.html").write_text(index_page(lang, by_lang[lang], gloss.is_file()), encoding="utf-8")
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
