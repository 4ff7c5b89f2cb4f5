"""The library's layout reads as the course's table of contents: each module imports only from layers below
its own (or its own layer), there are no import cycles, and only ``_hf.py`` names GPT-2's internals."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib" / "inferlab"
REPO = LIB.parents[1]

# Lower layers never import higher ones. A package entry ("measure") covers every module inside it.
LAYERS: list[tuple[str, ...]] = [
    ("i18n",),                                              # the language a reader reads
    ("errors", "paths", "plain", "progress", "scale", "timing", "units"),  # plain helpers
    ("gate",),                                              # the rules a quiet run meets (plain numbers in)
    ("cost",),                                              # formulas: FLOPs, bytes, floors, published shapes
    ("_hf",),                                               # the one adapter to Hugging Face
    ("checkpoints",),                                       # a model folder's files, checked; device and dtype
    ("hub",),                                               # the Hugging Face Hub: a probe that never hangs
    ("models",),                                            # load(), Model, ModelInfo
    ("cache", "sampling", "hooks", "bpe", "tokens"),        # the pieces inference is made of
    ("generation", "charstream"),                           # settings and streamed text; bytes into characters
    ("trace",),                                             # what one run recorded (with its settings and model)
    ("recorder",),                                          # recording one run into its trace
    ("engine",),                                            # prefill, decode_step, generate, stream
    ("embeddings", "vocab_space", "attention", "flash", "heads", "logit_lens", "fast", "quantize", "diversity",
     "serve"),                                              # lessons
    ("measure", "about", "speculative"),                    # timing sweeps, roofline, latency; the machine;
                                                            # speculative decoding (its verify cost is a sweep)
    ("narrate",),                                           # each finding as Markdown, with its other-outcome branch
    ("viz",),                                               # figures from plain data
    ("widgets",),                                           # interactive views
    ("tools",),                                             # command-line tooling
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _unit(path: Path) -> str:
    """The layer unit of a module file: its top-level module or package name under inferlab."""
    return path.relative_to(LIB).parts[0].removesuffix(".py")


def _imports(path: Path, text: str | None = None) -> set[str]:
    """Units this file (or ``text``, its contents) imports from inside inferlab (relative or absolute)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    package = list(path.relative_to(LIB).parent.parts)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                parts = base + (node.module.split(".") if node.module else [])
                if parts:
                    out.add(parts[0])
                else:  # "from . import x, y" at the package root
                    out.update(a.name for a in node.names)
            elif node.module and node.module.split(".")[0] == "inferlab":
                parts = node.module.split(".")[1:]
                out.update([parts[0]] if parts else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "inferlab" and len(parts) > 1:
                    out.add(parts[1])
    return out


FILES = sorted(p for p in LIB.rglob("*.py") if p.name != "__init__.py" or p.parent != LIB)


def test_every_module_has_a_layer():
    missing = sorted({_unit(p) for p in FILES} - set(LAYER_OF))
    assert not missing, f"add these modules to LAYERS in tests/test_layers.py: {missing}"


def upward_imports(files, texts: dict | None = None) -> list[str]:
    """One line per module that imports from a layer above its own (``texts``: contents to use instead of a file's)."""
    out = []
    for path in files:
        unit = _unit(path)
        imported = _imports(path, (texts or {}).get(path))
        above = sorted(u for u in imported - {unit} if u in LAYER_OF and LAYER_OF[u] > LAYER_OF.get(unit, -1))
        if above:
            out.append(f"{path.relative_to(LIB)} (layer {LAYER_OF.get(unit)}) imports from higher layers: {above}")
    return out


def test_no_module_imports_one_above_its_layer():
    bad = upward_imports(FILES)
    assert not bad, "\n".join(bad)


def test_an_upward_import_is_named():
    # the check above must be able to fail: a plain helper that imports the engine is reported by name
    timing, sweeps = LIB / "timing.py", LIB / "measure" / "sweeps.py"
    texts = {timing: "from .engine import generate\n", sweeps: "from ..viz import latency\n"}
    assert upward_imports([timing, sweeps], texts) == [
        "timing.py (layer 1) imports from higher layers: ['engine']",
        "measure/sweeps.py (layer 14) imports from higher layers: ['viz']"]


def test_no_import_cycles_between_modules():
    graph = {_unit(p): set() for p in FILES}
    for p in FILES:
        graph[_unit(p)] |= {u for u in _imports(p) if u in graph and u != _unit(p)}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack, node, nxt]))
            if nxt not in state:
                visit(nxt, [*stack, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


INTERNALS = re.compile(r"\.hf\b|\.(c_attn|c_fc|c_proj|ln_1|ln_2|ln_f|lm_head)\b|transformer\.(h|wte|wpe)\b|"
                       r"_attn_implementation|config\.(n_embd|n_layer|n_head|n_positions|n_ctx|vocab_size|"
                       r"layer_norm_epsilon|activation_function)\b|\bn_embd\b|\bn_positions\b")


def _sources() -> list[Path]:
    out = [p for p in LIB.rglob("*.py") if p.name != "_hf.py"]
    out += sorted((REPO / "tests").glob("*.py")) + sorted((REPO / "notebooks").rglob("*.ipynb"))
    return [p for p in out if p.name != Path(__file__).name]


def internal_names(path: Path, text: str) -> list[str]:
    """GPT-2's internal names in ``text`` (a notebook's code cells only: its prose may teach the module names)."""
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code")
    return sorted({m.group(0) for m in INTERNALS.finditer(text)})


def test_only_the_adapter_names_gpt2_internals():
    bad = [f"{p.relative_to(REPO)} names GPT-2 internals {hits}" for p in _sources()
           if (hits := internal_names(p, p.read_text(encoding="utf-8")))]
    assert not bad, "use the functions in _hf.py:\n" + "\n".join(bad)


def test_the_library_never_opens_the_transformers_door():
    """``Model.transformers_module()`` is for learners exploring Hugging Face; the library goes through ``_hf``."""
    bad = [str(p.relative_to(REPO)) for p in LIB.rglob("*.py") if p.name not in {"_hf.py", "models.py"}
           and "transformers_module(" in p.read_text(encoding="utf-8")]
    assert not bad, "reach the model through inferlab._hf (it accepts the Model), not transformers_module():\n" + \
        "\n".join(bad)


def test_internal_names_are_found_in_code_not_in_prose():
    nb = {"cells": [{"cell_type": "markdown", "source": ["GPT-2's `c_attn` projects q, k, v"]},
                    {"cell_type": "code", "source": ["m.transformers_module().transformer.h[0].ln_1"]}]}
    assert internal_names(Path("x.ipynb"), json.dumps(nb)) == [".ln_1", "transformer.h"]
    assert internal_names(Path("x.py"), "cfg.n_embd + model.lm_head") == [".lm_head", "n_embd"]
    assert internal_names(Path("x.py"), "capture(model.hf, kinds); cache.hf") == [".hf"]


def test_a_module_over_300_lines_says_why_it_is_one_piece():
    """Modules fit their names: past 300 lines a module is split along its seams, or its docstring says why not."""
    def reason(p: Path) -> bool:
        doc = (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").lower()
        return "one piece" in doc or "one command-line tool" in doc

    long = [p for p in LIB.rglob("*.py") if len(p.read_text(encoding="utf-8").splitlines()) > 300]
    silent = [str(p.relative_to(LIB)) for p in long if not reason(p)]
    assert not silent, f"over 300 lines with no stated reason (split it, or say why it is one piece): {silent}"
