"""The two ceilings of a device, measured: memory bandwidth and matmul throughput.

- ``measure_bandwidth(kind="copy")``: a large copy, bytes read + bytes written over the best time
  (the roofline's memory ceiling). ``kind="read"``: a sum over a large tensor, bytes read only (a
  decode step only *reads* its weights; on some CPUs a core streams less in pure reads).
- ``measure_matmul``: an ``n x n`` by ``n x n`` product, 2 n^3 FLOPs over the best time.
- ``measure_machine``: both, as a ``cost.MachineProfile`` for the floors of ``inferlab.cost``, with the
  range over the runs (``bytes_per_s_range``, ``flops_per_s_range``, ``spread``).
- ``rate_then`` and ``x_floor_paired``: each run of a compute-bound job paired with the matmul rate measured
  just before it, and the median of each run against the floor at its own rate (the machine's speed can
  drift between a profile taken at the start and a timing minutes later).
- ``machine_profile``: ``measure_machine`` once per process and device/dtype, then the same profile for
  every figure and sentence (floors no longer drift between notebooks); ``refresh=True`` measures again.

Each times its operation with ``timing.time_call`` (warm-up, device sync, repeats) and keeps the
best repeat: a ceiling is what the machine *can* do, so noise only ever makes it look lower.

    >>> machine_profile()      # doctest: +SKIP
    MachineProfile(cpu float32: 21.4 GB/s copy bandwidth, 160.2 GFLOP/s matmul, ridge 7.5 FLOP/B, best of 7 runs ...)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from ..checkpoints import resolve_device
from ..cost import MachineProfile
from ..errors import bad_value, check_number
from ..timing import time_call

BANDWIDTH_KINDS = ("copy", "read")
T = TypeVar("T")


def _bandwidth_rates(device, dtype, mb: int, repeats: int, kind: str) -> list[float]:
    """Bytes per second of each timed run (see ``measure_bandwidth``)."""
    if kind not in BANDWIDTH_KINDS:
        raise bad_value("kind", kind, f"one of {list(BANDWIDTH_KINDS)}", "use 'copy' (read + write) or 'read'")
    check_number("mb", mb, low=1, integer=True, fix="e.g. mb=256 (larger than the CPU caches)")
    check_number("repeats", repeats, low=1, integer=True)
    n = mb * 2**20 // torch.empty((), dtype=dtype).element_size()
    src = torch.ones(n, dtype=dtype, device=device)
    if kind == "copy":
        dst = torch.empty_like(src)
        times = time_call(lambda: dst.copy_(src), repeats=repeats, device=device)
        return [2 * src.numel() * src.element_size() / t for t in times]
    return [src.numel() * src.element_size() / t for t in time_call(src.sum, repeats=repeats, device=device)]


def _matmul_rates(device, dtype, n: int, repeats: int) -> list[float]:
    """FLOPs per second of each timed ``n x n`` product (see ``measure_matmul``)."""
    check_number("n", n, low=1, integer=True)
    check_number("repeats", repeats, low=1, integer=True)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    return [2 * n**3 / t for t in time_call(lambda: a @ b, repeats=repeats, device=device)]


def measure_bandwidth(device="cpu", dtype=torch.float32, mb: int = 256, repeats: int = 5, *,
                      kind: str = "copy") -> float:
    """Bytes per second through memory on ``device``, best of ``repeats`` (after one warm-up).

    Args:
        device, dtype: where and in which element type (a GPU's bandwidth needs a GPU tensor).
        mb: size of the tensor in MiB (larger than the caches, or the number measures the caches).
        kind: ``"copy"`` (``dst.copy_(src)``: read + write, counted twice) or ``"read"`` (``x.sum()``).
    """
    return max(_bandwidth_rates(device, dtype, mb, repeats, kind))


def measure_matmul(device="cpu", dtype=torch.float32, n: int = 1024, repeats: int = 5) -> float:
    """FLOPs per second of an ``n x n`` by ``n x n`` matmul (2 n^3 per product, best of ``repeats``)."""
    return max(_matmul_rates(device, dtype, n, repeats))


def matmul_size(device) -> int:
    """The ``n`` of the ``n x n`` product that measures ``device``'s matmul ceiling: 8192 on a GPU (smaller
    products leave most of it idle), 1024 on a CPU."""
    return 8192 if torch.device(device).type == "cuda" else 1024


def rate_then(run: Callable[[], T], device="cpu", dtype=torch.float32, repeats: int = 3
              ) -> Callable[[], tuple[float, T]]:
    """``run`` preceded by ``measure_matmul`` (``matmul_size``, best of ``repeats``).

    Returns ``(FLOPs per second, run's result)``.

    On a machine whose speed drifts from second to second (a shared VM, a laptop changing clock), a
    compute-bound time is only comparable with a rate measured next to it; ``x_floor_paired`` uses the pairs.
    """
    n = matmul_size(device)
    return lambda: (measure_matmul(device, dtype, n=n, repeats=repeats), run())


def x_floor_paired(seconds: Sequence[float], rates: Sequence[float], floor_at: Callable[[float], float]) -> float:
    """Median over runs of ``seconds[i] / floor_at(rates[i])``: each run against the floor at the rate measured
    just before it (``rate_then``). ``floor_at``: FLOPs per second -> floor seconds."""
    if not seconds or len(seconds) != len(rates):
        raise bad_value("rates", len(rates), f"one rate per timed run ({len(seconds)}), at least one",
                        "pair each run with its rate through rate_then")
    return statistics.median(s / floor_at(r) for s, r in zip(seconds, rates))


def measure_machine(device="cpu", dtype=torch.float32, *, copy_mb: int | None = None,
                    matmul_n: int | None = None, repeats: int = 5) -> MachineProfile:
    """Measure both ceilings on ``device`` (a second or two on a laptop CPU): copy bandwidth and matmul rate.

    Each ceiling is the best of ``repeats`` runs; the slowest and fastest run are kept as its range.
    """
    device = torch.device(device)
    big = device.type == "cuda"
    copy_mb = copy_mb or (1024 if big else 256)
    matmul_n = matmul_n or matmul_size(device)
    bw = _bandwidth_rates(device, dtype, copy_mb, repeats, "copy")
    mm = _matmul_rates(device, dtype, matmul_n, repeats)
    return MachineProfile(device=str(device), dtype=str(dtype).removeprefix("torch."),
                          bytes_per_s=max(bw), flops_per_s=max(mm), copy_mb=copy_mb, matmul_n=matmul_n,
                          bytes_per_s_range=(min(bw), max(bw)), flops_per_s_range=(min(mm), max(mm)), runs=repeats)


_PROFILES: dict[tuple[str, str], MachineProfile] = {}


def machine_profile(device=None, dtype=None, *, refresh: bool = False) -> MachineProfile:
    """This machine's ceilings, measured once per process (best of 7 runs) and reused by every caller.

    Args:
        device: ``None`` (the best device present: CUDA, then MPS, then CPU), or a name / ``torch.device``.
        dtype: ``None`` (float32) or a ``torch.dtype`` such as ``torch.float16`` (matmul rates differ by dtype).
        refresh: measure again and replace the stored profile (e.g. after the machine got quieter).

    Every notebook cell, figure and sentence that needs a floor should call this, so they all agree.

        >>> machine_profile() is machine_profile()      # doctest: +SKIP
        True
    """
    device = torch.device(resolve_device("auto") if device is None else device)
    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise bad_value("dtype", dtype, "None or a torch.dtype", "e.g. dtype=torch.float32")
    key = (str(device), str(dtype))
    if refresh or key not in _PROFILES:
        _PROFILES[key] = measure_machine(device, dtype, repeats=7)
    return _PROFILES[key]
