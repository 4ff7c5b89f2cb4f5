"""Notebook 08's measurements: the profiler's groups, attention kernels, decode paths, the scoreboard, the bench.

These measure on the bundled model: they check that each result has the right structure and that the
paths agree on tokens, never how fast anything was.
"""

from __future__ import annotations

import pytest
import torch

from inferlab import fast
from inferlab.measure import profiling, speedups
from inferlab.measure.kernels import KernelComparison
from inferlab.measure.sweeps import Sweep
from inferlab.tools import bench
from inferlab.viz import speed

PROMPT = "To be, or not to be, that is the question"


def test_op_groups():
    assert profiling.op_group("aten::addmm") == "matmuls"
    assert profiling.op_group("quantized::linear_dynamic") == "matmuls"
    assert profiling.op_group("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention"
    assert profiling.op_group("aten::native_layer_norm") == "norms & activations"
    assert profiling.op_group("aten::tanh") == "norms & activations"
    assert profiling.op_group("aten::index_copy_") == "other ops"
    assert profiling.op_group("## Call CompiledFxGraph f7urk5hnxhfhzqjx ##") == "compiled graph (fused)"
    assert profiling.op_group("TorchDynamo Cache Lookup") == "Python & dispatch"


def test_profile_step_adds_up(model):
    decoder = fast.FastDecoder(model, 96, weights="tied")
    decoder.prefill([model.encode(PROMPT)])
    prof = profiling.profile_step(lambda: decoder.step(3), label="fast", repeats=3, warmup=1)
    assert set(prof.groups) == set(profiling.GROUPS)
    assert prof.groups["matmuls"] > 0 and prof.groups["attention"] > 0
    assert all(v >= 0 for v in prof.groups.values())
    assert any("addmm" in name for name, _, _ in prof.top_ops)
    fig = speed.profile_bars([prof], floor_s=1e-3)
    assert len(fig.data) == len(profiling.GROUPS)
    assert "ms" in fig.layout.xaxis.title.text


def test_peak_bytes_sees_an_allocation():
    assert profiling.peak_bytes(lambda: torch.empty(1_000_000).fill_(1.0)) >= 4_000_000


def test_a_compiler_failure_is_reported_not_fatal(model, monkeypatch):
    real = speedups.FastDecoder

    def no_compiler(*args, compile=False, **kwargs):
        if compile:
            raise RuntimeError("no C++ compiler found\n(details)")
        return real(*args, **kwargs)

    monkeypatch.setattr(speedups, "FastDecoder", no_compiler)
    dec, why = speedups.compiled_decoder(model, 32, PROMPT)
    assert dec is None and why == "torch.compile failed: RuntimeError: no C++ compiler found"
    with pytest.warns(UserWarning, match=r"left out fast \+ torch.compile .*no C\+\+ compiler"):
        rows = speedups.decode_paths(model, PROMPT, 3, repeats=1, compile=True)
    assert "fast + torch.compile" not in [r.label for r in rows]
    result = bench.bench_model(model, prompt_tokens=8, new_tokens=3, repeats=1, variants=("fast", "fast+compile"),
                               log=lambda *_: None)
    assert set(result["variants"]) == {"fast"} and "no C++ compiler" in result["skipped"]["fast+compile"]
    assert "fast+compile left out: torch.compile failed" in bench.table([result])


def test_decode_paths_agree_and_ladder_chart(model):
    rows = speedups.decode_paths(model, PROMPT, 4, repeats=1)
    labels = [r.label for r in rows]
    assert labels[:4] == ["engine (DynamicCache)", "engine + StaticCache", "fast (tied head)", "fast (transposed head)"]
    assert len({r.tokens for r in rows}) == 1 and len(rows[0].tokens) == 4
    assert rows[0].extra_bytes is None and rows[2].extra_bytes > 0
    fig = speed.ladder_chart(labels, [r.tpot_s for r in rows], floor_s=1e-3)
    assert list(fig.data[0].x) == labels and "x floor" in fig.data[0].text[0]


def _sweep(job: str, xs: tuple[int, ...], medians: tuple[float, ...]) -> Sweep:
    return Sweep(job, "x", xs, tuple((m,) for m in medians), xs)


def test_scoreboard_rows_compare_each_technique_with_its_baseline():
    kernels = KernelComparison({"eager": _sweep("prefill", (64,), (0.02,)), "sdpa": _sweep("prefill", (64,), (0.01,))},
                               {"eager": (4_000_000,), "sdpa": (1_000_000,)}, {"eager": (0.0,), "sdpa": (1e-6,)})
    qrows = [speedups.QuantRow("fp32", "", 4_000_000, 4_000_000, 0.1, 0.02, 10.0),
             speedups.QuantRow("int8", "", 1_000_000, 1_000_000, 0.1, 0.01, 10.1)]
    paths = [speedups.PathRow("engine", 0.1, 0.02, (1, 2)), speedups.PathRow("fast", 0.05, 0.01, (1, 2), 5_000_000)]
    batch = _sweep("decode-batch", (1, 8), (0.01, 0.02))  # 100 tokens/s at batch 1, 400 at batch 8
    board = speedups.scoreboard_rows(kernels, qrows, {"tiny": (paths, 0.005)}, batch)
    assert [r["technique"] for r in board] == ["SDPA vs eager attention (prefill)", "int8 weights", "fast (tiny)",
                                               "batch 8 vs 1"]
    assert board[0]["TTFT"] == "x0.50 at T=64" and board[0]["memory"] == "x0.25 peak"
    assert board[1]["TPOT"] == "x0.50" and "+1.00%" in board[1]["quality"]
    assert board[2]["TPOT"] == "x0.50 (2.00x floor)" and board[2]["quality"] == "same tokens"
    assert board[3]["TPOT"] == "x2.00 per user" and board[3]["quality"] == "x4.0 tokens/s"


def test_quant_chart_and_scoreboard():
    rows = [speedups.QuantRow("fp32", "", 4_000_000, 4_000_000, 0.1, 2e-3, 10.0),
            speedups.QuantRow("int8", "", 1_000_000, 1_000_000, 0.1, 1e-3, 10.5)]
    fig = speed.quant_chart(rows, bytes_per_s=2e9)
    assert list(fig.data[0].text) == ["fp32", "int8"]
    assert "perplexity 10.50" in fig.data[0].hovertext[1]
    assert fig.layout.xaxis.title.text.startswith("bytes read")
    with pytest.raises(ValueError, match="QuantRow"):
        speed.quant_chart([{"kind": "x"}])
    table = speed.scoreboard([{"technique": "int8", "TPOT": "x0.5"}])
    assert list(table.data[0].cells.values[0]) == ["int8"]
