"""The fast path gives the engine's tokens, its profile adds up, and the speed helpers measure."""

from __future__ import annotations

import pytest
import torch

import inferlab as il
from inferlab import bench, fast, profiling, speedups, timing
from inferlab.viz import speed

PROMPT = "To be, or not to be, that is the question"


@pytest.fixture(scope="module")
def decoder(model) -> fast.FastDecoder:
    return fast.FastDecoder(model, 96, weights="tied")


def test_tied_head_logits_are_bitwise_the_engines(model, decoder):
    ids = model.encode(PROMPT)
    ref, cache = il.prefill(model, [ids])
    got = decoder.prefill([ids])
    assert torch.equal(ref, got)
    token = int(ref.argmax())
    for _ in range(4):
        ref, cache = il.decode_step(model, token, cache)
        got = decoder.step(token)
        assert torch.equal(ref, got)
        token = int(ref.argmax())
    assert decoder.tokens == cache.tokens


@pytest.mark.parametrize("weights", fast.WEIGHTS)
def test_greedy_tokens_match_generate(model, weights):
    if weights == "packed" and not fast.onednn_packing():
        pytest.skip("no oneDNN weight packing in this PyTorch")
    ref = il.generate(model, PROMPT, max_new_tokens=16, stop_at_eos=False)
    got = fast.FastDecoder(model, 64, weights=weights).generate(PROMPT, max_new_tokens=16, stop_at_eos=False)
    assert got.generated_ids == ref.generated_ids
    assert got.text == ref.text
    assert got.latency.n_tokens == 16 and got.latency.tpot > 0


def test_seeded_sampling_matches_generate(model, decoder):
    settings = {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 7}
    ref = il.generate(model, PROMPT, max_new_tokens=12, stop_at_eos=False, **settings)
    got = decoder.generate(PROMPT, max_new_tokens=12, stop_at_eos=False, **settings)
    assert got.generated_ids == ref.generated_ids


def test_greedy_matches_hugging_face_generate(model, decoder):
    ref = il.reference_generate(model, PROMPT, 12, stop_at_eos=False)
    assert decoder.generate(PROMPT, max_new_tokens=12, stop_at_eos=False).generated_ids == ref


@pytest.mark.parametrize("weights", ["tied", "rows"])
def test_fixed_shape_step_used_by_compile_and_cuda_graphs_matches(model, weights):
    """The masked whole-cache step (what torch.compile and CUDA graphs run) agrees with the eager one.

    ``"rows"`` is the arithmetic of the compiled CPU step ((W * x).sum(-1), attention as sums), run here
    uncompiled: torch.compile is lazy, so calling ``_step_fixed`` directly runs it eagerly.
    """
    ids = model.encode(PROMPT)
    eager = fast.FastDecoder(model, 40, weights="tied")
    fixed = fast.FastDecoder(model, 40, weights=weights, compile=weights == "rows")
    assert fixed.weights == weights
    a, b = eager.prefill([ids]), fixed.prefill([ids])
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    for _ in range(3):
        token = a.argmax(-1, keepdim=True)
        a = eager.step(token)
        with torch.inference_mode():
            b = fixed._step_fixed(token, torch.tensor([fixed.tokens]))
        fixed.tokens += 1
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        assert int(a.argmax()) == int(b.argmax())


def test_rows_memory_is_the_cache_and_one_copy_of_each_block_matrix(model):
    rows = fast.FastDecoder(model, 40, weights="rows")
    d, n = model.info.d_model, model.info.n_layer
    kv = 2 * n * 40 * d * 4
    assert rows.extra_bytes == kv + n * 12 * d * d * 4  # K, V and one [out, in] copy of each block matrix


def test_batch_decodes_each_row_like_batch_one(model):
    ids = model.encode(PROMPT)
    one, two = fast.FastDecoder(model, 32, weights="tied"), fast.FastDecoder(model, 32, batch=2, weights="tied")
    a = one.prefill([ids])
    b = two.prefill([ids, ids])
    torch.testing.assert_close(b[0], a[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(two.step([5, 5])[1], one.step(5)[0], rtol=1e-5, atol=1e-5)


def test_clear_errors(model, decoder):
    with pytest.raises(ValueError, match="max_tokens"):
        fast.FastDecoder(model, 10**6)
    with pytest.raises(ValueError, match="weights"):
        fast.FastDecoder(model, 16, weights="sideways")
    with pytest.raises(ValueError, match="weights"):
        fast.FastDecoder(model, 16, weights="packed", compile=True)
    with pytest.raises(ValueError, match="cuda_graph"):
        fast.FastDecoder(model, 16, cuda_graph=True)
    with pytest.raises(ValueError, match="max_tokens"):
        fast.FastDecoder(model, 16).generate(PROMPT, max_new_tokens=20)
    small = fast.FastDecoder(model, len(model.encode(PROMPT)) + 1, weights="tied")
    small.prefill([model.encode(PROMPT)])
    small.step(1)
    with pytest.raises(ValueError, match="max_tokens"):
        small.step(1)
    assert "tied" in repr(decoder) and "eager" in repr(decoder)


def test_op_groups():
    assert profiling.op_group("aten::addmm") == "matmuls"
    assert profiling.op_group("quantized::linear_dynamic") == "matmuls"
    assert profiling.op_group("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention"
    assert profiling.op_group("aten::native_layer_norm") == "norms & activations"
    assert profiling.op_group("aten::tanh") == "norms & activations"
    assert profiling.op_group("aten::index_copy_") == "other ops"
    assert profiling.op_group("## Call CompiledFxGraph f7urk5hnxhfhzqjx ##") == "compiled graph (fused)"
    assert profiling.op_group("TorchDynamo Cache Lookup") == "Python & dispatch"


def test_profile_step_adds_up(model, decoder):
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


def test_prefill_sweep_eager_materializes_more(model):
    rows = speedups.prefill_sweep(model, [16, 96], repeats=1)
    by = {(r.kernel, r.tokens): r for r in rows}
    assert by[("eager", 96)].peak_bytes > by[("sdpa", 96)].peak_bytes
    assert all(r.max_abs_diff < 1e-3 for r in rows)
    fig = speed.prefill_chart(rows)
    assert len(fig.data) == 4  # time and memory for each kernel


def test_batch_sweep(model):
    rows = speedups.batch_sweep(model, [1, 4], context=8, steps=2, weights="tied")
    assert [r.batch for r in rows] == [1, 4]
    assert all(r.tokens_per_s > 0 for r in rows)
    fig = speed.batching_chart(rows)
    assert {t.name for t in fig.data} >= {"tokens/s (all users)", "TPOT per user"}


def test_compiled_step_matches(model):
    """The compiled CPU step (weights "rows": products and attention as reductions) gives the engine's tokens."""
    ref = il.generate(model, PROMPT, max_new_tokens=8, stop_at_eos=False)
    dec = fast.FastDecoder(model, 32, compile=True)
    assert dec.weights == ("rows" if model.device.type == "cpu" else "tied")
    got = dec.generate(PROMPT, max_new_tokens=8, stop_at_eos=False)
    assert got.generated_ids == ref.generated_ids
    seeded = {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 7}
    ref = il.generate(model, PROMPT, max_new_tokens=8, stop_at_eos=False, **seeded)
    assert dec.generate(PROMPT, max_new_tokens=8, stop_at_eos=False, **seeded).generated_ids == ref.generated_ids
    dec.prefill([model.encode(PROMPT)])
    prof = profiling.profile_step(lambda: dec.step(3), label="compiled", repeats=2, warmup=1)
    assert prof.groups["compiled graph (fused)"] > 0.5 * prof.step_s  # the step is one generated kernel
    assert prof.groups["matmuls"] == 0


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


def test_interleave_warms_up_then_rotates():
    calls = []
    out = timing.interleave({"a": lambda: calls.append("a") or 1, "b": lambda: calls.append("b") or 2}, 2)
    assert calls == ["a", "b", "a", "b", "b", "a"]
    assert out == {"a": [1, 1], "b": [2, 2]}


def test_benchmark_command_writes_json_and_table(tmp_path, capsys):
    out = tmp_path / "bench.json"
    result = bench.main(["--models", "bundled", "--repeats", "1", "--new-tokens", "3", "--prompt-tokens", "8",
                         "--variants", "engine", "generate()", "fast", "--out", str(out)])
    printed = capsys.readouterr().out
    r = result["results"][0]
    assert set(r["variants"]) == {"engine", "generate()", "fast"}
    v = r["variants"]["fast"]
    assert v["tpot_x_floor"] == pytest.approx(v["tpot_s"] / r["tpot_floor_s"])
    assert "x generate()" in printed and "fast" in printed and out.exists()


def test_scoreboard_rows_compare_each_technique_with_its_baseline():
    pre = [speedups.PrefillRow("eager", 64, 0.02, 4_000_000, 0.0),
           speedups.PrefillRow("sdpa", 64, 0.01, 1_000_000, 1e-6)]
    qrows = [{"kind": "fp32", "ttft_s": 0.1, "tpot_s": 0.02, "step_bytes": 4e6, "perplexity": 10.0},
             {"kind": "int8", "ttft_s": 0.1, "tpot_s": 0.01, "step_bytes": 1e6, "perplexity": 10.1}]
    paths = [speedups.PathRow("engine", 0.1, 0.02, (1, 2)), speedups.PathRow("fast", 0.05, 0.01, (1, 2), 5_000_000)]
    batches = [speedups.BatchRow(1, 0.01), speedups.BatchRow(8, 0.02)]
    board = speedups.scoreboard_rows(pre, qrows, {"tiny": (paths, 0.005)}, batches)
    assert [r["technique"] for r in board] == ["SDPA vs eager attention (prefill)", "int8 weights", "fast (tiny)",
                                               "batch 8 vs 1"]
    assert board[0]["TTFT"] == "x0.50 at T=64" and board[0]["memory"] == "x0.25 peak"
    assert board[1]["TPOT"] == "x0.50" and "+1.00%" in board[1]["quality"]
    assert board[2]["TPOT"] == "x0.50 (2.00x floor)" and board[2]["quality"] == "same tokens"
    assert board[3]["quality"] == "x4.0 tokens/s"
