"""The download command's offline half: a save_pretrained folder loads with the network blocked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from inferlab import _hf

PROBE = r"""
import json, socket, sys
attempts = []
real_connect = socket.socket.connect
def guarded(self, address):
    attempts.append(repr(address))
    raise OSError("network blocked by the test")
socket.socket.connect = guarded
socket.create_connection = lambda *a, **k: guarded(None, a[0] if a else None)
import inferlab as il
m = il.load()                         # "auto", with INFERLAB_MODEL pointing at the folder
trace = il.generate(m, "Hello, world!", max_new_tokens=3)
print(json.dumps({"source": m.info.source, "n_layer": m.info.n_layer, "tokens": len(trace.generated_ids),
                  "attempts": attempts}))
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory, model):
    path = tmp_path_factory.mktemp("gpt2-like")
    torch.manual_seed(0)
    _hf.new_gpt2(n_layer=2, n_head=2, d_model=64, n_ctx=128).save_pretrained(path)
    model.tokenizer.save_pretrained(path)
    return path


def _run(cmd, folder, offline_env: bool):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE",)}
    env["INFERLAB_MODEL"] = str(folder)
    env["HF_HOME"] = str(folder.parent / "empty-hf-home")
    if offline_env:
        env["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run([*cmd, sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("offline_env", [True, False], ids=["HF_HUB_OFFLINE=1", "no-offline-flag"])
def test_folder_loads_without_touching_the_network(folder, offline_env):
    result = _run([], folder, offline_env)
    assert result["source"] == "folder" and result["n_layer"] == 2 and result["tokens"] == 3
    assert result["attempts"] == []  # not a single connection was attempted


def test_folder_loads_in_a_network_namespace(folder):
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and util-linux 'unshare' to create a network namespace; "
                    "the socket-guard test above covers the same promise")
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"this sandbox does not allow network namespaces: {probe.stderr.decode()[:200]}")
    result = _run([unshare, "-n"], folder, offline_env=True)
    assert result["source"] == "folder" and result["attempts"] == []
