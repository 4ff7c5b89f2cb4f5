"""Executing and checking the course notebooks (used by contributors and by the test suite).

    python -m inferlab.tools.notebook_tools execute notebooks/01_tokens.ipynb [...]
    python -m inferlab.tools.notebook_tools execute --all     # both editions, about 10 minutes on 2 cores
    python -m inferlab.tools.notebook_tools check             # every notebook: stored executed, fresh
    python -m inferlab.tools.notebook_tools check --root ../other-clone
    python -m inferlab.tools.notebook_tools tidy              # store notebooks as JupyterLab saves them

The command and the checks ``check`` runs. How a notebook is read, stamped and stored lives in
``notebook_files`` (which ``export_html`` reads with too); how one is run in a kernel, in ``notebook_run``.

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
import json
import re
import signal
import sys
from pathlib import Path

from .. import gate  # standard library only: --help and check stay quick
from ..errors import one_line
from . import Parser
from .notebook_files import (
    COMMAND,
    STAMP_KEY,
    STORED_SCALE,
    NotebookError,
    as_jupyterlab_saves,
    code_hash,
    find_root,
    kernelspec,
    notebooks_in,
    read_notebook,
    shown,
    stored_text,
    write_atomically,
)
from .notebook_run import execute


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
        return [f"cannot be checked ({one_line(e, 160)}). "
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
        write_atomically(nb, path)
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
                print(f"{shown(p)}: not saved, the kernel could not run it ({one_line(e, 160)}). "
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
