"""Executing and checking the course notebooks (used by contributors and by the test suite).

    python -m inferlab.notebook_tools execute notebooks/01_tokens.ipynb [...]
    python -m inferlab.notebook_tools check                      # every notebook: stored executed, fresh

Notebooks are committed executed, on the bundled model with no network, so GitHub and nbviewer show
them. ``execute`` runs a notebook top to bottom and stamps a hash of its code cells into its metadata;
``check`` (and ``tests/test_notebooks_stored.py``) fails when a notebook was edited after it was run,
was never run, or has an error output.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
STAMP_KEY = "inferlab"


def code_hash(nb) -> str:
    """SHA-256 of the code cells' sources, in order (what the stored outputs were made from)."""
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode("utf-8"))
            h.update(b"\x00")
    return h.hexdigest()


def execute(path: Path, timeout: int = 900) -> float:
    """Run ``path`` in place on the bundled model with the hub offline; returns seconds taken."""
    import tempfile

    import nbclient.output_widget
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    # nbclient mirrors what an ipywidgets Output captures back to the kernel; for a large figure
    # (> ~64 kB) that message never gets its reply and the cell hangs until the timeout. The widget
    # state is recorded either way, so the mirror is not needed for a stored notebook.
    nbclient.output_widget.OutputWidget.send = lambda self, *args, **kwargs: None

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("INFERLAB_MODEL", "bundled")
    nb = nbformat.read(path, as_version=4)
    t0 = time.time()
    # IPC sockets instead of TCP ports: several notebooks can execute at once without port races.
    with tempfile.TemporaryDirectory(prefix="inferlab-kernel-") as tmp:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(tmp) / "ipc"),
                           connection_file=str(Path(tmp) / "kernel.json"))
        client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}}, store_widget_state=True)
        client.execute()
    nb.metadata[STAMP_KEY] = {"code_sha256": code_hash(nb), "model": os.environ["INFERLAB_MODEL"]}
    nbformat.write(nb, path)
    return time.time() - t0


def problems(path: Path) -> list[str]:
    """What is wrong with a stored notebook (empty list when it is executed and fresh)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
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
    stamp = nb.metadata.get(STAMP_KEY, {}).get("code_sha256")
    if stamp is None:
        out.append("was not executed with `python -m inferlab.notebook_tools execute`")
    elif stamp != code_hash(nb):
        out.append("code changed after the stored outputs were made (stale): re-run "
                   f"`python -m inferlab.notebook_tools execute {path.relative_to(NOTEBOOKS.parent)}`")
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"execute", "check"}:
        print(__doc__)
        return 2
    if argv[0] == "execute":
        for p in argv[1:] or sorted(NOTEBOOKS.glob("*.ipynb")):
            print(f"{p}: {execute(Path(p)):.1f} s", flush=True)
        return 0
    bad = 0
    for p in sorted(NOTEBOOKS.glob("*.ipynb")):
        for issue in problems(p):
            print(f"{p.name}: {issue}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
