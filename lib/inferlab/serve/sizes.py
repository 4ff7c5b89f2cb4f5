"""How big each serving measurement is: one ``BenchSizes`` for notebook 09's runs and the serving benchmark.

    >>> BenchSizes().max_batch, BenchSizes.small().requests
    (8, 6)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchSizes:
    """How big each measurement is. The defaults take a few minutes on 2 CPU cores; ``small()`` seconds."""

    max_batch: int = 8
    requests: int = 16  # throughput and paged-vs-contiguous workloads
    workloads: int = 4  # the bench's throughput row: Poisson workloads (seeds) pooled; one run of each is noisy
    load: float = 1.0  # arrival rate / the estimated capacity (max_batch slots decoding the mean answer)
    throughput_requests: int = 64  # the bench's throughput row: requests per workload, arriving at
    throughput_load: float = 1.5  # this load, so the queue seldom empties (``measure.serving_targets.throughput_row``)
    prompt_tokens: tuple[int, int] = (16, 64)
    new_tokens: tuple[int, int] = (8, 128)
    peer_new_tokens: int = 32  # generate_batch takes one answer length for all
    fit_blocks: int = 48  # the KV memory of the paged-vs-contiguous row, in blocks of 16 positions
    long_prompt: int = 768  # the long prompt of the chunked-prefill row
    prefill_chunk: int = 64
    decoders: int = 4  # requests decoding when the long prompt arrives
    decoder_tokens: int = 48
    shared_prefix: int = 256
    prefix_requests: int = 8
    # load_sweep: each rate's requests arrive over about this many seconds, at least and at most this many requests
    # (a 12-request burst ended before an overloaded queue showed it was growing; 64 at 26 requests/s arrive in
    # 2.4 s, long enough to see the queue grow, and a fixed duration keeps the low rates cheap)
    load_seconds: float = 8.0
    load_requests: tuple[int, int] = (24, 64)

    @classmethod
    def small(cls) -> BenchSizes:
        """Seconds, for the test suite: every row runs, none of its numbers means much."""
        return cls(max_batch=4, requests=6, workloads=1, throughput_requests=5, prompt_tokens=(4, 12),
                   new_tokens=(2, 12), peer_new_tokens=4, fit_blocks=6, long_prompt=96, prefill_chunk=16, decoders=2,
                   decoder_tokens=8, shared_prefix=64, prefix_requests=3, load_seconds=0.5,
                   load_requests=(6, 8))
