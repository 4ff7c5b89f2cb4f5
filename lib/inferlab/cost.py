"""What a forward pass costs: FLOPs, bytes moved, arithmetic intensity, and the roofline floors.

Counting (REFERENCE.md; GPT-2, one sequence):
    FLOPs per token  ~ 2 x (non-embedding params + LM head params) + 4 x n_layer x d_model x context
    (prefill runs the LM head for the last prompt position only: that is the one next token it needs)
    KV bytes / token = 2 (K and V) x n_layer x n_head x head_dim x bytes_per_element
    decode step bytes ~ all weights + the KV cache read      (weights are read once per step)
    prefill bytes     ~ all weights + the KV cache written    (each weight is reused S times)
Floors: time >= bytes / memory bandwidth, and time >= FLOPs / peak compute. Both ceilings are
measured on the device in use by ``inferlab.measure.measure_machine``; this module only counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import bad_value, check_number
from .i18n import tr
from .plain import plain
from .units import bound_text, ms_cell


@dataclass(frozen=True)
class Shape:
    """The sizes the cost model needs (from a loaded model's ``info`` or a published config)."""

    name: str
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    n_ctx: int
    bytes_per_element: int = 4
    n_kv_head: int | None = None  # grouped-query attention: fewer K/V heads than query heads
    d_ff: int | None = None  # MLP width (GPT-2: 4 x d_model)
    tied_head: bool = True

    @property
    def head_dim(self) -> int:
        """d_model / n_head."""
        return self.d_model // self.n_head

    @property
    def kv_heads(self) -> int:
        """Heads that store keys and values (== n_head without grouped-query attention)."""
        return self.n_kv_head or self.n_head

    @property
    def layer_params(self) -> int:
        """Weights of one block: attention (Q, K, V, out) + MLP (biases ignored)."""
        d, ff = self.d_model, self.d_ff or 4 * self.d_model
        kv = self.kv_heads * self.head_dim
        mlp = (3 if self.d_ff else 2) * d * ff  # gated MLPs (LLaMA-style) have three matrices
        return d * d * 2 + 2 * d * kv + mlp

    @property
    def weight_params(self) -> int:
        """All weights read per forward: blocks + embedding table (+ an untied LM head)."""
        emb = self.vocab_size * self.d_model
        return self.n_layer * self.layer_params + emb * (1 if self.tied_head else 2)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all weights in this dtype."""
        return self.weight_params * self.bytes_per_element

    @classmethod
    def from_info(cls, info) -> Shape:
        """From a loaded model's ``ModelInfo``."""
        return cls(name=info.name, n_layer=info.n_layer, n_head=info.n_head, d_model=info.d_model,
                   vocab_size=info.vocab_size, n_ctx=info.n_ctx, bytes_per_element=info.bytes_per_element)


def kv_bytes_per_token(shape: Shape) -> int:
    """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
    return 2 * shape.n_layer * shape.kv_heads * shape.head_dim * shape.bytes_per_element


def flops_per_token(shape: Shape, context: int) -> int:
    """Forward FLOPs for one token attending over ``context`` positions (matmuls only)."""
    dense = 2 * (shape.n_layer * shape.layer_params + shape.vocab_size * shape.d_model)
    attention = 4 * shape.n_layer * shape.d_model * context
    return dense + attention


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one forward, and the floors they imply on a given machine."""

    job: str
    tokens: int  # tokens processed in this forward (all sequences)
    flops: float
    bytes: float
    floor_compute_s: float | None = None
    floor_memory_s: float | None = None

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved."""
        return self.flops / self.bytes

    @property
    def floor_s(self) -> float | None:
        """The roofline floor: the larger of the two lower bounds."""
        if self.floor_compute_s is None or self.floor_memory_s is None:
            return None
        return max(self.floor_compute_s, self.floor_memory_s)

    @property
    def bound(self) -> str | None:
        """"compute" or "memory": which floor is higher on this machine."""
        if self.floor_s is None:
            return None
        return "compute" if self.floor_compute_s >= self.floor_memory_s else "memory"

    @property
    def job_text(self) -> str:
        """``job`` ("prefill" or "decode", the identifier) in the reader's language."""
        return {"prefill": tr("prefill"), "decode": tr("decode")}.get(self.job, self.job)

    def __repr__(self) -> str:
        work = {"job": self.job_text, "gflop": self.flops / 1e9, "mb": self.bytes / 1e6, "intensity": self.intensity}
        if self.floor_s is None:
            return tr("Cost({job}: {gflop:.3f} GFLOP, {mb:.1f} MB, {intensity:.2f} FLOP/B)", **work)
        return tr("Cost({job}: {gflop:.3f} GFLOP, {mb:.1f} MB, {intensity:.2f} FLOP/B, floors: compute {compute:.3f} "
                  "ms, memory {memory:.3f} ms ({bound}))", compute=self.floor_compute_s * 1e3,
                  memory=self.floor_memory_s * 1e3, bound=bound_text(self.bound), **work)


def _floors(job, tokens, flops, nbytes, machine) -> Cost:
    if machine is None:
        return Cost(job, tokens, flops, nbytes)
    return Cost(job, tokens, flops, nbytes, flops / machine.flops_per_s, nbytes / machine.bytes_per_s)


def prefill_floor_at(shape: Shape, prompt_len: int, machine: MachineProfile, flops_per_s: float) -> float:
    """The prefill floor (seconds) had the machine's matrix rate been ``flops_per_s``: a run is judged against the
    floor at the rate measured just before it (``measure.machine.x_floor_paired``), not at a rate from earlier."""
    return prefill_cost(shape, prompt_len, machine=dataclasses.replace(machine, flops_per_s=flops_per_s)).floor_s


def prefill_cost(shape: Shape, prompt_len: int, batch: int = 1, machine: MachineProfile | None = None) -> Cost:
    """Prefill of ``prompt_len`` tokens (per sequence, ``batch`` sequences): weights read once, KV written.

    The LM head runs for the last position only (the engine asks for the next token's logits alone).
    """
    check_number("prompt_len", prompt_len, low=1, integer=True)
    blocks = 2 * shape.n_layer * shape.layer_params
    head = 2 * shape.vocab_size * shape.d_model
    # token i attends over i+1 positions: sum = S(S+1)/2 -> average context (S+1)/2
    attn = 4 * shape.n_layer * shape.d_model * prompt_len * (prompt_len + 1) / 2
    flops = batch * (prompt_len * blocks + head + attn)
    nbytes = shape.weight_bytes + batch * prompt_len * kv_bytes_per_token(shape)
    return _floors("prefill", batch * prompt_len, flops, nbytes, machine)


def decode_cost(shape: Shape, context: int, batch: int = 1, machine: MachineProfile | None = None) -> Cost:
    """One decode step with ``context`` positions in the cache, for ``batch`` sequences."""
    check_number("context", context, low=0, integer=True)
    flops = batch * flops_per_token(shape, context + 1)
    nbytes = shape.weight_bytes + batch * (context + 1) * kv_bytes_per_token(shape)
    return _floors("decode", batch, flops, nbytes, machine)


@dataclass(frozen=True)
class MachineProfile:
    """Ceilings of one device: memory bandwidth (a large copy) and matmul throughput.

    Measured by ``inferlab.measure.measure_machine``; built by hand in tests and what-if examples.
    """

    device: str
    dtype: str
    bytes_per_s: float
    flops_per_s: float
    copy_mb: int
    matmul_n: int
    bytes_per_s_range: tuple[float, float] | None = None   # (slowest, fastest) run; None when built by hand
    flops_per_s_range: tuple[float, float] | None = None
    runs: int = 1                                          # timed runs behind each ceiling

    @property
    def ridge(self) -> float:
        """FLOP/byte where the two roofs meet: below it a kernel is memory-bound."""
        return self.flops_per_s / self.bytes_per_s

    @property
    def spread(self) -> dict[str, float]:
        """How much the runs disagreed: fastest / slowest - 1 for each ceiling (0.0 when there was one run)."""
        def rel(rng):
            return rng[1] / rng[0] - 1 if rng and rng[0] > 0 else 0.0
        return {"bandwidth": rel(self.bytes_per_s_range), "matmul": rel(self.flops_per_s_range)}

    def __repr__(self) -> str:
        s = self.spread
        facts = {"device": self.device, "dtype": self.dtype, "bandwidth": self.bytes_per_s / 1e9,
                 "matmul": self.flops_per_s / 1e9, "ridge": self.ridge}
        if self.runs > 1:
            return tr("MachineProfile({device} {dtype}: {bandwidth:.1f} GB/s copy bandwidth, {matmul:.1f} GFLOP/s "
                      "matmul, ridge {ridge:.1f} FLOP/B, best of {runs} runs (spread {bandwidth_spread:.0%} / "
                      "{matmul_spread:.0%}))", runs=self.runs, bandwidth_spread=s["bandwidth"],
                      matmul_spread=s["matmul"], **facts)
        return tr("MachineProfile({device} {dtype}: {bandwidth:.1f} GB/s copy bandwidth, {matmul:.1f} GFLOP/s matmul, "
                  "ridge {ridge:.1f} FLOP/B)", **facts)

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-ready), field by field (``inferlab.plain``)."""
        return plain(self)


# Published configurations (not measured). GPT-2 (Radford et al. 2019; distilgpt2: Sanh et al. 2019):
# vocabulary 50257, context 1024, d_ff = 4 x d_model. The one table of these sizes: models.py builds
# its random-weight GPT-2 from ``published_shape``.
GPT2_SHAPES: dict[str, Shape] = {
    name: Shape(name, n_layer, n_head, d_model, 50257, 1024)
    for name, n_layer, n_head, d_model in (("distilgpt2", 6, 12, 768), ("gpt2", 12, 12, 768),
                                           ("gpt2-medium", 24, 16, 1024), ("gpt2-large", 36, 20, 1280),
                                           ("gpt2-xl", 48, 25, 1600))}

# The sizes the course compares (notebooks 05 and 07): GPT-2's four sizes and a modern 7B model with
# grouped-query attention (Mistral-7B: 32 layers, 32 query heads, 8 key/value heads, head_dim 128).
PUBLISHED_SHAPES: dict[str, Shape] = {
    **{k: GPT2_SHAPES[k] for k in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")},
    "mistral-7b (GQA)": Shape("mistral-7b (GQA)", 32, 32, 4096, 32000, 32768, bytes_per_element=2,
                              n_kv_head=8, d_ff=14336, tied_head=False),
}


def published_shape(name: str) -> Shape:
    """The published sizes of ``name`` (a GPT-2 family name or a ``PUBLISHED_SHAPES`` key).

    >>> s = published_shape("gpt2")
    >>> s.n_layer, s.n_head, s.d_model, s.vocab_size, s.n_ctx
    (12, 12, 768, 50257, 1024)
    """
    shape = GPT2_SHAPES.get(name) or PUBLISHED_SHAPES.get(name)
    if shape is None:
        names = sorted({*GPT2_SHAPES, *PUBLISHED_SHAPES})
        raise bad_value("name", name, f"one of {names}", "use a published model name, e.g. 'gpt2'")
    return shape


# ----------------------------------------------------------------------------- published hardware (vendors' numbers)
@dataclass(frozen=True)
class MemorySpec:
    """One device's published memory bandwidth (a vendor's specification, not measured here)."""

    name: str
    bytes_per_s: float
    source: str  # the document the number comes from
    match: tuple[str, ...] = ()  # substrings of ``torch.cuda.get_device_name()`` that identify this GPU


PUBLISHED_MEMORY: dict[str, MemorySpec] = {s.name: s for s in (
    MemorySpec("laptop, DDR5-5600 (2 channels)", 89.6e9,
               "JEDEC DDR5 (JESD79-5): 5600 MT/s x 8 bytes x 2 channels"),
    MemorySpec("Apple M2", 100e9, "Apple M2 press release and MacBook Air (M2) technical specifications"),
    MemorySpec("Apple M3 Max", 400e9, "Apple MacBook Pro (M3 Max) technical specifications"),
    MemorySpec("NVIDIA V100 (SXM2)", 900e9, "NVIDIA Tesla V100 GPU datasheet", ("V100",)),
    MemorySpec("NVIDIA A100 40GB", 1555e9, "NVIDIA A100 Tensor Core GPU datasheet", ("A100", "40GB")),
    MemorySpec("NVIDIA A100 80GB (SXM)", 2039e9, "NVIDIA A100 Tensor Core GPU datasheet", ("A100", "80GB")),
    MemorySpec("NVIDIA H100 SXM", 3350e9, "NVIDIA H100 Tensor Core GPU datasheet", ("H100", "HBM3")),
    MemorySpec("NVIDIA H200", 4800e9, "NVIDIA H200 Tensor Core GPU datasheet", ("H200",)),
)}


@dataclass(frozen=True)
class HardwareFloor:
    """The decode floors a published bandwidth predicts: seconds per token, by model name (not measured)."""

    spec: MemorySpec
    floors: dict[str, float]  # model name -> (weights + KV cache bytes of one step) / published bandwidth
    step_bytes: dict[str, float]

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {ms_cell(v)} ms" for k, v in self.floors.items())
        return tr("HardwareFloor({name}, {bandwidth:.0f} GB/s: {parts})", name=self.spec.name,
                  bandwidth=self.spec.bytes_per_s / 1e9, parts=parts)


def hardware_floors(shapes: Mapping[str, Shape], context: int = 256,
                    specs: Sequence[MemorySpec] | None = None) -> list[HardwareFloor]:
    """Decode-step floors (batch 1, ``context`` tokens cached) on each published device: bytes / bandwidth.

    Computed from published specifications, not measured: a real step is slower (the floor is the
    time to read the bytes once at full speed, with nothing else going on).

    >>> gpt2 = Shape("gpt2", 12, 12, 768, 50257, 1024, bytes_per_element=2)
    >>> round(hardware_floors({"gpt2": gpt2}, context=0)[-1].floors["gpt2"] * 1e6)   # H200, microseconds
    51
    """
    check_number("context", context, low=0, integer=True)
    step = {name: decode_cost(shape, context).bytes for name, shape in shapes.items()}
    return [HardwareFloor(s, {k: b / s.bytes_per_s for k, b in step.items()}, step)
            for s in (specs or PUBLISHED_MEMORY.values())]
