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
    >>> Markdown(languages.markdown(rows))                   # doctest: +SKIP

Token counts come from ``tokens.costs`` (one implementation for every notebook that counts tokens).

``finding`` says in words what one model's pair of measurements showed (the notebook's hidden cell).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def markdown(rows: Sequence[PromptTTFT]) -> str:
    """A Markdown table of ``prompt_ttft`` rows: model, prompt, characters, tokens, tokens per character, TTFT."""
    head = tr("| model | prompt | characters | tokens | tokens per character | median TTFT (ms) |")
    lines = [head, "|---|---|---|---|---|---|"]
    lines += [f"| {r.model} | {r.cost.name} | {r.cost.n_chars} | {r.cost.n_tokens} | "
              f"{r.cost.tokens_per_char:.2f} | {r.ttft.median * 1e3:.2f} |" for r in rows]
    return "\n".join(lines)


def finding(zh: PromptTTFT, en: PromptTTFT, answer_zh: TextCost, answer_en: TextCost, tpot_s: float) -> str:
    """What the same question in Chinese (``zh``) and English (``en``) cost on one model, in words (Markdown).

    ``answer_zh``/``answer_en``: one answer sentence in each language (from ``tokens.costs``); ``tpot_s``: a TPOT
    measured on the same model (seconds), to turn the answer's tokens into decode time. The TTFT comparison has two
    branches: Chinese slower (the expected case), or the difference lost in the noise of short prompts.
    """
    text = tr("The same question is **{zh_tokens} tokens** in Chinese and **{en_tokens}** in English ({ratio:.1f}x), "
              "although the Chinese has fewer characters ({zh_chars} against {en_chars}). On {model} the Chinese "
              "prompt's median TTFT was **{zh_ms:.1f} ms** against **{en_ms:.1f} ms** ({t_ratio:.2f}x). ",
              zh_tokens=zh.cost.n_tokens, en_tokens=en.cost.n_tokens, ratio=zh.cost.n_tokens / en.cost.n_tokens,
              zh_chars=zh.cost.n_chars, en_chars=en.cost.n_chars, model=zh.model,
              zh_ms=zh.ttft.median * 1e3, en_ms=en.ttft.median * 1e3, t_ratio=zh.ttft.median / en.ttft.median)
    if zh.ttft.median > en.ttft.median:  # the English texts end in a space where a sentence follows; Chinese needs none
        text += tr("Same meaning, more tokens, more prefill: every token goes through every layer, so the "
                         "prompt's matrix products grow with its token count (the sweep above). The time grows less "
                         "than the tokens because part of a short prompt's TTFT does not depend on its length "
                         "(tokenizing, the LM head for the last position, Python).")
    else:
        text += tr("Here the difference was lost in the noise of two short prompts (re-run the cell); in "
                         "arithmetic the prompts still differ by their token counts, as the sweep above shows.")
    return text + "\n\n" + tr(
        "The answer pays again, one decode step per token: the sample answer sentence is {zh_tokens} tokens in "
        "Chinese and {en_tokens} in English, so at a TPOT of {tpot:.1f} ms (measured on {model} in section 4) it "
        "streams in about {zh_ms:.0f} ms against {en_ms:.0f} ms.", zh_tokens=answer_zh.n_tokens,
        en_tokens=answer_en.n_tokens, tpot=tpot_s * 1e3, model=zh.model, zh_ms=answer_zh.n_tokens * tpot_s * 1e3,
        en_ms=answer_en.n_tokens * tpot_s * 1e3)
