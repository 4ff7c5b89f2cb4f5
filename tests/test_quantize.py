"""Quantized copies: same model when they should be, fewer bytes, perplexity as Hugging Face computes it."""

from __future__ import annotations

import math

import pytest
import torch

import inferlab as il
from inferlab import fast
from inferlab import quantize as q
from inferlab.logit_lens import logit_lens
from inferlab.paths import heldout_text

PROMPT = "To be, or not to be, that is the question"


@pytest.fixture(scope="module")
def logits(model) -> torch.Tensor:
    return il.forward_full(model, [model.encode(PROMPT)]).float()


@pytest.fixture(scope="module")
def fp32(model) -> q.Quantized:
    return q.quantize(model, "fp32")


def test_kinds_on_cpu():
    assert q.available_kinds("cpu")[:4] == ("fp32", "bf16", "fp16", "int8")


def test_as_linear_computes_x_times_w_transposed_plus_b():
    w, b, x = torch.arange(6.0).view(2, 3), torch.tensor([0.5, -1.0]), torch.tensor([[1.0, 0.0, 2.0]])
    # by hand: row 0 of w is (0, 1, 2) -> 1*0 + 0*1 + 2*2 + 0.5 = 4.5; row 1 is (3, 4, 5) -> 3 + 10 - 1 = 12
    assert q.as_linear(w, b)(x).tolist() == [[4.5, 12.0]]
    assert q.as_linear(w, None)(x).tolist() == [[4.0, 13.0]]


def test_fp32_copy_is_identical_and_the_original_untouched(model, logits, fp32):
    assert fp32.model.transformers_module() is not model.transformers_module()
    assert torch.equal(il.forward_full(fp32.model, [model.encode(PROMPT)]), logits)
    assert fp32.weight_bytes == model.info.weight_bytes
    assert next(model.transformers_module().parameters()).dtype == torch.float32


def test_step_bytes_count_the_tied_head_and_one_embedding_row(model, fp32):
    """Worked by hand for the bundled model (4 layers, d_model 160, vocab 50,257, n_ctx 512, fp32).

    One block: 2 norms (2 x 320) + qkv 160x480+480 + out 160x160+160 + fc 160x640+640 + out 640x160+160
             = 640 + 77,280 + 25,760 + 103,040 + 102,560                   =   309,280 weights
    A decode step reads 8 blocks (2,474,240) + the final norm (320) + the tied head, all of wte
    (50,257 x 160 = 8,041,120): 10,515,680 weights x 4 bytes = 42,062,720 bytes, plus one row each
    of wte and wpe (2 x 160 x 4 = 1,280) = 42,064,000. Stored: those weights + wpe (512 x 160 = 81,920)
    = 10,597,600 weights = 42,390,400 bytes.
    """
    assert (model.info.n_layer, model.info.d_model, model.info.n_ctx, model.info.vocab_size) == (8, 160, 512, 50257)
    assert fp32.weight_bytes == 42_390_400
    assert fp32.step_bytes == 42_064_000


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


def test_parts_quantize_only_the_head_or_only_the_blocks(model, logits, fp32):
    head, blocks = q.quantize(model, "int8", parts="head"), q.quantize(model, "int8", parts="blocks")
    assert "LM head only" in head.method and "projections only" in blocks.method
    # int8 stores 1 byte per weight instead of 4 (plus per-channel scales): each part saves about 3/4 of its bytes
    head_fp32, blocks_fp32 = 50257 * 160 * 4, 8 * 307_200 * 4  # bundled model: the head and the block matrices
    assert 0.70 < (fp32.step_bytes - head.step_bytes) / head_fp32 < 0.75
    assert 0.70 < (fp32.step_bytes - blocks.step_bytes) / blocks_fp32 < 0.75
    for part in (head, blocks):
        got = il.forward_full(part.model, [model.encode(PROMPT)]).float()
        assert torch.corrcoef(torch.stack([got.flatten(), logits.flatten()]))[0, 1] > 0.99


def test_quantized_copies_are_refused_where_plain_weights_are_needed(model, logits):
    int8 = q.quantize(model, "int8")
    with pytest.raises(ValueError, match="quantized"):
        fast.FastDecoder(int8.model, 16)
    with pytest.raises(ValueError, match="LM head"):
        logit_lens(int8.model, torch.zeros(2, 3, model.info.d_model))


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
        hf_loss = float(model.transformers_module()(input_ids=ids, labels=ids).loss)
    got = q.perplexity(model, text)
    assert got.tokens == ids.shape[1] - 1
    assert math.isclose(got.nats_per_token, hf_loss, rel_tol=1e-5)
    assert math.isclose(got.perplexity, math.exp(hf_loss), rel_tol=1e-5)


def test_perplexity_windows_cover_every_token(model):
    text = heldout_text()[:600]
    short = q.perplexity(model, text, window=50)
    assert short.tokens == len(model.encode(text)) - 1


def test_heldout_excerpt_is_from_julius_caesar():
    text = heldout_text()
    assert "Friends, Romans, countrymen" in text and 2000 < len(text) < 8000


def test_clear_errors(model):
    with pytest.raises(ValueError, match="kind"):
        q.quantize(model, "int3")
    with pytest.raises(ValueError, match="parts"):
        q.quantize(model, "fp16", parts="head")
    with pytest.raises(ValueError, match="parts"):
        q.quantize(model, "int8", parts="mlp")
    with pytest.raises(ValueError, match="window"):
        q.perplexity(model, "Hi", window=10**6)
