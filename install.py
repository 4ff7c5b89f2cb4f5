"""Install the course: the right torch build for this machine, then everything in requirements.txt.

    python3 install.py            # into the active Python (README: run it inside the course's .venv)
    python3 install.py --cpu      # force the CPU build of torch (also: INFERLAB_TORCH=cpu)
    python3 install.py --cuda     # force the CUDA build from PyPI (also: INFERLAB_TORCH=cuda)
    python3 install.py --dry-run  # print the choice and the pip commands, install nothing

Why: ``torch==2.13.0`` from plain PyPI is the CUDA build on Linux (about 18 nvidia packages, several GB)
and on Windows the CPU one; a laptop without an NVIDIA GPU needs only the CPU build (about 200 MB) from
PyTorch's CPU index. macOS wheels on PyPI are CPU/MPS builds already. This script uses only the standard
library, so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
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


def installed_torch(run=subprocess.run) -> str | None:
    """The torch version installed in this Python (``"2.13.0+cpu"``), or None."""
    probe = run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return (probe.stdout.strip() or None) if probe.returncode == 0 else None


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
    return [[*pip, "--index-url", choice.index_url, "--retries", "1"], pip]


def main(argv: list[str] | None = None, run=subprocess.run, probe=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 install.py", description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--cpu", action="store_const", const="cpu", dest="build", help="force the CPU build")
    group.add_argument("--cuda", action="store_const", const="cuda", dest="build", help="force the CUDA build")
    ap.add_argument("--dry-run", action="store_true", help="print the choice and commands, install nothing")
    ap.add_argument("-q", "--quiet", action="store_true", help="pass -q to pip (the test runner uses it)")
    args = ap.parse_args(argv)
    override = args.build or os.environ.get("INFERLAB_TORCH") or None
    choice = choose(Machine(sys.platform, has_nvidia_gpu(), override))
    have = installed_torch(run)
    quiet = ["-q", "--disable-pip-version-check"] if args.quiet else []
    requirements = [sys.executable, "-m", "pip", "install", *quiet, "-r", str(HERE / "requirements.txt")]
    if have and have.split("+")[0] == TORCH:
        print(f"install: torch {have} is already installed; keeping it.")
        torch_steps = []
    else:
        print(f"install: torch {TORCH}, {choice.build} build ({choice.size}): {choice.why}.")
        answers = choice.index_url is None or (probe or reachable)(choice.index_url)
        if not answers:
            print(f"install: {urlsplit(choice.index_url).hostname} did not answer within 3 s; installing torch from "
                  "the default index instead (on Linux that is the CUDA build, several GB, unless your pip "
                  "configuration points elsewhere). Fix: for the CPU build, rerun when it answers.")
        torch_steps = [[*cmd, *quiet] for cmd in torch_commands(choice, answers)]
    if args.dry_run:
        for cmd in [*torch_steps[:1], requirements]:
            print("would run:", " ".join(cmd))
        return 0
    for i, cmd in enumerate(torch_steps):
        if run(cmd).returncode == 0:
            break
        if i + 1 < len(torch_steps):
            print(f"install: {choice.index_url} did not answer or had no wheel; trying plain PyPI "
                  "(on Linux that is the CUDA build, several GB).")
    else:
        if torch_steps:
            print("install: torch could not be installed (see pip's message above). "
                  "Fix: check the network, then run python3 install.py again.", file=sys.stderr)
            return 1
    return run(requirements).returncode


if __name__ == "__main__":
    sys.exit(main())
