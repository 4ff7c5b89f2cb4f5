"""Notebook kernels for the test suite, forked from a process that has already imported the heavy libraries.

Every notebook's first cell imports torch, transformers and plotly: 5-6 s of CPU in each of the suite's 20 kernels,
about a third of the time the suite spent in notebooks on 2 cores. Here one process per pytest worker (the
*zygote*) imports those third-party libraries once; each kernel nbval asks for is a ``fork()`` of it that then becomes
an ordinary ``ipykernel`` (``python -m ipykernel_launcher -f <connection file>``: same code, same arguments, the
notebook's folder as working directory, the environment the kernel was given). The notebook then runs top to bottom
as in any kernel; only its ``import`` statements find the modules loaded.

Deliberately *not* imported here: ``inferlab`` itself (0.3 s). A cell that uses a submodule it never imported
(``il.narrate.n05`` without importing it) fails in a learner's fresh kernel, so it must fail here too; third-party
names are not the course's to get wrong. A kernel whose command or environment differs from what the zygote was
started with (a test that sets a variable a library reads at import) is started the normal way instead.

Used by ``conftest.IpcKernelManager``; ``INFERLAB_TEST_FORK_KERNELS=0`` turns it off (every kernel started fresh).
Linux and macOS only (``fork``); elsewhere kernels start the normal way.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import ClassVar

KERNEL_MODULE = "ipykernel_launcher"
# Variables that differ between the zygote and a kernel without changing what any library did at import: pytest's
# current test, jupyter_client's own, the terminal's size (jupyter_client drops it for kernels; read when printing),
# this switch, and private markers a library leaves in its process (torch.compile: _TORCHINDUCTOR_...).
VOLATILE = ("PYTEST_CURRENT_TEST", "LINES", "COLUMNS", "INFERLAB_TEST_FORK_KERNELS")
VOLATILE_PREFIXES = ("JPY_", "_")


# The worker's environment when conftest imported this module, before any test changed a variable for a while: the
# zygote starts with it, whichever test asks for the first kernel.
WORKER_ENV = dict(os.environ)


def _relevant(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in VOLATILE and not k.startswith(VOLATILE_PREFIXES)}


def _same_start(env: dict[str, str], base: dict[str, str], set_by_imports: dict[str, str]) -> bool:
    """Whether a kernel given ``env`` would have imported what the zygote did: the zygote's environment, give or
    take what the imports themselves set (the pytest worker has run the same imports and passes that on)."""
    env = _relevant(env)
    for k, v in set_by_imports.items():
        if env.get(k, v) == v:
            env.pop(k, None)
    return env == {k: v for k, v in base.items() if k not in set_by_imports}


# ----------------------------------------------------------------------------------------------- the zygote itself
def _preload() -> None:
    """What every notebook's first cell imports from outside the course (see the module docstring)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # as viz.setup_notebook() does in each kernel (_skip_iri_grammar)
    import ipykernel.ipkernel
    import ipykernel.kernelapp  # noqa: F401
    import IPython.display  # noqa: F401
    import ipywidgets  # noqa: F401
    import plotly.graph_objects
    import plotly.io  # noqa: F401
    import torch  # noqa: F401
    import transformers.models.gpt2.modeling_gpt2
    import transformers.models.gpt2.tokenization_gpt2  # noqa: F401


def _become_kernel(request: dict, set_by_imports: dict[str, str]) -> None:
    """In the forked child: the state ``python -m ipykernel_launcher`` would start from, then run it."""
    os.setsid()  # its own process group, as jupyter_client's launcher gives a kernel (interrupts go to the group)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)  # SIGCHLD above all: subprocess.run in a cell waits for its child
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for k, v in set_by_imports.items():
        os.environ.setdefault(k, v)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    if request.get("stderr_to_null"):  # nbval launches its kernels with stderr=os.devnull
        os.dup2(null, 2)
    os.close(null)
    del sys.path[0]  # this file's folder; ipykernel_launcher removes its own first entry too and IPython adds ""
    sys.argv = [importlib.util.find_spec(KERNEL_MODULE).origin, *request["args"]]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


def _serve(path: str) -> None:
    base = _relevant(dict(os.environ))
    _preload()
    # what the imports themselves put in the environment: a fresh kernel's imports would put it there too
    set_by_imports = {k: v for k, v in _relevant(dict(os.environ)).items() if base.get(k) != v}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernels are reaped as they end: no zombies
    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    print("ready", flush=True)
    while os.getppid() == parent:  # the pytest worker that started us is gone: so are we
        if not select.select([server], [], [], 1.0)[0]:
            continue
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.makefile("r").readline())
            if not _same_start(request["env"], base, set_by_imports):
                differ = sorted(k for k in set(base) | set(_relevant(request["env"]))
                                if base.get(k) != request["env"].get(k) and k not in set_by_imports)
                conn.sendall(json.dumps({"pid": None, "differ": differ}).encode() + b"\n")
                continue
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    server.close()
                    conn.close()
                    _become_kernel(request, set_by_imports)
                    code = 0
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


# ------------------------------------------------------------------------------------ the pytest worker's side
class ForkedKernel:
    """What jupyter_client's local provisioner needs of a kernel process (a ``Popen``'s poll, wait, signals), for a
    kernel that is the zygote's child, not ours."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                with open(f"/proc/{self.pid}/stat") as f:  # a zombie (not reaped yet) has ended too
                    ended = f.read().rsplit(")", 1)[1].split()[0] == "Z"
            except FileNotFoundError:
                ended = True
            except OSError:  # no /proc (macOS)
                try:
                    os.kill(self.pid, 0)
                    ended = False
                except ProcessLookupError:
                    ended = True
            if ended:
                self.returncode = 0  # its exit status went to the zygote
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(KERNEL_MODULE, timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """This worker's zygote, started on the first kernel it is asked for. ``fork(cmd, env, cwd)`` returns the new
    kernel's pid, or None where it cannot serve that kernel (the caller then starts it the normal way)."""

    _lock = threading.Lock()
    _proc: subprocess.Popen | None = None
    _path = ""
    _failed = False
    refused: ClassVar[list[str]] = []  # the variables that sent the last kernel the normal way

    @classmethod
    def enabled(cls) -> bool:
        return hasattr(os, "fork") and os.environ.get("INFERLAB_TEST_FORK_KERNELS", "1") != "0" and not cls._failed

    @classmethod
    def _start(cls) -> None:
        folder = tempfile.mkdtemp(prefix="inferlab-zygote-")
        cls._path = os.path.join(folder, "socket")
        cls._proc = subprocess.Popen([sys.executable, __file__, cls._path], stdout=subprocess.PIPE, text=True,
                                     env=WORKER_ENV)
        atexit.register(cls._stop, folder)
        if cls._proc.stdout.readline().strip() != "ready":  # it died while importing: say so, start kernels fresh
            cls._failed = True
            raise RuntimeError(f"the kernel zygote did not start (exit {cls._proc.wait()})")

    @classmethod
    def _stop(cls, folder: str) -> None:
        if cls._proc is not None and cls._proc.poll() is None:
            cls._proc.terminate()
        import shutil

        shutil.rmtree(folder, ignore_errors=True)

    @classmethod
    def fork(cls, cmd: list[str], env: dict[str, str], cwd: str, stderr_to_null: bool = False) -> int | None:
        if not cls.enabled() or cmd[:3] != [sys.executable, "-m", KERNEL_MODULE]:
            return None
        with cls._lock:
            if cls._proc is None:
                try:
                    cls._start()
                except RuntimeError as e:
                    print(f"kernel_zygote: {e}; kernels start the normal way", file=sys.stderr)
                    return None
        env = {**env, "JPY_PARENT_PID": str(os.getpid())}  # as jupyter_client's launcher sets it
        request = {"args": cmd[3:], "env": env, "cwd": cwd, "stderr_to_null": stderr_to_null}
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(cls._path)
                s.sendall(json.dumps(request).encode() + b"\n")
                answer = json.loads(s.makefile("r").readline())
        except (OSError, ValueError) as e:  # the zygote died (memory?): the rest of this worker's kernels start fresh
            cls._failed = True
            print(f"kernel_zygote: no answer ({e!r}); kernels start the normal way", file=sys.stderr)
            return None
        if answer["pid"] is None:
            cls.refused = answer["differ"]
        return answer["pid"]


if __name__ == "__main__":
    _serve(sys.argv[1])
