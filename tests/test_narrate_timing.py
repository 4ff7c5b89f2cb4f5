"""inferlab.narrate.n04 / n05: each finding's text from hand-made numbers, in both outcomes."""

from __future__ import annotations

import dataclasses

import pytest

from inferlab import cost, narrate
from inferlab.measure import CacheComparison, TpotVerdict

n04, n05 = narrate.n04, narrate.n05
MACHINE = cost.MachineProfile("cpu", "float32", 20e9, 100e9, 1, 1, bytes_per_s_range=(16e9, 20e9),
                              flops_per_s_range=(90e9, 100e9), runs=7)


def test_two_models_says_why_random_weights_time_the_same_or_that_one_model_is_enough():
    two = n04.two_models("tiny", 9_400_000, "gpt2", 124_400_000)
    assert "9.4M" in two and "124M" in two and "random weights take the same time as trained" in two
    assert "fixed costs" not in two  # no cause named without a profile behind it
    one = n04.two_models("gpt2", 124_400_000, "gpt2", 124_400_000)
    assert "already full-size" in one and "random" not in one


def test_ceilings_report_the_spread_and_each_side_of_the_ridge():
    text = n04.ceilings(MACHINE, decode_intensity=0.5, prefill_intensity=9.3, prompt_len=128)
    # ridge = 100e9 / 20e9 = 5.0; spreads 20/16 - 1 = 25% and 100/90 - 1 = 11%
    assert "**5.0 FLOP/B**" in text and "best of 7 runs" in text and "25%" in text and "11%" in text
    assert "other programs" in text  # 25% > 20%: the sentence warns
    quiet = dataclasses.replace(MACHINE, bytes_per_s_range=(19e9, 20e9))
    assert "other programs" not in n04.ceilings(quiet, 0.5, 9.3, 128)
    assert "Decode (0.50 FLOP/B) is below the ridge" in text and "(9.3 FLOP/B) is above it" in text
    flipped = n04.ceilings(MACHINE, decode_intensity=6.0, prefill_intensity=2.0, prompt_len=4)
    assert "is above the ridge" in flipped and "(2.0 FLOP/B) is below it" in flipped


def test_prefill_knee_inside_beyond_and_never():
    lengths, medians = (8, 512), (0.030, 0.300)  # 64x the tokens, 10x the time: 3.75 -> 0.59 ms per token
    inside = n04.prefill_knee(lengths, medians, 12, "gpt2")
    assert "**10.0x**" in inside and "3.75 ms" in inside and "0.59 ms" in inside and "cheaper per token" in inside
    assert "**12 prompt tokens**" in inside and "had not stopped falling by 512 tokens" in inside  # 27% per doubling
    assert "beyond the lengths" in n04.prefill_knee(lengths, medians, 700, "gpt2")
    never = n04.prefill_knee(lengths, (0.03, 3.0), None, "gpt2")  # 64x the tokens, 100x the time
    assert "NOT cheaper per token" in never and "never turns compute-bound" in never


# the stored run of notebook 04: 7.59 / 2.66 / 1.39 / 1.23 ms per token at 8 / 32 / 128 / 512 tokens
STORED_LENGTHS, STORED_MEDIANS = (8, 32, 128, 512), (0.0607, 0.0850, 0.1780, 0.6301)


def test_flattening_length_is_where_the_time_per_token_falls_less_than_its_share_per_doubling():
    # 41%, 28% then 6% per doubling: flat from 128 on
    assert n04.flattening_length(STORED_LENGTHS, STORED_MEDIANS) == 128
    assert n04.flattening_length(STORED_LENGTHS, STORED_MEDIANS, fall=0.30) == 32
    assert n04.flattening_length(STORED_LENGTHS, STORED_MEDIANS, fall=0.05) is None
    assert n04.flattening_length((8,), (0.06,)) is None


def test_prefill_knee_compares_the_measured_flattening_with_the_cost_models_turn():
    late = n04.prefill_knee(STORED_LENGTHS, STORED_MEDIANS, 16, "gpt2")
    assert "stopped falling (less than 15% per doubling of the prompt) from **128 prompt tokens** on" in late
    assert "later than the cost model's 16" in late and "few rows" in late and "agrees" not in late
    agrees = n04.prefill_knee(STORED_LENGTHS, STORED_MEDIANS, 64, "gpt2")
    assert "**128 prompt tokens**" in agrees and "agrees with the cost model" in agrees and "few rows" not in agrees
    falling = n04.prefill_knee((8, 32, 128), (0.0607, 0.0850, 0.1780), 16, "gpt2")  # still 28% per doubling
    assert "had not stopped falling by 128 tokens" in falling and "few rows" in falling


def test_decode_floor_near_and_far():
    near = n04.decode_floor(1.7, 0.020, 0.002, 0.034, 495, "gpt2", small=("tiny", 7.1))
    assert "**1.7x**" in near and "**17x** its compute floor" in near and "as the articles say" in near
    assert "tiny, sat at 7.1x" in near and "not spent reading weights" in near
    far = n04.decode_floor(6.0, 0.020, 0.002, 0.120, 495, "gpt2")
    assert "did NOT come near" in far and "tiny" not in far
    # the stored run's case: the small model at 4.9x its floor is not "about as near" as the full shape at 2.7x
    apart = n04.decode_floor(2.7, 0.0148, 0.00136, 0.0404, 494, "gpt2", small=("tiny", 4.9))
    assert "not spent reading weights" in apart and "about as near" not in apart
    assert "about as near" in n04.decode_floor(2.7, 0.0148, 0.00136, 0.0404, 494, "gpt2", small=("tiny", 3.5))


def test_decode_gap_blames_python_only_when_the_profile_does():
    kernels = {"matmuls": 0.025, "attention": 0.002, "Python & dispatch": 0.003}
    text = n04.decode_gap(kernels, step_s=0.030, floor_s=0.020, weight_bytes=500e6, model="gpt2")
    # 27 ms of 30 in operators = 90%; 500 MB in 25 ms = 20.0 GB/s
    assert "**90%**" in text and "**10%**" in text and "20.0 GB/s" in text and "not Python overhead" in text
    python = n04.decode_gap({"matmuls": 0.010, "Python & dispatch": 0.020}, 0.030, 0.010, 500e6, "tiny")
    assert "**67%** in Python" in python and "notebook 08 removes" in python and "For " not in python
    busy = n04.decode_gap({"matmuls": 0.065, "attention": 0.226, "Python & dispatch": 0.0}, 0.5, 0.06, 5e8, "gpt2")
    assert "largest group was attention (45%)" in busy and "not in Python" in busy  # 226 / 500 ms
    # the profiler saw 300 ms of operators in a 200 ms step (a busy machine): shares of 300 ms, never above 100%
    seen = {"matmuls": 0.060, "norms & activations": 0.240, "Python & dispatch": 0.0}
    over = n04.decode_gap(seen, 0.2, 0.03, 5e8, "g")
    assert "alone 60.0 ms, 20%" in over and "norms & activations (80%)" in over
    both = n04.decode_gap(kernels, 0.030, 0.020, 500e6, "gpt2", small=("tiny", {"Python & dispatch": 0.004}, 0.008))
    assert "For tiny, Python and dispatch took **50%** of its 8.00 ms step: with so few bytes" in both
    assert "fixed cost" not in n04.decode_gap(kernels, 0.03, 0.02, 5e8, "gpt2", small=("t", {}, 0.008))


def test_context_effect_flat_and_growing():
    flat = n04.context_effect((8, 512), (0.030, 0.033), (0.020, 0.021), 37.7e6, 495e6, 9.6)
    assert "(1.10x)" in flat and "37.7 MB" in flat and "changed 9.6x" in flat
    grew = n04.context_effect((8, 512), (0.03, 0.06), (0.02, 0.021), 1e6, 5e8, 9.6)
    assert "grew more than its floor" in grew and "A hypothesis, not measured here" in grew
    assert "not pure streaming" not in grew


def test_batch_with_and_without_a_turn():
    text = n04.batch(32, 3.2, 10.0, 16, 12)
    assert "**3.2x**" in text and "**10.0x**" in text and "From batch **16** on" in text and "batch **12**" in text
    free = n04.batch(32, 1.4, 22.9, None, 100)
    assert "nearly free up to 32" in free and "beyond this sweep" in free
    cheap = n04.batch(32, 1.97, 16.2, None, 100)  # grew almost 2x without staying there: not "nearly free"
    assert "nearly free" not in cheap and "grew 2.0x" in cheap and "not free" in cheap
    assert "no batch size" in n04.batch(4, 1.1, 3.6, None, None)


def test_batch_names_a_bigger_batch_that_stepped_faster_than_batch_one():
    dip = n04.batch(32, 2.1, 15.6, 32, 12, times={1: 0.0344, 4: 0.0265, 16: 0.0543, 32: 0.0707})
    assert "Batch 4's step (26.5 ms) was even faster than batch 1's (34.4 ms)" in dip and "notebook 08" in dip
    # within 10% of batch 1 (noise), or no batch 1 to compare with: nothing to explain
    for times in ({1: 0.0344, 4: 0.0320, 32: 0.0707}, {4: 0.0265, 32: 0.0707}, None):
        assert "even faster" not in n04.batch(32, 2.1, 15.6, 32, 12, times=times)


def test_batch_curve_names_the_fastest_batch_and_the_dip_only_when_the_curve_is_not_monotone():
    # notebook 07's stored fast-path TPOTs: 34.2 / 31.4 / 23.7 / 26.9 / 34.3 ms at batch 1 / 2 / 4 / 8 / 16
    text = n04.batch_curve((1, 2, 4, 8, 16), (0.0342, 0.0314, 0.0237, 0.0269, 0.0343))
    assert "**25% faster** from batch 2 to batch 4" in text
    assert "fastest at **batch 4** (23.7 ms, 0.69x batch 1's" in text
    assert "notebook 08, section 5" in text and "disturbance" in text
    assert n04.batch_curve((1, 2, 4), (0.010, 0.0095, 0.012)) == ""  # a 5% dip is noise: the curve grew
    assert n04.batch_curve((1,), (0.010,)) == ""
    late = n04.batch_curve((1, 2, 4), (0.010, 0.020, 0.015))  # a slow point at 2, batch 1 still the fastest
    assert "25% faster** from batch 2 to batch 4" in late and "smallest batch was still the fastest" in late
    assert "fastest at **batch" not in late


def test_notebook_07_batching_names_a_dip_between_the_ends():
    curve = ((1, 2, 4, 8, 16), (0.0342, 0.0314, 0.0237, 0.0269, 0.0343))
    text = narrate.n07.batching(1, 16, 0.0342, 0.0343, 29, 466, 9.0, "gpt2", curve=curve)
    assert "fastest at **batch 4**" in text and text.endswith("took 9.0x as long as one prompt.")
    flat = narrate.n07.batching(1, 16, 0.010, 0.012, 100, 1333, 9.0, "gpt2", curve=((1, 16), (0.010, 0.012)))
    assert "not monotone" not in flat


def verdict(**changes) -> TpotVerdict:
    base = TpotVerdict(batch=32, batch_time_x=3.2, bytes_label="int8", bytes_x=0.26, bytes_time_x=0.5,
                       fast_label="fast path (eager)", fast_s=0.025, bandwidth_floor_s=0.020, compute_floor_s=0.0025)
    return dataclasses.replace(base, **changes)


def test_tpot_verdict_each_outcome():
    memory = n04.tpot_verdict(verdict())
    assert "step time **x3.2**" in memory and "TPOT **x0.50**" in memory and "x0.26 the bytes" in memory
    assert "**1.2x** the bandwidth floor, **10x** the compute floor" in memory  # 25/20, 25/2.5
    assert "Verdict: memory, as article 000 says" in memory and "INFERLAB_FULL_RUN" in memory
    assert "32 times the arithmetic cost only x3.2 the step time" in memory  # the number, not "barely"
    assert "compute floor |\n\n**Verdict" in memory  # the verdict is a paragraph, not a row of the table
    assert "not memory alone" in n04.tpot_verdict(verdict(batch_time_x=20.0))
    slow_int8 = n04.tpot_verdict(verdict(bytes_time_x=1.3, compiled=True))
    assert "not every test agrees" in slow_int8 and "kernels for int8 are slower" in slow_int8
    assert "INFERLAB_FULL_RUN" not in slow_int8
    far = n04.tpot_verdict(verdict(fast_s=0.1))
    assert "took 5.0x the bandwidth floor" in far and "notebook 08 profiles" in far  # 0.1 / 0.02, and where to look
    assert "fixed costs" not in far  # no cause without a measurement beside it
    four = n04.tpot_verdict(verdict(batch_time_x=4.0))  # x4.0 the step for x32 the FLOPs: the number, never "barely"
    assert "only x4.0 the step time" in four and "barely" not in four
    assert "not memory alone" in n04.tpot_verdict(verdict(batch_time_x=8.0))  # batch / 4: the threshold itself


def test_myth_bandwidth_bound_or_not():
    assert "bandwidth-bound" in n04.myth(0.002, 0.020, 0.034)
    far = n04.myth(0.002, 0.020, 0.120)
    assert "**6.0x**" in far and "neither ceiling" in far and "10.0x longer" in far


def comparison(cached_step: float, uncached_steps: tuple[float, ...]) -> CacheComparison:
    n = len(uncached_steps)
    return CacheComparison(prompt_len=300, cached_ids=tuple(range(n)), uncached_ids=tuple(range(n)),
                           cached_times=((cached_step,) * n,), uncached_times=(uncached_steps,),
                           max_abs_diff=(0.0,) * n, max_logit=(1.0,) * n, device="cpu", dtype="float32", model="gpt2")


def test_cache_win_several_fold_and_not():
    win = n05.cache_win(comparison(0.03, (0.2, 0.25, 0.3, 0.35)))  # 1.1 s against 0.12 s: 9.2x
    assert "**9.2x faster with the cache**" in win and "over 303 tokens" in win and "350.0 ms" in win
    small = n05.cache_win(comparison(0.03, (0.03, 0.04, 0.04, 0.05)))  # 0.16 s against 0.12 s: 1.3x
    assert "only **1.3x**" in small and "longer the text" in small


def test_redone_work_follows_the_time_or_not():
    assert "The time follows the work" in n05.redone_work(300, 150, "gpt2")
    hidden = n05.redone_work(10, 1.3, "tiny")
    assert "**10x** the FLOPs" in hidden and "did not show up as time" in hidden


def test_small_model_and_memory_sentences():
    assert "only **1.3x**" in n05.small_model(1.3, "tiny", 48) and "GPT-2's full shape" in n05.small_model(1.3, "t", 4)
    assert "gained **3.0x**" in n05.small_model(3.0, "tiny", 48)
    assert "5,120 bytes" in n05.grown(12, 4, 35, 23, 5120) and "1,280 per layer" in n05.grown(12, 4, 35, 23, 5120)
    text = n05.crossover("gpt2", "float32", 6702, 1024, 8, 32, 131072, 0.0048, 35)
    assert "**6,702 cached tokens**" in text and "6.5 full 1024-token" in text and "4x smaller" in text
    assert "0.48%" in text
    # 512 x 5,120 B = 2.5 MiB, 7.0% of 37.4 MB; 1024 x 73,728 B = 72 MiB > 50 MB of weights
    small = n05.wall(512, 5120, 37_400_000)
    assert "**2.5 MiB**" in small and "7.0%" in small and "outgrows" not in small
    assert "outgrows the weights" in n05.wall(1024, 73728, 50_000_000)


def test_notebook_modules_load_on_first_use_and_nothing_else_does():
    assert narrate.n05.__name__ == "inferlab.narrate.n05"
    with pytest.raises(AttributeError, match="no attribute 'loudly'"):
        narrate.loudly  # noqa: B018


def test_00_never_prints_the_intensity_and_the_ridge_as_the_same_number():
    """2.94 above a ridge of 2.86 read "2.9 FLOPs per byte ... above the ridge point (2.9 FLOP/B)"."""
    from inferlab.narrate import n00

    text = n00.per_token(0.01, 20, 0.004, 2.94, 2.86, "gpt2")
    assert "2.94 FLOPs per byte" in text and "(2.86 FLOP/B)" in text
    text = n00.per_token(0.01, 20, 0.004, 0.9, 6.7, "gpt2", knee=150)
    assert "0.9 FLOPs per byte" in text and "(6.7 FLOP/B)" in text  # far apart: one decimal is enough
