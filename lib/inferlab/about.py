"""What this machine and this course are running: versions, device, model, weight bytes, bandwidth."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Environment:
    """The environment check printed by the first notebook (all measured or read, nothing typed in)."""

    python: str
    packages: dict[str, str]
    device: str
    device_name: str
    model: str
    model_source: str
    model_reason: str
    weight_bytes: int
    dtype: str
    bandwidth_gb_s: float | None

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs for a table."""
        rows = [("Python", self.python)] + [(k, v) for k, v in self.packages.items()]
        rows += [("device", f"{self.device} ({self.device_name})"),
                 ("model", f"{self.model} [{self.model_source}]"),
                 ("why this model", self.model_reason),
                 ("weights", f"{self.weight_bytes / 1e6:.1f} MB in {self.dtype}")]
        if self.bandwidth_gb_s is not None:
            rows.append(("measured memory bandwidth", f"{self.bandwidth_gb_s:.1f} GB/s (large copy)"))
        return rows

    def _repr_html_(self) -> str:
        import html

        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(v)}</td></tr>" for k, v in self.rows())
        return f"<table>{body}</table>"

    def __repr__(self) -> str:
        return "\n".join(f"{k:>28}: {v}" for k, v in self.rows())


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def environment(model, measure: bool = True) -> Environment:
    """Collect the environment facts for ``model`` (``measure``: the session's machine profile, measured once)."""
    import torch

    from .measure.machine import machine_profile

    dev = model.device
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
    elif dev.type == "mps":
        name = "Apple GPU (MPS)"
    else:
        name = platform.processor() or platform.machine()
    # the same profile every figure and sentence of the session uses, so 00 shows one bandwidth, not two
    bandwidth = machine_profile(dev, model.info.dtype).bytes_per_s if measure else None
    return Environment(
        python=sys.version.split()[0],
        packages={p: _version(p) for p in ("torch", "transformers", "plotly", "ipywidgets", "jupyterlab", "inferlab")},
        device=str(dev), device_name=name, model=model.info.name, model_source=model.info.source,
        model_reason=model.info.reason, weight_bytes=model.info.weight_bytes,
        dtype=str(model.info.dtype).removeprefix("torch."),
        bandwidth_gb_s=None if bandwidth is None else bandwidth / 1e9)
