"""Notebook 01's findings (tokens), told from its own numbers; each function has its other-outcome branch.

>>> character_cost(n_chars=7, n_bytes=21, n_tokens=14, whole=2)[:40]
'The sentence has **7 characters**, **21 '
"""

from __future__ import annotations

from collections.abc import Iterable

from ..charstream import CharStream, PairCost
from ..i18n import by_language, tr
from ..tokens import visible
from . import join

ARTICLES = "00_start_here.ipynb#the-two-source-articles"  # the same name and anchor in notebooks/zh/
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
WORDS_ZH = {1: "一", 2: "两", 3: "三", 4: "四", 5: "五", 6: "六"}  # "四个 token", as article 004 writes it


def _characters(n: float) -> str:
    return tr("{n:g} character", n=n) if n == 1 else tr("{n:g} characters", n=n)


def _tokens(n: float) -> str:
    return tr("{n:g} token", n=n) if n == 1 else tr("{n:g} tokens", n=n)


def _messages(n: float) -> str:
    return tr("{n:g} message", n=n) if n == 1 else tr("{n:g} messages", n=n)


def _codes(names: list[str]) -> str:
    return join(f"`{s}`" for s in names)


def _language(name: str) -> str:
    """A language's name (``tokens.SAME_MEANING``'s English keys) in the reader's language; others as given."""
    names = {"Spanish": tr("Spanish"), "German": tr("German"), "Russian": tr("Russian"), "Greek": tr("Greek"),
             "Arabic": tr("Arabic"), "Hindi": tr("Hindi"), "Chinese": tr("Chinese"), "Japanese": tr("Japanese"),
             "Korean": tr("Korean")}
    return names.get(name, name)


def character_cost(n_chars: int, n_bytes: int, n_tokens: int, whole: int) -> str:
    """How many tokens a text of (mostly multi-byte) characters costs, and how many are whole characters."""
    parts = n_tokens - whole
    head = tr("The sentence has **{chars}**, **{n_bytes} UTF-8 bytes** and **{tokens}**: {ratio:.1f} tokens per "
              "character. ", chars=_characters(n_chars), n_bytes=n_bytes, tokens=_tokens(n_tokens),
              ratio=n_tokens / n_chars)
    if parts == 0:
        return head + tr("Every token is a whole character (or several): no character was cut into byte pieces.")
    if whole == 1:
        return head + tr("Only **{whole}** of the tokens is a whole character; the other {parts} hold byte pieces of "
                         "a character.", whole=whole, parts=parts)
    return head + tr("Only **{whole}** of the tokens are whole characters; the other {parts} hold byte pieces of a "
                     "character.", whole=whole, parts=parts)


def article_word_count(text: str, n_tokens: int, article_tokens: int = 4) -> str:
    """Set GPT-2's token count for ``text`` against the count the source article gives (a word-level count).

    The English edition quotes the article in translation; the Chinese one quotes its own words (四个 token).
    """
    word = by_language(en=WORDS.get(article_tokens, article_tokens),
                       zh=WORDS_ZH.get(article_tokens, f"{article_tokens} "))
    said = tr("{word} token", word=word) if article_tokens == 1 else tr("{word} tokens", word=word)
    if n_tokens == article_tokens:
        return tr("GPT-2 cuts `{text}` into {tokens}, the same count as [the source articles]({link}) give "
                  "(*\"{said}\"*, our translation).", text=text, tokens=_tokens(n_tokens), link=ARTICLES, said=said)
    fields = {"link": ARTICLES, "said": said, "n": n_tokens, "x": n_tokens / article_tokens}
    if n_tokens > article_tokens:
        text = tr("One of [the source articles]({link}) says this question is *\"{said}\"* (our translation); "
                  "GPT-2's tokenizer gives **{n}**, {x:.1f}x more. ", **fields)
    else:
        text = tr("One of [the source articles]({link}) says this question is *\"{said}\"* (our translation); "
                  "GPT-2's tokenizer gives **{n}**, {x:.1f}x fewer. ", **fields)
    return text + tr(
        "Both can be right: they count with different vocabularies. A vocabulary built from Chinese text has whole "
        "words such as 什么 (*what*), 是 (*is*), 量子 (*quantum*) and 计算 (*computing*) as entries, so a word-level "
        "or Chinese-aware tokenizer needs about one token per word. GPT-2's byte-level BPE learned its merges from "
        "mostly English web text: it has entries for few Chinese characters and almost no Chinese words, so most "
        "characters are cut into byte pieces (the chips above). The same question costs a Chinese-trained model a "
        "few tokens, and GPT-2 several times more.")


def chars_per_token_rule(chars_per_token: float, per_1000: float) -> str:
    """The rule of thumb for English prose, from the measured characters per token."""
    if chars_per_token >= 3:
        return tr("English prose in this notebook: **{cpt:.1f} characters per token**, so a 1,000-character English "
                  "text costs about {per_1000:.0f} tokens.", cpt=chars_per_token, per_1000=per_1000)
    return tr("The English prose here came out at only **{cpt:.1f} characters per token** (about {per_1000:.0f} "
              "tokens per 1,000 characters): unusual for English, so count tokens for your own text rather than "
              "trusting a rule of thumb.", cpt=chars_per_token, per_1000=per_1000)


def chat_template(n_messages: int, n_chars: int, n_tokens: int, specials: list[str], split: list[str]) -> str:
    """What the chat template added: the text the model reads and how GPT-2 counts its markers."""
    head = tr("The template turned {messages} into one text of {chars} characters, **{tokens}** for GPT-2's "
              "tokenizer. ", messages=_messages(n_messages), chars=n_chars, tokens=_tokens(n_tokens))
    if split:
        return head + tr("GPT-2 has never seen this format: its markers ({markers}) are not in its vocabulary, so "
                         "they are cut into ordinary pieces such as `<`, `|`, `im`. A model trained with ChatML has "
                         "each marker as **one special token** of its vocabulary, as `<|endoftext|>` is for GPT-2.",
                         markers=_codes(split))
    return head + tr("Every marker ({markers}) is one special token of this vocabulary, as in the models trained with "
                     "this format.", markers=_codes(specials))


def language_cost(en_tokens: int, en_chars_per_token: float, worst_name: str, worst_tokens: int,
                  zh_chars: int, zh_tokens: int) -> str:
    """What the same sentence costs in English, in the most expensive language, and in Chinese.

    ``worst_name``: a language's English name, a key of ``tokens.SAME_MEANING`` (shown in the reader's language).
    """
    text = tr("English needs **{n}** tokens ({cpt:.1f} characters per token). ", n=en_tokens, cpt=en_chars_per_token)
    if worst_name == "English" or worst_tokens <= en_tokens:
        text += tr("No other language here costs more than English for the same meaning. ")
    else:
        text += tr("The most expensive here is **{name}**: {n} tokens, **{x:.1f}x** English for the same meaning. ",
                   name=_language(worst_name), n=worst_tokens, x=worst_tokens / en_tokens)
    fields = {"chars": zh_chars, "tokens": zh_tokens, "per": zh_tokens / zh_chars, "x": zh_tokens / en_tokens}
    if zh_tokens > zh_chars:
        return text + tr("Chinese writes the sentence in only {chars} characters but pays {tokens} tokens ({per:.2f} "
                         "per character, {x:.1f}x English).", **fields)
    return text + tr("Chinese writes the sentence in only {chars} characters and pays {tokens} tokens ({per:.2f} per "
                     "character, {x:.1f}x English).", **fields)


# ----------------------------------------------------------------------------- Chinese, token by token (section 8)
def pair_cost_table(pairs: Iterable[PairCost]) -> str:
    """A Markdown table of ``charstream.compare``'s pairs: one row per text."""
    head = tr("| | text | characters | UTF-8 bytes | GPT-2 tokens | tokens per character |")
    rows = [head, "|---|---|---|---|---|---|"]
    for p in pairs:
        for label, text, c in ((tr("{name} · English", name=p.name), p.en_text, p.en),
                               (tr("{name} · Chinese", name=p.name), p.zh_text, p.zh)):
            rows.append(f"| {label} | {_cell(text, show_spaces=False)} | {c.n_chars} | {c.n_bytes} | "
                        f"{c.n_tokens} | {c.tokens_per_char:.2f} |")
    return "\n".join(rows)


def stream_table(flow: CharStream) -> str:
    """A Markdown table, one row per token; a ✓ marks the step at which a cut character completed."""
    rows = [tr("| step | token id | its bytes | printed on its own | held back | the stream shows | "
               "character complete |"), "|---|---|---|---|---|---|---|"]
    for s in flow.steps:
        done = tr("✓ {char} ({n} tokens)", char=s.joined, n=s.span) if s.joined else ""
        rows.append(f"| {s.index} | {s.token_id} | {s.raw.hex(' ') or '—'} | {_cell(s.alone)} | "
                    f"{s.held.hex(' ')} | {_cell(s.shown) if s.shown else '—'} | {done} |")
    return "\n".join(rows)


def stream_summary(flow: CharStream) -> str:
    """What ``stream_table`` shows, in one paragraph of Markdown (every number from the steps)."""
    if flow.n_joined:
        out = tr("{n_tokens} tokens made {n_chars} characters; {n_joined} of those characters arrived in "
                 "pieces, over two or more tokens. At {n_waits} steps the stream showed nothing: it was holding "
                 "bytes back, and it showed each such character whole when its last byte arrived. The stream "
                 "showed U+FFFD {shown} times; printing each token on its own would have shown it {alone} times.",
                 n_tokens=flow.n_tokens, n_chars=flow.n_chars, n_joined=flow.n_joined, n_waits=flow.n_waits,
                 shown=flow.shown_replacements, alone=flow.alone_replacements)
    else:
        out = tr("{n_tokens} tokens made {n_chars} characters, and every token held whole characters: this "
                 "time no character was cut over tokens, so the stream never had to wait. (Run it on a model "
                 "that writes Chinese, or change the prompt, to see a character arrive in pieces.)",
                 n_tokens=flow.n_tokens, n_chars=flow.n_chars)
    if flow.unfinished:
        out += " " + tr("The generation stopped in the middle of a character: its first bytes "
                        "({hex}) never got their last one.", hex=flow.unfinished.hex(" "))
    return out


def _cell(text: str, show_spaces: bool = True) -> str:
    """Text for a Markdown table cell, as code (pipes escaped); ``show_spaces``: spaces and newlines made visible."""
    text = visible(text) if show_spaces else text.replace("\n", " ")
    return "`" + text.replace("`", "ʹ").replace("|", "\\|") + "`"
