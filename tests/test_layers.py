"""The library's layout reads as the course's table of contents: each module imports only from layers below
its own (or its own layer), there are no import cycles, and only the package ``_hf/`` names GPT-2's internals."""

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
    ("errors", "kept", "paths", "plain", "progress", "scale", "timing", "units"),  # plain helpers; what a machine keeps
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
    # annotations only (``if TYPE_CHECKING:``, e.g. _hf's ``model: Model``): never run, so no import of the layer
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
                   for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
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


def test_an_import_for_annotations_only_is_not_a_layer_import():
    # _hf's ``model: Model`` imports models under ``if TYPE_CHECKING:`` (never run); the same import run is reported
    run = LIB / "_hf" / "run.py"
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..models import Model\n"
    assert upward_imports([run], {run: typed}) == []
    assert upward_imports([run], {run: "from ..models import Model\n"}) == [
        "_hf/run.py (layer 4) imports from higher layers: ['models']"]


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


DOOR = LIB / "_hf"  # the one adapter to Hugging Face: a package with one face (``_hf/__init__.py``)


def _in_door(path: Path) -> bool:
    return DOOR in path.parents


def _sources() -> list[Path]:
    out = [p for p in LIB.rglob("*.py") if not _in_door(p)]
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
    assert not bad, "use the functions in inferlab._hf:\n" + "\n".join(bad)


TRAINING = REPO / "training"  # the training package: it trains the raw GPT2LMHeadModel that the Model door hides
TRAINING_PARTS = TRAINING / "gpt2_parts.py"  # ... so one module of it may name GPT-2's internals, and no other


def test_only_gpt2_parts_names_gpt2_internals_in_the_training_package():
    modules = sorted(TRAINING.rglob("*.py"))
    assert TRAINING_PARTS in modules and TRAINING / "loop.py" in modules and TRAINING / "guide.py" in modules
    bad = [f"{p.relative_to(REPO)} names GPT-2 internals {hits}" for p in modules
           if p != TRAINING_PARTS and (hits := internal_names(p, p.read_text(encoding="utf-8")))]
    assert not bad, "reach the raw model through training/gpt2_parts.py:\n" + "\n".join(bad)
    assert internal_names(TRAINING_PARTS, TRAINING_PARTS.read_text(encoding="utf-8"))  # the scan finds them there


def test_the_door_is_one_package_scanned_as_one_unit():
    door = {p.relative_to(LIB).as_posix() for p in FILES if _in_door(p)}
    assert {"_hf/__init__.py", "_hf/run.py", "_hf/load.py", "_hf/tensors.py", "_hf/peers.py"} <= door
    assert {_unit(p) for p in FILES if _in_door(p)} == {"_hf"}  # one layer, as LAYERS lists it
    sources = _sources()  # what the internal-names scan reads: everything but the door
    assert LIB / "hooks.py" in sources and LIB / "serve" / "paged.py" in sources
    assert not [p for p in sources if _in_door(p)]


def test_the_library_never_opens_the_transformers_door():
    """``Model.transformers_module()`` is for learners exploring Hugging Face; the library goes through ``_hf``."""
    bad = [str(p.relative_to(REPO)) for p in LIB.rglob("*.py") if not _in_door(p) and p.name != "models.py"
           and "transformers_module(" in p.read_text(encoding="utf-8")]
    assert not bad, "reach the model through inferlab._hf (it accepts the Model), not transformers_module():\n" + \
        "\n".join(bad)


def test_internal_names_are_found_in_code_not_in_prose():
    nb = {"cells": [{"cell_type": "markdown", "source": ["GPT-2's `c_attn` projects q, k, v"]},
                    {"cell_type": "code", "source": ["m.transformers_module().transformer.h[0].ln_1"]}]}
    assert internal_names(Path("x.ipynb"), json.dumps(nb)) == [".ln_1", "transformer.h"]
    assert internal_names(Path("x.py"), "cfg.n_embd + model.lm_head") == [".lm_head", "n_embd"]
    assert internal_names(Path("x.py"), "capture(model.hf, kinds); cache.hf") == [".hf"]


CAP = 450  # lines: past this a module is split, whatever its docstring says
# "One piece (over 300 lines) on purpose: <why>": the phrase, then a colon in the same sentence, then a reason of at
# least four words. A docstring that only mentions "one piece" in passing says nothing about the module's size.
ONE_PIECE = re.compile(r"\b(one piece|one command-line tool)\b[^.:]*:\s*(\S+\s+){3,}\S")


def says_why_it_is_one_piece(text: str) -> bool:
    """True when the module docstring of the source ``text`` states why the module is one piece (``ONE_PIECE``)."""
    doc = " ".join((ast.get_docstring(ast.parse(text)) or "").split())
    return ONE_PIECE.search(doc.lower()) is not None


def size_problems(files: list[Path], root: Path = REPO) -> list[str]:
    """Each module over ``CAP`` lines, and each over 300 with no stated reason, one line each."""
    out = []
    for p in files:
        text = p.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > CAP:
            out.append(f"{p.relative_to(root)}: {n} lines, over the cap of {CAP} that no docstring lifts (split it)")
        elif n > 300 and not says_why_it_is_one_piece(text):
            out.append(f"{p.relative_to(root)}: {n} lines with no stated reason (split it, or say in its docstring "
                       "'One piece (over 300 lines) on purpose: <why>')")
    return out


def test_a_module_over_300_lines_says_why_it_is_one_piece():
    """Modules fit their names: past 300 lines a module is split along its seams, or its docstring says why not;
    past ``CAP`` lines it is split, whatever its docstring says. ``training/`` is held to the same rule."""
    files = sorted(p for folder in (LIB, REPO / "training") if folder.is_dir() for p in folder.rglob("*.py"))
    problems = size_problems(files)
    assert not problems, "\n".join(problems)


def test_the_size_rule_fails_past_the_cap_and_on_a_phrase_met_by_accident(tmp_path):
    reason = '"""A module. One piece (over 300 lines) on purpose: the parts share every field."""\n'
    assert says_why_it_is_one_piece(reason)
    assert says_why_it_is_one_piece('"""The benchmark (one command-line tool, on purpose: one entry per table)."""')
    assert not says_why_it_is_one_piece('"""A piece of the course: it is one piece of many."""')  # no reason after
    assert not says_why_it_is_one_piece('"""One piece: short."""')  # a reason is a few words
    assert not says_why_it_is_one_piece('x = 1\n"""One piece on purpose: not the docstring, only a string."""')
    for n in (300, 450, 451):  # the cap: a file of 451 lines fails with any docstring
        (tmp_path / f"reason_{n}.py").write_text(reason + "x = 1\n" * (n - 1), encoding="utf-8")
        (tmp_path / f"silent_{n}.py").write_text('"""A module."""\n' + "x = 1\n" * (n - 1), encoding="utf-8")
    found = size_problems(sorted(tmp_path.glob("*.py")), root=tmp_path)
    assert [line.split(":")[0] for line in found] == ["reason_451.py", "silent_450.py", "silent_451.py"], found
    assert "over the cap" in found[0] and "no stated reason" in found[1] and "over the cap" in found[2]
