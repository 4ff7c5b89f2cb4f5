"""The offline HTML edition: every executed notebook as a web page, figures embedded, no CDN.

    python -m inferlab.tools.export_html            # writes site/: index.html, a page per notebook, zh/ in Chinese
    python -m inferlab.tools.export_html --out DIR [--root COURSE] [notebooks/01_tokens.ipynb ...]

It reads the notebooks as stored (executed, on the bundled model), so it needs no kernel and takes
seconds. Plotly figures are stored as ``application/vnd.plotly.v1+json``; each becomes a ``<div>``
drawn by the local copy of plotly.js that ships in the ``plotly`` package (written once as
``plotly.min.js`` next to the pages). Math is turned into MathML at export time, links between notebooks
point to the pages, progress bars are dropped and interactive views show a note with the figures they
held when stored (see ``offline_page``): the pages load nothing from a network. ``notebooks/GLOSSARY.md``
becomes ``glossary.html``, which the notebooks link to. One piece (over 300 lines) on purpose: the command, the
site's layout and its atomic swap; page cleaning lives in ``safe_html`` and page parts in ``offline_page``.

The notebooks and the default ``site/`` folder are those of the course folder the command runs in
(found as ``notebook_tools check`` finds it); a tracked notebook is read as git holds it, as ``check`` reads
it (``--working-tree``: the files). Every notebook is read before anything is written, and the site is built
in a temporary folder beside ``--out`` that then replaces ``--out`` whole (an older site there is set aside and
deleted; a folder holding anything else is refused), so a bad notebook, a bad ``--out`` or a full disk ends
with one line naming it, exit status 1, and nothing half-written. HTML that comes from a notebook is cleaned
(``safe_html``): the pages run no script of a notebook's and load nothing from a network.
"""

from __future__ import annotations

import html
import os
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from ..errors import one_line
from . import Parser, offline_page
from .notebook_files import NotebookError, find_root, notebooks_in, read_notebook, shown, stored_text, umask
from .offline_page import math_to_mathml, rewrite_links, static_view, strip_cdn_scripts, widget_state
from .safe_html import clean_html, script_json

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def plotly_js_path() -> Path:
    """The plotly.js bundle inside the installed ``plotly`` package."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _figure_html(spec: dict, div_id: str) -> str:
    """A plotly figure as a ``<div>`` and the script that draws it (its data escaped: see ``safe_html``)."""
    layout = spec.get("layout") if isinstance(spec.get("layout"), dict) else {}
    config = spec.get("config") if isinstance(spec.get("config"), dict) else {}
    height = layout.get("height", 450)
    height = height if isinstance(height, (int, float)) and not isinstance(height, bool) and height > 0 else 450
    args = ", ".join(script_json(x) for x in (div_id, spec.get("data", []), layout, {"responsive": True, **config}))
    return (f'<div id="{html.escape(div_id)}" class="plotly-graph-div" style="height:{height:g}px;width:100%"></div>'
            f'<script type="text/javascript">Plotly.newPlot({args});</script>')


def html_exporter():
    """nbconvert's lab template, with every piece of HTML that comes from a notebook cleaned (``safe_html``).

    Markdown cells and ``text/markdown`` outputs are cleaned after nbconvert renders them, raw cells by the
    template's ``clean_html`` filter; ``prepare`` cleans the ``text/html`` outputs.
    """
    from jinja2 import pass_context
    from nbconvert import HTMLExporter

    class SafeExporter(HTMLExporter):
        @pass_context  # as nbconvert's own: the filter reads the cell's attachments from the context
        def markdown2html(self, context, source):
            return clean_html(super().markdown2html(context, source))

    exporter = SafeExporter(template_name="lab")
    exporter.register_filter("clean_html", clean_html)
    return exporter


def prepare(nb, stem: str, lang: str = "en"):
    """Make ``nb`` (changed in place) ready for a static page; returns it and its number of figures.

    Plotly outputs become embeddable HTML, Markdown math becomes MathML, widget outputs become their
    static view (or disappear: progress bars). HTML stored in outputs is cleaned (``safe_html.clean_html``)
    and JavaScript outputs are dropped: nothing a notebook holds runs in the page.
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
            if data.pop("application/javascript", None) is not None and not data:
                continue  # it would run in the page
            if "text/html" in data:  # the notebook's own HTML (before the figures and views made here)
                data["text/html"] = clean_html(data["text/html"])
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
    items = "\n".join(f'<li><a href="{html.escape(quote(stem))}.html">{html.escape(title)}</a> '
                      f'({n} {t["figures"]})</li>'
                      for stem, title, n in pages)
    extra = f'<p><a href="glossary.html">{t["glossary"]}</a>{t["glossary_more"]}</p>' if has_glossary else ""
    return (f"<!doctype html><html lang='{t['lang']}'><head><meta charset='utf-8'><title>{t['title']}</title></head>"
            "<body style='font-family:sans-serif;max-width:50em;margin:2em auto'>"
            f"<p class='inferlab-language-switch' style='text-align:right'>{t['switch']}</p>"
            f"<h1>{t['h1']}</h1><p>{t['intro']}</p><ol>{items}</ol>{extra}</body></html>")


SITE_MARK = ".inferlab-site"  # written into every site this tool makes: a folder it may replace


def _is_site(folder: Path) -> bool:
    """True when ``folder`` is empty or holds an HTML edition (ours: the mark, or an older export's files)."""
    names = {p.name for p in folder.iterdir()}
    if not names or SITE_MARK in names:
        return True
    ours = {"plotly.min.js", "zh"} | {n for n in names if n.endswith(".html")}
    return {"index.html", "plotly.min.js"} <= names and names <= ours


def check_out_dir(out_dir: Path) -> Path:
    """Refuse an ``--out`` that is a file, lies under a file, or is a folder holding something else than a site.

    Returns the folder the new site is built in before it is moved to ``out_dir``: ``out_dir``'s parent, or the
    nearest folder above it that exists.
    """
    out_dir = Path(out_dir)
    for folder in (out_dir, *out_dir.parents):
        if folder.exists() and not folder.is_dir():
            raise NotebookError(f"--out {out_dir}: {folder} is a file, not a folder. "
                                "Fix: pass a folder name (it is created if missing), e.g. --out site.")
    if out_dir.is_dir() and not _is_site(out_dir):
        raise NotebookError(f"--out {out_dir}: the folder exists and holds other files than an HTML edition, which "
                            "the export would replace. Fix: pass a new folder (e.g. --out site), or empty this one.")
    for folder in Path(out_dir).absolute().parents:
        if folder.exists():
            return folder
    return Path.cwd()


def _pages(notebooks: list[Path], working_tree: bool = False) -> tuple[dict[Path, object], list[Path]]:
    """Every notebook read as git holds it (``working_tree``: the files), and those whose file differs from that.

    Raises ``NotebookError`` naming each one that cannot be read (one line each), or two that would be one page.
    """
    read, errors, edited, pages = {}, [], [], {}
    for path in notebooks:
        page = offline_page.site_path(repo_path(path))
        if page in pages:
            errors.append(f"{shown(path)}: would be the same page ({page}) as {shown(pages[page])}. "
                          "Fix: export one of them, or rename it.")
            continue
        pages[page] = path
        try:
            held = stored_text(path, working_tree)
            read[path] = read_notebook(path, held)
            if held is not None and path.is_file() and held != path.read_text(encoding="utf-8", errors="replace"):
                edited.append(path)
        except NotebookError as e:
            errors.append(str(e))
        except OSError as e:
            errors.append(f"{shown(path)}: cannot be read ({e.strerror or e}).")
    if errors:
        raise NotebookError("\n".join(errors))
    return read, edited


def _swap_in(build: Path, out_dir: Path) -> None:
    """Make the finished site ``build`` be ``out_dir``: one rename, or (when a site is there) the old one set
    aside, the new one renamed in, the old one deleted. Either site is whole at every moment."""
    if not out_dir.exists():
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        os.replace(build, out_dir)
        return
    os.chmod(build, out_dir.stat().st_mode & 0o7777)  # keep the folder's permissions (e.g. a web server's)
    aside = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old-"))
    try:
        os.replace(out_dir, aside / "site")
    except BaseException:
        aside.rmdir()
        raise
    try:
        os.replace(build, out_dir)
    except BaseException:
        os.replace(aside / "site", out_dir)  # put the old site back: nothing half-updated
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)


def export(out_dir: Path, notebooks: list[Path], glossary: Path | None = None,
           working_tree: bool = False) -> list[tuple[str, int]]:
    """Write one page per notebook, ``index.html``, ``plotly.min.js`` and ``glossary.html`` into ``out_dir``.

    Chinese-edition notebooks (``notebooks/zh/``) go to ``out_dir/zh/`` with their own index and glossary
    (``notebooks/zh/GLOSSARY.md``); each index links to the other language. ``glossary`` is the English glossary
    file (default: ``notebooks/GLOSSARY.md`` of the course the first notebook belongs to; skipped if absent; the
    Chinese one is ``zh/GLOSSARY.md`` beside it).
    A tracked notebook is read as git holds it (as ``notebook_tools check`` reads it), so a notebook opened
    and autosaved in JupyterLab exports as committed; ``working_tree=True`` reads the files.
    The site is built beside ``out_dir`` and then replaces it whole (an older export there is removed).
    Returns (page path without ``.html``, e.g. ``zh/01_tokens``, number of figures) per notebook.
    """
    return _export(out_dir, notebooks, glossary, working_tree)[0]


def _export(out_dir, notebooks, glossary=None, working_tree=False) -> tuple[list[tuple[str, int]], list[Path]]:
    beside = check_out_dir(Path(out_dir))
    out_dir = Path(out_dir).absolute()
    books, edited = _pages(notebooks, working_tree)
    exporter = html_exporter()
    pages = []
    # Build beside --out (same disk, so the final moves are renames); nothing appears there until the end.
    build = Path(tempfile.mkdtemp(dir=beside, prefix=f".{out_dir.name}.partial-"))
    try:
        os.chmod(build, 0o777 & ~umask())  # mkdtemp's 0700 would hide the site from a web server
        (build / SITE_MARK).write_text("made by python -m inferlab.tools.export_html; it replaces this folder "
                                       "whole on the next export\n", encoding="utf-8")
        shutil.copy(plotly_js_path(), build / "plotly.min.js")
        by_lang: dict[str, list[tuple[str, str, int]]] = {"en": [], "zh": []}
        for path, nb in books.items():
            source = repo_path(path)
            lang = "zh" if source.startswith("notebooks/zh/") else "en"
            try:
                title = title_of(nb, path.stem)
                nb, n_figs = prepare(nb, path.stem, lang)
                page = _page(exporter, nb, source)
            except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:  # odd outputs inside
                raise NotebookError(f"{shown(path)}: cannot be exported, an output is not what a notebook holds "
                                    f"({one_line(e, 120)}). Fix: restore it "
                                    f"(git checkout -- {shown(path)}) or re-run it.") from None
            target = build / offline_page.site_path(source)
            target.parent.mkdir(exist_ok=True)
            target.write_text(page, encoding="utf-8")
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
        _swap_in(build, out_dir)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return pages, edited


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m inferlab.tools.export_html",
                                 description="Export every executed notebook to offline HTML.")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default: site/ in the course folder); an older export there is replaced")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb of the course folder")
    ap.add_argument("--root", type=Path, default=None,
                    help="the course folder (default: the nearest folder at or above here holding notebooks/)")
    ap.add_argument("--working-tree", action="store_true",
                    help="export the notebook files as they are, not what git holds (e.g. before you git add them)")
    args = ap.parse_args(argv)
    out = args.out
    try:
        root = None if args.notebooks and args.out else (args.root or find_root())
        out = out or root / "site"
        notebooks = args.notebooks or notebooks_in(root)
        if not notebooks:
            raise NotebookError(f"{shown(root / 'notebooks')}: holds no .ipynb files.")
        pages, edited = _export(out, notebooks, working_tree=args.working_tree)
    except NotebookError as e:
        print(e, file=sys.stderr)
        return 1
    except OSError as e:  # e.g. no permission to write beside --out, or the disk is full
        print(f"--out {out}: cannot write there ({e.strerror or e}); nothing was changed. "
              "Fix: choose a folder you can write to, on a disk with room.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"--out {out}: interrupted; nothing was changed.", file=sys.stderr)
        return 130
    except Exception as e:  # a defect of this tool: still one line, and still nothing half-written
        print(f"export_html failed ({one_line(e)}); nothing was changed in {out}. "
              "This is a bug: please report it with the command you ran.", file=sys.stderr)
        return 1
    for stem, n in pages:
        print(f"{out / (stem + '.html')}: {n} figures")
    if edited:
        print(f"({len(edited)} notebook(s) differ in your working tree, e.g. opened in JupyterLab: exported as git "
              "holds them; --working-tree exports the files)")
    print(f"open {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
