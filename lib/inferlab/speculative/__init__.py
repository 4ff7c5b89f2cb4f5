"""Speculative decoding: several tokens for the price of one memory-bound step, with the target's own answer.

A decode step is bound by reading the weights (notebook 04), so a forward that reads them once for k + 1
tokens costs about what a forward for one token costs. Guess k tokens cheaply, check them all in that one
forward, keep the ones the target agrees with:

    t = speculative.generate(m, prompt, 64, draft="lookup", k=4)     # guesses copied from the prompt
    t.text, t.acceptance, t.tokens_per_round, t.latency
    t = speculative.generate(m, prompt, 64, draft=speculative.first_layers(m, 2))   # a draft model
    speculative.verify_cost(m, [1, 2, 4, 8])                          # one forward of k tokens, timed

``loop`` is the algorithm (and the accept rule), ``drafts`` where guesses come from, ``runners`` a model and
its cache on the engine's or the fast path, ``cost`` what a round costs and what it is predicted to gain.
"""

from .cost import VerifyCost, expected_tokens_per_round, predicted_speedup, verify_cost
from .drafts import MAX_K, first_layers, lookup
from .loop import Round, SpeculativeTrace, accept, generate

__all__ = ["MAX_K", "Round", "SpeculativeTrace", "VerifyCost", "accept", "expected_tokens_per_round",
           "first_layers", "generate", "lookup", "predicted_speedup", "verify_cost"]
