"""Notebook 01's findings (tokens), told from its own numbers; each function has its other-outcome branch.

>>> character_cost(n_chars=7, n_bytes=21, n_tokens=14, whole=2)[:40]
'The sentence has **7 characters**, **21 '
"""

from __future__ import annotations

ARTICLES = "00_start_here.ipynb#the-two-source-articles"
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _per(n: float, unit: str) -> str:
    return f"{n:g} {unit}" if n == 1 else f"{n:g} {unit}s"


def character_cost(n_chars: int, n_bytes: int, n_tokens: int, whole: int) -> str:
    """How many tokens a text of (mostly multi-byte) characters costs, and how many are whole characters."""
    ratio = n_tokens / n_chars
    parts = n_tokens - whole
    head = (f"The sentence has **{_per(n_chars, 'character')}**, **{n_bytes} UTF-8 bytes** and "
            f"**{_per(n_tokens, 'token')}**: {ratio:.1f} tokens per character. ")
    if parts == 0:
        return head + "Every token is a whole character (or several): no character was cut into byte pieces."
    verb = "is a whole character" if whole == 1 else "are whole characters"
    return head + f"Only **{whole}** of the tokens {verb}; the other {parts} hold byte pieces of a character."


def article_word_count(text: str, n_tokens: int, article_tokens: int = 4) -> str:
    """Set GPT-2's token count for ``text`` against the count the source article gives (a word-level count)."""
    cite = f"[the source articles]({ARTICLES})"
    said = f"{WORDS.get(article_tokens, article_tokens)} {'token' if article_tokens == 1 else 'tokens'}"
    if n_tokens == article_tokens:
        return (f"GPT-2 cuts `{text}` into {_per(n_tokens, 'token')}, the same count as {cite} "
                f"give (*\"{said}\"*, our translation).")
    verdict = "more" if n_tokens > article_tokens else "fewer"
    return (
        f"One of {cite} says this question is *\"{said}\"* (our translation); GPT-2's "
        f"tokenizer gives **{n_tokens}**, {n_tokens / article_tokens:.1f}x {verdict}. Both can be right: they count "
        "with different vocabularies. A vocabulary built from Chinese text has whole words such as 什么 (*what*), "
        "是 (*is*), 量子 (*quantum*) and 计算 (*computing*) as entries, so a word-level or Chinese-aware "
        "tokenizer needs about one token per word. GPT-2's byte-level BPE learned its merges from mostly English "
        "web text: it has entries for few Chinese characters and almost no Chinese words, so most characters "
        "are cut into byte pieces (the chips above). The same question costs a Chinese-trained model a few "
        "tokens, and GPT-2 several times more.")


def chars_per_token_rule(chars_per_token: float, per_1000: float) -> str:
    """The rule of thumb for English prose, from the measured characters per token."""
    if chars_per_token >= 3:
        return (f"English prose in this notebook: **{chars_per_token:.1f} characters per token**, so a "
                f"1,000-character English text costs about {per_1000:.0f} tokens.")
    return (f"The English prose here came out at only **{chars_per_token:.1f} characters per token** (about "
            f"{per_1000:.0f} tokens per 1,000 characters): unusual for English, so count tokens for your own text "
            "rather than trusting a rule of thumb.")


def chat_template(n_messages: int, n_chars: int, n_tokens: int, specials: list[str], split: list[str]) -> str:
    """What the chat template added: the text the model reads and how GPT-2 counts its markers."""
    head = (f"The template turned {_per(n_messages, 'message')} into one text of {n_chars} characters, "
            f"**{_per(n_tokens, 'token')}** for GPT-2's tokenizer. ")
    if split:
        return head + (
            f"GPT-2 has never seen this format: its markers ({', '.join(f'`{s}`' for s in split)}) are not in its "
            "vocabulary, so they are cut into ordinary pieces such as `<`, `|`, `im`. A model trained with "
            "ChatML has each marker as **one special token** of its vocabulary, as `<|endoftext|>` is for GPT-2.")
    return head + (f"Every marker ({', '.join(f'`{s}`' for s in specials)}) is one special token of this "
                   "vocabulary, as in the models trained with this format.")


def language_cost(en_tokens: int, en_chars_per_token: float, worst_name: str, worst_tokens: int,
                  zh_chars: int, zh_tokens: int) -> str:
    """What the same sentence costs in English, in the most expensive language, and in Chinese."""
    text = f"English needs **{en_tokens}** tokens ({en_chars_per_token:.1f} characters per token). "
    if worst_name == "English" or worst_tokens <= en_tokens:
        text += "No other language here costs more than English for the same meaning. "
    else:
        text += (f"The most expensive here is **{worst_name}**: {worst_tokens} tokens, "
                 f"**{worst_tokens / en_tokens:.1f}x** English for the same meaning. ")
    ratio = zh_tokens / zh_chars
    verb = "but pays" if zh_tokens > zh_chars else "and pays"
    return text + (f"Chinese writes the sentence in only {zh_chars} characters {verb} {zh_tokens} tokens "
                   f"({ratio:.2f} per character, {zh_tokens / en_tokens:.1f}x English).")
