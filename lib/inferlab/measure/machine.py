"""The two ceilings of a device, measured: memory bandwidth and matmul throughput.

- ``measure_bandwidth(kind="copy")``: a large copy, bytes read + bytes written over the best time
  (the roofline's memory ceiling). ``kind="read"``: a sum over a large tensor, bytes read only (a
  decode step only *reads* its weights; on some CPUs a core streams less in pure reads).
- ``measure_matmul``: an ``n x n`` by ``n x n`` product, 2 n^3 FLOPs over the best time.
- ``measure_machine``: both, as a ``cost.MachineProfile`` for the floors of ``inferlab.cost``.

Each times its operation with ``timing.time_call`` (warm-up, device sync, repeats) and keeps the
best repeat: a ceiling is what the machine *can* do, so noise only ever makes it look lower.

    >>> measure_machine("cpu")      # doctest: +SKIP
    MachineProfile(cpu float32: 21.4 GB/s copy bandwidth, 160.2 GFLOP/s matmul, ridge 7.5 FLOP/B)
"""

from __future__ import annotations

import torch

from ..cost import MachineProfile
from ..errors import bad_value, check_number
from ..timing import time_call

BANDWIDTH_KINDS = ("copy", "read")


def measure_bandwidth(device="cpu", dtype=torch.float32, mb: int = 256, repeats: int = 5, *,
                      kind: str = "copy") -> float:
    """Bytes per second through memory on ``device``, best of ``repeats`` (after one warm-up).

    Args:
        device, dtype: where and in which element type (a GPU's bandwidth needs a GPU tensor).
        mb: size of the tensor in MiB (larger than the caches, or the number measures the caches).
        kind: ``"copy"`` (``dst.copy_(src)``: read + write, counted twice) or ``"read"`` (``x.sum()``).
    """
    if kind not in BANDWIDTH_KINDS:
        raise bad_value("kind", kind, f"one of {list(BANDWIDTH_KINDS)}", "use 'copy' (read + write) or 'read'")
    check_number("mb", mb, low=1, integer=True, fix="e.g. mb=256 (larger than the CPU caches)")
    check_number("repeats", repeats, low=1, integer=True)
    n = mb * 2**20 // torch.empty((), dtype=dtype).element_size()
    src = torch.ones(n, dtype=dtype, device=device)
    if kind == "copy":
        dst = torch.empty_like(src)
        best = min(time_call(lambda: dst.copy_(src), repeats=repeats, device=device))
        return 2 * src.numel() * src.element_size() / best
    best = min(time_call(src.sum, repeats=repeats, device=device))
    return src.numel() * src.element_size() / best


def measure_matmul(device="cpu", dtype=torch.float32, n: int = 1024, repeats: int = 5) -> float:
    """FLOPs per second of an ``n x n`` by ``n x n`` matmul (2 n^3 per product, best of ``repeats``)."""
    check_number("n", n, low=1, integer=True)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    best = min(time_call(lambda: a @ b, repeats=repeats, device=device))
    return 2 * n**3 / best


def measure_machine(device="cpu", dtype=torch.float32, *, copy_mb: int | None = None,
                    matmul_n: int | None = None) -> MachineProfile:
    """Measure both ceilings on ``device`` (a second or two on a laptop CPU): copy bandwidth and matmul rate."""
    device = torch.device(device)
    big = device.type == "cuda"
    copy_mb = copy_mb or (1024 if big else 256)
    matmul_n = matmul_n or (8192 if big else 1024)
    return MachineProfile(device=str(device), dtype=str(dtype).removeprefix("torch."),
                          bytes_per_s=measure_bandwidth(device, dtype, copy_mb),
                          flops_per_s=measure_matmul(device, dtype, matmul_n),
                          copy_mb=copy_mb, matmul_n=matmul_n)
