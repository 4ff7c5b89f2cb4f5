"""Issue 45's targets, each measured and scored: ``python -m inferlab.tools.bench speculative`` prints them.

    equality        greedy answers equal il.generate's (both drafts, both languages, stop strings, EOS)
    sampling        the rejection rule's first-token distance from the target's, 4,000 draws (and the wrong rule's)
    verify          one forward of 8 tokens over one of 1, GPT-2's shape, on the path generate verifies with
    copy            the bundled model copies held-out passages its prompt holds (tokens until it strays)
    lookup          prompt lookup's tokens/s over il.generate on grounded prompts (and over plain decoding)
    transformers    the same against transformers' prompt_lookup_num_tokens (same tokens)
    plain text      lookup over plain decoding where there is nothing to look up
    predicted       predicted against measured speed-up, each draft
    refusals        bad input refused, by name, before any forward pass
"""

from __future__ import annotations

import dataclasses
import statistics

from ..engine import generate as plain_generate
from ..measure.targets import TargetRow, Targets
from ..measure.targets import ratio_row as _ratio_row
from ..models import Model
from .bench import (
    COPY_AT_LEAST,
    PLAIN_PROMPTS,
    copies_most,
    copy_lengths,
    draft_gain,
    first_token_tv,
    grounded_prompts,
    race,
)
from .cost import verify_cost
from .drafts import first_layers
from .loop import generate


def equality_row(model: Model, new_tokens: int = 40) -> TargetRow:
    draft = first_layers(model, 2)
    prompts = grounded_prompts(1) | {"plain en": PLAIN_PROMPTS["en"], "plain zh": PLAIN_PROMPTS["zh"]}
    same = total = 0
    for prompt in prompts.values():
        free = plain_generate(model, prompt, new_tokens, stop_at_eos=False).generated_ids
        stop_text = model.decode(free[new_tokens // 2: new_tokens // 2 + 2])
        for settings in ({}, {"stop_strings": [stop_text]}, {"stop_token_ids": [free[new_tokens // 3]]}):
            ref = plain_generate(model, prompt, new_tokens, **settings)
            for d in ("lookup", draft):
                out = generate(model, prompt, new_tokens, draft=d, **settings)
                same += out.generated_ids == ref.generated_ids and out.text == ref.text
                total += 1
    return TargetRow("greedy tokens equal to il.generate (en + zh, lookup + first 2 blocks, stop strings, "
                     "stop tokens)", "100%", same / total, same == total, f"{same} of {total} answers equal")


def sampling_row(model: Model, draws: int = 4000) -> TargetRow:
    ex = first_token_tv(model, first_layers(model, 2), "ROMEO.\n", (draws,))  # temperature 1, top-k 10
    passed = ex.rule[-1] <= 0.03 and ex.accept_all[-1] >= 0.1
    return TargetRow(f"sampling (T 1, top-k 10): TV of the first verified token from the target's, {draws:,} draws",
                     "<= 0.03", ex.rule[-1], passed,
                     f"the rule {ex.rule[-1]:.4f}; accepting every guess {ex.accept_all[-1]:.3f} (target >= 0.1); "
                     f"the draft's q differs from p by {ex.draft_vs_target:.3f}")


def verify_row(shape_model: Model, repeats: int = 7) -> TargetRow:
    fast = verify_cost(shape_model, [1, 2, 4, 8, 16], repeats=repeats)
    engine = verify_cost(shape_model, [1, 8], repeats=repeats, path="engine")
    curve = ", ".join(f"{k}: {t * 1e3:.1f} ms" for k, t in zip(fast.sweep.xs, fast.sweep.medians))
    return _ratio_row(f"verify_cost on {shape_model.info.name}, {fast.path} path: 8 tokens over 1", fast.ratios[3],
                      at_most=1.4, detail=f"{curve}; the engine's path (Hugging Face forward): 8 over 1 "
                                          f"{engine.ratios[1]:.2f}x ({engine.sweep.medians[0] * 1e3:.1f} ms for 1)")


def copy_row(model: Model) -> TargetRow:
    lengths = copy_lengths(model)
    good = sum(n >= COPY_AT_LEAST for n in lengths.values())
    return TargetRow(f"held-out passages (of {len(lengths)}) its prompt holds that the bundled model copies, "
                     f">= {COPY_AT_LEAST} tokens", f"> {len(lengths) // 2}", good, copies_most(lengths),
                     "tokens before the first divergence: " + ", ".join(f"{k} {v}" for k, v in lengths.items()))


def lookup_rows(model: Model, repeats: int = 3, new_tokens: int = 64) -> list[TargetRow]:
    rows = race(model, grounded_prompts(), new_tokens, repeats=repeats)
    plain = race(model, {f"plain {k}": v for k, v in PLAIN_PROMPTS.items()}, new_tokens, repeats=repeats)

    def median(rs, a, b):
        return statistics.median(r.over(a, b) for r in rs)
    each = "; ".join(f"{r.prompt}: {r.over('speculative', 'il.generate'):.2f}x, {r.tokens_per_round:.2f} tokens/round"
                     for r in rows)
    same = all(r.same_tokens["transformers"] and r.same_tokens["speculative"] for r in rows)
    return [
        _ratio_row(f"prompt lookup on grounded prompts, tokens/s over il.generate ({new_tokens} tokens, greedy)",
                   median(rows, "speculative", "il.generate"), at_least=2.0,
                   detail=f"median of {len(rows)} prompts ({each}); over plain decoding on the same path: "
                          f"{median(rows, 'speculative', 'plain'):.2f}x"),
        dataclasses.replace(_ratio_row(
            "the same against transformers' prompt_lookup_num_tokens (same model, prompts, k, n-gram)",
            median(rows, "speculative", "transformers"), at_least=1.0,
            detail=f"same tokens on every prompt: {same}; transformers over il.generate "
                   f"{median(rows, 'transformers', 'il.generate'):.2f}x"),
            passed=median(rows, "speculative", "transformers") >= 1.0 and same),
        _ratio_row("text with nothing to look up: lookup over plain decoding on the same path",
                   median(plain, "speculative", "plain"), at_least=0.95,
                   detail="; ".join(f"{r.prompt}: {r.over('speculative', 'plain'):.2f}x, {r.tokens_per_round:.2f} "
                                    f"tokens/round" for r in plain)),
    ]


def predicted_rows(model: Model, repeats: int = 3) -> list[TargetRow]:
    out = []
    prompts = grounded_prompts(1)
    for draft in ("lookup", first_layers(model, 2)):
        g = draft_gain(model, draft, prompts, repeats=repeats)
        error = g.predicted_speedup / g.speedup - 1
        out.append(TargetRow(f"predicted against measured speed-up, draft {g.draft}", "within 15%", abs(error),
                             abs(error) <= 0.15,
                             f"alpha {g.alpha:.2f}, c {g.c:.2f}, verify {g.verify:.2f} steps, k {g.k} (mean proposed "
                             f"{statistics.fmean(g.proposed):.2f}): tokens per round "
                             f"{g.expected_tokens_per_round:.2f} predicted, {g.tokens_per_round:.2f} measured; "
                             f"speed-up {g.predicted_speedup:.2f}x predicted, {g.speedup:.2f}x measured"))
    return out


def refusal_row(model: Model) -> TargetRow:
    bad = [{"k": 0}, {"k": 65}, {"ngram": 0}, {"draft": "ngram"}, {"draft": 3},
           {"draft": dataclasses.replace(model, info=dataclasses.replace(model.info, vocab_size=50000))}]
    clear = 0
    for kwargs in bad:
        try:
            generate(model, "ROMEO.", 4, **kwargs)
        except (ValueError, TypeError) as exc:
            clear += next(iter(kwargs)) in str(exc)
    return TargetRow("bad input refused with the parameter named (k, ngram, draft)", "100%", clear / len(bad),
                     clear == len(bad), f"{clear} of {len(bad)}")


def speculative_targets(model: Model, shape_model: Model, *, repeats: int = 3, log=print) -> Targets:
    """Every row: ``model`` the bundled one (answers, copying, lookup, drafts), ``shape_model`` GPT-2's shape (the
    verify's cost)."""
    rows = []
    for name, make in (("equality", lambda: [equality_row(model)]), ("sampling", lambda: [sampling_row(model)]),
                       ("verify", lambda: [verify_row(shape_model)]), ("copy", lambda: [copy_row(model)]),
                       ("lookup", lambda: lookup_rows(model, repeats)),
                       ("predicted", lambda: predicted_rows(model, repeats)),
                       ("refusals", lambda: [refusal_row(model)])):
        log(f"  measuring {name} ...")
        rows += make()
    return Targets(f"inferlab.speculative targets on {model.info.name} (verify on {shape_model.info.name})",
                   tuple(rows))
