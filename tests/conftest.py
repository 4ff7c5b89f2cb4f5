"""Shared fixtures. Tests run offline on the bundled model (no network, no GPU needed)."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported anywhere
# the notebooks' test scale (inferlab/scale.py) unless the caller chose one; notebook kernels inherit it
os.environ.setdefault("INFERLAB_SCALE", "test")
# the fast path remembers its measured layout choice; tests keep theirs out of the learner's ~/.cache
os.environ.setdefault("INFERLAB_CACHE", tempfile.mkdtemp(prefix="inferlab-test-cache-"))

import pytest
import torch

import inferlab as il


@pytest.fixture(scope="session")
def model() -> il.Model:
    """The bundled tiny GPT-2, float32 on the CPU."""
    torch.manual_seed(0)
    return il.load("bundled", device="cpu", verbose=False)


@pytest.fixture(scope="session")
def short_trace(model) -> il.Trace:
    """A short greedy run with everything recorded (shared by figure tests)."""
    return il.generate(model, "To be, or not to be", max_new_tokens=6, record="all")


@pytest.fixture(scope="module")
def own_choice_cache(tmp_path_factory):
    """weights="auto" remembers its measurements: a module that times layouts keeps its own, in a fresh folder."""
    from inferlab import fast_choice

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INFERLAB_CACHE", str(tmp_path_factory.mktemp("choice_cache")))
        mp.setattr(fast_choice, "_MEMORY", {})
        yield
