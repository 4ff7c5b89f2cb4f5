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
- ``machine_profile``: ``measure_machine`` once per machine, device and dtype, then the same profile for every
  figure and sentence of every notebook (floors no longer drift between notebooks): kept in this process and in
  a small JSON file beside the fast path's layout choices (``profile_file()``), with when it was measured, which
  its ``repr`` prints; ``refresh=True`` measures again. A profile read back from the file is first compared
  with ``spot_check`` (the same two rates, a few runs): beyond ``gate.STALE_MAX`` it is measured again.

Each times its operation with ``timing.time_call`` (warm-up, device sync, repeats) and keeps the
best repeat: a ceiling is what the machine *can* do, so noise only ever makes it look lower. Where the profile is
kept, and the one rule for a damaged file, are ``inferlab.kept``'s (shared with the fast path's layout choices).

    >>> machine_profile()      # doctest: +SKIP
    MachineProfile(cpu float32: 21.4 GB/s copy bandwidth, 160.2 GFLOP/s matmul, ridge 7.5 FLOP/B, best of 7 runs ...);
    measured 3 days ago (2026-11-30 14:02 UTC) on AMD EPYC 7B13, 2 threads; machine_profile(refresh=True) re-measures
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch

from .. import gate, kept
from ..checkpoints import resolve_device
from ..cost import MachineProfile
from ..errors import bad_value, check_number
from ..i18n import tr
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


SPOT_REPEATS = 3  # best of 3: within a few % of the profile's best of 7 on a quiet machine, a fraction of a second


def spot_check(profile: MachineProfile, device="cpu", dtype=torch.float32) -> MachineProfile:
    """The two rates of ``profile`` measured again, briefly: ``measure_machine`` with its copy size and matmul size,
    best of ``SPOT_REPEATS`` (a fraction of a second on a CPU). ``machine_profile`` compares it with a profile read
    back from disk, which may have been measured hours ago at another speed."""
    return measure_machine(device, dtype, copy_mb=profile.copy_mb, matmul_n=profile.matmul_n, repeats=SPOT_REPEATS)


def agrees(checked: MachineProfile, profile: MachineProfile) -> bool:
    """Both of ``checked``'s rates within ``gate.STALE_MAX`` of ``profile``'s (the gate's ``stale`` rule)."""
    return all(abs(gate.off(getattr(checked, k), getattr(profile, k))) <= gate.STALE_MAX
               for k in ("bytes_per_s", "flops_per_s"))


# ----------------------------------------------------------------------------- one profile for the whole course
FORMAT = 1  # the profile file's layout; a file of another layout is ignored (and rewritten on the next save)


@dataclass(frozen=True, repr=False)
class SavedProfile(MachineProfile):
    """A ``MachineProfile`` that says when and where it was measured (``machine_profile`` keeps these)."""

    measured_at: float = 0.0  # seconds since the epoch (time.time())
    machine: str = ""  # the CPU (or GPU) and thread count it was measured on
    source: str = "measured"  # "measured" in this process, or "saved" (read back from profile_file())

    def age(self, now: float | None = None) -> str:
        """How long ago it was measured, in words: "just now", "5 minutes ago", "3 days ago"."""
        seconds = max(0.0, (time.time() if now is None else now) - self.measured_at)
        if seconds >= 2 * 86400:
            return tr("{n} days ago", n=int(seconds // 86400))
        if seconds >= 2 * 3600:
            return tr("{n} hours ago", n=int(seconds // 3600))
        if seconds >= 120:
            return tr("{n} minutes ago", n=int(seconds // 60))
        return tr("just now")

    def __repr__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.measured_at))
        return tr("{profile}; measured {age} ({when}) on {machine}; machine_profile(refresh=True) re-measures",
                  profile=MachineProfile.__repr__(self), age=self.age(), when=when, machine=self.machine)


PROFILE_NAME = "machine_profile.json"


def profile_file() -> Path:
    """Where profiles are kept between processes: ``machine_profile.json`` beside the fast path's choices
    (``kept.folder``: ``$INFERLAB_CACHE``, else ``~/.cache/inferlab/``). JSON only: reading it can never run code."""
    return kept.path(PROFILE_NAME)


def machine_key(device: torch.device, dtype: torch.dtype) -> str:
    """What a profile holds for: the CPU model, its core count, the threads torch uses, torch's version, the
    device (with a GPU's name) and the dtype. Another machine, or the same one with other threads, measures anew."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return kept.machine_key(cores=os.cpu_count(), threads=torch.get_num_threads(), torch=torch.__version__,
                            device=str(device), gpu=gpu, dtype=str(dtype))


def _describe(device: torch.device) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else kept.cpu_name()
    return tr("{name}, {threads} threads", name=name, threads=torch.get_num_threads())


def _read_profiles() -> dict:
    """The profile file's entries (key -> fields); a missing file is empty, an unreadable or foreign one is
    ignored with a warning that says so (``kept.read``; it is replaced on the next save)."""
    return kept.read(PROFILE_NAME, "machine_profile", _not_profiles).get("profiles", {})


def _not_profiles(data) -> str | None:
    """Why ``data`` is not a profile file of this ``FORMAT`` (None when it is one)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("profiles"), dict):
        return tr("not a machine-profile file of format {format}", format=FORMAT)
    return None


def _from_entry(entry) -> SavedProfile | None:
    """A saved entry back as a profile, or None when it lacks a field or holds the wrong type."""
    try:
        fields = {f.name: entry[f.name] for f in dataclasses.fields(SavedProfile)
                  if f.name in entry or f.default is dataclasses.MISSING}
        for name in ("bytes_per_s_range", "flops_per_s_range"):
            if fields.get(name) is not None:
                fields[name] = tuple(float(v) for v in fields[name])
        profile = SavedProfile(**{**fields, "source": "saved"})
        ok = [isinstance(getattr(profile, k), (int, float)) and getattr(profile, k) > 0
              for k in ("bytes_per_s", "flops_per_s", "measured_at")]
        return profile if all(ok) and isinstance(profile.machine, str) else None
    except (TypeError, KeyError, ValueError):
        return None


def _save(key: str, profile: SavedProfile) -> None:
    """Add ``profile`` to the file (atomically: two processes saving at once leave one whole file);
    silently skipped where the folder cannot be written."""
    entry = {k: v for k, v in profile.to_dict().items() if k != "source"}
    kept.write(PROFILE_NAME, {"format": FORMAT, "profiles": {**_read_profiles(), key: entry}})


_PROFILES: dict[str, SavedProfile] = {}  # this process's profiles, by machine_key


def machine_profile(device=None, dtype=None, *, refresh: bool = False) -> SavedProfile:
    """This machine's ceilings, measured once (best of 7 runs) and reused by every caller of every notebook.

    Args:
        device: ``None`` (the best device present: CUDA, then MPS, then CPU), or a name / ``torch.device``.
        dtype: ``None`` (float32) or a ``torch.dtype`` such as ``torch.float16`` (matmul rates differ by dtype).
        refresh: measure again and replace the kept profile (e.g. after the machine got quieter).

    The profile is kept in this process and in ``profile_file()``, under ``machine_key`` (CPU, cores, threads,
    torch, device, dtype); its ``repr`` says how long ago it was measured. A measurement whose runs disagree by
    more than ``inferlab.gate.SPREAD_MAX`` (the machine was busy) is used in this process but not saved, and a
    notebook shows that its run was disturbed. A profile read back from the file is checked first (``spot_check``,
    once per process): when either rate is more than ``gate.STALE_MAX`` off, the machine is measured again and the
    new profile replaces it (the machine's speed drifts: a notebook's floors must be this run's). The check's
    numbers are left as gate evidence (``gate.spot``). Every notebook cell, figure and sentence that needs a floor calls
    this, so they all agree.

        >>> machine_profile() is machine_profile()      # doctest: +SKIP
        True
    """
    device = torch.device(resolve_device("auto") if device is None else device)
    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise bad_value("dtype", dtype, "None or a torch.dtype", "e.g. dtype=torch.float32")
    key = machine_key(device, dtype)
    if refresh or key not in _PROFILES:
        saved = None if refresh else _from_entry(_read_profiles().get(key))
        checked = None if saved is None else spot_check(saved, device, dtype)
        quoted = saved if checked is not None and agrees(checked, saved) else _measure(key, device, dtype)
        if checked is not None:
            gate.spot(saved, checked, quoted)
        _PROFILES[key] = quoted
    gate.machine(_PROFILES[key])
    return _PROFILES[key]


def _measure(key: str, device: torch.device, dtype: torch.dtype) -> SavedProfile:
    """``measure_machine`` (best of 7), kept in the file unless its runs disagree beyond ``gate.SPREAD_MAX``."""
    measured = measure_machine(device, dtype, repeats=7)
    profile = SavedProfile(**{f.name: getattr(measured, f.name) for f in dataclasses.fields(MachineProfile)},
                           measured_at=time.time(), machine=_describe(device))
    if max(profile.spread.values()) <= gate.SPREAD_MAX:
        _save(key, profile)
    return profile
