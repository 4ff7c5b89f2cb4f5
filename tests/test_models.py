"""Loading: the bundled model, a save_pretrained folder, a full-size random GPT-2, auto fallback, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import inferlab as il
from inferlab import _hf
from inferlab.models import BUNDLED_DIR


def test_bundled_model_facts(model):
    info = model.info
    assert info.source == "bundled"
    # the bundled model's published shape (its model card): 8 layers, 5 heads of 32, 512 positions
    assert (info.n_layer, info.n_head, info.d_model, info.n_ctx, info.vocab_size) == (8, 5, 160, 512, 50257)
    assert info.head_dim * info.n_head == info.d_model
    assert info.n_params == sum(p.numel() for p in model.transformers_module().parameters())  # tied head counted once
    assert info.weight_bytes == info.n_params * 4 and info.dtype == torch.float32
    assert model.encode("How does inference work?") == [2437, 857, 32278, 670, 30]
    assert model.eos_id == 50256
    assert "bundled" in repr(model)


def test_bundled_folder_is_complete_and_small():
    names = {p.name for p in BUNDLED_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "vocab.json", "merges.txt", "generation_config.json",
            "README.md"} <= names
    assert not any(n.endswith((".bin", ".pt", ".pth", ".pkl")) for n in names)
    size = sum(p.stat().st_size for p in BUNDLED_DIR.iterdir())
    assert size <= 25 * 10**6
    # the card and eval.json state the folder's size, themselves included (training.evaluate writes until they agree)
    assert json.loads((BUNDLED_DIR / "eval.json").read_text(encoding="utf-8"))["size_on_disk_bytes"] == size


def test_bundled_model_writes_english_like_its_plays(model):
    text = il.generate(model, "ROMEO.", 40, temperature=0.8, top_k=40, seed=0).text
    words = [w.strip(".,;:!?'\"").lower() for w in text.split()]
    common = {"the", "and", "i", "to", "of", "a", "my", "you", "that", "in", "is", "not", "me", "it", "with",
              "be", "your", "his", "this", "thou", "thee", "thy", "for", "lord", "shall", "have", "but", "will"}
    assert len(words) >= 15
    assert sum(w in common for w in words) >= 5, text


def test_load_a_save_pretrained_folder(tmp_path, model):
    src = _hf.new_gpt2(n_layer=2, n_head=2, d_model=32, n_ctx=64)
    src.save_pretrained(tmp_path)
    model.tokenizer.save_pretrained(tmp_path)
    m = il.load(tmp_path, verbose=False)
    assert m.info.source == "folder" and m.info.n_layer == 2 and m.info.n_ctx == 64
    ids = torch.tensor([[2437, 857, 32278]])
    with torch.no_grad():
        assert torch.allclose(il.forward_full(m, ids), src(ids).logits, atol=1e-5)
    assert m.encode("Hello, world!") == [15496, 11, 995, 0]


def test_full_size_gpt2_config_with_random_weights():
    m = il.load("random:gpt2", verbose=False)
    assert (m.info.n_layer, m.info.n_head, m.info.d_model, m.info.n_ctx) == (12, 12, 768, 1024)
    assert m.info.n_params == 124_439_808
    assert m.info.weight_bytes == 124_439_808 * 4
    assert m.info.source == "random-weights"
    _logits, cache = il.prefill(m, list(range(200)))
    assert cache.nbytes == 14_745_600  # REFERENCE.md: 200 tokens of GPT-2 small's cache in fp32
    assert m.info.name == "gpt2" and m.info.path == "random:gpt2"


def test_random_weights_with_fewer_blocks():
    """The test scale's timing model: GPT-2's width, context and vocabulary with 2 of its 12 blocks."""
    m = il.load("random:gpt2", verbose=False, n_layer=2)
    assert (m.info.n_layer, m.info.n_head, m.info.d_model, m.info.n_ctx) == (2, 12, 768, 1024)
    # 124,439,808 - 10 blocks x 7,087,872 parameters each
    assert m.info.n_params == 53_561_088 and m.info.name == "gpt2 (2 of 12 blocks)"
    assert m.info.path == "random:gpt2" and m.info.source == "random-weights"
    for bad, error in (({"model": "bundled", "n_layer": 2}, ValueError), ({"model": "random:gpt2", "n_layer": 0},
                                                                          ValueError),
                       ({"model": "random:gpt2", "n_layer": 2.5}, TypeError),
                       ({"model": "random:distilgpt2", "n_layer": 7}, ValueError)):
        with pytest.raises(error, match="n_layer") as err:
            il.load(verbose=False, **bad)
        assert "Fix" in str(err.value) or "use e.g." in str(err.value)


def test_auto_respects_offline_and_is_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("INFERLAB_MODEL", raising=False)
    t0 = time.time()
    m = il.load(verbose=False)
    assert m.info.source == "bundled" and "HF_HUB_OFFLINE" in m.info.reason
    assert "INFERLAB_MODEL" in m.info.reason  # says how to change it
    assert time.time() - t0 < 10


def test_auto_without_network_falls_back_within_seconds():
    """No HF_HUB_OFFLINE: the hub probe must give up quickly (this machine has no route to the hub)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "INFERLAB_MODEL")}
    env["HF_HOME"] = "/nonexistent-inferlab-hf-home"  # an empty cache
    code = "import time,inferlab as il;t=time.time();m=il.load(verbose=False);print(m.info.source, time.time()-t)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    source, seconds = out.stdout.split()
    if source != "bundled":
        pytest.skip("this machine can reach the Hugging Face Hub; the fallback path is not exercised here")
    assert float(seconds) < 15


def test_env_variable_chooses_the_model(monkeypatch):
    monkeypatch.setenv("INFERLAB_MODEL", "bundled")
    m = il.load(verbose=False)
    assert m.info.source == "bundled" and "INFERLAB_MODEL" in m.info.reason


def test_unknown_hub_name_offline_is_clear(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="not in the local Hugging Face cache"):
        il.load("gpt2-nonexistent-model", verbose=False)


def test_missing_and_wrong_folders_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        il.load(str(tmp_path / "nope"), verbose=False)
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        il.load(str(tmp_path), verbose=False)
    _hf.new_gpt2(n_layer=1, n_head=2, d_model=8, n_ctx=16).config.to_json_file(tmp_path / "config.json")
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle would be here")
    with pytest.raises(FileNotFoundError, match=r"never loads pickle"):
        il.load(str(tmp_path), verbose=False)


def test_corrupt_weights_are_clear(tmp_path):
    _hf.new_gpt2(n_layer=1, n_head=2, d_model=8, n_ctx=16).save_pretrained(tmp_path)
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((BUNDLED_DIR / name).read_bytes())
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="could not load the weights"):
        il.load(str(tmp_path), verbose=False)


def test_non_gpt2_folder_is_refused(tmp_path):
    from transformers import BertConfig

    (tmp_path / "config.json").write_text(BertConfig().to_json_string())
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="GPT-2"):
        il.load(str(tmp_path), verbose=False)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", 3])
def test_bad_device(device):
    with pytest.raises((ValueError, TypeError), match="device"):
        il.load("bundled", device=device, verbose=False)


def test_bad_dtype_and_model_values():
    with pytest.raises(ValueError, match="dtype"):
        il.load("bundled", dtype="float8", verbose=False)
    with pytest.raises(ValueError, match="model"):
        il.load("", verbose=False)
    with pytest.raises(ValueError, match="random:"):
        il.load("random:llama", verbose=False)


def test_dtype_is_honoured():
    m = il.load("bundled", dtype="bfloat16", verbose=False)
    assert m.info.dtype == torch.bfloat16 and m.info.weight_bytes == m.info.n_params * 2
    assert len(il.generate(m, "ROMEO.", 3).generated_ids) == 3


def test_loading_never_uses_pickle_or_remote_code():
    lib = Path(il.__file__).parent
    src = "".join(p.read_text() for p in [*sorted((lib / "_hf").glob("*.py")), lib / "models.py"])
    assert "use_safetensors=True" in src
    assert "trust_remote_code=True" not in src and "torch.load" not in src
    # every from_pretrained call refuses remote code explicitly (behaviour: tests/test_hardening.py)
    assert src.count(".from_pretrained(") == src.count("trust_remote_code=False") >= 3
