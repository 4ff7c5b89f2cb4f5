"""The engine against Hugging Face: greedy and seeded sampling, cached vs uncached, per-step logits."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import inferlab as il
from inferlab import _hf, hooks
from inferlab.embeddings import token_vectors

PROMPT = "To be, or not to be, that is the"
SETTINGS = [
    il.GREEDY,
    il.SamplingConfig(temperature=1.0, seed=0),
    il.SamplingConfig(temperature=0.7, top_k=40, seed=1),
    il.SamplingConfig(temperature=1.2, top_p=0.9, seed=2),
    il.SamplingConfig(temperature=0.9, top_k=50, top_p=0.95, seed=3),
    il.SamplingConfig(temperature=1.0, top_k=1, seed=4),
]


@pytest.mark.parametrize("config", SETTINGS, ids=repr)
def test_same_tokens_as_hf_generate(model, config):
    ours = il.generate(model, PROMPT, max_new_tokens=24, sampling=config).generated_ids
    theirs = il.reference_generate(model, PROMPT, max_new_tokens=24, sampling=config)
    assert ours == theirs


def test_different_seeds_differ(model):
    a = il.generate(model, PROMPT, 24, temperature=1.0, seed=10).generated_ids
    b = il.generate(model, PROMPT, 24, temperature=1.0, seed=11).generated_ids
    assert a != b


def test_cached_and_uncached_agree(model):
    cached = il.generate(model, PROMPT, 20, record="sampling")
    uncached = il.generate(model, PROMPT, 20, record="sampling", use_cache=False)
    assert cached.generated_ids == uncached.generated_ids
    assert [s.kind for s in uncached.steps[1:]] == ["decode"] * 19
    assert all(len(s.input_ids) == 1 for s in cached.steps[1:])
    assert [len(s.input_ids) for s in uncached.steps] == [len(cached.prompt_ids) + i for i in range(20)]


def test_step_logits_match_full_forward(model):
    ids = model.encode(PROMPT)
    logits, cache = il.prefill(model, ids)
    seq = list(ids)
    worst = 0.0
    for _ in range(12):
        full = il.forward_full(model, [seq])[0, -1]
        worst = max(worst, (full - logits[0]).abs().max().item())
        token = int(logits[0].argmax())
        seq.append(token)
        logits, cache = il.decode_step(model, token, cache)
    assert worst < 1e-4
    assert cache.tokens == len(seq)


def test_static_cache_matches_dynamic(model):
    ids = model.encode(PROMPT)
    l1, c1 = il.prefill(model, ids)
    l2, c2 = il.prefill(model, ids, static_tokens=len(ids) + 8)
    assert c2.static and c2.tokens == len(ids)
    for _ in range(6):
        assert torch.allclose(l1, l2, atol=1e-4)
        t = int(l1[0].argmax())
        l1, c1 = il.decode_step(model, t, c1)
        l2, c2 = il.decode_step(model, t, c2)
    assert c1.tokens == c2.tokens == len(ids) + 6


def test_static_cache_generation_matches_dynamic(model):
    dynamic = il.generate(model, PROMPT, 8, stop_at_eos=False, record="cache")
    static = il.generate(model, PROMPT, 8, stop_at_eos=False, record="cache", cache_implementation="static")
    assert static.generated_ids == dynamic.generated_ids
    slots = len(static.prompt_ids) + 8  # allocated once: prompt + max_new_tokens
    per_slot = dynamic.steps[0].cache.total_bytes // len(dynamic.prompt_ids)
    assert [s.cache.tokens for s in static.steps] == [s.cache.tokens for s in dynamic.steps]
    assert [s.cache.allocated_bytes for s in static.steps] == [slots * per_slot] * 8  # allocated once, up front
    assert [s.cache.allocated_bytes for s in dynamic.steps] == [s.cache.total_bytes for s in dynamic.steps]


def test_batched_prefill_and_decode(model):
    a, b = model.encode("ROMEO. My lord, I"), model.encode("JULIET. O Romeo, Romeo")
    n = min(len(a), len(b))
    ids = torch.tensor([a[:n], b[:n]])
    logits, cache = il.prefill(model, ids)
    assert logits.shape == (2, model.info.vocab_size)
    logits, cache = il.decode_step(model, logits.argmax(-1), cache)
    assert logits.shape == (2, model.info.vocab_size)
    assert cache.layers[0][0].shape[:3] == (2, model.info.n_head, ids.shape[1] + 1)


def test_cache_object_is_visible(model):
    _logits, cache = il.prefill(model, model.encode(PROMPT))
    n = len(model.encode(PROMPT))
    assert cache.tokens == n
    assert len(cache.layers) == model.info.n_layer
    k, v = cache.layers[0]
    assert tuple(k.shape) == (1, model.info.n_head, n, model.info.head_dim) == tuple(v.shape)
    snap = cache.snapshot()
    assert snap.total_bytes == cache.nbytes == 2 * model.info.n_layer * model.info.n_head * model.info.head_dim * 4 * n
    assert "tokens" in repr(cache)


def test_stream_yields_each_token_then_the_trace(model):
    s = il.stream(model, PROMPT, max_new_tokens=10)
    events = list(s)
    assert [e.token_id for e in events] == s.trace.generated_ids
    assert "".join(e.text for e in events) == s.trace.text
    times = [e.t for e in events]
    assert times == sorted(times) and times == s.trace.token_times


def test_length_limit(model):
    one = il.generate(model, PROMPT, 1)
    assert len(one.generated_ids) == 1 and one.stop_reason == "max_new_tokens"
    seven = il.generate(model, PROMPT, 7, stop_at_eos=False)
    assert len(seven.generated_ids) == 7 and seven.stop_reason == "max_new_tokens"


def test_stop_string_cuts_the_text_and_the_stream(model):
    full = il.generate(model, PROMPT, 30, stop_at_eos=False)
    assert len(full.text) > 8, "greedy output of the bundled model is expected to be longer than 8 characters"
    stop = full.text[5:8]  # greedy is deterministic, so this text will be produced again
    s = il.stream(model, PROMPT, 30, stop_at_eos=False, stop_strings=[stop])
    events = list(s)
    cut = s.trace
    assert cut.stop_reason == f"stop string {stop!r}"
    assert cut.text == full.text[: full.text.index(stop)]
    assert "".join(e.text for e in events) == cut.text  # no streamed piece showed the stop string
    assert cut.generated_ids == full.generated_ids[: len(cut.generated_ids)] and len(cut.generated_ids) < 30


class _EosIs:
    """GPT-2's tokenizer, except that its end-of-text id is ``eos`` (to force a stop the model will make)."""

    def __init__(self, tokenizer, eos: int) -> None:
        self._tokenizer, self.eos_token_id = tokenizer, eos

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)


def test_stop_token_ends_the_run(model):
    free = il.generate(model, PROMPT, 10, stop_at_eos=False).generated_ids
    certain = free[2]  # greedy: the third token is certain to be this id
    forced = dataclasses.replace(model, tokenizer=_EosIs(model.tokenizer, certain))
    trace = il.generate(forced, PROMPT, 10)
    assert trace.stop_reason == "stop token"
    assert trace.generated_ids == free[: free.index(certain) + 1]
    assert len(il.generate(forced, PROMPT, 10, stop_at_eos=False).generated_ids) == 10


def test_extra_stop_token_ids(model):
    first = il.generate(model, PROMPT, 10).generated_ids
    stop_id = first[3]
    trace = il.generate(model, PROMPT, 10, stop_token_ids=[stop_id])
    assert trace.stop_reason == "stop token" and trace.generated_ids == first[: first.index(stop_id) + 1]
    with pytest.raises(ValueError, match="stop_token_ids"):
        il.generate(model, PROMPT, 3, stop_token_ids=[10**6])


def test_hooks_removed_after_run_and_after_error(model):
    assert hooks.active_hook_count(model) == 0
    il.generate(model, PROMPT, 3, record="all")
    assert hooks.active_hook_count(model) == 0
    assert _hf.current_attention(model) == "sdpa"
    with pytest.raises(RuntimeError, match="boom"), hooks.capture(model, {"attention", "residual", "embeddings"}):
        assert hooks.active_hook_count(model) > 0
        raise RuntimeError("boom")
    assert hooks.active_hook_count(model) == 0
    assert _hf.current_attention(model) == "sdpa"
    s = il.stream(model, PROMPT, 5, record="attention")
    next(iter(s))  # abandon the stream mid-run: closing the generator must remove the hooks too
    del s
    import gc

    gc.collect()
    assert hooks.active_hook_count(model) == 0


def test_recorded_attention_is_causal_and_normalised(short_trace, model):
    T = len(short_trace.prompt_ids)
    for layer in range(model.info.n_layer):
        pattern = short_trace.steps[0].attention[layer]
        assert pattern.shape == (model.info.n_head, T, T)
        assert torch.allclose(pattern.sum(-1), torch.ones(model.info.n_head, T), atol=1e-5)
        assert (pattern.triu(1) == 0).all()
    rows = short_trace.decode_rows(0, 0)
    assert [len(r) for r in rows] == [T + i for i in range(1, len(short_trace.steps))]


def test_recorded_embeddings_and_residual(short_trace, model):
    emb = short_trace.embeddings
    T, d = len(short_trace.prompt_ids), model.info.d_model
    assert emb["tok"].shape == emb["pos"].shape == emb["sum"].shape == (T, d)
    assert torch.allclose(emb["tok"] + emb["pos"], emb["sum"], atol=1e-6)
    assert torch.allclose(emb["tok"], token_vectors(model, short_trace.prompt_ids))
    assert short_trace.steps[0].residual.shape == (model.info.n_layer + 1, T, d)
    assert short_trace.steps[1].residual.shape == (model.info.n_layer + 1, 1, d)


def test_recorded_cache_and_sampling(short_trace, model):
    sizes = short_trace.cache_bytes()
    per_token = 2 * model.info.n_layer * model.info.n_head * model.info.head_dim * 4
    T = len(short_trace.prompt_ids)
    assert sizes == [per_token * (T + i) for i in range(len(sizes))]
    for step in short_trace.steps:
        assert step.sampling.token_id == step.token_id
        assert [s.name for s in step.sampling.stages] == ["model", "temperature", "top_k", "top_p"]


def test_residual_alone_can_be_recorded(model):
    trace = il.generate(model, PROMPT, 2, record=("attention", "residual"))
    assert trace.steps[0].residual.shape[0] == model.info.n_layer + 1
    assert trace.embeddings is None  # embeddings were captured for the residual, not recorded


def test_trace_round_trips_through_json(short_trace):
    import json

    back = il.Trace.from_dict(json.loads(short_trace.to_json()))
    assert back.generated_ids == short_trace.generated_ids
    assert torch.allclose(back.attention(1, 2), short_trace.attention(1, 2))
    assert back.steps[2].cache == short_trace.steps[2].cache
    assert back.latency == short_trace.latency
    # the settings and the model's facts come back as the objects they were, field by field
    assert back.config == short_trace.config and isinstance(back.config, il.GenerationConfig)
    assert back.model_info == short_trace.model_info and back.model_info.dtype == torch.float32
    assert back.steps[1].sampling == short_trace.steps[1].sampling and back.runner == "engine"
    assert [vars(s).keys() for s in back.steps] == [vars(s).keys() for s in short_trace.steps]


def test_trace_from_dict_refuses_what_to_dict_did_not_write(short_trace):
    d = short_trace.to_dict()
    with pytest.raises(ValueError, match=r"without \[.prompt.*Trace.to_dict\(\)"):
        il.Trace.from_dict({})
    with pytest.raises(ValueError, match="to_dict"):
        il.Trace.from_dict({**d, "steps": [{"index": 0}]})
    with pytest.raises(ValueError, match="to_dict"):
        il.Trace.from_dict([d])


def test_attention_memory_limit_refuses_clearly(model):
    with pytest.raises(ValueError, match="max_record_bytes"):
        il.generate(model, "word " * 300, 10, record="attention", max_record_bytes=1_000_000)
    il.generate(model, "word " * 20, 2, record="attention", max_record_bytes=1_000_000)


def test_untraced_run_has_no_records(model):
    trace = il.generate(model, PROMPT, 4)
    assert trace.recorded == () and all(s.attention is None and s.cache is None for s in trace.steps)
    with pytest.raises(ValueError, match="record="):
        trace.attention(0, 0)


def test_the_loop_names_both_jobs_as_the_article_does():
    """``_loop`` calls ``prefill`` and ``decode_step`` itself (recording is a context around them, not a trampoline)."""
    import ast
    import inspect

    from inferlab import engine

    tree = ast.parse(inspect.getsource(engine._loop))
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert {"prefill", "decode_step", "stop_reason"} <= called, sorted(called)
    withs = [n for n in ast.walk(tree) if isinstance(n, ast.With)]
    assert len(withs) == 2 and all("capturing" in ast.unparse(w.items[0]) for w in withs)
