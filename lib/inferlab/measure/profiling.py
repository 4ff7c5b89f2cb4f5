"""Measuring where time and memory go: ``torch.profiler`` grouped for teaching.

- ``profile_step(step)``: one decode step's time by group (matrix products, attention, norms and
  activations, other operators) plus the Python & dispatch time around them. A ``torch.compile``d
  step shows as one group, "compiled graph (fused)": its generated kernels do every operator at once.
- ``profile_paths(model, ids, decoders)``: ``profile_step`` of the engine's decode step and of each fast
  decoder's, after the same prompt (notebook 08 and ``python -m inferlab.tools.bench --profile``).
- ``product_rates(decoder)``: each matrix-vector product of a fast decode step, in the decoder's own
  layout, against a plain read (``W.sum()``) of the same weights: how near each kernel streams to
  what the memory can give, and how much of the step the products are.
- ``peak_bytes(fn)``: the most memory a call allocates while it runs (CPU or CUDA).

The profiler's C++ side prints start/stop lines on the process's stderr; ``quiet_stderr`` hides them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from .. import gate
from ..engine import decode_step, prefill
from ..fast import FastDecoder
from ..i18n import by_language, tr
from ..timing import clock, interleave, summarize, time_call

GROUPS = ("matmuls", "attention", "norms & activations", "other ops", "compiled graph (fused)", "Python & dispatch")
_GROUP_WORDS = (("compiled graph (fused)", ("CompiledFxGraph",)),
                ("Python & dispatch", ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "AOTDispatcher",
                                       "Pregraph bytecode")),
                ("matmuls", ("addmm", "aten::mm", "linear", "matmul", "bmm", "int4pack", "int8pack", "aten::mv")),
                ("attention", ("scaled_dot_product", "attention", "softmax")),
                ("norms & activations", ("layer_norm", "tanh", "pow", "gelu", "aten::mul", "aten::add", "aten::div")))


def group_label(group: str) -> str:
    """One of ``GROUPS`` in the reader's language (the groups themselves stay English keys)."""
    labels = {"matmuls": tr("matmuls"), "attention": tr("attention"), "norms & activations": tr("norms & activations"),
              "other ops": tr("other ops"), "compiled graph (fused)": tr("compiled graph (fused)"),
              "Python & dispatch": tr("Python & dispatch")}
    return labels.get(group, group)


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
        parts = by_language(en=", ", zh="，").join(f"{group_label(k)} {v * 1e3:.2f}" for k, v in self.groups.items())
        # a notebook's label is code ("gpt2 decode step"); the job in it is named as the Chinese edition names it
        label = by_language(en=self.label, zh=self.label.replace("decode step", "Decode 步"))
        return tr("StepProfile({label}: {step:.2f} ms/step = {parts} ms)", label=label, step=self.step_s * 1e3,
                  parts=parts)


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
    gate.profile(label, step_s, groups, rest="Python & dispatch")
    return StepProfile(label, step_s, groups, tuple(top))


def path_label(name: str, decoder: FastDecoder | None = None) -> str:
    """How a profile names a decode path's step: ``"engine"``, ``"fast"`` or ``"fast+compile"`` (a lost compile
    says which eager layout stepped faster), in the reader's language."""
    if name == "engine":
        return tr("engine step (HF forward)")
    if decoder is None:
        return {"fast": tr("fast step"), "fast+compile": tr("fast step, compiled")}.get(name, name)
    if name == "fast+compile" and not decoder.compiled:
        return tr("fast step (compile lost to {weights})", weights=decoder.weights)
    # name the layout the decoder runs: two fast bars must never look like one path, nor one path like two
    return {"fast": tr("fast step ({weights})", weights=decoder.weights),
            "fast+compile": tr("fast step, compiled ({weights})", weights=decoder.weights)}.get(name, name)


def profile_paths(model, ids: list[int], decoders: Mapping[str, FastDecoder], *, repeats: int = 10,
                  warmup: int = 3) -> dict[str, StepProfile]:
    """``profile_step`` of one decode step of each path after the prompt ``ids``: ``"engine"`` (Hugging Face's
    forward, ``inferlab.decode_step``) first, then each of ``decoders`` (name -> ``FastDecoder``, e.g. from
    ``measure.speedups.fast_decoders``), under the same names; each profile's label is ``path_label``'s.

    Every profiled call appends a token to its cache: a decoder needs ``len(ids) + warmup + 2 * repeats`` slots.

    >>> decoders, _ = speedups.fast_decoders(m, 128, prompt, compile=True)          # doctest: +SKIP
    >>> profile_paths(m, m.encode(prompt), decoders)["fast"].groups["matmuls"]       # doctest: +SKIP
    """
    device = model.device
    _, cache = prefill(model, [ids])
    out = {"engine": profile_step(lambda: decode_step(model, 0, cache), label=path_label("engine"), repeats=repeats,
                                  warmup=warmup, device=device)}
    for name, dec in decoders.items():
        dec.prefill([ids])
        out[name] = profile_step(lambda d=dec: d.step(0), label=path_label(name, dec), repeats=repeats, warmup=warmup,
                                 device=device)
    gate.step(model.info, out["engine"].step_s, via="profile_paths (engine)", context=len(ids))
    for name, dec in decoders.items():
        if dec.choice is not None:  # weights="auto": the layout this machine chose (the gate's "fast" rule)
            gate.step(model.info, out[name].step_s, via=f"profile_paths ({name})", path="fast", context=len(ids))
    return out


@dataclass(frozen=True)
class ProductRate:
    """One kind of matrix-vector product in a decode step (one input row), all layers', against a plain read."""

    name: str  # "qkv", "attn_out", "fc", "mlp_out" (every block's) or "head" (the LM head)
    shape: tuple[int, int]  # one weight matrix, [out, in]
    per_step: int  # matrices of this kind in one step (n_layer for a block's, 1 for the head)
    nbytes: int  # all of them: what these products stream per step
    product_s: float  # median seconds of all ``per_step`` products in the decoder's layout
    read_s: float  # median seconds of W.sum() over the same tensors

    @property
    def product_bytes_per_s(self) -> float:
        return self.nbytes / self.product_s

    @property
    def read_bytes_per_s(self) -> float:
        return self.nbytes / self.read_s

    @property
    def efficiency(self) -> float:
        """Read time / product time: 1.0 = the products stream their weights as fast as a plain read."""
        return self.read_s / self.product_s

    def __repr__(self) -> str:
        return tr("ProductRate({name} [{rows}, {cols}] x{per_step}: {rate:.1f} GB/s, a plain read {read:.1f} GB/s, "
                  "{efficiency:.0%})", name=self.name, rows=self.shape[0], cols=self.shape[1], per_step=self.per_step,
                  rate=self.product_bytes_per_s / 1e9, read=self.read_bytes_per_s / 1e9, efficiency=self.efficiency)


def product_rates(decoder: FastDecoder, *, repeats: int = 5) -> list[ProductRate]:
    """Time each kind of product of ``decoder``'s step (every block's four, the LM head) against ``W.sum()``.

    Each timed call runs the products of *every* layer, as a step does, so the weights stream from
    memory rather than from the CPU's caches. Products run as the decoder's step runs them: eager in
    its layout or, for a compiled ``"rows"`` decoder, as a compiled reduction ``(W * x).sum(-1)``.
    Products and reads take turns (``timing.interleave``), so a busy machine slows both alike.
    """
    gemv = decoder.compiled and decoder.weights == "rows" and decoder.batch == 1
    reduce = torch.compile(lambda w, x: (w * x).sum(-1), fullgraph=True, dynamic=False) if gemv else None
    projs = {"qkv": [b.qkv for b in decoder.blocks], "attn_out": [b.proj for b in decoder.blocks],
             "fc": [b.fc for b in decoder.blocks], "mlp_out": [b.out for b in decoder.blocks]}
    kinds = {k: ([p.rows if p.rows is not None else p.w for p in ps],
                 (lambda x, ps=ps: [reduce(p.rows, x) for p in ps]) if gemv else
                 (lambda x, ps=ps: [p(x) for p in ps])) for k, ps in projs.items()}
    head = decoder.head_t if decoder.head_t is not None else decoder.head
    kinds["head"] = ([head], (lambda x: reduce(head, x)) if gemv else (lambda x: decoder.logits_head(x)))
    device = decoder.wte.device
    out = []
    for name, (weights, fn) in kinds.items():
        n_in = decoder.d if name != "mlp_out" else 4 * decoder.d
        x = torch.randn(decoder.batch, n_in, dtype=weights[0].dtype, device=device)
        with torch.inference_mode():
            timed = interleave({"product": lambda f=fn, x=x: time_call(lambda: f(x), repeats=repeats, device=device),
                                "read": lambda ws=weights: time_call(lambda: [w.sum() for w in ws], repeats=repeats,
                                                                     device=device)}, 2)
        prod, read = (summarize([t for run in timed[k] for t in run]).median for k in ("product", "read"))
        w = weights[0]
        out.append(ProductRate(name, (w.numel() // n_in, n_in), len(weights),
                               sum(t.numel() * t.element_size() for t in weights), prod, read))
    return out


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
