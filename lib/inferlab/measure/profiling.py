"""Measuring where time and memory go: ``torch.profiler`` grouped for teaching.

- ``profile_step(step)``: one decode step's time by group (matrix products, attention, norms and
  activations, other operators) plus the Python & dispatch time around them. A ``torch.compile``d
  step shows as one group, "compiled graph (fused)": its generated kernels do every operator at once.
- ``peak_bytes(fn)``: the most memory a call allocates while it runs (CPU or CUDA).

The profiler's C++ side prints start/stop lines on the process's stderr; ``quiet_stderr`` hides them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from ..timing import clock, summarize, time_call

GROUPS = ("matmuls", "attention", "norms & activations", "other ops", "compiled graph (fused)", "Python & dispatch")
_GROUP_WORDS = (("compiled graph (fused)", ("CompiledFxGraph",)),
                ("Python & dispatch", ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "AOTDispatcher",
                                       "Pregraph bytecode")),
                ("matmuls", ("addmm", "aten::mm", "linear", "matmul", "bmm", "int4pack", "int8pack", "aten::mv")),
                ("attention", ("scaled_dot_product", "attention", "softmax")),
                ("norms & activations", ("layer_norm", "tanh", "pow", "gelu", "aten::mul", "aten::add", "aten::div")))


def op_group(name: str) -> str:
    """Which of ``GROUPS`` an operator (``aten::addmm``, ``quantized::linear_dynamic`` ...) belongs to."""
    for group, words in _GROUP_WORDS:
        if any(w in name for w in words):
            return group
    return "other ops"


@dataclass(frozen=True)
class StepProfile:
    """Where one step's time goes: seconds per step by group, and the biggest operators.

    Operator times are ``torch.profiler`` self times; ``Python & dispatch`` is the rest of the step's
    wall time measured without the profiler (Python, argument checks, allocation, launching).
    """

    label: str
    step_s: float  # median wall time of one step, without the profiler
    groups: dict[str, float]
    top_ops: tuple[tuple[str, float, int], ...]  # (name, seconds per step, calls per step)

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in self.groups.items())
        return f"StepProfile({self.label}: {self.step_s * 1e3:.2f} ms/step = {parts} ms)"


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2: the profiler's C++ side prints start/stop lines there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def profile_step(step, *, label: str = "step", repeats: int = 10, warmup: int = 3,
                 device: torch.device | str = "cpu") -> StepProfile:
    """Profile ``step()`` (one decode step, no arguments) ``repeats`` times, after ``warmup`` calls.

    >>> logits, cache = il.prefill(m, ids)                                    # doctest: +SKIP
    >>> profile_step(lambda: il.decode_step(m, 0, cache), label="engine")      # doctest: +SKIP
    """
    cuda = torch.device(device).type == "cuda"
    step_s = summarize(time_call(step, repeats=repeats, warmup=warmup, device=device)).median
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with quiet_stderr(), profile(activities=activities) as prof:
        for _ in range(repeats):
            step()
        clock(device)
    per_op: dict[str, tuple[float, int]] = {}
    for ev in prof.key_averages():
        t = (ev.self_device_time_total if cuda else ev.self_cpu_time_total) / 1e6 / repeats
        if t > 0 or ev.count:
            per_op[ev.key] = (t, ev.count // repeats)
    groups = dict.fromkeys(GROUPS, 0.0)
    for name, (t, _) in per_op.items():
        groups[op_group(name)] += t
    groups["Python & dispatch"] = 0.0  # the rest of the wall time, whatever the profiler saw there
    groups["Python & dispatch"] = max(0.0, step_s - sum(groups.values()))
    top = sorted(((n, t, c) for n, (t, c) in per_op.items()), key=lambda r: -r[1])[:12]
    return StepProfile(label, step_s, groups, tuple(top))


def peak_bytes(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated before it.

    CUDA: the allocator's own peak counter. CPU: the running sum of every operator's allocations
    and frees recorded by ``torch.profiler`` (in time order).
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage),
                    key=lambda e: e.time_range.start)
    running = peak = 0
    for e in events:
        running += e.self_cpu_memory_usage
        peak = max(peak, running)
    return peak
