"""Quantized copies: same model when they should be, fewer bytes, perplexity as Hugging Face computes it."""

from __future__ import annotations

import math

import pytest
import torch

import inferlab as il
from inferlab import quantize as q
from inferlab.viz import speed

PROMPT = "To be, or not to be, that is the question"


@pytest.fixture(scope="module")
def logits(model) -> torch.Tensor:
    return il.forward_full(model, [model.encode(PROMPT)]).float()


@pytest.fixture(scope="module")
def fp32(model) -> q.Quantized:
    return q.quantize(model, "fp32")


def test_kinds_on_cpu():
    assert q.available_kinds("cpu")[:4] == ("fp32", "bf16", "fp16", "int8")


def test_conv1d_as_linear_is_the_same_model(model, logits):
    import copy

    hf = copy.deepcopy(model.hf)
    q._linearize(hf)
    assert not any(type(m).__name__ == "Conv1D" for m in hf.modules())
    got = il.forward_full(il.Model(hf, model.tokenizer, model.info), [model.encode(PROMPT)])
    torch.testing.assert_close(got, logits, rtol=1e-5, atol=1e-4)


def test_fp32_copy_is_identical_and_the_original_untouched(model, logits, fp32):
    assert fp32.model.hf is not model.hf
    assert torch.equal(il.forward_full(fp32.model, [model.encode(PROMPT)]), logits)
    assert fp32.weight_bytes == model.info.weight_bytes
    assert next(model.hf.parameters()).dtype == torch.float32


def test_step_bytes_count_the_tied_head_and_one_embedding_row(model, fp32):
    info = model.info
    wpe = info.n_ctx * info.d_model * 4
    assert fp32.step_bytes == info.weight_bytes - wpe + info.d_model * 4 * 2


@pytest.mark.parametrize("kind", ["bf16", "fp16"])
def test_half_precision_halves_bytes(model, logits, fp32, kind):
    half = q.quantize(model, kind)
    assert half.weight_bytes == fp32.weight_bytes // 2
    assert half.model.info.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[kind]
    got = il.forward_full(half.model, [model.encode(PROMPT)]).float()
    assert (got - logits).abs().max() < 0.02 * logits.abs().max()  # ~3 significant digits (bf16)
    assert torch.corrcoef(torch.stack([got.flatten(), logits.flatten()]))[0, 1] > 0.999


def test_int8_reads_a_quarter_and_stays_close(model, logits, fp32):
    int8 = q.quantize(model, "int8")
    assert int8.step_bytes < fp32.step_bytes / 3.5
    got = il.forward_full(int8.model, [model.encode(PROMPT)]).float()
    assert torch.corrcoef(torch.stack([got.flatten(), logits.flatten()]))[0, 1] > 0.99
    trace = il.generate(int8.model, PROMPT, max_new_tokens=4, stop_at_eos=False)
    assert len(trace.generated_ids) == 4
    assert "int8" in repr(int8)


@pytest.mark.skipif(not q.int4_supported(), reason="this PyTorch has no int4 CPU kernel")
def test_int4_linear_computes_the_dequantized_product():
    torch.manual_seed(0)
    w, b, x = torch.randn(40, 64) * 0.02, torch.randn(40), torch.randn(3, 64)
    lin = q.Int4Linear(w, b)
    groups = w.reshape(40, -1, q.INT4_GROUP)
    low, high = groups.amin(-1, keepdim=True), groups.amax(-1, keepdim=True)
    scale = (high - low) / 15
    deq = (torch.round((groups - low) / scale) * scale + low).reshape(40, 64)
    torch.testing.assert_close(lin(x), x @ deq.T + b, rtol=0.02, atol=0.02)
    assert lin(x).shape == (3, 40)


@pytest.mark.skipif(not q.int4_supported(), reason="this PyTorch has no int4 CPU kernel")
def test_int4_model_is_smaller_still(model, logits):
    int4, int8 = q.quantize(model, "int4"), q.quantize(model, "int8")
    assert int4.step_bytes < int8.step_bytes
    got = il.forward_full(int4.model, [model.encode(PROMPT)]).float()
    assert torch.corrcoef(torch.stack([got.flatten(), logits.flatten()]))[0, 1] > 0.95


def test_perplexity_matches_hugging_face_loss(model):
    text = "Friends, Romans, countrymen, lend me your ears; I come to bury Caesar, not to praise him."
    ids = torch.tensor([model.encode(text)])
    with torch.inference_mode():
        hf_loss = float(model.hf(input_ids=ids, labels=ids).loss)
    got = q.perplexity(model, text)
    assert got.tokens == ids.shape[1] - 1
    assert math.isclose(got.nats_per_token, hf_loss, rel_tol=1e-5)
    assert math.isclose(got.perplexity, math.exp(hf_loss), rel_tol=1e-5)


def test_perplexity_windows_cover_every_token(model):
    text = q.heldout_text()[:600]
    short = q.perplexity(model, text, window=50)
    assert short.tokens == len(model.encode(text)) - 1


def test_heldout_excerpt_is_from_julius_caesar():
    text = q.heldout_text()
    assert "Friends, Romans, countrymen" in text and 2000 < len(text) < 8000


def test_clear_errors(model):
    with pytest.raises(ValueError, match="kind"):
        q.quantize(model, "int3")
    with pytest.raises(ValueError, match="window"):
        q.perplexity(model, "Hi", window=10**6)


def test_quant_chart_and_scoreboard():
    rows = [{"kind": "fp32", "step_bytes": 4e6, "tpot_s": 2e-3, "perplexity": 10.0},
            {"kind": "int8", "step_bytes": 1e6, "tpot_s": 1e-3, "perplexity": 10.5}]
    fig = speed.quant_chart(rows, bytes_per_s=2e9)
    assert list(fig.data[0].text) == ["fp32", "int8"]
    assert "perplexity 10.50" in fig.data[0].hovertext[1]
    assert fig.layout.xaxis.title.text.startswith("bytes read")
    with pytest.raises(ValueError, match="kind"):
        speed.quant_chart([{"kind": "x"}])
    table = speed.scoreboard([{"technique": "int8", "TPOT": "x0.5"}])
    assert list(table.data[0].cells.values[0]) == ["int8"]
