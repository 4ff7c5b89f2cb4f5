"""The door to Hugging Face, ``inferlab._hf``: one face that exports what callers use, and it takes the course's
``Model``, never the raw ``transformers`` module inside it (only ``_hf/load.py`` handles one, while loading)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import inferlab as il
from inferlab import _hf
from inferlab._hf import load, peers, run, tensors

LIB = Path(il.__file__).parent
DOOR = LIB / "_hf"
REPO = LIB.parents[1]
REFUSED = r"model must be a Model from il\.load\(\), got {}\. Fix: pass the Model itself"


def test_the_face_exports_every_name_its_callers_use():
    callers = [*LIB.rglob("*.py"), *(REPO / "tests").glob("*.py"), *(REPO / "data").glob("*.py"),
               *(REPO / "training").rglob("*.py")]
    used = {name for p in callers if DOOR not in p.parents
            for name in re.findall(r"\b_hf\.([A-Za-z_]\w*)", p.read_text(encoding="utf-8"))
            if not name.startswith("__")} - {"py"}
    assert {"forward", "block_tensors", "model_lock", "new_gpt2"} <= used  # the scan finds the callers
    assert not used - set(_hf.__all__), "callers use names the face does not export (or reach past the face)"
    assert all(hasattr(_hf, name) for name in _hf.__all__)
    defined = {name for mod in (run, load, tensors, peers) for name, value in vars(mod).items()
               if not name.startswith("_") and getattr(value, "__module__", None) == mod.__name__}
    assert defined <= set(_hf.__all__), f"defined inside the door but not on its face: {defined - set(_hf.__all__)}"


@pytest.mark.parametrize("call", [
    lambda m: _hf.forward(m, torch.tensor([[1, 2]])),
    lambda m: _hf.block_tensors(m),
    lambda m: _hf.model_lock(m),
    lambda m: _hf.new_cache(m),
    lambda m: _hf.hf_generate(m, torch.tensor([[1]]), max_new_tokens=1, do_sample=False),
    lambda m: _hf.copy_module(m),
], ids=["forward", "block_tensors", "model_lock", "new_cache", "hf_generate", "copy_module"])
def test_a_raw_module_is_refused_with_the_fix(model, call):
    with pytest.raises(TypeError, match=REFUSED.format("GPT2LMHeadModel")):
        call(model.transformers_module())
    with pytest.raises(TypeError, match=REFUSED.format("str")):
        call("gpt2")


def test_the_model_itself_passes_the_door(model):
    assert _hf.shape_facts(model).n_layer == model.info.n_layer == len(_hf.block_tensors(model))
    assert _hf.module(model) is model.transformers_module()


def test_forward_takes_the_course_cache_and_refuses_anything_else(model):
    ids = torch.tensor([model.encode("To be, or not")])
    _, cache = il.prefill(model, ids)
    logits, _ = _hf.forward(model, ids[:, :1], cache)  # the course's KVCache: its Hugging Face cache runs
    assert logits.shape == (1, 1, model.info.vocab_size) and cache.tokens == ids.shape[1] + 1
    for wrong in (cache.layers, ((torch.zeros(1), torch.zeros(1)),), "cache"):
        with pytest.raises(TypeError, match=r"cache must be the KVCache that prefill returned \(or None\), got"):
            _hf.forward(model, ids, wrong)


def _signatures() -> list[tuple[str, str, str, str]]:
    """(file, function, parameter, annotation) for every annotated parameter of a function inside the door."""
    out = []
    for path in sorted(DOOR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in [*node.args.args, *node.args.kwonlyargs]:
                    if arg.annotation is not None:
                        out.append((path.name, node.name, arg.arg, ast.unparse(arg.annotation)))
    return out


def test_every_function_on_a_loaded_model_is_typed_model():
    signatures = _signatures()
    assert len(signatures) > 40  # the scan reads the door's files
    models = [s for s in signatures if s[2] in {"model", "assistant"}]
    untyped = [s for s in models if s[3] not in {"Model", "Model | None"}]
    assert models and not untyped, f"takes a loaded model but is not typed Model: {untyped}"
    raw = [s for s in signatures if "GPT2LMHeadModel" in s[3]]
    assert raw and {s[0] for s in raw} == {"load.py"}, raw  # a raw module only while loading
