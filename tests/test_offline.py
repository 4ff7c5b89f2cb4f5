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


def _network_namespace() -> list[str] | None:
    """``["unshare", "-n"]`` where this machine lets us start a process with no network at all, else None."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return None
    return [unshare, "-n"] if subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0 else None


def test_folder_loads_with_the_network_blocked(folder):
    """HF_HUB_OFFLINE=1: no connection is attempted (the socket guard) and, where a network namespace can be made
    (root and util-linux' unshare, as in CI), in a process that has no network at all."""
    result = _run(_network_namespace() or [], folder, offline_env=True)
    assert result["source"] == "folder" and result["n_layer"] == 2 and result["tokens"] == 3
    assert result["attempts"] == []  # not a single connection was attempted


def test_folder_loads_without_the_offline_flag_and_touches_no_network(folder):
    result = _run([], folder, offline_env=False)
    assert result["source"] == "folder" and result["n_layer"] == 2 and result["tokens"] == 3
    assert result["attempts"] == []
