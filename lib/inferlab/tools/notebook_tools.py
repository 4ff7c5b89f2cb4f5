"""Executing and checking the course notebooks (used by contributors and by the test suite).

    python -m inferlab.tools.notebook_tools execute notebooks/01_tokens.ipynb [...]
    python -m inferlab.tools.notebook_tools execute --all     # both editions, about 10 minutes on 2 cores
    python -m inferlab.tools.notebook_tools check             # every notebook: stored executed, fresh
    python -m inferlab.tools.notebook_tools check --root ../other-clone
    python -m inferlab.tools.notebook_tools tidy              # store notebooks as JupyterLab saves them

One command-line tool (over 300 lines on purpose): its subcommands share how a notebook is read, stamped and
stored.

Notebooks are committed executed, on the bundled model with no network, so GitHub and nbviewer show
them. ``execute`` runs a notebook top to bottom at the full scale (``INFERLAB_SCALE=full`` in its kernel,
whatever this shell says: the stored run is the lesson) and stamps a hash of its code cells and the scale
into its metadata; ``check`` (and ``tests/test_notebooks_stored.py``) fails when a notebook was edited after
it was run, was never run, was run at the test scale, has an error output, or cannot be read. Time the
notebooks on a quiet machine: nothing else heavy (the test suite, a training run) running beside them.
``check`` also applies the gate on disturbed runs (``inferlab.gate``) to the numbers a timing notebook stored in
its outputs' metadata: a timing notebook with no such evidence, or whose evidence breaks a rule (within the
notebook, or against the other timing notebooks of its edition), fails, naming the rule, the numbers and the
command that re-executes it.

What it checks is what git holds: in a git checkout, a tracked notebook is read from git's index (the
committed version, or the staged one), not from the working tree. A learner who opened, ran and autosaved
notebooks in JupyterLab still passes ``bash tests/run.sh`` and can still pull updates; a notebook committed
stale still fails. ``check --working-tree`` checks the files as they are (a contributor, before ``git add``).
Outside git, or for an untracked notebook, the file itself is read.

Which notebooks: those of the course folder you run the command in, never the ones next to the
imported library (a second clone checks its own notebooks). The course folder is ``--root`` when
given, otherwise the nearest folder at or above the current directory that holds a ``notebooks/``
folder; ``check`` prints the folder it checked.

Every failure is one line naming the notebook and the cause, and the exit status is 1; the other
notebooks are still checked or executed. A notebook is written only after its run succeeded, and
atomically (a temporary file beside it, then a rename, keeping its mode), so an error or Ctrl-C never leaves
it half-written; Ctrl-C stops the kernel at once. A folder that cannot be written is refused before the run.

Notebooks are stored as JupyterLab saves them (``as_jupyterlab_saves``, the installed ``kernelspec()``):
``execute`` writes them so and ``tidy`` rewrites one without running it, so a learner who opens a notebook
and saves it (or lets JupyterLab autosave it) changes no byte and can still ``git pull``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import gate, scale  # standard library only: --help and check stay quick
from . import Parser

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


def _first_line(error: BaseException, limit: int = 160) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:limit]


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
        raise NotebookError(f"{shown(path)}: is not a valid notebook ({_first_line(e)}). {restore}") from None
    if invalid.get("ValidationError") is not None:  # e.g. a string execution_count: nbformat only logs it
        raise NotebookError(f"{shown(path)}: is not a valid notebook ({_first_line(invalid['ValidationError'])}). "
                            f"{restore}")
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


def problems(path: Path, working_tree: bool = False) -> list[str]:
    """What is wrong with a stored notebook, one sentence each (empty list when it is executed and fresh).

    Reads what git holds for ``path`` when git tracks it, else the file (``working_tree=True``: always the file).
    """
    try:
        nb = read_notebook(path, stored_text(path, working_tree))
    except NotebookError as e:
        return [str(e).split(": ", 1)[1]]
    try:
        return _problems(nb, path)
    except Exception as e:  # whatever else is odd in it: one line, and the other notebooks are still checked
        return [f"cannot be checked ({type(e).__name__}: {_first_line(e)}). "
                f"Fix: restore it (git checkout -- {shown(path)})."]


def _problems(nb, path: Path) -> list[str]:
    out = []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    if any(c.execution_count is None for c in code):
        out.append("has code cells that were never executed")
    counts = [c.execution_count for c in code if c.execution_count is not None]
    if counts != sorted(counts):
        out.append("cells were executed out of order")
    for c in code:
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"has an error output: {o.get('ename')}: {o.get('evalue')}"[:200])
    stamp = nb.metadata.get(STAMP_KEY, {})
    if stamp.get("code_sha256") is None:
        out.append(f"was not executed with `{COMMAND} execute`")
    elif stamp["code_sha256"] != code_hash(nb):
        out.append(f"code changed after the stored outputs were made (stale): re-run `{COMMAND} execute {shown(path)}`")
    if stamp.get("scale", STORED_SCALE) != STORED_SCALE:  # stamps made before the test scale existed are full-scale
        out.append(f"was executed at the {stamp['scale']!r} scale; the stored run must be the lesson's: re-run "
                   f"`{COMMAND} execute {shown(path)}`")
    return out + disturbed(nb, path)


def _rerun(path: Path) -> str:
    return f"Fix: re-execute it alone, on a quiet machine: `{COMMAND} execute {shown(path)}`"


def disturbed(nb, path: Path) -> list[str]:
    """The gate on disturbed runs (``inferlab.gate``) applied to one stored notebook's evidence, one sentence per
    broken rule; a notebook whose code calls a measurement that leaves evidence (``gate.EMITTERS``) but stores none
    fails too."""
    records = gate.records_in(nb)
    if not records:
        calls = re.compile(r"\b(" + "|".join(gate.EMITTERS) + r")\(")
        if any(c.cell_type == "code" and calls.search(c.source) for c in nb.cells):
            return [f"no evidence stored: its timing cells ran before the gate on disturbed runs existed (or their "
                    f"outputs were removed), so no one can tell whether its run was quiet. {_rerun(path)}"]
        return []
    return [f"this run was disturbed (rule '{b.rule}'): {b.reason}. {_rerun(path)}" for b in gate.judge(records)]


def edition_problems(paths: list[Path], working_tree: bool = False) -> dict[Path, list[str]]:
    """The gate's ``agree`` rule across the timing notebooks of each edition (the notebooks of one folder): the
    reference decode step stored by each notebook agrees with the others' (``gate.judge_edition``)."""
    by_folder: dict[Path, dict[str, Path]] = {}
    for p in paths:
        by_folder.setdefault(Path(p).parent, {})[Path(p).name] = Path(p)
    out: dict[Path, list[str]] = {}
    for named in by_folder.values():
        runs = {}
        for name, p in named.items():
            try:
                runs[name] = gate.records_in(read_notebook(p, stored_text(p, working_tree)))
            except (NotebookError, KeyError, TypeError, AttributeError):
                continue  # unreadable: problems() says so
        for name, breach in gate.judge_edition(runs).items():
            out.setdefault(named[name], []).append(f"this run was disturbed (rule '{breach.rule}', across the "
                                                   f"edition): {breach.reason}. {_rerun(named[name])}")
    return out


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


def _write_atomically(nb, path: Path) -> None:
    """Write ``nb`` to a temporary file beside ``path``, then rename it over ``path``, keeping ``path``'s mode.

    The file is what JupyterLab would save (``as_jupyterlab_saves``, the installed ``kernelspec()``), in
    nbformat's layout.
    """
    import nbformat

    nb = nbformat.from_dict(as_jupyterlab_saves(json.loads(nbformat.writes(nb))))
    nb.metadata["kernelspec"] = kernelspec() or nb.metadata.get("kernelspec", {})
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        os.chmod(tmp, mode)  # mkstemp makes 0600: a shared notebook would become readable by its owner only
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_writable(path: Path) -> None:
    """Refuse, before a run of minutes, a notebook whose folder cannot take the new version (read-only, full)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise NotebookError(f"{shown(path)}: not run, its folder cannot be written ({e.strerror or e}). "
                            "Fix: make the folder writable (or free some disk space), or execute a copy "
                            "elsewhere.") from None


def _stop_kernel(km) -> None:
    """Kill the kernel at once (Ctrl-C): the cell it is running may take minutes, or ignore interrupts."""
    try:
        provisioner = km.provisioner
        if provisioner is not None and provisioner.process is not None:
            provisioner.process.kill()
    except (OSError, AttributeError):
        pass


def _release_kernel(client, km) -> None:
    """Stop the notebook's kernel once it is done. nbclient shuts down only the kernels it starts itself, not one it
    is handed (``km``): without this, each notebook of one ``execute`` call kept its kernel, and the model it loaded,
    until the process ended; the eighteenth of twenty notebooks ran out of memory on a 24 GB machine."""
    kc = getattr(client, "kc", None)
    if kc is not None:
        kc.stop_channels()
    _stop_kernel(km)
    try:
        km.provisioner.process.wait(timeout=10)  # reaped: no zombie left behind
    except Exception:  # no process (it never started), or it is already gone
        pass


def _failed_cell(nb, error) -> str:
    """'cell N raised Name: value' for the first cell holding an error output (N counts from 1)."""
    for i, cell in enumerate(nb.cells, start=1):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                return f"cell {i} raised {o.get('ename')}: {o.get('evalue')}"[:240]
    return f"{type(error).__name__}: {_first_line(error, 240)}"


def execute(path: Path, timeout: int = 900) -> float:
    """Run ``path`` in place on the bundled model with the hub offline, at the full scale; returns seconds taken.

    The kernel gets ``INFERLAB_SCALE=full`` even when this process runs at the test scale (the suite), and
    ``HF_HUB_OFFLINE=1``, ``INFERLAB_MODEL=bundled`` unless they are set; this process's environment is unchanged.
    Raises ``NotebookError`` (one line, the stored notebook untouched) when it cannot be read or a cell fails.
    """
    import nbclient.output_widget
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    # nbclient mirrors what an ipywidgets Output captures back to the kernel; for a large figure
    # (> ~64 kB) that message never gets its reply and the cell hangs until the timeout. The widget
    # state is recorded either way, so the mirror is not needed for a stored notebook.
    nbclient.output_widget.OutputWidget.send = lambda self, *args, **kwargs: None

    path = Path(path)
    nb = read_notebook(path)
    _check_writable(path)
    # INFERLAB_NO_SLOW_NOTE: the live "still running" line under slow cells (inferlab.progress) is not stored
    env = {"HF_HUB_OFFLINE": "1", "INFERLAB_MODEL": "bundled", **os.environ, scale.ENV: STORED_SCALE,
           "INFERLAB_NO_SLOW_NOTE": "1"}
    t0 = time.time()
    # IPC sockets instead of TCP ports: several notebooks can execute at once without port races.
    with tempfile.TemporaryDirectory(prefix="inferlab-kernel-") as tmp:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(tmp) / "ipc"),
                           connection_file=str(Path(tmp) / "kernel.json"))
        client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}}, store_widget_state=True)
        # nbclient waits on the kernel in a loop that Ctrl-C does not reach: it runs in a thread, and this
        # thread waits for it in short steps, so KeyboardInterrupt arrives here at once and kills the kernel.
        failed: list[BaseException] = []

        def run() -> None:
            try:
                client.execute(env=env)
            except BaseException as e:  # handed to the waiting thread below
                failed.append(e)

        worker = threading.Thread(target=run, name=f"execute {path.name}", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.1)
        except KeyboardInterrupt:
            _stop_kernel(km)
            # the worker notices the dead kernel in its own time (seconds on a busy machine): it is a daemon
            # thread, so the process need not wait for it (waiting up to 15 s made Ctrl-C take 20 s under load)
            worker.join(1)
            raise
        finally:
            _release_kernel(client, km)
        if failed:  # a failing cell, a cell timeout, a dead or missing kernel: all end this notebook
            raise NotebookError(f"{shown(path)}: not saved, {_failed_cell(nb, failed[0])}. "
                                f"Fix: run it in JupyterLab to see the whole error.")
    nb.metadata[STAMP_KEY] = {"code_sha256": code_hash(nb), "model": env["INFERLAB_MODEL"], "scale": STORED_SCALE}
    try:
        _write_atomically(nb, path)
    except OSError as e:  # the disk filled up during the run, or the folder became read-only
        raise NotebookError(f"{shown(path)}: ran in {time.time() - t0:.0f} s but could not be saved "
                            f"({e.strerror or e}); the stored notebook is unchanged. Fix: free some disk space "
                            "(or make the folder writable) and run it again.") from None
    return time.time() - t0


def tidy(path: Path) -> bool:
    """Store ``path`` as JupyterLab would save it (nothing runs, outputs and stamp unchanged); True if it changed."""
    import nbformat

    path = Path(path)
    nb = read_notebook(path)
    before = path.read_text(encoding="utf-8")
    tidied = nbformat.from_dict(as_jupyterlab_saves(json.loads(before)))
    tidied.metadata["kernelspec"] = kernelspec() or tidied.metadata.get("kernelspec", {})
    if nbformat.writes(tidied) + "\n" == before:
        return False
    try:
        _write_atomically(nb, path)
    except OSError as e:
        raise NotebookError(f"{shown(path)}: cannot be rewritten ({e.strerror or e}); it is unchanged. "
                            "Fix: make its folder writable.") from None
    return True


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds >= 1")
    return int(text)


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog=COMMAND, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True, metavar="{execute,check,tidy}")
    for name, text in (("execute", "run notebooks at the full scale and store them executed (name them, or --all)"),
                       ("check", "check stored notebooks are executed, fresh and error-free (default: every one)"),
                       ("tidy", "store notebooks as JupyterLab saves them, running nothing, so opening and saving "
                                "one changes no byte (default: every one)")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("notebooks", nargs="*", type=Path,
                       help="notebook files (check's default: notebooks/*.ipynb and notebooks/zh/*.ipynb)")
        p.add_argument("--root", type=Path, default=None,
                       help="the course folder (default: the nearest folder at or above here holding notebooks/)")
        if name == "check":
            p.add_argument("--working-tree", action="store_true",
                           help="check the files as they are, not what git holds (before you git add them)")
        if name == "execute":
            p.add_argument("--all", action="store_true",
                           help="every notebook of both editions (about 10 minutes on a 2-core laptop; on a quiet "
                                "machine, since the stored timings are the lessons)")
            p.add_argument("--timeout", type=_positive_int, default=900, help="seconds per cell (default: 900)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "execute" and not args.notebooks and not args.all:
        print(f"execute: name the notebooks to run (e.g. {COMMAND} execute notebooks/01_tokens.ipynb), or pass --all "
              "for every notebook of both editions (about 10 minutes on 2 cores).", file=sys.stderr)
        return 2
    if args.command == "execute" and args.notebooks and args.all:
        print("execute: pass notebook files or --all, not both.", file=sys.stderr)
        return 2
    # Files named on the command line win; otherwise every notebook of the course folder.
    try:
        folder = None if args.notebooks else Path(args.root or find_root()) / "notebooks"
        paths = args.notebooks or notebooks_in(folder.parent)
    except NotebookError as e:
        print(e, file=sys.stderr)
        return 1
    if not paths:
        print(f"{shown(folder)}: holds no .ipynb files. Fix: pass --root the top folder of the course.",
              file=sys.stderr)
        return 1
    bad = 0
    if args.command == "tidy":
        changed = 0
        for p in paths:
            try:
                changed += tidy(p)
            except NotebookError as e:
                print(e, file=sys.stderr)
                bad += 1
        print(f"tidied {changed} of {len(paths)} notebook(s)" + (f"; {bad} could not be read" if bad else ""))
        return 1 if bad else 0
    if args.command == "execute":
        # Ctrl-C must stop a run even when this process inherited SIGINT as ignored (a parent that ignores it,
        # as a test runner's worker may, passes that on through exec; Python then installs no handler)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for p in paths:
            try:
                print(f"{shown(p)}: {execute(p, args.timeout):.1f} s", flush=True)
            except NotebookError as e:
                print(e, file=sys.stderr, flush=True)
                bad += 1
            except KeyboardInterrupt:
                print(f"{shown(p)}: interrupted; the stored notebook is unchanged.", file=sys.stderr)
                return 130
            except Exception as e:  # e.g. no kernel installed, no room for the kernel's files: still one line
                print(f"{shown(p)}: not saved, the kernel could not run it ({type(e).__name__}: {_first_line(e)}). "
                      "Fix: check that ipykernel is installed in this environment (python3 install.py).",
                      file=sys.stderr, flush=True)
                bad += 1
        return 1 if bad else 0
    edited = 0
    for p in paths:
        held = stored_text(p, args.working_tree)
        try:
            edited += held is not None and p.is_file() and held != p.read_text(encoding="utf-8", errors="replace")
        except OSError:  # unreadable: checked as git holds it all the same
            edited += 1
        for issue in problems(p, args.working_tree):
            print(f"{shown(p)}: {issue}")
            bad += 1
    for p, issues in edition_problems(paths, args.working_tree).items():
        for issue in issues:
            print(f"{shown(p)}: {issue}")
            bad += 1
    where = f" in {folder.resolve()}" if folder else ""
    print(f"checked {len(paths)} notebook(s){where}: " + (f"{bad} problem(s)" if bad else "all executed and fresh"))
    if edited:
        print(f"({edited} of them differ in your working tree, e.g. opened in JupyterLab: checked as git holds them; "
              "--working-tree checks the files)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
