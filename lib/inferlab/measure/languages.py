"""The same meaning in two languages: how many tokens each text takes, and the prefill time that costs.

GPT-2's byte-level BPE learned its merges from mostly English web text: a common English word is one
token, while a Chinese character (three bytes in UTF-8) is one to three tokens. The same question
therefore takes several times the tokens in Chinese, and every token is work: in a prompt, prefill work
(TTFT); in an answer, one decode step (TPOT) each. Notebook 07 measures it::

    >>> from inferlab.measure import languages
    >>> texts = {"中文": "什么是量子计算", "English": "What is quantum computing?"}
    >>> rows = languages.prompt_ttft({"gpt2": g}, texts, repeats=5)   # doctest: +SKIP
    >>> [(r.cost.n_chars, r.cost.n_tokens) for r in rows]   # doctest: +SKIP
    [(7, 14), (26, 5)]
    >>> Markdown(n07.language_table(rows))                   # doctest: +SKIP

Token counts come from ``tokens.costs`` (one implementation for every notebook that counts tokens).

``finding`` says in words what one model's pair of measurements showed (the notebook's hidden cell).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..engine import generate
from ..errors import bad_value, check_number
from ..i18n import tr
from ..models import Model
from ..timing import Summary, interleave, summarize
from ..tokens import TextCost, costs


@dataclass(frozen=True)
class PromptTTFT:
    """TTFT of one prompt on one model (tokenize + prefill + the first token), over repeated runs."""

    model: str
    cost: TextCost  # the prompt's name, characters, UTF-8 bytes and tokens under this model's tokenizer
    ttft: Summary  # seconds

    def __repr__(self) -> str:
        return tr("PromptTTFT({model}, {name}: {tokens} tokens, median TTFT {ms:.2f} ms over {n} runs)",
                  model=self.model, name=self.cost.name, tokens=self.cost.n_tokens, ms=self.ttft.median * 1e3,
                  n=self.ttft.n)


def prompt_ttft(models: Mapping[str, Model], prompts: Mapping[str, str], *, repeats: int = 5,
                warmup: int = 1) -> list[PromptTTFT]:
    """Each prompt's TTFT on each model: one row per (model, prompt), models outer, in the order given.

    Each run is a whole request of one new token (``generate(..., 1)``, as ``latency.ttft_sweep`` times it).
    The runs of every (model, prompt) pair take turns (``timing.interleave``), so a machine that gets busier
    halfway slows every prompt alike instead of the last one measured.
    """
    check_number("repeats", repeats, low=1, integer=True, fix="time at least one run")
    check_number("warmup", warmup, low=0, integer=True)
    if not models or not prompts:
        raise bad_value("prompts" if models else "models", prompts if models else models, "a non-empty mapping",
                        'e.g. prompt_ttft({m.info.name: m}, {"中文": "什么是量子计算？", "English": "What is ..."})')
    counted = {name: costs(model.tokenizer, prompts) for name, model in models.items()}
    calls = {(name, label): (lambda model=model, text=text: generate(model, text, 1, stop_at_eos=False).latency.ttft)
             for name, model in models.items() for label, text in prompts.items()}
    times = interleave(calls, repeats, warmup=warmup)
    return [PromptTTFT(name, cost, summarize(times[name, cost.name])) for name, row in counted.items() for cost in row]
