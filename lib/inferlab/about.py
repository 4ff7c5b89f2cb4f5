"""What this machine and this course are running: versions, device, model, weight bytes, bandwidth."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass

from .i18n import tr


@dataclass(frozen=True)
class Environment:
    """The environment check printed by the first notebook (all measured or read, nothing typed in)."""

    python: str
    packages: dict[str, str | None]  # None: not installed
    device: str
    device_name: str
    model: str
    model_source: str
    model_reason: str
    weight_bytes: int
    dtype: str
    bandwidth_gb_s: float | None

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs for a table, in the reader's language (package names stay as they are)."""
        rows = [("Python", self.python)] + [(k, tr("not installed") if v is None else v)
                                            for k, v in self.packages.items()]
        rows += [(tr("device"), f"{self.device} ({self.device_name})"),
                 (tr("model"), f"{self.model} [{self.model_source}]"),
                 (tr("why this model"), self.model_reason),
                 (tr("weights"), tr("{mb:.1f} MB in {dtype}", mb=self.weight_bytes / 1e6, dtype=self.dtype))]
        if self.bandwidth_gb_s is not None:
            rows.append((tr("measured memory bandwidth"),
                         tr("{gb_s:.1f} GB/s (large copy)", gb_s=self.bandwidth_gb_s)))
        return rows

    def _repr_html_(self) -> str:
        import html

        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(v)}</td></tr>" for k, v in self.rows())
        return f"<table>{body}</table>"

    def __repr__(self) -> str:
        rows = self.rows()
        # a CJK character takes two columns in a monospace font: pad by display width, not by len()
        widths = [_columns(k) for k, _ in rows]
        width = max(28, *widths)
        return "\n".join(f"{' ' * (width - n)}{k}: {v}" for (k, v), n in zip(rows, widths))


def _columns(text: str) -> int:
    """How many monospace columns ``text`` takes (East Asian wide characters take two)."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _version(name: str) -> str | None:
    """The installed version of package ``name``, or None (shown as "not installed" in the reader's language)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


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
