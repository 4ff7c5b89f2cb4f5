"""Reading, stamping and storing the course notebooks: what ``notebook_tools`` (check, tidy, execute),
``notebook_run``, ``export_html``, ``reading_time`` and ``gpu_check`` share.

- Where they are: ``find_root`` (the course folder you run a command in, never the one next to the imported
  library) and ``notebooks_in`` (both editions, in reading order).
- What is read: ``stored_text`` (what git holds for a tracked notebook, so a learner's autosaved copy is not what
  is checked) and ``read_notebook`` (a refusal naming the path and the cause, one line, for anything that is not
  an nbformat-4 notebook of this course).
- The stamp: ``code_hash`` of the code cells, kept under ``metadata[STAMP_KEY]`` with the model and the scale.
- How they are stored: as JupyterLab saves them (``as_jupyterlab_saves``, the installed ``kernelspec()``), and
  atomically (``write_atomically``: a temporary file beside it, then a rename, keeping its mode).

Standard library only at import (nbformat and jupyter_client are imported where used): ``--help`` and ``check``
stay quick.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path

from ..errors import one_line

STAMP_KEY = "inferlab"
COMMAND = "python -m inferlab.tools.notebook_tools"
STORED_SCALE = "full"  # stored notebooks hold full-scale runs (inferlab.scale)


class NotebookError(ValueError):
    """A notebook that cannot be found, read or run; the message is one line, starting with its path."""


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it (how a learner typed it)."""
    if not Path(path).is_absolute():
        return str(path)
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") or rel == "." else rel


def find_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the current directory) holding ``notebooks/``."""
    here = Path.cwd() if start is None else Path(start)
    for folder in (here.resolve(), *here.resolve().parents):
        if (folder / "notebooks").is_dir():
            return folder
    raise NotebookError(f"{here}: no notebooks/ folder here or in any folder above. "
                        "Fix: cd into your copy of the course, or pass --root PATH.")


def notebooks_in(root: Path) -> list[Path]:
    """Every notebook of the course folder ``root`` in reading order: ``notebooks/*.ipynb``, then the Chinese
    edition ``notebooks/zh/*.ipynb``."""
    folder = Path(root) / "notebooks"
    if not folder.is_dir():
        raise NotebookError(f"{root}: has no notebooks/ folder. Fix: pass --root the top folder of the course.")
    return sorted(folder.glob("*.ipynb")) + sorted(folder.glob("zh/*.ipynb"))


def git_text(path: Path) -> str | None:
    """``path`` as git's index holds it (committed or staged), or None: not in a git checkout, untracked, no git."""
    path = Path(path).absolute()
    try:
        got = subprocess.run(["git", "-C", str(path.parent), "show", f":./{path.name}"],
                             capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if got.returncode != 0:
        return None
    return got.stdout.decode("utf-8", errors="replace")


def stored_text(path: Path, working_tree: bool = False) -> str | None:
    """The notebook text the checks read: git's copy when git tracks ``path`` (unless ``working_tree``), else None.

    None means "read the file itself"; callers pass the result on to ``read_notebook(path, text)``.
    """
    return None if working_tree else git_text(path)



MAX_NOTEBOOK_BYTES = 64 * 2**20  # the course's largest stored notebook is a few MB; a file past this is not one


def read_notebook(path: Path, text: str | None = None):
    """Read ``path`` (or ``text``, its contents from elsewhere, e.g. git) as an nbformat-4 notebook.

    Raises ``NotebookError`` saying why it is not one.
    """
    path = Path(path)
    if text is not None:
        return _parse(path, text)
    if path.is_dir():
        raise NotebookError(f"{shown(path)}: is a folder, not a notebook. Fix: pass a .ipynb file inside it.")
    if path.suffix != ".ipynb":
        raise NotebookError(f"{shown(path)}: is not a notebook (expected a .ipynb file). "
                            "Fix: pass a path such as notebooks/01_tokens.ipynb.")
    try:
        info = path.stat()  # follows a link: what matters is what would be read
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read forever, a device never end
            raise NotebookError(f"{shown(path)}: is not a regular file (a pipe, a device or a socket), so it is not "
                                "read. Fix: pass a .ipynb file.")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{shown(path)}: is {info.st_size:,} bytes, more than a notebook of this course can "
                                f"be ({MAX_NOTEBOOK_BYTES:,}), so it is not read. Fix: pass one of the course's "
                                ".ipynb files.")
        with path.open("rb") as f:
            text = f.read(MAX_NOTEBOOK_BYTES + 1).decode("utf-8")
    except FileNotFoundError:
        raise NotebookError(f"{shown(path)}: no such file. Fix: check the name (ls notebooks/).") from None
    except (OSError, UnicodeDecodeError) as e:
        raise NotebookError(f"{shown(path)}: cannot be read ({type(e).__name__}: {e}).") from None
    if len(text.encode("utf-8")) > MAX_NOTEBOOK_BYTES:  # it grew while being read
        raise NotebookError(f"{shown(path)}: is more than {MAX_NOTEBOOK_BYTES:,} bytes, so it is not read.")
    return _parse(path, text)


def _parse(path: Path, text: str):
    import nbformat

    restore = f"Fix: restore it (git checkout -- {shown(path)})."
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NotebookError(f"{shown(path)}: is not valid JSON ({e}); the file is truncated or was edited "
                            f"by hand. {restore}") from None
    except RecursionError:
        raise NotebookError(f"{shown(path)}: is JSON nested too deeply to be a notebook. {restore}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError(f"{shown(path)}: is JSON but not a notebook (no 'cells' list). {restore}")
    invalid: dict = {}
    try:
        nb = nbformat.reads(text, as_version=4, capture_validation_error=invalid)
    except Exception as e:  # nbformat raises ValidationError, TypeError, AttributeError... for malformed cells
        raise NotebookError(f"{shown(path)}: is not a valid notebook ({one_line(e, 160, named=False)}). "
                            f"{restore}") from None
    if invalid.get("ValidationError") is not None:  # e.g. a string execution_count: nbformat only logs it
        why = one_line(invalid["ValidationError"], 160, named=False)
        raise NotebookError(f"{shown(path)}: is not a valid notebook ({why}). {restore}")
    # The parts this course reads that nbformat's schema leaves free: each must be what the tools expect.
    for key in (STAMP_KEY, "widgets"):
        if key in nb.metadata and not isinstance(nb.metadata[key], dict):
            raise NotebookError(f"{shown(path)}: metadata.{key} must be an object, got "
                                f"{type(nb.metadata[key]).__name__}. {restore}")
    return nb


def code_hash(nb) -> str:
    """SHA-256 of the code cells' sources, in order (what the stored outputs were made from)."""
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode("utf-8"))
            h.update(b"\x00")
    return h.hexdigest()


def as_jupyterlab_saves(value):
    """A notebook's JSON ``value`` as JupyterLab will save it back: numbers pass through JavaScript, which has one
    number type, so an integral float (``1.0``, below 1e21) comes back as ``1``.

    Notebooks are stored this way, so a learner who opens one and saves it (or whose JupyterLab autosaves it)
    changes no byte, and ``git pull`` of an update is not stopped by a notebook that only looks edited.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: as_jupyterlab_saves(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_jupyterlab_saves(v) for v in value]
    return value


def kernelspec() -> dict | None:
    """The ``metadata.kernelspec`` JupyterLab writes when it starts the course's kernel (``python3``, as installed:
    "Python 3 (ipykernel)"); a notebook stored with another one is rewritten as soon as it is opened."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec("python3")
    except Exception:  # no kernel installed here: keep what the notebook has
        return None
    return {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


def write_atomically(nb, path: Path) -> None:
    """Write ``nb`` to a temporary file beside ``path``, then rename it over ``path``, keeping ``path``'s mode.

    The file is what JupyterLab would save (``as_jupyterlab_saves``, the installed ``kernelspec()``), in
    nbformat's layout.
    """
    import nbformat

    nb = nbformat.from_dict(as_jupyterlab_saves(json.loads(nbformat.writes(nb))))
    nb.metadata["kernelspec"] = kernelspec() or nb.metadata.get("kernelspec", {})
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        os.chmod(tmp, mode)  # mkstemp makes 0600: a shared notebook would become readable by its owner only
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def umask() -> int:
    """This process's umask (read by setting it, then setting it back): the mode bits a new file or folder is denied."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_writable(path: Path) -> None:
    """Refuse, before a run of minutes, a notebook whose folder cannot take the new version (read-only, full)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise NotebookError(f"{shown(path)}: not run, its folder cannot be written ({e.strerror or e}). "
                            "Fix: make the folder writable (or free some disk space), or execute a copy "
                            "elsewhere.") from None
