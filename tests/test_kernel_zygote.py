"""The suite's notebook kernels are forks of a process that imported torch, transformers and plotly once
(``kernel_zygote.py``). A forked kernel must be what ``python -m ipykernel_launcher`` would have started: same
arguments, path, folder, environment and signal handling, no course module loaded; and it must stop, interrupt and
be replaced like one."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from conftest import IpcKernelManager
from kernel_zygote import ForkedKernel, Zygote

pytestmark = pytest.mark.skipif(not Zygote.enabled(), reason="kernels are not forked here (no fork, or turned off)")

PROBE = """import json, os, signal, subprocess, sys
print(json.dumps({"path": sys.path, "argv0": sys.argv[0], "args": sys.argv[1:2], "cwd": os.getcwd(),
    "env": dict(os.environ), "sigchld_default": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
    "sigint": str(signal.getsignal(signal.SIGINT)), "group_leader": os.getpgid(0) == os.getpid(),
    "child": subprocess.run(["echo", "ok"], capture_output=True, text=True).stdout.strip(),
    "course_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "inferlab"),
    "torch_loaded": "torch" in sys.modules}))"""


def _start(cwd, env=None, fork=True):
    km = IpcKernelManager(kernel_name="python3")
    saved = os.environ.get("INFERLAB_TEST_FORK_KERNELS")
    os.environ["INFERLAB_TEST_FORK_KERNELS"] = "1" if fork else "0"
    try:
        km.start_kernel(cwd=str(cwd), **({"env": env} if env else {}))
    finally:
        if saved is None:
            del os.environ["INFERLAB_TEST_FORK_KERNELS"]
        else:
            os.environ["INFERLAB_TEST_FORK_KERNELS"] = saved
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def _run(kc, code: str, timeout: float = 60) -> str:
    out: list[str] = []
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=lambda m: out.append(
        m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(out)


def _stop(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def test_a_forked_kernel_starts_as_a_fresh_one_would(tmp_path):
    forked, fresh = {}, {}
    for fork, seen in ((True, forked), (False, fresh)):
        km, kc = _start(tmp_path, fork=fork)
        try:
            assert isinstance(km.provisioner.process, ForkedKernel) is fork, f"started the normal way: {Zygote.refused}"
            seen.update(json.loads(_run(kc, PROBE)))
        finally:
            _stop(km, kc)
    assert forked["torch_loaded"] and not fresh["torch_loaded"]  # the point of it
    assert forked["course_loaded"] == fresh["course_loaded"] == []  # a cell must import the course's modules itself
    for key in ("path", "argv0", "cwd", "sigchld_default", "sigint", "group_leader", "child"):
        assert forked[key] == fresh[key], key
    assert forked["cwd"] == str(tmp_path) and forked["child"] == "ok" and forked["sigchld_default"]
    # the same environment, but for the variable that says how the kernel started and what the imports set
    # themselves (torch names its compile cache when imported: a fresh kernel's import sets it too)
    differ = {k for k in set(forked["env"]) | set(fresh["env"]) if forked["env"].get(k) != fresh["env"].get(k)}
    assert differ <= {"INFERLAB_TEST_FORK_KERNELS", "TORCHINDUCTOR_CACHE_DIR"}, differ


def test_a_kernel_given_another_environment_starts_the_normal_way(tmp_path):
    env = {**os.environ, "INFERLAB_SCALE": "full-for-this-test"}  # a variable the course reads when imported
    km, kc = _start(tmp_path, env=env)
    try:
        assert not isinstance(km.provisioner.process, ForkedKernel)
        assert Zygote.refused == ["INFERLAB_SCALE"]
        assert _run(kc, "import os; print(os.environ['INFERLAB_SCALE'])").strip() == "full-for-this-test"
    finally:
        _stop(km, kc)


def test_a_forked_kernel_is_interrupted_and_shut_down_like_any(tmp_path):
    km, kc = _start(tmp_path)
    pid = km.provisioner.process.pid
    try:
        msg_id = kc.execute("import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('stopped')")
        time.sleep(1.0)
        km.interrupt_kernel()  # what nbval does when a cell runs past its timeout
        out, deadline = "", time.monotonic() + 20
        while "stopped" not in out and time.monotonic() < deadline:
            msg = kc.get_iopub_msg(timeout=20)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                out += msg["content"]["text"]
        assert "stopped" in out
    finally:
        _stop(km, kc)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the forked kernel {pid} outlived its shutdown")


def test_a_dead_zygote_means_kernels_start_the_normal_way(tmp_path):
    km, kc = _start(tmp_path)  # makes sure this worker's zygote is running
    _stop(km, kc)
    Zygote._proc.kill()
    Zygote._proc.wait()
    try:
        km, kc = _start(tmp_path)
        try:
            assert not isinstance(km.provisioner.process, ForkedKernel)
            assert _run(kc, "print(6 * 7)").strip() == "42"
        finally:
            _stop(km, kc)
    finally:  # a new zygote for the rest of this worker's notebooks
        Zygote._proc, Zygote._failed = None, False
    km, kc = _start(tmp_path)
    try:
        assert isinstance(km.provisioner.process, ForkedKernel)
    finally:
        _stop(km, kc)
