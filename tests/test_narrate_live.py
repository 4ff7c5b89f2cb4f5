"""Live narration on a busy machine (review #50, §3 defect 4): where the numbers a cell measured cannot come from a
quiet run, the finding says so in one line and asks for the cell to be re-run, instead of telling the lesson
backwards from them (09's load sweep read as "it kept up", its chunks blamed on the prompt, 03's eager at 0.58x
called "about the same").

The numbers are hand-made, each finding's branches tested at their branch points, in English and Chinese. The
checks reuse the gate's thresholds (``gate.SPIKE_X``, ``gate.NOISE_X``); a stored run's gate is tested in
test_gate.py.
"""

from __future__ import annotations

import math

import pytest
from test_narrate_language import chinese
from test_serve_views import points

from inferlab import gate, i18n, narrate

n03, n09 = narrate.n03, narrate.n09
RERUN = "re-run this cell"
GPT2 = (12, 12, 1024, 576.0)  # kernel_cost's last four fields: real GPT-2's layers, heads, context, MiB


def test_falls_finds_a_curve_that_dropped_by_more_than_the_spike_factor():
    assert gate.falls([0.2, 0.9, 3.0]) is None  # a curve that grows
    assert gate.falls([0.4, 0.2, 0.9]) is None  # exactly 2x lower later: within a quiet run's noise
    assert gate.falls([0.41, 0.2, 0.9]) == (0, 1)
    assert gate.falls([6.0, 3.0, 0.15, 0.6]) == (0, 2)  # review: 6.0 s at the lowest rate, ~150 ms higher up
    assert gate.falls([0.1, 0.3, 0.2, 0.1]) == (1, 3)  # the highest point before the drop is named
    assert gate.falls([]) is None and gate.falls([5.0]) is None


def test_noise_is_the_median_over_the_fastest_repeat():
    assert gate.noise([0.01, 0.01, 0.01]) == 1.0
    assert gate.noise([0.010, 0.014, 0.020]) == pytest.approx(1.4)
    assert gate.noise([0.02]) == 1.0  # one repeat (the test scale): nothing to judge


def test_the_rerun_line_in_both_languages(zh):
    chinese(gate.rerun_cell())
    i18n.set_language("en")
    assert RERUN in gate.rerun_cell() and gate.rerun_cell().startswith("**Other programs")


# ------------------------------------------------------------------------------------------------ 09 §4: the knee
V_SHAPE = (6.0, 3.0, 0.15, 0.6)  # review 09_cell28: p99 6.0 s at the lowest rate, ~150 ms at a higher one


def test_a_v_shaped_curve_is_called_disturbed_not_kept_up(zh):
    chinese(n09.knee(points(*V_SHAPE), 1.0))
    i18n.set_language("en")
    text = n09.knee(points(*V_SHAPE), 1.0)
    assert "At 1.0 requests/s the slowest 1% waited 6000.0 ms" in text and "at 4.0 requests/s" in text
    assert "only 150.0 ms" in text and RERUN in text
    for lesson in ("kept up", "**knee**", "never tripled", "**goodput**", "No rate tried", "arrived faster"):
        assert lesson not in text, lesson


def test_the_knee_branch_point_a_first_rate_twice_as_slow_is_still_read(zh):
    """Exactly 2x above a later rate is within the noise: read, from the lower of the first two rates' p99 (a
    baseline of the slow first point, 0.4 s, would need 1.2 s and find the knee at 8 requests/s, not 4)."""
    within, beyond = points(0.4, 0.2, 0.9, 5.0), points(0.41, 0.2, 0.9, 5.0)
    chinese(n09.knee(within, 1.0)), chinese(n09.knee(beyond, 1.0))
    i18n.set_language("en")
    text = n09.knee(within, 1.0)
    assert "At 2.0 requests/s the slowest 1% waited 200.0 ms" in text
    assert "From 4.0 requests/s it jumped to 900.0 ms: the **knee**" in text and RERUN not in text
    assert RERUN in n09.knee(beyond, 1.0) and "**knee**" not in n09.knee(beyond, 1.0)


def test_a_quiet_curve_keeps_its_first_rate_as_the_baseline(english):
    """The stored run's shape: the knee at the second rate, read against the first."""
    text = n09.knee(points(0.133, 0.911, 2.956, 4.592), 1.0)
    assert "At 1.0 requests/s the slowest 1% waited 133.0 ms" in text
    assert "From 2.0 requests/s it jumped to 911.0 ms" in text and RERUN not in text
    text = n09.knee(points(0.133), 1.0)  # one rate: its own baseline
    assert "At 1.0 requests/s" in text and "never tripled" in text


# ----------------------------------------------------------------------------------------------- 09 §5: the chunks
# whole p99, chunked p99, TTFT whole, TTFT chunked, chunk, long prompt, median gap before, during (seconds)
QUIET = (0.78, 0.10, 0.79, 1.1, 64, 768, 0.019, 0.094)  # the stored run's numbers


def chunks(**changed) -> str:
    names = ("whole_p99", "chunked_p99", "ttft_whole", "ttft_chunked", "chunk", "long_prompt", "before", "during")
    return n09.chunks(**{**dict(zip(names, QUIET, strict=True)), **changed})


def test_a_decode_stall_longer_than_the_whole_prefill_is_the_machines(zh):
    chinese(chunks(whole_p99=1.59))
    i18n.set_language("en")
    assert RERUN not in chunks(whole_p99=1.58)  # exactly 2x the prompt's own TTFT: not yet
    text = chunks(whole_p99=1.59)
    assert "read whole, a decode waited 1590.0 ms, over 2x the 790.0 ms" in text and RERUN in text
    assert "in chunks, a decode" not in text and "bounded slowdown" not in text and "did not smooth" not in text


def test_a_chunked_stall_beyond_twice_the_chunks_median_gap_is_the_machines(zh):
    chinese(chunks(chunked_p99=0.189)), chinese(chunks(chunked_p99=0.189, whole_p99=2.0))
    i18n.set_language("en")
    assert RERUN not in chunks(chunked_p99=0.188)  # exactly 2x the median gap while the chunks ran: not yet
    text = chunks(chunked_p99=0.189)
    assert "in chunks, a decode waited 189.0 ms, over 2x the decodes' median gap of 94.0 ms" in text
    assert RERUN in text and "read whole, a decode" not in text and "bounded slowdown" not in text
    both = chunks(chunked_p99=0.189, whole_p99=2.0)
    assert "read whole, a decode waited 2000.0 ms" in both and "in chunks, a decode waited 189.0 ms" in both
    assert RERUN not in chunks(during=math.nan, before=math.nan)  # a phase with no gap (the test scale) says nothing


def test_the_reviewed_run_no_longer_blames_the_prompt(zh):
    """09_cell32: 2546.3 ms whole and 1815.9 ms in chunks (0.71x) for a 768-token prompt, told as "the prompt was
    short enough"; twelve chunks' worth in one step that cost about as much as one chunk is the machine."""
    busy = {"whole_p99": 2.5463, "chunked_p99": 1.8159, "ttft_whole": 2.6, "ttft_chunked": 2.9, "during": 1.5}
    chinese(chunks(**busy))
    i18n.set_language("en")
    text = chunks(**busy)
    assert "12 chunks' worth of tokens into one step" in text and RERUN in text and "short enough" not in text


def test_a_flat_step_is_called_short_only_for_a_prompt_of_a_few_chunks(zh):
    """The branch point: a prompt of 4 chunks or more cannot be "short enough" to explain flat steps."""
    short, long = chunks(long_prompt=255, chunked_p99=0.6, during=0.5), chunks(long_prompt=256, chunked_p99=0.6,
                                                                             during=0.5)
    chinese(short), chinese(long)
    i18n.set_language("en")
    short, long = chunks(long_prompt=255, chunked_p99=0.6, during=0.5), chunks(long_prompt=256, chunked_p99=0.6,
                                                                             during=0.5)
    assert "the prompt was short enough" in short and RERUN not in short
    assert "4 chunks' worth" in long and RERUN in long and "short enough" not in long
    assert "bounded slowdown" in chunks() and RERUN not in chunks()  # the quiet stored run: unchanged


# ------------------------------------------------------------------------------------------ 03 §7: eager vs SDPA
def kernel_cost(ratio: float, runs=()) -> str:
    return n03.kernel_cost(ratio, 128, 5, 2.5, *GPT2, runs=runs)


@pytest.mark.parametrize(("ratio", "branch"), [(1.16, "slower"), (1.15, "same"), (1.0, "same"), (1 / 1.15, "same"),
                                               (1 / 1.15 - 1e-9, "faster"), (0.58, "faster")])
def test_kernel_cost_reads_each_ratio_its_own_way(ratio, branch, zh):
    chinese(kernel_cost(ratio))
    i18n.set_language("en")
    text = kernel_cost(ratio)
    assert ("two kernels cost about the same" in text) == (branch == "same")
    assert ("was the faster one" in text and RERUN in text) == (branch == "faster")
    assert ("about the same" not in text and "faster one" not in text) == (branch == "slower")
    assert "576 MiB for one prefill" in text


def test_kernel_cost_calls_a_run_with_noisy_repeats_disturbed(zh):
    """A kernel whose median is beyond 1.4x its fastest repeat (the gate's noise rule): the ratio is not read."""
    quiet = [[0.0171, 0.0182, 0.0190, 0.0183, 0.0201], [0.010, 0.011, 0.014, 0.014, 0.02]]  # worst: exactly 1.4x
    noisy = [[0.0171, 0.0182, 0.0190, 0.0183, 0.0201], [0.010, 0.011, 0.0141, 0.015, 0.02]]
    assert "结论。这些字节" in chinese(kernel_cost(0.58, noisy))  # no English space between Chinese sentences
    i18n.set_language("en")
    assert RERUN not in kernel_cost(1.0, quiet) and "kernels cost about the same" in kernel_cost(1.0, quiet)
    text = kernel_cost(0.58, noisy)
    assert "One kernel's runs ranged from 10.0 ms to 20.0 ms, its median 1.41x its fastest" in text
    assert RERUN in text and "about the same" not in text and "faster one" not in text
    assert "2.50 MiB" in text and "576 MiB for one prefill" in text
    assert RERUN in kernel_cost(1.0, noisy)  # even a ratio that looks plausible is not read from a disturbed run
    assert RERUN not in kernel_cost(1.0, [[0.02]])  # one repeat (the test scale)
