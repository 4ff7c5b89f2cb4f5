"""Install the course: the right torch build for this machine, then everything in requirements.txt.

    python3 install.py            # into the active Python (README: run it inside the course's .venv)
    python3 install.py --cpu      # force the CPU build of torch (also: INFERLAB_TORCH=cpu)
    python3 install.py --cuda     # force the CUDA build from PyPI (also: INFERLAB_TORCH=cuda)
    python3 install.py --dry-run  # print the choice and the pip commands, install nothing
    python3 install.py --pypi-fallback  # if the CPU index fails on Linux, accept PyPI's CUDA build (several GB)
    python3 install.py --no-compile     # pip does not byte-compile: Python compiles each module when first imported
    python3 install.py --dev            # requirements-dev.txt instead: the course and what its test suite needs

After pip, it writes the course's Jupyter settings into this Python's prefix (``jupyter_settings``): the server saves
a widget view as its text when the view's state is not saved with the notebook (reopened, it reads as text instead of
"Error displaying widget: model not found") and shuts down a kernel idle for an hour (each holds hundreds of MB once
a notebook ran; notebooks opened from links pile up), and JupyterLab shuts a notebook's kernel down when its tab
closes.

Why: ``torch==2.13.0`` from plain PyPI is the CUDA build on Linux (about 18 nvidia packages, several GB)
and on Windows the CPU one; a laptop without an NVIDIA GPU needs only the CPU build (about 200 MB) from
PyTorch's CPU index. macOS wheels on PyPI are CPU/MPS builds already. This script uses only the standard
library, so it runs before anything is installed; for the same reason it is one piece (over 300 lines): one file a
learner runs, importing nothing of the course, not even the server's pre-save hook it writes out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

TORCH = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
HERE = Path(__file__).resolve().parent
PREFIX = Path(sys.prefix)  # where this Python's Jupyter reads its settings (the course's .venv)
SIZES = {"cpu": "about 200 MB", "cuda": "about 3 GB (torch plus the nvidia CUDA libraries)",
         "pypi": "about 80 MB (macOS wheel)"}


@dataclass(frozen=True)
class Machine:
    """What the choice depends on: the OS (``sys.platform``), whether an NVIDIA GPU shows, the override."""

    platform: str
    nvidia: bool
    override: str | None = None  # "cpu", "cuda" or None


@dataclass(frozen=True)
class Choice:
    """Which torch build to install, from where, and why (one sentence)."""

    build: str  # "cpu" (PyTorch's CPU index), "cuda" or "pypi" (plain PyPI)
    index_url: str | None
    why: str

    @property
    def size(self) -> str:
        return SIZES[self.build]


def has_nvidia_gpu(which=shutil.which, exists=os.path.exists) -> bool:
    """True when an NVIDIA driver is visible: ``nvidia-smi`` on PATH or the Linux driver's /proc entry."""
    return which("nvidia-smi") is not None or exists("/proc/driver/nvidia/version")


def choose(machine: Machine) -> Choice:
    """The torch build for ``machine``: CPU index without NVIDIA, plain PyPI with it, plain PyPI on macOS."""
    if machine.override not in (None, "cpu", "cuda"):
        raise SystemExit(f"INFERLAB_TORCH={machine.override!r}: allowed are 'cpu' and 'cuda'. "
                         "Fix: unset it, or set INFERLAB_TORCH=cpu or INFERLAB_TORCH=cuda.")
    if machine.platform == "darwin":
        return Choice("pypi", None, "macOS: PyPI's torch is already the CPU/MPS build")
    if machine.override == "cpu":
        return Choice("cpu", CPU_INDEX, "asked for the CPU build (--cpu or INFERLAB_TORCH=cpu)")
    if machine.override == "cuda":
        return Choice("cuda", None, "asked for the CUDA build (--cuda or INFERLAB_TORCH=cuda)")
    if machine.nvidia:
        return Choice("cuda", None, "an NVIDIA GPU is present (nvidia-smi or /proc/driver/nvidia found)")
    return Choice("cpu", CPU_INDEX, "no NVIDIA GPU found (no nvidia-smi, no /proc/driver/nvidia)")


@dataclass(frozen=True)
class Installed:
    """The torch already in this Python: its version and whether it is a CUDA build."""

    version: str  # "2.13.0+cpu", "2.13.0" (PyPI's Linux wheel: CUDA, no suffix), "2.13.0+cu128"
    cuda: bool  # torch.version.cuda is set

    @property
    def build(self) -> str:
        return "cuda" if self.cuda else "cpu"


def installed_torch(run=subprocess.run) -> Installed | None:
    """The torch installed in this Python, or None."""
    probe = run([sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda or '-')"],
                capture_output=True, text=True)
    words = probe.stdout.split() if probe.returncode == 0 else []
    return Installed(words[0], len(words) > 1 and words[1] != "-") if words else None


def keep_installed(have: Installed | None, choice: Choice, explicit: bool) -> tuple[bool, str]:
    """Whether the present torch stays, and the sentence that says why (empty when there is none).

    The right version stays if its build is the one chosen. A CUDA build is replaced where the CPU build was
    chosen (a rerun after a fallback, or ``--cpu``); a CPU build on a GPU machine is replaced only on ``--cuda``.
    """
    if have is None:
        return False, ""
    if have.version.split("+")[0] != TORCH:
        return False, f"install: torch {have.version} is installed; replacing it with {TORCH}."
    if choice.build == "pypi" or have.build == choice.build:
        return True, f"install: torch {have.version} ({have.build} build) is already installed; keeping it."
    if choice.build == "cpu":
        return False, (f"install: torch {have.version} is a CUDA build; replacing it with the CPU build. The nvidia-* "
                       "packages it brought stay installed: `pip uninstall` them to free several GB.")
    if explicit:
        return False, f"install: torch {have.version} is a CPU build; replacing it with the CUDA build (--cuda)."
    return True, (f"install: torch {have.version} is a CPU build on a machine with an NVIDIA GPU; keeping it. "
                  "Fix: python3 install.py --cuda to replace it with the CUDA build (several GB).")


def big_fallback(choice: Choice, platform: str, wheels_on_disk=None) -> bool:
    """Whether falling back from the CPU index to plain PyPI downloads the CUDA build (Linux: several GB).

    Not when pip would take a torch wheel of this version from a folder on disk (``--find-links``, e.g.
    ``PIP_FIND_LINKS`` or pip's configuration: a CI image or a workshop's USB stick): nothing is downloaded then.
    """
    if not (choice.build == "cpu" and platform.startswith("linux")):
        return False
    return not (local_torch_wheels() if wheels_on_disk is None else wheels_on_disk)


def local_torch_wheels(folders: list[str] | None = None) -> list[Path]:
    """torch wheels of this version in pip's find-links folders (the environment's, then pip's configuration)."""
    if folders is None:
        folders = os.environ.get("PIP_FIND_LINKS", "").split()
        try:
            out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                                 capture_output=True, text=True, timeout=20)
            folders += out.stdout.split() if out.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            pass
    found = []
    for folder in folders:
        path = Path(folder.removeprefix("file://"))
        if path.is_dir():
            found += sorted(path.glob(f"torch-{TORCH}-*.whl")) + sorted(path.glob(f"torch-{TORCH}+*.whl"))
    return found


def reachable(url: str, timeout: float = 3.0, connect=socket.create_connection) -> bool:
    """Whether ``url``'s host answers a TCP connection within ``timeout`` seconds (DNS included)."""
    parts = urlsplit(url)
    try:
        connect((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)), timeout=timeout).close()
        return True
    except OSError:
        return False


def torch_commands(choice: Choice, index_answers: bool = True) -> list[list[str]]:
    """pip commands to try in order: the chosen index first (when it answers), then plain PyPI.

    pip retries an unreachable index for every package it resolves there (minutes of back-off), so the
    index is probed first and pip is told to retry it only once.
    """
    pip = [sys.executable, "-m", "pip", "install", f"torch=={TORCH}"]
    if choice.index_url is None or not index_answers:
        return [pip]
    # "+cpu": an installed CUDA torch of the same version does not satisfy it, so pip replaces it
    cpu = [sys.executable, "-m", "pip", "install", f"torch=={TORCH}+cpu"]
    return [[*cpu, "--index-url", choice.index_url, "--retries", "1"], pip]


def agree_to_fallback(accepted: bool, ask) -> bool:
    """Consent to PyPI's multi-GB CUDA build: ``--pypi-fallback``, or "y" at the prompt when there is a terminal."""
    if accepted:
        return True
    if ask is None:
        return False
    answer = ask(f"install: plain PyPI has only the CUDA build of torch for Linux ({SIZES['cuda']}). "
                 "Download it instead? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


# What the course sets in JupyterLab and Jupyter Server, written below this Python's prefix (sys.prefix: the .venv).
LAB_SETTINGS = {
    # closing a notebook's tab shuts its kernel down (JupyterLab's default keeps it running, unseen)
    "@jupyterlab/notebook-extension:tracker": {"kernelShutdown": True},
}
IDLE_HOUR = 3600
SERVER_SETTINGS = {
    # a kernel that ran nothing for an hour is shut down, even with its tab open: tabs opened from links pile up
    "MappingKernelManager": {"cull_idle_timeout": IDLE_HOUR, "cull_interval": 300, "cull_connected": True},
}
SERVER_MARK = "# Written by the inferlab course's install.py"


def keep_views_readable(model, **_):
    """Jupyter Server's pre-save hook: a widget view whose model state is not saved with the notebook is saved as its
    text/HTML instead (every course view carries one). JupyterLab saves no widget state by default, so a learner's
    own notebook, reopened, read "Error displaying widget: model not found" where each view was (issue 50)."""
    view_mime, state_mime = "application/vnd.jupyter.widget-view+json", "application/vnd.jupyter.widget-state+json"
    notebook = model.get("content") if model.get("type") == "notebook" else None
    if not isinstance(notebook, dict):
        return
    widgets = (notebook.get("metadata") or {}).get("widgets") or {}
    saved = (widgets.get(state_mime) or {}).get("state") or {}
    for cell in notebook.get("cells") or []:
        for output in cell.get("outputs") or []:
            data = output.get("data") if isinstance(output, dict) else None
            view = data.get(view_mime) if isinstance(data, dict) else None
            if isinstance(view, dict) and view.get("model_id") and view["model_id"] not in saved and len(data) > 1:
                del data[view_mime]


def server_config() -> str:
    """The course's ``jupyter_server_config.py``: the kernel culling of ``SERVER_SETTINGS`` and the pre-save hook
    (a hook is a Python callable, so this config is Python; its source is copied from this file)."""
    import inspect

    lines = [f"{SERVER_MARK}; each run writes it anew. Jupyter prefers a virtual",
             "# environment's config to ~/.jupyter: change a setting for one server on the command line instead, e.g.",
             "# jupyter lab --MappingKernelManager.cull_idle_timeout=0 (0: no culling).", "", ""]
    lines += [inspect.getsource(keep_views_readable), ""]
    lines += [f"c.{section}.{key} = {value!r}" for section, keys in SERVER_SETTINGS.items() for key, value in
              keys.items()]
    lines += ["c.FileContentsManager.pre_save_hook = keep_views_readable", ""]
    return "\n".join(lines)


def jupyter_settings(prefix: Path) -> dict[Path, str]:
    """The course's settings files for the Jupyter under ``prefix``, and their text: JupyterLab's app settings (a file
    of the course's own in ``overrides.d``, read by jupyterlab_server from ``{sys.prefix}/share/jupyter/lab/settings``)
    and the server's config (``{sys.prefix}/etc/jupyter``, on Jupyter's config path)."""
    return {prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "inferlab.json":
            json.dumps(LAB_SETTINGS, indent=2) + "\n",
            prefix / "etc" / "jupyter" / "jupyter_server_config.py": server_config()}


def write_jupyter_settings(prefix: Path) -> bool:
    """Write ``jupyter_settings(prefix)``; False, and one line saying so, where a file cannot be written or a server
    config that install.py did not write is there already (it is left as it is)."""
    for path, text in jupyter_settings(prefix).items():
        try:
            if path.suffix == ".py" and path.is_file() and not path.read_text(encoding="utf-8").startswith(SERVER_MARK):
                raise OSError(f"{path.name} of your own is there; install.py leaves it as it is")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as e:
            print(f"install: could not write {path} ({e.strerror or e}). The course works without it, but a notebook "
                  "you saved may show \"model not found\" where its views were when reopened, and idle kernels keep "
                  "their memory (Kernel > Shut Down All Kernels... frees it). Fix: run install.py with the Python of "
                  "the course's .venv.", file=sys.stderr)
            return False
    return True


def main(argv: list[str] | None = None, run=subprocess.run, probe=None, ask=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 install.py", description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--cpu", action="store_const", const="cpu", dest="build", help="force the CPU build")
    group.add_argument("--cuda", action="store_const", const="cuda", dest="build", help="force the CUDA build")
    ap.add_argument("--dry-run", action="store_true", help="print the choice and commands, install nothing")
    ap.add_argument("--pypi-fallback", action="store_true",
                    help="if the CPU index fails on Linux, install PyPI's CUDA build (several GB) without asking")
    ap.add_argument("-q", "--quiet", action="store_true", help="pass -q to pip (the test runner uses it)")
    ap.add_argument("--no-compile", action="store_true",
                    help="pass --no-compile to pip: Python compiles each module the first time it is imported instead "
                         "of pip compiling every file it installs (the test runner uses it: about a minute less on 2 "
                         "cores; needs Python allowed to write bytecode, i.e. PYTHONDONTWRITEBYTECODE unset)")
    ap.add_argument("--dev", action="store_true",
                    help="install requirements-dev.txt (the course, and the training data test's opencc) instead of "
                         "requirements.txt: what tests/run.sh installs, still in one pip run")
    args = ap.parse_args(argv)
    override = args.build or os.environ.get("INFERLAB_TORCH") or None
    choice = choose(Machine(sys.platform, has_nvidia_gpu(), override))
    if ask is None and sys.stdin is not None and sys.stdin.isatty() and not args.dry_run:
        ask = input
    quiet = ["-q", "--disable-pip-version-check"] if args.quiet else []
    lazy = ["--no-compile"] if args.no_compile else []  # pip options for every install it runs
    wanted = HERE / ("requirements-dev.txt" if args.dev else "requirements.txt")
    requirements = [sys.executable, "-m", "pip", "install", *quiet, *lazy, "-r", str(wanted)]
    have = installed_torch(run)
    keep, why = keep_installed(have, choice, explicit=override is not None)
    if why:
        print(why)
    torch_steps = []
    # "torch==2.13.0" is satisfied by an installed 2.13.0+cpu: remove that first so pip fetches the CUDA build
    same_version_cpu = have is not None and have.version.split("+")[0] == TORCH and have.build == "cpu"
    remove = [[sys.executable, "-m", "pip", "uninstall", "-y", *quiet[:1], "torch"]] \
        if not keep and same_version_cpu and choice.build == "cuda" else []
    if not keep:
        print(f"install: torch {TORCH}, {choice.build} build ({choice.size}): {choice.why}.")
        answers = choice.index_url is None or (probe or reachable)(choice.index_url)
        if not answers:
            print(f"install: {urlsplit(choice.index_url).hostname} did not answer within 3 s.")
        torch_steps = [[*cmd, *quiet, *lazy] for cmd in torch_commands(choice, answers)]
    big = bool(torch_steps) and big_fallback(choice, sys.platform)  # asked once: it looks at pip's wheel folders
    if args.dry_run:
        for cmd in remove:
            print("would run:", " ".join(cmd))
        for cmd in torch_steps:
            fallback = choice.index_url is not None and "--index-url" not in cmd
            note = ("" if not fallback else "   (if the CPU index fails; asks first: PyPI's CUDA build, several GB)"
                    if big else "   (if the CPU index fails)")
            print("would run:", " ".join(cmd) + note)
        print("would run:", " ".join(requirements), f"   (in {HERE})")
        for path in jupyter_settings(PREFIX):
            print("would write:", path)
        return 0
    for cmd in remove:
        run(cmd)
    for i, cmd in enumerate(torch_steps):
        fallback = choice.index_url is not None and "--index-url" not in cmd
        if fallback and big and not agree_to_fallback(args.pypi_fallback, ask):
            print(f"install: not downloading PyPI's CUDA build of torch ({SIZES['cuda']}). Fix: rerun python3 "
                  f"install.py when {urlsplit(choice.index_url).hostname} answers, or accept the CUDA build with "
                  "python3 install.py --pypi-fallback (a later python3 install.py --cpu replaces it).", file=sys.stderr)
            return 1
        if run(cmd).returncode == 0:
            break
        if i + 1 < len(torch_steps):
            print(f"install: {choice.index_url} did not answer or had no wheel; plain PyPI is next"
                  + (" (on Linux that is the CUDA build, several GB)." if big else "."))
    else:
        if torch_steps:
            print("install: torch could not be installed (see pip's message above). "
                  "Fix: check the network, then run python3 install.py again.", file=sys.stderr)
            return 1
    # from the course's folder: requirements.txt installs the library with `-e .`, relative to the working folder
    code = run(requirements, cwd=HERE).returncode
    if code == 0:
        write_jupyter_settings(PREFIX)
    return code


if __name__ == "__main__":
    sys.exit(main())
