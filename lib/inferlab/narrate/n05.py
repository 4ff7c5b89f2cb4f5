"""Notebook 05 (the KV cache): each finding as Markdown, from the numbers the notebook measured.

In the reader's language (``inferlab.i18n.tr``). Times are seconds, sizes bytes. ``CacheComparison``
comes from ``inferlab.measure.compare_cache``.
"""

from __future__ import annotations

from ..i18n import tr
from ..measure.cache_on_off import CacheComparison
from ..units import ms


def cache_win(cmp: CacheComparison) -> str:
    """Per-step time with and without the cache, first step against last, and the total speed-up."""
    with_c, without_c = cmp.step_medians(True), cmp.step_medians(False)
    n = len(cmp.cached_ids)
    text = tr("On {model}, after a {prompt}-token prompt: without the cache the last step (over {last} tokens) took "
              "{without_last}, with the cache {with_last}. In total, {n} tokens took {without_total:.2f} s without "
              "and {with_total:.2f} s with the cache: ", model=cmp.model, prompt=cmp.prompt_len,
              last=cmp.prompt_len + n - 1, without_last=ms(without_c[-1]), with_last=ms(with_c[-1]), n=n,
              without_total=cmp.total_s(False), with_total=cmp.total_s(True))
    if cmp.speedup >= 2:
        return text + tr("**{x:.1f}x faster with the cache**. Without it every step runs the whole sequence again, "
                         "so each step costs about a prefill of everything so far; with it a step runs one token and "
                         "reads the stored K and V.", x=cmp.speedup)
    return text + tr("only **{x:.1f}x** faster. On this run the repeated work did not dominate: the sequence is short, "
                     "or most of each step's time is not arithmetic (reading the weights, running operators one by "
                     "one: notebook 04's profile), and both runs pay that alike. The longer the text, the larger the "
                     "cache's advantage.", x=cmp.speedup)


def redone_work(work_x: float, time_x: float, model: str) -> str:
    """FLOPs of the last uncached step over the cached one (``work_x``) against their time ratio (``time_x``)."""
    text = tr("On {model} the last uncached step did **{work:.0f}x** the FLOPs of the cached one and took "
              "**{time:.1f}x** as long. ", model=model, work=work_x, time=time_x)
    if time_x > work_x / 3:
        return text + tr("The time follows the work: recomputing the whole sequence is what the uncached run pays "
                         "for.")
    return text + tr("Much of the repeated work did not show up as time: the cached step is limited by reading the "
                     "weights, not by its FLOPs (notebook 04), while the uncached step reuses each weight it reads "
                     "for every token of the sequence, so its FLOPs run far faster. Redoing the tokens costs much "
                     "less than their FLOPs say, but it still costs, and more with every token.")


def small_model(speedup: float, model: str, tokens: int) -> str:
    """The loaded (small) model's own speed-up, set against the full-shape measurement."""
    if speedup >= 2:
        return tr("The loaded model, {model}, gained **{x:.1f}x** from the cache over its {n} tokens too.",
                  model=model, x=speedup, n=tokens)
    return tr("The loaded model, {model}, gained only **{x:.1f}x** over its {n} tokens: its steps do so little "
              "arithmetic that redoing it barely shows (notebook 04 profiles where a small model's step goes). That "
              "is why the time above is measured on GPT-2's full shape.", model=model, x=speedup, n=tokens)


def grown(steps: int, n_layer: int, tokens: int, prompt_len: int, per_token: int) -> str:
    """What the cache holds after ``steps`` decode steps (pure bookkeeping: no other outcome)."""
    return tr("After {steps} decode steps each of the {n_layer} layers holds K and V for {tokens} positions: {prompt} "
              "written at once by prefill, then one per decode step. Every step added {per_token:,} bytes in total, "
              "{per_layer:,} per layer. A decode step computes K and V only for its one new token and reads the rest "
              "from here.", steps=steps, n_layer=n_layer, tokens=tokens, prompt=prompt_len, per_token=per_token,
              per_layer=per_token // n_layer)


def crossover(name: str, dtype: str, crossover_tokens: float, n_ctx: int, kv_heads: int, n_head: int,
              gqa_bytes_per_token: int, loaded_share: float, loaded_tokens: int) -> str:
    """Where GPT-2's cache outgrows its weights, what grouped-query attention saves, and the loaded model's share."""
    return tr("For {name} ({dtype}) the cache equals the weights at about **{tokens:,.0f} cached tokens**, for example "
              "a batch of {contexts:.1f} full {n_ctx}-token contexts: serving many users at long contexts fills "
              "memory with cache, not weights. The 7B model stores {kv_heads} K/V heads for its {n_head} query heads, "
              "so its cache per token is {smaller}x smaller than without grouping ({gqa:,} B/token). For the loaded "
              "model, the {loaded_tokens}-token cache of section 2 took {share:.2%} of the weights' memory.",
              name=name, dtype=dtype, tokens=crossover_tokens, contexts=crossover_tokens / n_ctx, n_ctx=n_ctx,
              kv_heads=kv_heads, n_head=n_head, smaller=n_head // kv_heads, gqa=gqa_bytes_per_token,
              loaded_tokens=loaded_tokens, share=loaded_share)


def wall(n_ctx: int, per_token: int, weight_bytes: int) -> str:
    """The cache of one sequence at the end of the context window, against the weights."""
    full = n_ctx * per_token
    share = full / weight_bytes
    fields = {"n_ctx": n_ctx, "per_token": per_token, "mib": full / 2**20, "share": share}
    if share > 1:
        return tr("For this model that is {n_ctx} x {per_token:,} B = **{mib:.1f} MiB** per sequence, {share:.1%} of "
                  "its weights: one sequence's full cache outgrows the weights.", **fields)
    return tr("For this model that is {n_ctx} x {per_token:,} B = **{mib:.1f} MiB** per sequence, {share:.1%} of its "
              "weights.", **fields)
