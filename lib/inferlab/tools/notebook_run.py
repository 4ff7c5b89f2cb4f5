"""Running one course notebook in a kernel and storing it executed (``notebook_tools execute``).

``execute`` runs a notebook top to bottom at the full scale (``INFERLAB_SCALE=full`` in its kernel, whatever this
shell says: the stored run is the lesson), on the bundled model with the hub offline, and stamps a hash of its code
cells and the scale into its metadata (``notebook_files.code_hash``). The notebook is written only after its run
succeeded, and atomically, so an error or Ctrl-C never leaves it half-written; Ctrl-C stops the kernel at once, and
each notebook's kernel is stopped when it is done. A folder that cannot be written is refused before the run.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from .. import scale
from ..errors import one_line
from .notebook_files import (
    STAMP_KEY,
    STORED_SCALE,
    NotebookError,
    check_writable,
    code_hash,
    read_notebook,
    shown,
    write_atomically,
)


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
    return one_line(error, 240)


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
    check_writable(path)
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
        write_atomically(nb, path)
    except OSError as e:  # the disk filled up during the run, or the folder became read-only
        raise NotebookError(f"{shown(path)}: ran in {time.time() - t0:.0f} s but could not be saved "
                            f"({e.strerror or e}); the stored notebook is unchanged. Fix: free some disk space "
                            "(or make the folder writable) and run it again.") from None
    return time.time() - t0
