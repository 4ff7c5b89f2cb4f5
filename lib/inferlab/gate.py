"""The gate on disturbed runs: the few numbers each timing measurement leaves in a notebook, and the rules a
quiet run meets.

A timing notebook's stored run is the lesson, so a run that another program disturbed (a test suite, a
training run) is re-executed, never explained away. The library's measurements (``machine_profile``,
``decode_sweep``, ``batch_sweep``, ``profile_step`` ... see ``EMITTERS``) each leave a *record*, a small
dict of plain numbers: in a Jupyter kernel it is displayed as an output whose metadata holds
``{"inferlab": {"evidence": record}}`` (its text is empty on a quiet run), so ``python -m
inferlab.tools.notebook_tools check`` reads the numbers back without parsing prose. It is one piece (over 300 lines)
on purpose: the records and the rules that read them are one contract, and a reader checks one against the other.
The rules (``judge``):

- ``spread``: the machine profile's slowest run is within 20% of its best (``SPREAD_MAX``).
- ``agree``: the batch-1 decode step of GPT-2 small's shape (float32), wherever it is timed, agrees within
  1.5x (``AGREE_X``); across the timing notebooks of one edition too (``judge_edition``).
- ``batch``: a batch sweep's median never drops by more than 25% from one batch size to the next
  (``BATCH_DROP``: two back-to-back sweeps of the same step on a 2-core VM differed by up to 21%) unless the
  repeats overlap (the bigger batch's slowest repeat at least the smaller one's fastest: within the sweep's own
  noise), or the smaller batch, timed once more after the sweep, was again that much slower (``again``: its
  kernels, not a passing disturbance; on the 2-core VM the fast path's step of GPT-2's shape took 29.5 ms at
  batch 1 and 20.9 ms at batch 4, run after run): a bigger batch does more work, so a drop beyond the noise is a
  disturbance. Judged on GPT-2 small's shape (the reference model, as ``agree``): a tiny model's step of a
  millisecond or two is mostly per-call overhead, where the layout the fast path picks for each batch size can
  make batch 2 faster than batch 1 with nothing disturbing the run.
- ``profile``: a profile's operator times add up to at most 1.1x the step's wall time (``PROFILE_X``), for
  steps of 10 ms or more (``PROFILE_MIN_S``): the profiler adds a few microseconds to each of a step's hundreds of
  operators, which is 10-20% of a 2 ms step (the bundled model's fast step read 1.13x in a quiet run).
- ``fast``: the fast path the machine chose (``weights="auto"``) is not slower than the engine's step
  (5% counts as a tie, ``FAST_SLACK``).
- ``stale``: the machine profile a run quotes agrees with the machine it ran on. A profile read back from disk
  (``measure.machine_profile``, measured hours or days before) is checked, where a process first gets it, against a
  spot check of the same two rates (a few runs of the profile's own copy and matmul, a fraction of a second); beyond
  15% either way (``STALE_MAX``) the profile is measured again and the run quotes the new one. The rule fails a
  spot check that disagreed with the stored profile when the run went on to quote that profile anyway (no refresh),
  and a saved profile quoted with no spot check before it (a run from before the check existed). A refreshed
  profile is this run's own measurement, judged by ``spread``: a second's check against a best-of-7 profile differs
  by its own noise (08's check read 169 GFLOP/s, and the profile measured right after it 199).
- ``spike``: no point of a sweep (a ``batch`` or ``sweep`` record: medians against a size) is more than 2x both
  neighbours (``SPIKE_X``), alone or in a run of up to ``SPIKE_WIDTH`` points above 2x the points either side.
  Whatever a curve does as its size grows, it does not jump for a point or two and come back: that is another
  program taking the machine (05's uncached steps at 292 and 293 tokens took 1,015 and 1,554 ms among 346-381
  ms). End points have one neighbour and are not judged (a curve may rise steeply at its end).
- ``noise``: at each batch size of a batch sweep the median is within 1.4x of its fastest repeat (``NOISE_X``).
  This is the rule for every model's sweep, the bundled model's included, where ``batch`` cannot judge (its
  medians may cross, see above): the check is on the repeats of one point, not on the curve's shape, so it
  needs no cost model of a small step. Its threshold is the small model's noise: across six stored quiet runs of
  the bundled model's batch sweep (36 points) the median was at most 1.27x the fastest repeat (GPT-2's shape:
  1.25x), while 08's disturbed run read 1.53x at batch 1 (repeats 3.77 to 9.93 ms), and its narration, which
  reads medians, called batch 1 slower than batch 2. Narration that branched on the spread instead would
  explain a disturbed run away rather than have it re-executed.

A live run that breaks a rule shows a banner in the cell ("this run was disturbed: re-run ... because ...").
Narration reads numbers no record carries (a load sweep's TTFT, a kernel's repeats), so it checks them itself with
the same thresholds (``noise``, ``falls``): where its numbers cannot come from a quiet run, it says so in one line
(``rerun_cell``) instead of telling the lesson from them. Those checks judge a live cell only, never a stored run.
Only full-scale runs are judged: the test scale (``inferlab.scale``) times one repeat on a test machine
running two notebooks at once, which is not a lesson and never stored; its records are still displayed
(empty), so the test suite runs this code.

Standard library only: ``notebook_tools check`` imports it without torch.

    >>> judge([{"kind": "machine", "what": "cpu float32", "spread": 0.58}])[0].rule
    'spread'
"""

from __future__ import annotations

import html
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from . import scale
from .i18n import tr

KEY = "inferlab"  # output metadata: {"inferlab": {"evidence": record}}
SPREAD_MAX = 0.20
AGREE_X = 1.5
BATCH_DROP = 0.25  # two back-to-back sweeps of the same step on a 2-core VM differed by up to 21%
PROFILE_X = 1.1
PROFILE_MIN_S = 0.010  # shorter steps: the profiler's own cost per operator is a share (see the module doc)
FAST_SLACK = 1.05
STALE_MAX = 0.15  # the VM's speed drifts by a third between quarter-hours; a spot check's own noise is ~5%
SPIKE_X = 2.0
SPIKE_WIDTH = 3  # points a passing disturbance covers (05: two consecutive uncached steps of ~0.4 s)
NOISE_X = 1.4  # median / fastest repeat; quiet runs: at most 1.27x (see the module doc)
REFERENCE_SHAPE = (12, 12, 768, 50257)  # GPT-2 small: layers, heads, width, vocabulary
# The library functions that leave records: a stored notebook that calls one must hold evidence.
EMITTERS = ("machine_profile", "decode_sweep", "batch_sweep", "profile_step", "profile_paths", "first_token_parts",
            "compare_cache", "decode_paths", "tpot_sweep", "serve_step_sweep", "decode_grid", "profile_sides")


# ----------------------------------------------------------------------------- records
def model_key(info) -> tuple[str, bool]:
    """A timed model as a record names it (shape, bytes, dtype, device), and whether it is the reference: GPT-2
    small's shape in float32, whose batch-1 decode step the ``agree`` rule compares wherever it is timed.

    ``info``: a ``ModelInfo`` (anything with its fields).
    """
    dtype = str(info.dtype).removeprefix("torch.")
    shape = (info.n_layer, info.n_head, info.d_model, info.vocab_size)
    key = (f"{info.n_layer} layers x {info.d_model} wide, {info.weight_bytes / 1e6:.0f} MB of {dtype}, "
           f"{info.device}")
    quantized = any(str(n).startswith("quantized") for n in getattr(info, "notes", ()))
    return key, shape == REFERENCE_SHAPE and dtype == "float32" and not quantized


def _what(profile) -> str:
    return f"{profile.device} {profile.dtype}"


def machine(profile) -> dict:
    """The record of a machine profile (``cost.MachineProfile``): its spread, largest of the two ceilings', and its
    ``source`` (``"measured"`` in this process, ``"saved"``: read back from disk, which ``stale`` wants checked)."""
    spread = profile.spread
    return leave({"kind": "machine", "what": _what(profile), "spread": max(spread.values()),
                  "bandwidth_spread": spread["bandwidth"], "matmul_spread": spread["matmul"],
                  "measured_at": getattr(profile, "measured_at", None),
                  "source": getattr(profile, "source", "measured")})


def spot(stored, checked, quoted) -> dict:
    """The record of a spot check (``measure.machine``): the two rates of the ``stored`` profile (read back from
    disk), what a short measurement ``checked`` read just now, the profile the run goes on to ``quoted`` (the stored
    one, or a new measurement where the check disagreed), and whether it was measured again (``refreshed``)."""
    return leave({"kind": "spot", "what": _what(stored), "measured_at": getattr(stored, "measured_at", None),
                  "stored_bytes_per_s": float(stored.bytes_per_s), "stored_flops_per_s": float(stored.flops_per_s),
                  "bytes_per_s": float(checked.bytes_per_s), "flops_per_s": float(checked.flops_per_s),
                  "quoted_bytes_per_s": float(quoted.bytes_per_s), "quoted_flops_per_s": float(quoted.flops_per_s),
                  "refreshed": quoted is not stored})


def sweep(info, xs: Sequence[int], medians: Sequence[float], *, via: str, job: str) -> dict:
    """The record of a sweep against a size other than the batch (context, prompt length, generated token): its
    sizes and median seconds, which the ``spike`` rule reads."""
    key, reference = model_key(info)
    return leave({"kind": "sweep", "via": via, "model": key, "reference": reference, "job": job,
                  "xs": [int(x) for x in xs], "medians": [float(s) for s in medians]})


def step(info, seconds: float, *, via: str, path: str = "engine", context: int = 0) -> dict:
    """The record of one batch-1 decode step's time (median seconds) of the model ``info`` describes.

    ``via``: the function that timed it (named in messages). ``path``: ``"engine"`` or ``"fast"`` (a fast
    path the machine chose, ``weights="auto"``: the ``fast`` rule compares it with the engine).
    """
    key, reference = model_key(info)
    return leave({"kind": "step", "via": via, "model": key, "reference": reference, "path": path,
                  "seconds": float(seconds), "context": int(context)})


def batch(info, xs: Sequence[int], medians: Sequence[float], *, via: str, job: str, path: str,
          fastest: Sequence[float] | None = None, slowest: Sequence[float] | None = None,
          again: Sequence[float | None] | None = None) -> dict:
    """The record of a batch sweep: its batch sizes and median seconds per forward, and (when given) each point's
    fastest and slowest repeat, the noise the ``batch`` rule allows for, and ``again``: the median of a point timed
    once more after the sweep (``None`` where it was not), for a point the next batch size beat by a wide margin."""
    key, reference = model_key(info)
    record = {"kind": "batch", "via": via, "model": key, "reference": reference, "job": job, "path": path,
              "xs": [int(x) for x in xs], "medians": [float(s) for s in medians]}
    if fastest is not None and slowest is not None:
        record |= {"fastest": [float(s) for s in fastest], "slowest": [float(s) for s in slowest]}
    if again is not None and any(a is not None for a in again):
        record["again"] = [None if a is None else float(a) for a in again]
    return leave(record)


def profile(label: str, step_s: float, groups: Mapping[str, float], *, rest: str) -> dict:
    """The record of a step profile: its wall time and what its operators add up to (every group but ``rest``,
    the wall time left over)."""
    ops = sum(v for k, v in groups.items() if k != rest)
    return leave({"kind": "profile", "via": "profile_step", "label": str(label), "step_s": float(step_s),
                  "ops_s": float(ops)})


def records_in(nb) -> list[dict]:
    """Every record a stored notebook (nbformat or plain JSON) holds, in cell order."""
    out = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            found = (o.get("metadata") or {}).get(KEY, {})
            if isinstance(found, Mapping) and isinstance(found.get("evidence"), Mapping):
                out.append(dict(found["evidence"]))
    return out


# ----------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Breach:
    """One rule a run broke: ``rule`` (a key of the module docstring's list), ``reason`` (a sentence with the
    numbers, in the reader's language) and ``records`` (indices of the records it compares)."""

    rule: str
    reason: str
    records: tuple[int, ...]

    def __repr__(self) -> str:
        return f"Breach({self.rule}: {self.reason})"


def _steps(records: Sequence[dict], path: str) -> dict[str, list[int]]:
    """Indices of the batch-1 step records on ``path``, by model."""
    out: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if r.get("kind") == "step" and r.get("path") == path and r.get("seconds", 0) > 0:
            out.setdefault(r["model"], []).append(i)
    return out


def _ms(s: float) -> float:
    return s * 1e3


def off(rate: float, quoted: float) -> float:
    """How far a spot check's ``rate`` is from the ``quoted`` one, as a signed fraction (-0.22: 22% slower)."""
    return rate / quoted - 1


def spot_agrees(record: Mapping) -> bool:
    """A spot record's check agrees with the profile the run quotes within ``STALE_MAX`` (both rates)."""
    return all(abs(off(record[k], record[f"quoted_{k}"])) <= STALE_MAX for k in ("bytes_per_s", "flops_per_s"))


def _spike(med: Sequence[float]) -> tuple[int, int] | None:
    """The first run ``(i, j)`` of 1 to ``SPIKE_WIDTH`` interior points all more than ``SPIKE_X`` times both the
    point before it and the point after it, or None."""
    for i in range(1, len(med) - 1):
        for j in range(i, min(i + SPIKE_WIDTH, len(med) - 1)):
            if min(med[i:j + 1]) > SPIKE_X * max(med[i - 1], med[j + 1]):
                return i, j
    return None


def _when(seconds) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds)) if seconds else "?"


def _stale(i: int, r: Mapping, records: Sequence[dict]) -> Breach | None:
    """The ``stale`` rule on record ``i`` (a spot check, or a machine profile read back from disk)."""
    if r["kind"] == "spot":
        # refreshed: the run quotes a profile measured just now, which ``spread`` judges; a one-second check a few
        # percent under a best-of-7 profile is that check's own noise (this VM's matmul rate moves 15% in seconds)
        if r.get("refreshed") or spot_agrees(r):
            return None
        k = max(("bytes_per_s", "flops_per_s"), key=lambda k: abs(off(r[k], r[f"quoted_{k}"])))
        unit = "GB/s" if k == "bytes_per_s" else "GFLOP/s"
        return Breach("stale", tr(
            "a spot check of the machine ({what}) read {now:.1f} {unit} against the {quoted:.1f} {unit} of the "
            "profile this run quotes ({off:+.0%}; allowed: ±{limit:.0%})", what=r["what"], now=r[k] / 1e9,
            unit=unit, quoted=r[f"quoted_{k}"] / 1e9, off=off(r[k], r[f"quoted_{k}"]), limit=STALE_MAX), (i,))
    # a spot check of this device before it, or an earlier record of the same profile (judged there, once)
    seen = any(q.get("kind") in ("spot", "machine") and q.get("what") == r["what"] for q in records[:i])
    if r.get("source", "saved") == "measured" or seen:
        return None
    return Breach("stale", tr(
        "the machine profile ({what}) measured at {when} was quoted with no spot check against the machine this "
        "run used", what=r["what"], when=_when(r.get("measured_at"))), (i,))


def judge(records: Sequence[dict]) -> list[Breach]:
    """The rules one run (a notebook, a live kernel) broke, judged on its ``records`` in the order they were left."""
    out = []
    for i, r in enumerate(records):
        kind = r.get("kind")
        if kind in ("machine", "spot") and (stale := _stale(i, r, records)):
            out.append(stale)
        if kind == "machine" and r["spread"] > SPREAD_MAX:
            out.append(Breach("spread", tr(
                "the machine's ceilings ({what}) varied by {spread:.0%} between the runs of one measurement "
                "(allowed: {limit:.0%})", what=r["what"], spread=r["spread"], limit=SPREAD_MAX), (i,)))
        if kind in ("batch", "sweep") and (run := _spike(r["medians"])):
            a, b = run
            out.append(Breach("spike", tr(
                "{via}'s median jumped to {peak:.1f} ms at {x} (the point before: {before:.1f} ms, the point after: "
                "{after:.1f} ms; allowed: {limit}x both)", via=r["via"], peak=_ms(max(r["medians"][a:b + 1])),
                x=", ".join(str(x) for x in r["xs"][a:b + 1]), before=_ms(r["medians"][a - 1]),
                after=_ms(r["medians"][b + 1]), limit=SPIKE_X), (i,)))
        if kind == "batch" and r.get("fastest") is not None:
            worst = max(range(len(r["medians"])), key=lambda k: r["medians"][k] / r["fastest"][k])
            if r["medians"][worst] > NOISE_X * r["fastest"][worst]:
                out.append(Breach("noise", tr(
                    "{via}'s repeats at batch {b} ranged from {fast:.2f} to {slow:.2f} ms: their median, {med:.2f} "
                    "ms, is {x:.2f}x the fastest (allowed: {limit}x)", via=r["via"], b=r["xs"][worst],
                    fast=_ms(r["fastest"][worst]), slow=_ms(r["slowest"][worst]), med=_ms(r["medians"][worst]),
                    x=r["medians"][worst] / r["fastest"][worst], limit=NOISE_X), (i,)))
        if kind == "batch" and r.get("reference", True):  # GPT-2's shape (see the module doc)
            xs, med = r["xs"], r["medians"]
            lo, hi = r.get("fastest"), r.get("slowest")
            for k in range(1, len(med)):
                # within noise: some repeat of the bigger batch was as slow as a repeat of the smaller one (a step
                # that reads its weights once costs about the same at batch 1 and 4, so medians can cross)
                overlap = lo is not None and hi is not None and hi[k] >= lo[k - 1]
                # timed again after the sweep and still as slow: that batch size is slower here (its kernels), not
                # a step slowed by a disturbance, which passes
                again = (r.get("again") or [None] * len(med))[k - 1]
                kept = again is not None and med[k] < (1 - BATCH_DROP) * again
                if med[k] < (1 - BATCH_DROP) * med[k - 1] and not overlap and not kept:
                    out.append(Breach("batch", tr(
                        "{via}'s median fell from {before:.1f} ms at batch {b0} to {after:.1f} ms at batch {b1} "
                        "({drop:.0%} less, though a bigger batch does more work; allowed: {limit:.0%})",
                        via=r["via"], before=_ms(med[k - 1]), b0=xs[k - 1], after=_ms(med[k]), b1=xs[k],
                        drop=1 - med[k] / med[k - 1], limit=BATCH_DROP), (i,)))
                    break
        elif kind == "profile" and r["step_s"] >= PROFILE_MIN_S and r["ops_s"] > PROFILE_X * r["step_s"]:
            out.append(Breach("profile", tr(
                "the profile of '{label}' adds its operators up to {ops:.1f} ms, {x:.2f}x the step's wall time "
                "of {step:.1f} ms (allowed: {limit}x)", label=r["label"], ops=_ms(r["ops_s"]),
                x=r["ops_s"] / r["step_s"], step=_ms(r["step_s"]), limit=PROFILE_X), (i,)))
    engine = _steps(records, "engine")
    for model, idx in engine.items():
        if not records[idx[0]].get("reference"):
            continue
        lo = min(idx, key=lambda j: records[j]["seconds"])
        hi = max(idx, key=lambda j: records[j]["seconds"])
        x = records[hi]["seconds"] / records[lo]["seconds"]
        if x > AGREE_X:
            out.append(Breach("agree", tr(
                "the same decode step ({model}, batch 1) took {low:.1f} ms in {low_via} but {high:.1f} ms in "
                "{high_via}: {x:.1f}x apart (allowed: {limit}x)", model=model, low=_ms(records[lo]["seconds"]),
                low_via=records[lo]["via"], high=_ms(records[hi]["seconds"]), high_via=records[hi]["via"], x=x,
                limit=AGREE_X), tuple(sorted({lo, hi}))))
    for model, idx in _steps(records, "fast").items():
        if model not in engine:
            continue
        base = statistics.median(records[j]["seconds"] for j in engine[model])
        for j in idx:
            x = records[j]["seconds"] / base
            if x > FAST_SLACK:
                out.append(Breach("fast", tr(
                    "the fast path this machine chose ({via}) took {fast:.1f} ms per step, {x:.2f}x the engine's "
                    "{engine:.1f} ms (allowed: {limit}x)", via=records[j]["via"], fast=_ms(records[j]["seconds"]),
                    x=x, engine=_ms(base), limit=FAST_SLACK), (j, *engine[model])))
    return out


def reference_step(records: Sequence[dict]) -> float | None:
    """The median of a run's reference decode-step records (seconds), or None when it timed none."""
    times = [r["seconds"] for r in records if r.get("kind") == "step" and r.get("path") == "engine"
             and r.get("reference") and r.get("seconds", 0) > 0]
    return statistics.median(times) if times else None


def judge_edition(runs: Mapping[str, Sequence[dict]]) -> dict[str, Breach]:
    """Across the notebooks of one edition (name -> records): the reference step agrees within ``AGREE_X``.

    While the notebooks' medians are further apart than that, the one furthest from the median of the rest
    is blamed and set aside, so one disturbed notebook is named, not every other one.
    """
    steps = {name: s for name, rec in runs.items() if (s := reference_step(rec)) is not None}
    out: dict[str, Breach] = {}
    while len(steps) >= 2 and max(steps.values()) / min(steps.values()) > AGREE_X:
        middle = statistics.median(steps.values())
        name = max(steps, key=lambda k: abs(math.log(steps[k] / middle)))
        others = statistics.median(v for k, v in steps.items() if k != name)
        far = max((k for k in steps if k != name), key=lambda k: abs(math.log(steps[name] / steps[k])))
        out[name] = Breach("agree", tr(
            "the same decode step (GPT-2's shape, batch 1) took {mine:.1f} ms here but {typical:.1f} ms in the "
            "edition's other timing notebooks (median; {far_ms:.1f} ms in {far}): {x:.1f}x apart (allowed: "
            "{limit}x)", mine=_ms(steps[name]), typical=_ms(others), far_ms=_ms(steps[far]), far=far,
            x=max(steps[name], steps[far]) / min(steps[name], steps[far]), limit=AGREE_X), ())
        del steps[name]
    return out


# ----------------------------------------------------------------------------- checks narration runs itself
def noise(repeats: Sequence[float]) -> float:
    """The ``noise`` rule's measure of one point's repeats (seconds): their median over the fastest (1.0: all equal;
    beyond ``NOISE_X``: disturbed)."""
    return statistics.median(repeats) / min(repeats)


def falls(values: Sequence[float]) -> tuple[int, int] | None:
    """The first ``(i, j)``, ``i < j``, where a curve that cannot fall as its size grows (TTFT against the arrival
    rate: more requests never get answered sooner) was more than ``SPIKE_X`` times higher at ``i`` than at ``j``, or
    None. The ``spike`` rule for a curve's start, which ``spike`` leaves unjudged: the point at ``i`` was disturbed
    (09's first rate once read 6.0 s where the quiet re-run read 124 ms)."""
    for j in range(1, len(values)):
        i = max(range(j), key=lambda k: values[k])
        if values[i] > SPIKE_X * values[j]:
            return i, j
    return None


def rerun_cell() -> str:
    """The one line a narration adds where its numbers cannot come from a quiet run (Markdown)."""
    return tr("**Other programs were using the CPU during this run**: re-run this cell, with nothing heavy running "
              "beside it. These numbers are not the lesson.")


# ----------------------------------------------------------------------------- the live side
_RUN: list[dict] = []  # the records this process left, in order (a kernel: this notebook's run)


def banner(breaches: Sequence[Breach]) -> dict[str, str]:
    """The output a disturbed run shows (``text/plain`` and ``text/html``); empty text when nothing broke."""
    if not breaches:
        return {"text/plain": ""}
    text = tr("⚠ This run was disturbed: re-run this notebook alone on a quiet machine (Kernel > Restart Kernel "
              "and Run All Cells, with nothing heavy running beside it) because {reasons}. Its timings are not "
              "the lesson.", reasons="; ".join(b.reason for b in breaches))
    style = "border-left:4px solid #c0392b;background:#fdecea;padding:6px 10px;font-family:sans-serif"
    return {"text/plain": text, "text/html": f'<div style="{style}">{html.escape(text)}</div>'}


def _kernel_display() -> Callable[..., object] | None:
    from .progress import _in_kernel

    if not _in_kernel():
        return None
    from IPython.display import display

    return display


def leave(record: dict, *, show: Callable[..., object] | None = None) -> dict:
    """Keep ``record`` in this run and, in a Jupyter kernel (or through ``show``, as IPython's ``display``), show
    it: an empty output carrying it in its metadata, or the banner when it makes this run break a rule.

    Outside a kernel nothing is kept or shown (scripts and tests time freely). Returns ``record``.
    """
    show = show or _kernel_display()
    if show is None:
        return record
    _RUN.append(record)
    judged = not scale.is_test()
    new = [b for b in judge(_RUN) if len(_RUN) - 1 in b.records] if judged else []
    show(banner(new), raw=True, metadata={KEY: {"evidence": record}})
    return record


def forget() -> None:
    """Drop this process's records (a fresh run; tests)."""
    _RUN.clear()
