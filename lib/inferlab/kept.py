"""What this machine keeps between processes: small JSON files in one folder, each entry under a machine key.

- ``folder()``: ``$INFERLAB_CACHE``, else ``$XDG_CACHE_HOME/inferlab``, else ``~/.cache/inferlab``. The fast path's
  layout choices live there in ``fast_choice.json`` (``fast.choice``), the machine's ceilings in
  ``machine_profile.json`` (``measure.machine``).
- ``machine_key(**fields)``: the JSON key an entry is kept under, the CPU's model name (``cpu_name``) first, then
  what else it holds for (threads, torch, device, shape ...), in the caller's order.
- ``read(name, owner)``: the file's contents; a file that is not what it should be (truncated, not JSON, another
  program's) is ignored with one warning naming it, and the caller starts fresh: it measures again and ``write``
  replaces the file. JSON only: reading a file can never run code.
- ``write(name, data)``: the whole file or nothing (a temporary file, then a rename), even with two processes
  writing at once; silently skipped where the folder cannot be written (the entry is still used in this process).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import warnings
from collections.abc import Callable
from pathlib import Path

from .errors import one_line
from .i18n import tr

_WARNED: set[tuple[str, str]] = set()  # (file, why): each bad file is warned about once per process


def folder() -> Path:
    """The folder this machine's kept files live in (created by the first ``write``)."""
    root = os.environ.get("INFERLAB_CACHE")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferlab"
    return Path(root)


def path(name: str) -> Path:
    """The kept file ``name`` (e.g. ``"fast_choice.json"``)."""
    return folder() / name


@functools.cache  # the CPU does not change while a process runs
def cpu_name() -> str:
    """The CPU's model name (``lscpu``'s "Model name", else ``platform.processor()``), e.g. ``"AMD EPYC"``."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
        if names and names[0]:
            return names[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_key(**fields) -> str:
    """The key an entry is kept under: ``{"cpu": cpu_name(), **fields}`` as JSON (the order is part of the key,
    so a file written before still answers)."""
    return json.dumps({"cpu": cpu_name(), **fields})


def _is_object(data) -> str | None:
    return None if isinstance(data, dict) else tr("not a JSON object")


def read(name: str, owner: str, problem: Callable[[object], str | None] = _is_object) -> dict:
    """The kept file ``name`` as JSON, or ``{}``: a missing file is empty; one that cannot be read, is not JSON or
    fails ``problem`` (which returns why, or None) is ignored with a warning once, naming ``owner`` (the function a
    learner called) and the file."""
    file = path(name)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:  # not JSON (a truncated write, a pickle, another program's file)
        return _ignore(file, owner, one_line(e))
    why = problem(data)
    return _ignore(file, owner, why) if why is not None else data


def _ignore(file: Path, owner: str, why: str) -> dict:
    if (str(file), why) not in _WARNED:
        _WARNED.add((str(file), why))
        warnings.warn(tr("{owner}: ignored {path} ({why}); this machine is measured again and the file rewritten. "
                         "Delete the file if another program owns it.", owner=owner, path=file, why=why[:200]),
                      UserWarning, stacklevel=5)  # the caller of the function that read the file
    return {}


def write(name: str, data: dict) -> None:
    """Replace the kept file ``name`` with ``data`` as JSON, whole or not at all (silently skipped where the folder
    cannot be written)."""
    file = path(name)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, file)  # whole file or nothing, even with two processes saving at once
    except OSError:
        pass
