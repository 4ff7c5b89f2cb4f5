"""Prefill under each attention kernel: time (interleaved), peak memory, and whether the logits agree.

``kernel_sweep(model, lengths)`` times the engine's ``prefill`` of random ``[1, T]`` prompts with the
eager kernel (which materializes every ``[batch, heads, query_pos, key_pos]`` probability) and with
SDPA (fused), taking turns so a busy machine slows them alike. Any other set-up can be passed as a
context manager factory, e.g. the capture hooks of ``record="attention"``.

    >>> cmp = kernel_sweep(m, [64, 256])        # doctest: +SKIP
    >>> cmp.sweeps["eager"].medians             # seconds per prefill, one per length  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..engine import prefill
from ..errors import check_number
from ..hooks import capture
from ..i18n import tr
from ..models import Model
from ..progress import progress
from ..timing import interleave, time_call
from .profiling import peak_bytes
from .sweeps import Sweep, check_sizes, meta, sample_ids

KernelSetup = Callable[[], contextlib.AbstractContextManager]


@dataclass(frozen=True)
class KernelComparison:
    """One prefill ``Sweep`` per attention kernel over the same prompt lengths, with memory and agreement.

    ``peak_bytes[k][i]``: the most memory prefill allocated at ``lengths[i]`` with kernel ``k`` (empty
    when not measured); ``max_abs_diff[k][i]``: largest |logit difference| from the first kernel there.
    """

    sweeps: dict[str, Sweep]
    peak_bytes: dict[str, tuple[int, ...]]
    max_abs_diff: dict[str, tuple[float, ...]]

    @property
    def kernels(self) -> list[str]:
        """Kernel names, the reference (first) one first."""
        return list(self.sweeps)

    @property
    def lengths(self) -> tuple[int, ...]:
        """Prompt lengths (tokens)."""
        return next(iter(self.sweeps.values())).xs

    @property
    def agree(self) -> float:
        """The largest |logit difference| from the first kernel over every kernel and length."""
        return max(d for diffs in self.max_abs_diff.values() for d in diffs)

    def __repr__(self) -> str:
        parts = tr(", ").join(f"{tr('eager + recording') if k == RECORDING else k} {s.medians[-1] * 1e3:.2f} ms"
                              for k, s in self.sweeps.items())  # sdpa, eager: identifiers
        return tr("KernelComparison(prefill at {lengths} tokens; at {last}: {parts}; max |logit diff| {diff:.1e})",
                  lengths=list(self.lengths), last=self.lengths[-1], parts=parts, diff=self.agree)


def _setups(model: Model, kernels) -> dict[str, KernelSetup]:
    if isinstance(kernels, Mapping):
        return dict(kernels)
    if isinstance(kernels, str) or not kernels:
        raise TypeError(f"kernels must be a list of kernel names or a dict of set-ups, got {kernels!r}. "
                        "Fix: e.g. kernels=('eager', 'sdpa').")
    return {k: (lambda k=k: model.attention_kernel(k)) for k in kernels}


def kernel_sweep(model: Model, lengths: Sequence[int], kernels: Sequence[str] | Mapping[str, KernelSetup] = (
        "eager", "sdpa"), *, repeats: int = 3, warmup: int = 1, memory: bool = True) -> KernelComparison:
    """Time prefill of ``[1, T]`` random ids for each T in ``lengths`` under each kernel, interleaved.

    Args:
        model: from ``inferlab.load()``.
        lengths: prompt lengths (tokens, each <= the context length).
        kernels: names for ``Model.attention_kernel`` (``"eager"``, ``"sdpa"``), or ``{label: set-up}``
            where each set-up returns a context manager to run inside (e.g. capture hooks).
        repeats: timed prefills per kernel and length, after ``warmup`` untimed ones each.
        memory: also measure each prefill's peak memory (``profiling.peak_bytes``).
    """
    lengths = check_sizes("lengths", lengths, 1, model.info.n_ctx)
    check_number("repeats", repeats, low=1, integer=True)
    check_number("warmup", warmup, low=0, integer=True)
    setups = _setups(model, kernels)
    times = {k: [] for k in setups}
    peaks = {k: [] for k in setups}
    diffs = {k: [] for k in setups}
    for n in progress(lengths, tr("kernels")):
        ids = sample_ids(model, n)

        def once(setup: KernelSetup, ids=ids) -> float:
            with setup():
                return time_call(lambda: prefill(model, ids), repeats=1, warmup=0, device=model.device)[0]

        for k, seconds in interleave({k: (lambda s=s: once(s)) for k, s in setups.items()}, repeats,
                                     warmup=warmup).items():
            times[k].append(tuple(seconds))
        ref = None
        for k, setup in setups.items():
            with setup():
                logits = prefill(model, ids)[0].float()  # [1, vocab]
                if memory:
                    peaks[k].append(peak_bytes(lambda ids=ids: prefill(model, ids), model.device))
            ref = logits if ref is None else ref
            diffs[k].append(float((logits - ref).abs().max()))
    sweeps = {k: Sweep("prefill", tr("prompt length (tokens)"), lengths, tuple(times[k]), lengths, **meta(model),
                       note=tr("attention kernel: {kernel}", kernel=k)) for k in setups}
    return KernelComparison(sweeps, {k: tuple(v) for k, v in peaks.items()}, {k: tuple(v) for k, v in diffs.items()})


RECORDING = "eager + recording"


def attention_kernels(model: Model, tokens: int, *, repeats: int = 5, warmup: int = 2) -> KernelComparison:
    """One prefill of ``tokens`` tokens with SDPA, eager, and eager while recording every probability.

    What ``record="attention"`` costs (notebook 03): the eager kernel, plus hooks copying its
    ``[heads, query_pos, key_pos]`` probabilities out of every layer.
    """
    setups = {"sdpa": lambda: model.attention_kernel("sdpa"), "eager": lambda: model.attention_kernel("eager"),
              RECORDING: lambda: capture(model, {"attention"})}
    return kernel_sweep(model, [tokens], setups, repeats=repeats, warmup=warmup, memory=False)
