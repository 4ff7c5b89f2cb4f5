"""Measured times against the cost model: roofline points, the myth check, and predictions for other sizes.

Counting (FLOPs, bytes, floors) comes from ``inferlab.cost``; times come from a ``Sweep`` or a
``Measurement``. ``inferlab.viz.roofline`` draws the results.

    >>> points = roofline_points(prefill_sweep(m, [8, 64]), shape, machine)     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..cost import Cost, MachineProfile, Shape, decode_cost, prefill_cost
from ..errors import bad_value
from ..i18n import tr
from ..models import Model
from ..units import bound_text, ms_cell
from .latency import Measurement
from .sweeps import Sweep


def sweep_costs(sweep: Sweep, shape: Shape, machine: MachineProfile | None = None) -> list[Cost]:
    """The cost model's FLOPs, bytes and floors for every point of a sweep."""
    per_job = {"prefill": lambda x: prefill_cost(shape, x, sweep.batch, machine),
               "TTFT": lambda x: prefill_cost(shape, x, sweep.batch, machine),
               "decode": lambda x: decode_cost(shape, x, sweep.batch, machine),
               "decode step": lambda x: decode_cost(shape, x - 1, sweep.batch, machine),  # x counts the new token
               "decode-batch": lambda x: decode_cost(shape, sweep.context, x, machine),
               "prefill-batch": lambda x: prefill_cost(shape, sweep.context, x, machine)}
    if sweep.job not in per_job:
        raise bad_value("sweep.job", sweep.job, f"one of {list(per_job)}", "pass a Sweep from inferlab.measure")
    return [per_job[sweep.job](x) for x in sweep.xs]


@dataclass(frozen=True)
class RooflinePoint:
    """One measured forward placed on the roofline: its counted work and its median time."""

    label: str
    job: str
    flops: float
    bytes: float
    seconds: float  # measured median
    floor_s: float  # the larger of the two floors on this machine
    model: str = ""  # the sweep's model (a roofline can carry two models' points)

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (x on the roofline)."""
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s (y on the roofline)."""
        return self.flops / self.seconds

    @property
    def times_floor(self) -> float:
        """Measured time / floor: 1 means on the roof; 10 means ten times slower than the roof allows."""
        return self.seconds / self.floor_s

    def __repr__(self) -> str:
        return tr("RooflinePoint({label}: {intensity:.2f} FLOP/B, {gflops:.2f} GFLOP/s, {ms:.3f} ms = {times:.1f} x "
                  "the floor)", label=self.label, intensity=self.intensity, gflops=self.flops_per_s / 1e9,
                  ms=self.seconds * 1e3, times=self.times_floor)


def roofline_points(sweep: Sweep, shape: Shape, machine: MachineProfile) -> list[RooflinePoint]:
    """Each sweep point as a ``RooflinePoint`` (work from the cost model, time from the sweep)."""
    labels = {"prefill": "prefill T={}", "TTFT": "prefill T={}", "decode": "decode ctx={}",
              "decode step": "decode ctx={}", "decode-batch": "decode batch={}", "prefill-batch": "prefill batch={}"}
    return [RooflinePoint(labels[sweep.job].format(x), sweep.job, cost.flops, cost.bytes, t, cost.floor_s, sweep.model)
            for x, cost, t in zip(sweep.xs, sweep_costs(sweep, shape, machine), sweep.medians)]


@dataclass(frozen=True)
class MythCheck:
    """TPOT predicted from compute alone, from bandwidth alone, and measured (seconds per decode step)."""

    from_compute_s: float
    from_bandwidth_s: float
    measured_s: float
    context: int

    @property
    def closer(self) -> str:
        """Which prediction is nearer the measurement (ratio-wise): "compute" or "bandwidth"."""
        def off(p: float) -> float:
            return max(p, self.measured_s) / min(p, self.measured_s)

        return "compute" if off(self.from_compute_s) < off(self.from_bandwidth_s) else "bandwidth"

    def __repr__(self) -> str:
        return tr("MythCheck(compute predicts {compute:.3f} ms, bandwidth predicts {bandwidth:.3f} ms, measured "
                  "{measured:.3f} ms)", compute=self.from_compute_s * 1e3, bandwidth=self.from_bandwidth_s * 1e3,
                  measured=self.measured_s * 1e3)


def myth_check(shape: Shape, machine: MachineProfile, measured_s: float, context: int) -> MythCheck:
    """Both predictions of one batch-1 decode step at ``context`` cached positions."""
    cost = decode_cost(shape, context, 1, machine)
    return MythCheck(cost.floor_compute_s, cost.floor_memory_s, measured_s, context)


def compute_bound_from(shape: Shape, machine: MachineProfile, batch: int = 1) -> int | None:
    """The shortest prompt whose prefill the cost model puts on the compute side of ``machine``'s roofline.

    Below it prefill is memory-bound on this machine (too few tokens reuse each weight read); None when
    no prompt up to the context window gets there. Hand-worked: on a machine with ridge 4 FLOP/B, GPT-2
    small in fp32 (about 495 MB read) turns at 12 tokens: each prompt token adds about 170 MFLOP (the LM
    head runs once per prompt), so 11 tokens do 1.95 GFLOP < 4 x 495 MB and 12 do 2.12 GFLOP > it.
    """
    for n in range(1, shape.n_ctx + 1):
        if prefill_cost(shape, n, batch, machine).bound == "compute":
            return n
    return None


@dataclass(frozen=True)
class TpotVerdict:
    """Three measurements that decide whether batch-1 TPOT is set by memory or by compute.

    ``batch_time_x``: step time at ``batch`` sequences / at one (x``batch`` the FLOPs, nearly the same
    bytes). ``bytes_time_x``: TPOT of a copy with fewer bytes per weight (``bytes_label``, reading
    ``bytes_x`` times the float32 bytes per step) / TPOT in float32.
    ``fast_s``: the fastest measured step (``fast_label``) against its two floors (seconds).
    ``compiled``: whether ``fast_s`` comes from the compiled step (else the eager fast path).
    """

    batch: int
    batch_time_x: float
    bytes_label: str
    bytes_x: float
    bytes_time_x: float
    fast_label: str
    fast_s: float
    bandwidth_floor_s: float
    compute_floor_s: float
    compiled: bool = False

    def __repr__(self) -> str:
        return tr("TpotVerdict(batch x{batch} -> step x{step:.2f}; {bytes_label} (bytes x{bytes:.2f}) -> TPOT "
                  "x{tpot:.2f}; {fast_label} at {bandwidth:.1f}x the bandwidth floor, {compute:.0f}x the compute "
                  "floor)", batch=self.batch, step=self.batch_time_x, bytes_label=self.bytes_label, bytes=self.bytes_x,
                  tpot=self.bytes_time_x, fast_label=self.fast_label, bandwidth=self.fast_s / self.bandwidth_floor_s,
                  compute=self.fast_s / self.compute_floor_s)


def count_ops(fn: Callable[[], object]) -> int:
    """How many tensor operations (ATen calls; on a GPU, roughly kernel launches) ``fn()`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Counter(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    with _Counter() as counter:
        fn()
    return counter.n


# ----------------------------------------------------------------------------- other model sizes
@dataclass(frozen=True)
class Prediction:
    """Roofline prediction for one model shape (not measured, except where ``measured`` says so)."""

    name: str
    params: int
    ttft_s: float  # predicted (or measured) TTFT
    tpot_s: float
    ttft_floor_s: float  # roofline lower bounds: max(FLOPs / peak compute, bytes / bandwidth)
    tpot_floor_s: float
    tpot_bound: str  # "memory" or "compute": which floor is higher for a decode step
    measured: bool = False

    def __repr__(self) -> str:
        facts = {"name": self.name, "params": self.params / 1e6, "ttft": ms_cell(self.ttft_s),
                 "tpot": ms_cell(self.tpot_s),
                 "ttft_floor": ms_cell(self.ttft_floor_s), "tpot_floor": ms_cell(self.tpot_floor_s),
                 "bound": bound_text(self.tpot_bound)}
        if self.measured:
            return tr("Prediction({name}, {params:.0f}M params, measured: TTFT {ttft} ms, TPOT {tpot} ms; floors "
                      "{ttft_floor} / {tpot_floor} ms, decode {bound})", **facts)
        return tr("Prediction({name}, {params:.0f}M params, PREDICTED: TTFT {ttft} ms, TPOT {tpot} ms; floors "
                  "{ttft_floor} / {tpot_floor} ms, decode {bound})", **facts)


def predict_sizes(measured: Measurement, model: Model, machine: MachineProfile, shapes: Mapping[str, Shape],
                  also_measured: Mapping[str, Measurement] | None = None) -> list[Prediction]:
    """The loaded model as measured, then other shapes predicted as roofline floor + overhead per layer.

    The overhead (measured median minus the floor, for the loaded model) is Python and framework time
    that the roofline ignores; it is scaled by the number of layers, a crude but stated assumption.
    Shapes named in ``also_measured`` (e.g. real GPT-2 found in the cache) are shown measured instead.
    """
    also_measured = also_measured or {}
    prompt_len, n_new = measured.prompt_tokens, measured.runs[0].n_tokens
    context = prompt_len + n_new // 2

    def floors(shape: Shape) -> tuple[float, float, str]:
        d = decode_cost(shape, context, machine=machine)
        return prefill_cost(shape, prompt_len, machine=machine).floor_s, d.floor_s, d.bound

    own = Shape.from_info(model.info)
    f_ttft, f_tpot, bound = floors(own)
    per_layer = (max(measured.ttft.median - f_ttft, 0.0) / own.n_layer,
                 max(measured.tpot.median - f_tpot, 0.0) / own.n_layer)
    out = [Prediction(own.name, model.info.n_params, measured.ttft.median, measured.tpot.median, f_ttft, f_tpot,
                      bound, measured=True)]
    for name, shape in shapes.items():
        if name == own.name:
            continue
        shape = Shape(**{**shape.__dict__, "bytes_per_element": own.bytes_per_element})
        f_ttft, f_tpot, bound = floors(shape)
        if name in also_measured:
            other = also_measured[name]
            out.append(Prediction(name, shape.weight_params, other.ttft.median, other.tpot.median, f_ttft, f_tpot,
                                  bound, measured=True))
            continue
        out.append(Prediction(name, shape.weight_params, f_ttft + per_layer[0] * shape.n_layer,
                              f_tpot + per_layer[1] * shape.n_layer, f_ttft, f_tpot, bound))
    return out
