"""Shared fixtures. Tests run offline on the bundled model (no network, no GPU needed)."""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported anywhere
# the notebooks' test scale (inferlab/scale.py) unless the caller chose one; notebook kernels inherit it
os.environ.setdefault("INFERLAB_SCALE", "test")
# no live "still running" line under slow notebook cells: nbval compares the outputs as stored
os.environ.setdefault("INFERLAB_NO_SLOW_NOTE", "1")
# the fast path remembers its measured layout choice; tests keep theirs out of the learner's ~/.cache
os.environ.setdefault("INFERLAB_CACHE", tempfile.mkdtemp(prefix="inferlab-test-cache-"))

import nbval.kernel
import pytest
import torch
from browser_support import browser, lab  # noqa: F401  (browser tests: one of each per file)
from jupyter_client.manager import KernelManager
from kernel_zygote import ForkedKernel, Zygote

import inferlab as il


class IpcKernelManager(KernelManager):
    """The notebooks' kernels talk to nbval over IPC sockets (files in a folder of this worker's), not TCP ports.

    jupyter_client picks a kernel's five ports by binding and releasing them; the kernel binds them a moment later.
    With two workers and the browser tests' JupyterLab starting kernels at the same time, two kernels could pick
    the same port, and one died before it answered ("Kernel died before replying to kernel_info", every cell of its
    notebook an error). A socket file has no such race (``notebook_tools.execute`` uses the same transport).
    """

    _folder = tempfile.mkdtemp(prefix="inferlab-kernels-")
    _numbers = itertools.count()
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)

    def __init__(self, **kwargs):
        super().__init__(transport="ipc", ip=os.path.join(self._folder, f"k{next(self._numbers)}"), **kwargs)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        """A fork of this worker's zygote (``kernel_zygote.py``: torch, transformers and plotly already imported)
        where it can serve this kernel; otherwise the normal launch."""
        pid = Zygote.fork(kernel_cmd, dict(kw.get("env") or os.environ), str(kw.get("cwd") or os.getcwd()),
                          stderr_to_null=kw.get("stderr") is not None)
        if pid is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        provisioner = self.provisioner
        provisioner.process = ForkedKernel(pid)
        provisioner.pid = provisioner.pgid = pid  # the kernel leads its own process group, as a launched one does
        provisioner.cwd = kw.get("cwd") or os.getcwd()
        self._reconcile_connection_info(provisioner.connection_info)


nbval.kernel.KernelManager = IpcKernelManager  # nbval has no setting for it; start_new_kernel reads this name


@pytest.fixture(scope="session")
def model() -> il.Model:
    """The bundled tiny GPT-2, float32 on the CPU."""
    torch.manual_seed(0)
    return il.load("bundled", device="cpu", verbose=False)


class ForwardCounter:
    """Counts the model's forward passes while active (bad input must be refused before any):
    ``from conftest import ForwardCounter``; ``with ForwardCounter(model) as count: ...``; ``count.n``."""

    def __init__(self, model):
        self.model, self.n = model, 0

    def __enter__(self):
        module = self.model.transformers_module()
        self.handle = module.register_forward_pre_hook(lambda *_: setattr(self, "n", self.n + 1))
        return self

    def __exit__(self, *exc):
        self.handle.remove()


@pytest.fixture(scope="session")
def short_trace(model) -> il.Trace:
    """A short greedy run with everything recorded (shared by figure tests)."""
    return il.generate(model, "To be, or not to be", max_new_tokens=6, record="all")


@pytest.fixture(scope="module")
def pat(short_trace):
    """The short run's recorded attention as ``attention.Patterns`` (the attention and heads tests)."""
    from inferlab import attention

    return attention.Patterns.from_trace(short_trace)


def _causal_uniform(T: int) -> torch.Tensor:
    """Evenly spread causal attention ``[query_pos, key_pos]`` over T tokens."""
    return torch.ones(T, T).tril() / torch.arange(1, T + 1).view(-1, 1)


@pytest.fixture(scope="session")
def causal_uniform():
    """``causal_uniform(T)``: evenly spread causal attention ``[query_pos, key_pos]`` over T tokens."""
    return _causal_uniform


@pytest.fixture(scope="module")
def own_choice_cache(tmp_path_factory):
    """weights="auto" remembers its measurements: a module that times layouts keeps its own, in a fresh folder."""
    from inferlab.fast import choice as fast_choice

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INFERLAB_CACHE", str(tmp_path_factory.mktemp("choice_cache")))
        mp.setattr(fast_choice, "_MEMORY", {})
        yield


# Files of few tests that each take seconds (a Python process of their own, a kernel, a network timeout): counted by
# their tests they went last, and the worker that got them finished 15-17 s after the other; they go first instead.
FEW_BUT_LONG = ("tests/test_offline.py", "tests/test_progress.py", "tests/test_network.py")


def _unit_order(item, tests_in: dict[str, int]) -> tuple[int, ...]:
    """Where an item's file goes in the run: the English notebooks from the highest number down, then the Chinese ones
    the same way, then the two browser files (about 80 s each, one per worker), then the other test files,
    ``FEW_BUT_LONG`` and then those with the most tests first; the short files at the end fill in so that the workers
    finish together. A file's items keep their order; each file stays on one worker (``tests/run.sh`` passes
    ``--no-loadscope-reorder`` so that xdist keeps this order).

    The editions go one after the other, not side by side: a Chinese notebook then finds what its English twin
    measured or compiled (the fast path's layout choices in ``$INFERLAB_CACHE``, 08's compiled step in PyTorch's
    on-disk cache) instead of doing the same work at the same moment on the other worker. Side by side, the
    notebooks took 273 s of the workers' time and pytest 5:16; one edition after the other, 235 s and 4:48 (2-core
    VM, 2026-12-07; the Chinese 11 alone went from 16 s to 5 s)."""
    file = item.nodeid.split("::", 1)[0]
    number = Path(file).name[:2]
    if file.endswith(".ipynb") and number.isdigit():
        return 0, int(file.startswith("notebooks/zh/")), -int(number)
    if Path(file).name.startswith("test_browser_"):
        return 1, 0
    return 2, -1_000_000 if file in FEW_BUT_LONG else -tests_in[file]


def pytest_collection_modifyitems(config, items):
    """Longest units first, short ones last (see ``_unit_order``)."""
    tests_in: dict[str, int] = {}
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        tests_in[file] = tests_in.get(file, 0) + 1
    items.sort(key=lambda item: _unit_order(item, tests_in))  # stable


def _speaking(lang: str):
    """``lang`` for one test, then whatever was chosen before (another test may rely on the other language)."""
    from inferlab import i18n

    before = i18n._chosen
    i18n.set_language(lang)
    try:
        yield
    finally:
        i18n._chosen = before


@pytest.fixture
def zh():
    """Chinese for one test."""
    yield from _speaking("zh")


@pytest.fixture
def english():
    """English for one test."""
    yield from _speaking("en")
