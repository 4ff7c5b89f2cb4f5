"""Checkpoints that lie: a folder whose weights, config or tokenizer files do not fit together is refused with
a clear error naming the folder, before a learner runs a model built of made-up or dropped weights."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import torch
from safetensors.torch import load_file, save_file

import inferlab as il
from inferlab import _hf
from inferlab.paths import BUNDLED_DIR


@pytest.fixture
def folder(tmp_path, model):
    """A small, healthy save_pretrained folder (2 blocks) with GPT-2's tokenizer files."""
    _hf.new_gpt2(n_layer=2, n_head=2, d_model=32, n_ctx=64).save_pretrained(tmp_path)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(BUNDLED_DIR / name, tmp_path / name)
    return tmp_path


def _config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _weights(folder, change):
    tensors = load_file(folder / "model.safetensors")
    save_file(change(tensors), folder / "model.safetensors", metadata={"format": "pt"})


def test_a_healthy_folder_loads(folder):
    m = il.load(folder, verbose=False)
    assert m.info.n_layer == 2 and m.info.source == "folder"


@pytest.mark.parametrize("case, match", [
    ("half the tensors", "weights do not match its config.json.*missing keys"),
    ("config says more blocks", "weights do not match its config.json.*missing keys"),
    ("config says fewer blocks", "weights do not match its config.json.*unexpected keys"),
    ("a wider config", "weights do not match its config.json.*mismatched keys"),
    ("nan weights", "NaN or infinity"),
])
def test_weights_that_do_not_fit_the_config(folder, case, match):
    if case == "half the tensors":
        _weights(folder, lambda t: {k: v for i, (k, v) in enumerate(sorted(t.items())) if i % 2 == 0})
    elif case == "config says more blocks":
        _config(folder, n_layer=4)
    elif case == "config says fewer blocks":
        _config(folder, n_layer=1)
    elif case == "a wider config":
        _config(folder, **{_hf.CONFIG_KEYS["d_model"]: 64})
    else:
        _weights(folder, lambda t: {k: torch.full_like(v, float("nan")) if "c_fc.weight" in k else v
                                    for k, v in t.items()})
    with pytest.raises(ValueError, match=match) as info:
        il.load(folder, verbose=False)
    assert str(folder) in str(info.value) and "Fix:" in str(info.value)


@pytest.mark.parametrize("changes, match", [
    ({"n_layer": -1}, r"n_layer=-1; a GPT-2 needs a whole number from 1"),
    ({"n_layer": 1_000_000}, r"n_layer=1000000; a GPT-2 needs a whole number from 1 to 256"),
    ({"n_head": 0}, "n_head=0"),
    ({_hf.CONFIG_KEYS["d_model"]: "32"}, "='32'; a GPT-2 needs a whole number"),
    ({"n_head": 3}, "n_head=3, which does not divide"),
    ({"add_cross_attention": True}, "add_cross_attention=true"),
])
def test_configs_that_cannot_build_a_gpt2_are_refused_before_building(folder, changes, match):
    _config(folder, **changes)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=match) as info:
        il.load(folder, verbose=False)
    assert time.perf_counter() - t0 < 5 and str(folder) in str(info.value)


def test_a_huge_config_is_refused_without_reading_it(folder):
    (folder / "config.json").write_text('{"model_type": "gpt2", "pad": "' + "x" * 2_000_000 + '"}')
    with pytest.raises(ValueError, match=r"config.json is 2,000,03\d bytes"):
        il.load(folder, verbose=False)


def test_a_shard_index_pointing_outside_the_folder(folder, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere")
    shutil.move(folder / "model.safetensors", outside / "model.safetensors")
    (folder / "model-00001-of-00001.safetensors").write_bytes(b"")  # a shard name so the folder looks sharded
    index = {"metadata": {}, "weight_map": {"some.weight": f"../{outside.name}/model.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="points outside the model's folder"):
        il.load(folder, verbose=False)


@pytest.mark.parametrize("file, content, match", [
    ("vocab.json", '{"!": 0, "\\"": 1, ', "vocab.json could not be read as JSON"),
    ("vocab.json", '{"a": 0}', "vocab.json holds 1 tokens"),
    ("merges.txt", "#version: 0.2\n", "merges.txt holds no merges"),
])
def test_tokenizer_files_that_are_cut_short(folder, file, content, match):
    (folder / file).write_text(content)
    with pytest.raises(ValueError, match=match):
        il.load(folder, verbose=False)


def test_a_tokenizer_larger_than_the_embedding_table(folder):
    _hf.new_gpt2(n_layer=1, n_head=2, d_model=32, n_ctx=64, vocab_size=1000).save_pretrained(folder)
    with pytest.raises(ValueError, match="50,257 tokens but the model's embedding table only 1,000 rows"):
        il.load(folder, verbose=False)
