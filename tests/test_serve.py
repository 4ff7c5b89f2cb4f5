"""inferlab.serve: every request's tokens are those il.generate gives it alone, and the KV blocks balance.

For every policy and option (static, continuous, chunked prefill, prefix cache) and under preemption, on the
bundled model with greedy (and seeded) settings. Small on purpose: a few requests, short answers.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import inferlab as il
from inferlab.fast import layouts
from inferlab.fast.layouts import RowPlan, onednn_packing, resolve_weights
from inferlab.serve import BlockPool, Request, padded, paged, request, run, workload
from inferlab.serve.paged import PagedKV, Segment


@pytest.fixture(scope="module")
def reqs(model) -> list[Request]:
    """Five requests arriving at once: prompts of 5-40 tokens (some over two 16-position blocks), 3-12 new tokens."""
    return workload(5, math.inf, prompt_tokens=(5, 40), new_tokens=(3, 12), seed=3, model=model)


@pytest.fixture(scope="module")
def prefixed(model) -> list[Request]:
    """Four requests opening with the same 40 tokens (two full blocks of 16). The first arrives alone and answers
    with 12 tokens; the others arrive 1 ms later, after its first iteration and (on any machine) before its last."""
    out = workload(4, math.inf, prompt_tokens=(3, 12), new_tokens=(3, 8), seed=5, model=model, shared_prefix=40)
    return [Request(r.id, r.prompt, r.prompt_ids, il.GenerationConfig(max_new_tokens=12 if r.id == 0 else
                                                                       r.max_new_tokens, stop_at_eos=r.stop_at_eos),
                    0.001 if r.id else 0.0) for r in out]


@pytest.fixture(scope="module")
def short(model) -> list[Request]:
    """Four requests with short prompts and longer answers: admitted with few blocks, they outgrow them."""
    return workload(4, math.inf, prompt_tokens=(3, 6), new_tokens=(8, 10), seed=2, model=model)


def solo(model, r: Request) -> list[int]:
    """What il.generate gives the request alone."""
    s = r.sampling
    return il.generate(model, r.prompt, max_new_tokens=r.max_new_tokens, stop_at_eos=r.stop_at_eos,
                       temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, seed=s.seed).generated_ids


@pytest.fixture(scope="module")
def solo_tokens(model, reqs, prefixed, short) -> dict[tuple[str, int], list[int]]:
    return {(name, r.id): solo(model, r) for name, rs in (("reqs", reqs), ("prefixed", prefixed), ("short", short))
            for r in rs}


def check_tokens(result, solo_tokens, name: str) -> None:
    wrong = [(s.request.id, list(s.tokens), solo_tokens[name, s.request.id]) for s in result.requests
             if list(s.tokens) != solo_tokens[name, s.request.id]]
    assert not wrong, f"request id, served tokens, il.generate's tokens: {wrong}"


def check_blocks(result, requests: list[Request], block_size: int) -> None:
    """No block leaked after the run; none held by two live requests unless it is the same full block of a common
    prefix (the same place in each table, and the holders' tokens up to its end equal)."""
    pool = result.pool
    assert pool.problems() == []
    assert pool.used_blocks == 0 and pool.free_blocks == pool.num_blocks and not pool.tables
    prompts = {r.id: r.prompt_ids for r in requests}
    for it in result.iterations:
        holders: dict[int, list[tuple[int, int]]] = {}
        for rid, table in it.tables:
            assert len(set(table)) == len(table)
            for j, block in enumerate(table):
                holders.setdefault(block, []).append((rid, j))
        assert len({b for _, t in it.tables for b in t}) == it.used_blocks
        for block, held in holders.items():
            if len(held) > 1:
                assert len({j for _, j in held}) == 1, f"iteration {it.index}: block {block} at different places {held}"
                end = (held[0][1] + 1) * block_size
                assert len({prompts[rid][:end] for rid, _ in held}) == 1, f"block {block} shared by other tokens"
                assert all(len(prompts[rid]) > end for rid, _ in held), f"block {block} is no prompt prefix"


SETTINGS = {
    "static": {"policy": "static", "max_batch": 3},
    "continuous": {"policy": "continuous", "max_batch": 3},
    "chunked": {"policy": "continuous", "max_batch": 4, "prefill_chunk": 6},
    "static+chunked": {"policy": "static", "max_batch": 4, "prefill_chunk": 9},
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_policy_gives_each_request_its_solo_tokens(model, reqs, solo_tokens, name):
    result = run(model, reqs, **SETTINGS[name])  # weights="auto": oneDNN-packed copies where this CPU packs
    check_tokens(result, solo_tokens, "reqs")
    check_blocks(result, reqs, 16)
    assert result.summary.preemptions == 0  # kv_blocks=None: room for max_batch of the longest request
    if SETTINGS[name].get("prefill_chunk"):
        assert max(it.prefill_tokens for it in result.iterations) <= SETTINGS[name]["prefill_chunk"]


@pytest.mark.parametrize("settings", [{"policy": "continuous", "max_batch": 4},
                                      {"policy": "static", "max_batch": 4, "prefill_chunk": 3}])
def test_preemption_frees_blocks_and_recomputes_the_same_tokens(model, short, solo_tokens, settings):
    # blocks of 4 positions, 5 of them: each request ends up needing 3-4, so running ones outgrow the pool
    result = run(model, short, block_size=4, kv_blocks=5, **settings)
    assert result.summary.preemptions >= 2
    assert sum(len(it.preempted) for it in result.iterations) == result.summary.preemptions
    assert result.summary.peak_blocks <= 5
    check_tokens(result, solo_tokens, "short")
    check_blocks(result, short, 4)


def test_prefix_cache_shares_the_common_blocks_and_changes_no_token(model, prefixed, solo_tokens):
    result = run(model, prefixed, policy="continuous", max_batch=4, prefix_cache=True)
    check_tokens(result, solo_tokens, "prefixed")
    check_blocks(result, prefixed, 16)
    later = [s.cached_tokens for s in result.requests[1:]]
    assert result.requests[0].cached_tokens == 0 and later == [32] * len(later)  # two full blocks of the 40
    assert any(len({b for _, t in it.tables for b in t}) < sum(len(t) for _, t in it.tables)
               for it in result.iterations), "no block was ever shared"
    plain = run(model, prefixed, policy="continuous", max_batch=4)
    assert all(s.cached_tokens == 0 for s in plain.requests)
    assert all(len({b for _, t in it.tables for b in t}) == sum(len(t) for _, t in it.tables)
               for it in plain.iterations)


def test_prefix_cache_with_chunks_and_preemption(model, prefixed, solo_tokens):
    # blocks of 4: room for the longest request (64 positions) and one more block; admission keeps each running
    # request's next 4 positions free, and requests that grow past them still preempt the newest
    result = run(model, prefixed, policy="continuous", max_batch=4, prefix_cache=True, prefill_chunk=7, kv_blocks=17,
                 block_size=4)
    assert result.summary.preemptions >= 1 and result.summary.cached_tokens > 0
    check_tokens(result, solo_tokens, "prefixed")
    check_blocks(result, prefixed, 4)


def test_admission_leaves_room_for_the_running_requests_to_grow(model, short):
    """A waiting request joins only while every running request keeps room for its next block_size positions:
    admitted on their prompts alone, the four would fill the pool and then preempt each other (vLLM keeps a
    watermark of free blocks for the same reason)."""
    result = run(model, short, max_batch=4, block_size=4, kv_blocks=8)
    first = result.iterations[0]
    prompts = {r.id: len(r.prompt_ids) for r in short}
    room = sum(-(-min(prompts[rid] + 4, prompts[rid] + r.max_new_tokens) // 4) for rid, r in
               ((r.id, r) for r in short) if rid in first.requests)
    assert room <= 8 and len(first.requests) < len(short)  # not all four at once: their prompts alone would fit
    assert sum(-(-p // 4) for p in prompts.values()) <= 8


def test_the_books_balance_at_every_iteration(model, reqs, monkeypatch):
    from inferlab.serve import scheduler

    seen = []
    schedule = scheduler.Scheduler.schedule

    def checked(self):
        out = schedule(self)
        seen.append(self.pool.problems())
        return out

    monkeypatch.setattr(scheduler.Scheduler, "schedule", checked)
    run(model, reqs, max_batch=5, kv_blocks=5, prefill_chunk=8)
    assert len(seen) > 5 and all(p == [] for p in seen)


def test_seeded_sampling_matches_generate(model):
    rs = [request(model, text, 6, id=i, sampling=il.SamplingConfig(temperature=0.9, top_k=40, seed=10 + i))
          for i, text in enumerate(["ROMEO.", "To be, or not", "What light"])]
    result = run(model, rs, max_batch=3)
    assert [list(s.tokens) for s in result.requests] == [solo(model, r) for r in rs]


def test_static_waits_for_the_batch_and_continuous_refills_a_slot(model, reqs):
    for policy in ("static", "continuous"):
        result = run(model, reqs, policy=policy, max_batch=2)
        finish = {s.request.id: s.finish for s in result.requests}
        joined_mid_flight = False
        for a, b in zip(result.iterations, result.iterations[1:], strict=False):
            newcomers = set(b.requests) - set(a.requests)
            still_running = [rid for rid in a.requests if finish[rid] > a.end]
            if newcomers and still_running:
                joined_mid_flight = True
        assert joined_mid_flight == (policy == "continuous"), policy


def test_static_keeps_computing_the_rows_of_finished_requests(model, reqs, monkeypatch):
    """As generate() on a padded batch: its prompts are read as long as the longest, and until the batch's longest
    answer is done a finished request's row still runs (a padding row); continuous batching refills the slot instead,
    and a batch running full is never padded."""
    rows, pads = [], []
    real = PagedKV.forward

    def forward(self, segs):  # rows: single positions and the requests' own segments; pads: prompt padding
        scratch = [len(s.tokens) > 1 and s.table[0] >= self.num_blocks for s in segs]
        own = [s for s in segs if s.table[0] < self.num_blocks]
        for s in segs:  # a finished request's row still attends over the batch's whole length, as in generate()
            assert s.table[0] < self.num_blocks or len(s.tokens) > 1 or s.start == max(r.start for r in own)
        rows.append(scratch.count(False))
        pads.append(sum(len(s.tokens) for s, x in zip(segs, scratch, strict=True) if x))
        return real(self, segs)

    monkeypatch.setattr(PagedKV, "forward", forward)
    static = run(model, reqs, policy="static", max_batch=3)
    assert [len(it.requests) + it.padding_rows for it in static.iterations] == rows
    assert [it.padding_tokens for it in static.iterations] == pads
    assert any(it.padding_rows for it in static.iterations)
    for it in static.iterations:  # a batch's first forward reads every prompt as long as its longest, as padded
        if it.prefill_tokens:
            longest = max(len(r.prompt_ids) for r in reqs if r.id in it.requests)
            assert it.prefill_tokens + it.padding_tokens == longest * len(it.requests), it
    assert any(pads) and not any(it.padding_tokens for it in static.iterations if not it.prefill_tokens)
    for a, b in itertools.pairwise(static.iterations):  # a batch's rows never shrink until it is done
        if set(b.requests) <= set(a.requests):
            assert len(b.requests) + b.padding_rows == len(a.requests) + a.padding_rows
    continuous = run(model, reqs, policy="continuous", max_batch=3).iterations
    assert not any(it.padding_rows or it.padding_tokens for it in continuous)


def test_times_and_summary(model):
    rs = workload(4, 40.0, prompt_tokens=(4, 10), new_tokens=(2, 5), seed=1, model=model)
    result = run(model, rs, max_batch=4)
    first_run = {rid: it.start for it in reversed(result.iterations) for rid in it.requests}
    for s in result.requests:
        times = s.token_times
        assert len(times) == len(s.tokens) == s.request.max_new_tokens
        assert all(a <= b for a, b in itertools.pairwise(times))
        assert s.arrival <= first_run[s.request.id] <= s.first_token  # nothing runs before it arrives
        assert s.ttft == pytest.approx(s.first_token - s.arrival)
        assert s.tpot == pytest.approx((s.finish - s.first_token) / (len(s.tokens) - 1))
    summ = result.summary
    assert summ.generated_tokens == sum(len(s.tokens) for s in result.requests)
    assert summ.seconds == pytest.approx(max(s.finish for s in result.requests))
    assert summ.tokens_per_s == pytest.approx(summ.generated_tokens / summ.seconds)
    assert summ.ttft.p50 <= summ.ttft.p90 <= summ.ttft.p99 == pytest.approx(max(s.ttft for s in result.requests),
                                                                                rel=0.05)
    assert [n for _, n in summ.blocks_over_time] == [it.used_blocks for it in result.iterations]
    assert "tokens/s" in repr(summ) and "Served(#0" in repr(result.requests[0])


def test_the_models_own_weights_give_the_same_tokens(model, reqs, solo_tokens):
    result = run(model, reqs, policy="continuous", max_batch=4, prefill_chunk=6, weights="model")
    assert result.requests and all(s is not None for s in result.requests)
    check_tokens(result, solo_tokens, "reqs")
    kv = PagedKV(model, 2, 4, weights="model")
    assert kv.weights == "model" and kv.packed is None


def test_padding_rows_use_scratch_reserved_before_the_clock(model, reqs, monkeypatch):
    """Static batching's padding rows read scratch blocks reserved once, before the timed loop: growing them there
    would copy the whole pool (every layer's keys and values) inside the measured run."""
    kv = PagedKV(model, 2, 16)
    with pytest.raises(RuntimeError, match="reserve_padding"):
        padded.padding(kv, 0, start=40)
    padded.reserve_padding(kv, 41)
    assert padded.padding(kv, 0, start=40).table == (2, 3, 4) and kv.k[0].shape[0] == (2 + 3) * 16
    grown = []
    real = padded.reserve_padding
    monkeypatch.setattr(padded, "reserve_padding", lambda kv, n: grown.append(n) or real(kv, n))
    run(model, reqs, policy="static", max_batch=3)
    assert grown == [max(len(r.prompt_ids) + r.max_new_tokens for r in reqs)]  # once, for the longest request


def test_auto_packs_the_weights_only_where_onednn_can(model):
    assert PagedKV(model, 2, 16).weights == ("packed" if onednn_packing() else "model")
    elsewhere = torch.empty(2, 2, device="meta")  # not a CPU tensor: nothing to pack for oneDNN
    assert resolve_weights("auto", elsewhere) == "model"
    with pytest.raises(ValueError, match=r"weights='packed'.*Fix:"):
        resolve_weights("packed", elsewhere)


@pytest.mark.parametrize("weights", ["packed", "model"])
def test_paged_forward_matches_prefill_logits(model, weights):
    """Two requests in one pool, tables out of order: a prompt read in two chunks beside another's decode."""
    if weights == "packed" and not onednn_packing():
        pytest.skip("this PyTorch cannot pack weights for oneDNN")
    a = model.encode("To be, or not to be, that is the question: whether")  # 13 tokens
    b = model.encode("ROMEO. But soft")
    kv = PagedKV(model, 6, 4, weights=weights)  # 6 blocks of 4 positions
    table_a, table_b = (3, 0, 5, 1), (2, 4)
    kv.forward([Segment(tuple(a[:5]), 0, table_a, False), Segment(tuple(b), 0, table_b, True)])
    got = kv.forward([Segment((7,), len(b), table_b, True), Segment(tuple(a[5:]), 5, table_a, True)])
    assert got.shape == (2, model.info.vocab_size)
    torch.testing.assert_close(got[0], il.prefill(model, [*b, 7])[0][0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[1], il.prefill(model, a)[0][0], rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not onednn_packing(), reason="this PyTorch cannot pack weights for oneDNN")
def test_a_few_rows_padded_to_their_plan_give_the_unpadded_logits(model, monkeypatch):
    """serve pads an iteration's T rows to the plan of T rows (``PagedKV.rows``); every padded count must give each
    row the logits it has unpadded, at every T the plans cover."""
    ids = model.encode("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer")
    kv = PagedKV(model, 8 * 6, 4)
    assert sorted(kv.plans) == [1, 2, 3] and kv.rows(4) == RowPlan.unpadded(4)  # ROW_COUNTS: 1, 2, 4
    tables = [tuple(range(i * 6, (i + 1) * 6)) for i in range(7)]
    kv.forward([Segment(tuple(ids[:5 + i]), 0, t, False) for i, t in enumerate(tables)])
    logits, seen = {}, []
    product = layouts.linear_onednn
    monkeypatch.setattr(layouts, "linear_onednn", lambda x, *a, **k: seen.append(len(x)) or product(x, *a, **k))
    for name, plans in {"unpadded": {}, "padded": {t: RowPlan.uniform(8) for t in range(1, 8)}}.items():
        kv.plans, seen[:] = plans, []
        logits[name] = [kv.forward([Segment((ids[5 + i],), 5 + i, tables[i], True) for i in range(t)])
                        for t in range(1, 8)]
        assert set(seen) == ({8} if plans else set(range(1, 8)))  # every product, the head too, at its plan's rows
    for t, (a, b) in enumerate(zip(logits["unpadded"], logits["padded"], strict=True), start=1):
        assert a.shape == (t, model.info.vocab_size)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_decodes_of_very_different_lengths_attend_in_two_groups_and_match_prefill(model):
    """Five requests decode at once: three short contexts and two long ones are gathered in two attention calls
    (each padded to its own longest), not one padded to 40 positions; every row's logits are its own prefill's."""
    lengths = (3, 4, 5, 38, 40)
    ids = model.encode("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the "
                       "slings and arrows of outrageous fortune, or to take arms against a sea of troubles")
    kv = PagedKV(model, 5 * 11, 4)
    tables = [tuple(range(i * 11, (i + 1) * 11)) for i in range(len(lengths))]
    kv.forward([Segment(tuple(ids[:n]), 0, t, False) for n, t in zip(lengths, tables, strict=True)])
    decodes = [Segment((ids[n],), n, t, True) for n, t in zip(lengths, tables, strict=True)]
    plan = paged._AttentionPlan(kv, decodes, model.device)
    assert [len(rows) for rows, _, _ in plan.decode_groups] == [3, 2]
    assert [slots.shape[1] for _, slots, _ in plan.decode_groups] == [6, 41]
    got = kv.forward(decodes)
    for row, n in enumerate(lengths):
        torch.testing.assert_close(got[row], il.prefill(model, ids[:n + 1])[0][0], rtol=1e-4, atol=1e-4)


def test_block_pool_counts():
    pool = BlockPool(4, 16, prefix_cache=True)
    assert pool.grow(0, 33) and pool.tables[0] == [0, 1, 2] and pool.free_blocks == 1
    assert not pool.grow(1, 40) and pool.tables[1] == []  # all or nothing
    tokens = list(range(60))
    pool.remember(0, tokens, 33)  # two full blocks written (the third is not full, nor written)
    pool.release(0)
    assert pool.used_blocks == 0 and pool.problems() == []
    assert pool.cached_prefix(tokens) == [0, 1]  # still findable after release; only written blocks
    assert pool.cached_prefix(tokens[:32]) == [0]  # one token must be left to compute
    assert pool.cached_prefix([99, *tokens[1:40]]) == []
    pool.share(2, [0, 1])
    assert pool.refs[:2] == [1, 1] and pool.hit_tokens == 32
    assert pool.grow(2, 40) and pool.tables[2] == [0, 1, 3]  # block 2 and 3 were free; 3 was freed first
    assert pool.problems() == []
    pool.tables[2].append(0)
    assert any("twice" in p for p in pool.problems())
    pool.tables[2].pop()
    pool.refs[3] = 2
    assert any("references" in p for p in pool.problems())
    pool.tables[5] = [3]  # now two tables hold block 3, which holds no cached prefix
    assert [p for p in pool.problems() if "no cached prefix block" in p] == [
        "block 3 is held by 2 requests but is no cached prefix block"]
    pool.tables[5] = [0]
    pool.refs[0], pool.refs[3] = 2, 1
    assert pool.problems() == []  # block 0 is a cached prefix block: sharing it is the point


def test_workload_is_seeded_and_its_prompts_are_text(model):
    a = workload(6, 5.0, prompt_tokens=(4, 30), new_tokens=(2, 9), seed=7, model=model)
    assert a == workload(6, 5.0, prompt_tokens=(4, 30), new_tokens=(2, 9), seed=7, model=model)
    assert a != workload(6, 5.0, prompt_tokens=(4, 30), new_tokens=(2, 9), seed=8, model=model)
    assert [r.id for r in a] == list(range(6)) and a[0].arrival == 0.0
    assert all(x.arrival < y.arrival for x, y in itertools.pairwise(a))
    for r in a:
        assert 4 <= len(r.prompt_ids) <= 30 and 2 <= r.max_new_tokens <= 9 and not r.stop_at_eos
        assert model.encode(r.prompt) == list(r.prompt_ids)
    many = workload(400, 5.0, prompt_tokens=4, new_tokens=2, seed=1, model=model)
    assert many[-1].arrival / 399 == pytest.approx(1 / 5.0, rel=0.15)  # Poisson: mean gap 1 / rate
    shared = workload(3, math.inf, prompt_tokens=5, new_tokens=2, seed=1, model=model, shared_prefix=20)
    assert len({r.prompt_ids[:20] for r in shared}) == 1 and all(len(r.prompt_ids) == 25 for r in shared)
    assert all(r.arrival == 0.0 for r in shared)


BAD_RUN = [
    ({"policy": "fast"}, ValueError, "policy='fast'"),
    ({"max_batch": 0}, ValueError, "max_batch=0"),
    ({"block_size": 0}, ValueError, "block_size=0"),
    ({"kv_blocks": 1}, ValueError, "kv_blocks=1"),
    ({"prefill_chunk": 0}, ValueError, "prefill_chunk=0"),
    ({"prefix_cache": "yes"}, TypeError, "prefix_cache"),
    ({"max_batch": 2.5}, TypeError, "max_batch"),
    ({"weights": "int8"}, ValueError, "weights='int8'"),
]


@pytest.mark.parametrize(("kwargs", "error", "names"), BAD_RUN)
def test_bad_settings_are_refused_with_the_fix(model, reqs, kwargs, error, names):
    with pytest.raises(error) as info:
        run(model, reqs, **kwargs)
    assert names in str(info.value) and "Fix:" in str(info.value)


def test_bad_requests_and_workloads_are_refused_with_the_fix(model, reqs):
    cases = [
        (lambda: run(model, []), "requests="),
        (lambda: run(model, ["To be"]), "requests="),
        (lambda: run(model, [reqs[0], reqs[0]]), "a different id for every request"),
        (lambda: run("bundled", reqs), "il.load"),
        (lambda: workload(0, 1.0, model=model), "n=0"),
        (lambda: workload(3, -1.0, model=model), "rate_per_s=-1.0"),
        (lambda: workload(3, 1.0, prompt_tokens=(9, 3), model=model), "lo <= hi"),
        (lambda: workload(3, 1.0, prompt_tokens=(4, 400), new_tokens=200, model=model), "context length"),
        (lambda: request(model, "", 4), "prompt=''"),
    ]
    for make, words in cases:
        with pytest.raises((ValueError, TypeError)) as info:
            make()
        assert words in str(info.value) and "Fix" in str(info.value), str(info.value)
    with pytest.raises(ValueError, match=r"kv_blocks=2 .*at least 3.*Fix: use kv_blocks >= 3"):
        run(model, [request(model, "To be", 40)], kv_blocks=2)


def test_transformers_generate_batch_gives_the_same_tokens(model, short):
    """Hugging Face's own continuous batching, the peer serve is measured against, answers the same."""
    from inferlab import _hf

    ids = [list(r.prompt_ids) for r in short]
    theirs = _hf.hf_generate_batch(model, ids, max_new_tokens=4, max_batch=4, block_size=16, kv_blocks=8)
    same = [Request(r.id, r.prompt, r.prompt_ids, il.GenerationConfig(max_new_tokens=4, stop_at_eos=False), 0.0)
            for r in short]
    assert theirs == [list(s.tokens) for s in run(model, same, max_batch=4).requests]
    assert il.generate(model, short[0].prompt, max_new_tokens=4, stop_at_eos=False).generated_ids == theirs[0]


def test_a_prompt_longer_than_the_passage_is_still_its_own_text(model):
    """The passage repeats for long prompts: repeated as text, then encoded, so a window across a seam round-trips."""
    long = workload(3, 1.0, prompt_tokens=(420, 500), new_tokens=2, seed=4, model=model)  # the passage: 339 tokens
    for r in long:
        assert 420 <= len(r.prompt_ids) <= 500 and model.encode(r.prompt) == list(r.prompt_ids)


def test_padded_generate_gives_the_same_tokens(model, short):
    """transformers' generate() on one left-padded batch (static batching as most code does it) answers alike too."""
    from inferlab import _hf

    theirs = _hf.hf_generate_padded(model, [list(r.prompt_ids) for r in short], max_new_tokens=5)
    assert [len(t) for t in theirs] == [5] * len(short)  # no stop token: every row runs to the end
    for r, t in zip(short, theirs, strict=True):
        assert il.generate(model, r.prompt, max_new_tokens=5, stop_at_eos=False).generated_ids == t


def test_one_step_schedules_runs_and_post_processes(model):
    """Scheduler.step: the plan (who runs which tokens), one batched forward, each emitted token; a finished
    request's blocks go back, and the next step admits the one that waited for its slot."""
    sched = il.serve.Scheduler(model, il.serve.ServeConfig(max_batch=2, kv_blocks=8))
    rs = [request(model, text, 2, id=i, stop_at_eos=False) for i, text in enumerate(["To be, or not", "ROMEO.", "Hi"])]
    for r in rs:
        sched.add(r)
    first = sched.step()
    assert first.runs == ((0, len(rs[0].prompt_ids)), (1, len(rs[1].prompt_ids)))
    assert [w.id for w in sched.waiting] == [2]  # two slots: the third waits
    assert [rid for rid, _ in first.emitted] == [0, 1] and dict(first.tables) == {0: (0,), 1: (1,)}
    second = sched.step()
    assert second.runs == ((0, 1), (1, 1)) and sorted(sched.done) == [0, 1] and sched.pool.used_blocks == 0
    third = sched.step()
    assert third.runs == ((2, len(rs[2].prompt_ids)),) and [it.index for it in sched.iterations] == [0, 1, 2]
    for r in rs[:2]:
        want = il.generate(model, r.prompt, config=r.config).generated_ids
        assert [t for it in (first, second) for rid, t in it.emitted if rid == r.id] == want
    with pytest.raises(ValueError, match="id"):
        sched.add(rs[0])  # served already: its id is taken


def test_run_takes_a_config_and_overrides_and_refuses_an_unknown_setting(model, reqs, monkeypatch):
    base = il.serve.ServeConfig(policy="static", max_batch=2, block_size=8)
    result = run(model, reqs[:2], base, max_batch=3)
    assert (result.settings.policy, result.settings.max_batch, result.settings.block_size) == ("static", 3, 8)
    assert result.settings.kv_blocks is not None  # sized for max_batch of the longest request
    monkeypatch.setattr(il.serve.Scheduler, "serve", lambda *a: pytest.fail("ran before refusing"))
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['max_bach'\].*Fix"):
        run(model, reqs, max_bach=2)
    with pytest.raises(TypeError, match="config must be a ServeConfig"):
        run(model, reqs, {"max_batch": 2})


def test_stop_tokens_and_stop_strings_end_a_request_as_in_generate(model):
    """A request stops through generation.stop_reason (and its text's stop strings), so its answer is il.generate's."""
    free = il.generate(model, "ROMEO.", max_new_tokens=12, stop_at_eos=False)
    ids = free.generated_ids
    piece = model.decode(ids[1:4])  # text the free answer writes by its fourth token
    rs = [request(model, "ROMEO.", 12, id=0, stop_at_eos=False, stop_token_ids=(ids[3],)),
          request(model, "ROMEO.", 12, id=1, stop_at_eos=False, stop_strings=(piece,)),
          request(model, "ROMEO.", 12, id=2, stop_at_eos=False)]
    served = run(model, rs, max_batch=3)
    for s in served.requests:
        assert list(s.tokens) == il.generate(model, s.request.prompt, config=s.request.config).generated_ids
    assert len(served.requests[0].tokens) <= 4 and len(served.requests[1].tokens) < 12
    assert len(served.requests[2].tokens) == 12
