"""Tokens: the reference facts, our hand-written BPE against the real tokenizer, chips and widgets."""

from __future__ import annotations

import random

import plotly.graph_objects as go
import pytest

from inferlab import bpe as B
from inferlab import tokens as T
from inferlab.viz import tokens as vt
from inferlab.widgets import tokens as wt

# Strings that exercise every branch of GPT-2's pre-tokenizer and byte handling.
TRICKY = [
    "How does inference work?", "Hello, world!", "什么是量子计算", " How", "Hello world", "hello  world",
    "a  b    c        d\n\n\nend", "\n", "\n\n", " \n ", "\t\tindented\n", "   leading", "trailing   ",
    "it's I'm we've they'll you'd don't I'M IT'S", "'s's", "2024-11-29 12:34:56", "1234567890", "3.14159",
    "def f(x):\n    return x ** 2  # square\n", "if (a && b) { c++; }", "<html><body>hi</body></html>",
    "I love pizza 🍕🍕! 👨‍👩‍👧 🇫🇷 👍🏽", "naïve café résumé Ångström", "Straße", "Доброе утро!", "Καλημέρα!",
    "صباح الخير", "सुप्रभात", "おはようございます！今日は", "좋은 아침", "ﷺ", "x\u200by", "\u00a0nbsp", "a\r\nb",
    "<|endoftext|>", "start<|endoftext|>end", " <|endoftext|> ", "\x00\x01\x7f", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "!!!???...",
    "   ", " ", "ＦＵＬＬ　ＷＩＤＴＨ", "e\u0301", "🙂" * 5, *T.EXAMPLES.values(), *T.SAME_MEANING.values(),
]

POOL = list("abcXYZ  \n\t'.,!?-_019") + list("是的量子好ऄअ") + ["é", "ß", "Ж", "🍕", "👍", "\u200d", "’"]


def random_strings(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def tok(model):
    return model.tokenizer


# ----------------------------------------------------------------------------- facts (REFERENCE.md)
def test_reference_ids(tok):
    assert T.tokenize(tok, "How does inference work?").ids == [2437, 857, 32278, 670, 30]
    assert T.tokenize(tok, "Hello, world!").ids == [15496, 11, 995, 0]
    assert T.tokenize(tok, "什么是量子计算").n_tokens == 14
    assert T.tokenize(tok, "<|endoftext|>").ids == [50256]
    assert T.tokenize(tok, " How").ids == [1374]  # the id the article printed in place of " does"
    assert T.tokenize(tok, " does").ids == [857]
    assert len(tok) == 50257


def test_leading_space_belongs_to_next_token(tok):
    pieces = T.tokenize(tok, "How does inference work?").pieces
    assert [p.text for p in pieces] == ["How", " does", " inference", " work", "?"]
    assert pieces[1].symbol == "Ġdoes"


# ----------------------------------------------------------------------------- byte map and BPE
def test_bytes_to_unicode_is_gpt2s_map():
    table = B.bytes_to_unicode()
    assert len(table) == 256 and len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
    assert all(s.isprintable() and not s.isspace() for s in table.values())
    vocab = B.gpt2_bpe().vocab
    assert all(s in vocab for s in table.values())  # every byte is a token of its own


@pytest.mark.parametrize("text", TRICKY)
def test_hand_bpe_matches_real_tokenizer(tok, text):
    assert B.gpt2_bpe().encode(text) == list(tok(text, add_special_tokens=False).input_ids)


def test_hand_bpe_matches_on_random_strings(tok):
    bpe = B.gpt2_bpe()
    for text in random_strings(300):
        assert bpe.encode(text) == list(tok(text, add_special_tokens=False).input_ids), repr(text)


def test_pretokenizer_matches_huggingface(tok):
    pre = tok.backend_tokenizer.pre_tokenizer
    for text in TRICKY[:40] + random_strings(50, seed=1):
        if "<|endoftext|>" in text:
            continue
        ours = ["".join(B.BYTE_TO_SYMBOL[b] for b in c.encode("utf-8")) for c in B.BPE.pretokenize(text)]
        assert ours == [c for c, _ in pre.pre_tokenize_str(text)], repr(text)


def test_bpe_decode_roundtrip(tok):
    bpe = B.gpt2_bpe()
    for text in TRICKY:
        assert bpe.decode(bpe.encode(text)) == text


def test_bpe_steps_show_the_work():
    work = B.bpe_steps(" inference")
    assert work.utf8 == b" inference"
    assert work.initial == ("Ġ", "i", "n", "f", "e", "r", "e", "n", "c", "e")
    assert work.final == ("Ġinference",) and work.ids == (32278,)
    ranks = [s.rank for s in work.steps]
    assert ranks == sorted(ranks)  # lower rank = learned earlier = applied first
    for before, step in zip((work.initial, *(s.symbols for s in work.steps)), work.steps):
        assert "".join(before) == "".join(step.symbols)  # merging never changes the bytes
        assert len(step.symbols) == len(before) - step.count


def test_bpe_ranks_increase_on_many_words():
    bpe = B.gpt2_bpe()
    for text in TRICKY:
        for work in bpe.encode_and_show_work(text):
            ranks = [s.rank for s in work.steps]
            assert ranks == sorted(ranks), work


def test_bpe_steps_refuses_several_chunks():
    with pytest.raises(ValueError, match="encode_and_show_work"):
        B.bpe_steps("hello world")
    with pytest.raises(ValueError):
        B.bpe_steps("")


def test_bpe_from_folder_needs_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"merges\.txt"):
        B.BPE.from_folder(tmp_path)


# ----------------------------------------------------------------------------- pieces
def test_partial_characters_show_bytes_not_replacement(tok):
    t = T.tokenize(tok, "什么是量子计算")
    first = t.pieces[0]
    assert first.partial and first.hex == "e4 bb" and first.chars == "什" and first.label == "e4 bb"
    assert t.pieces[1].hex == "80" and t.pieces[1].chars == "什"
    assert not t.pieces[4].partial and t.pieces[4].text == "是"
    assert b"".join(p.raw for p in t.pieces) == "什么是量子计算".encode()


def test_no_replacement_character_anywhere(tok):
    for text in TRICKY + random_strings(100, seed=2):
        t = T.tokenize(tok, text)
        assert b"".join(p.raw for p in t.pieces) == text.encode("utf-8")
        html = vt.chips_html(t)
        assert "\ufffd" not in html
        assert all("\ufffd" not in p.describe() and "\ufffd" not in p.label for p in t.pieces)


def test_piece_text_shows_bytes_for_part_of_a_character(tok):
    ids = tok("什么是", add_special_tokens=False).input_ids
    assert [T.piece_text(tok, i) for i in ids] == ["⟨e4⟩⟨bb⟩", "⟨80⟩", "⟨e4⟩⟨b9⟩", "⟨88⟩", "是"]
    assert T.piece_text(tok, tok.eos_token_id) == "<|endoftext|>"
    assert T.piece_text(tok, tok(" world").input_ids[0]) == " world"
    (replacement,) = tok("\ufffd", add_special_tokens=False).input_ids  # U+FFFD itself: one whole token (4210)
    assert T.piece_text(tok, replacement) == "\ufffd"


def test_counts_and_special(tok):
    t = T.tokenize(tok, "a<|endoftext|>é")
    assert t.n_chars == 15 and t.n_bytes == 16
    assert [p.special for p in t.pieces] == [False, True, False]
    assert t.chars_per_token == pytest.approx(15 / 3) and t.bytes_per_token == pytest.approx(16 / 3)


def test_visible_whitespace():
    assert T.visible(" a\n\tb\u200d") == "·a⏎→b⟨U+200D⟩"


@pytest.mark.parametrize("bad", ["", "x" * (T.MAX_CHARS + 1)])
def test_bad_text_is_refused_clearly(tok, bad):
    with pytest.raises(ValueError, match="Fix"):
        T.tokenize(tok, bad)
    with pytest.raises(TypeError):
        T.tokenize(tok, 42)
    with pytest.raises(ValueError, match="UTF-8"):
        T.tokenize(tok, "broken \ud83d emoji")


@pytest.mark.parametrize("call,name", [
    (lambda text: B.gpt2_bpe().encode_and_show_work(text), "text"),
    (lambda text: B.gpt2_bpe().encode(text), "text"),
    (lambda text: B.gpt2_bpe().work(text), "word"),
    (lambda text: B.bpe_steps(text), "word"),
    (lambda text: T.check_text(text), "text"),
])
def test_lone_surrogate_names_parameter_position_and_fix(call, name):
    # "a\ud800b": the high surrogate at character 1 has no partner, so the text has no UTF-8 bytes
    with pytest.raises(ValueError, match=rf"^{name}='a\\ud800b' is not allowed: .*UTF-8.* "
                                         r"Fix: remove the lone surrogate U\+D800 at character 1 "):
        call("a\ud800b")
    with pytest.raises(TypeError, match=f"{name} must be a string"):
        call(b"bytes")


def test_long_text_with_a_lone_surrogate_shows_where():
    text = "x" * 100 + "\udc00" + "y" * 100
    with pytest.raises(ValueError, match="at character 100 ") as err:
        B.gpt2_bpe().encode(text)
    assert "x" * 50 not in str(err.value)  # an excerpt around the bad character, not the whole text


def test_bpe_decode_refuses_unknown_ids():
    with pytest.raises(ValueError, match=r"ids=\[60000\].*Fix"):
        B.gpt2_bpe().decode([15496, 60000])


def test_costs_same_meaning(tok):
    cs = T.costs(tok, T.SAME_MEANING)
    assert [c.name for c in cs] == list(T.SAME_MEANING)
    en = cs[0]
    assert en.n_tokens == T.tokenize(tok, T.SAME_MEANING["English"]).n_tokens
    assert en.tokens_per_char == en.n_tokens / en.n_chars


# ----------------------------------------------------------------------------- views
def test_chips_one_per_token_with_ids_in_titles(tok):
    t = T.tokenize(tok, "Hello, world!\nnext 什")
    html = vt.chips_html(t)
    assert html.count('class="il-chip"') == t.n_tokens
    assert html.count("title=") == t.n_tokens
    for p in t.pieces:
        assert f"id {p.id}," in html
    assert "<br>" in html and "⏎" in html  # the newline is visible and breaks the line
    # 什 is bytes e4 bb 80, cut into two tokens: each chip shows its bytes and the character it is part of
    assert [p.partial for p in t.pieces[-2:]] == [True, True]
    assert "bytes e4 bb, part of &#x27;什&#x27; (U+4EC0)" in html and "bytes 80, part of &#x27;什&#x27;" in html
    assert html.count(">of 什 · ") == 2


def test_chips_cap(tok):
    t = T.tokenize(tok, "a " * 50)
    html = vt.chips_html(t, max_chips=10)
    assert html.count('class="il-chip"') == 10 and "more tokens not drawn" in html
    with pytest.raises(ValueError, match="tokenize"):
        vt.chips_html(["not a piece"])


def test_chips_display_object(tok):
    out = vt.chips(T.tokenize(tok, "Hello"))
    assert "tokens" in out.data and "il-chip" in out.data


def test_merge_table_rows():
    work = B.bpe_steps(" inference")
    html = vt.merge_table_html(work)
    assert html.count("<tr") == len(work.steps) + 3  # header, start, merges, end
    assert f"rank {work.steps[-1].rank:,}" in html and "32278" in html
    part = vt.merge_table_html(work, upto=2)
    assert part.count("<tr") == 2 + 3 and "more merge" in part
    assert vt.byte_map_html(work).count("<td") == len(work.utf8) + 1


def test_cost_bars(tok):
    cs = T.costs(tok, T.SAME_MEANING)
    fig = vt.cost_bars(cs)
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    assert list(fig.data[0].x) == list(T.SAME_MEANING)
    assert fig.layout.yaxis.title.text == "tokens per character"
    assert "tokens" in fig.data[0].hovertext[0]
    with pytest.raises(ValueError, match="metric"):
        vt.cost_bars(cs, metric="nope")
    with pytest.raises(ValueError):
        vt.cost_bars([])


# ----------------------------------------------------------------------------- widgets
def test_token_box_messages(tok):
    box = wt.token_box(tok)
    pick, text, view = box.children
    assert "il-chip" in view.value
    text.value = ""
    assert "empty" in view.value and "il-chip" not in view.value
    text.value = "x" * 30_000
    assert "at most" in view.value
    pick.value = "Chinese"
    assert text.value == T.EXAMPLES["Chinese"] and "part of" in view.value
    text.value = "Hello, world!"
    assert pick.value == "(your own text)" and view.value.count('class="il-chip"') == 4


def test_bpe_stepper_steps():
    st = wt.bpe_stepper(" inference")
    (_, chunk), slider, view = st.children[0].children, st.children[1], st.children[2]
    assert slider.max == len(B.bpe_steps(" inference").steps) and "more merge" in view.value
    slider.value = slider.max
    assert "no pair left" in view.value
    st.children[0].children[0].value = "Hello world"
    assert list(chunk.options) == ["Hello", "·world"]
    st.children[0].children[0].value = ""
    assert "Type a word" in view.value


# ----------------------------------------------------------------------------- typing, debounced
class ManualClock:
    """A scheduler for ``Debouncer`` that fires only when told: ``fire()`` runs what is still pending."""

    def __init__(self):
        self.pending = []

    class Handle:
        def __init__(self, delay, callback):
            self.delay, self.callback, self.cancelled = delay, callback, False

        def cancel(self):
            self.cancelled = True

    def __call__(self, delay, callback):
        self.pending.append(self.Handle(delay, callback))
        return self.pending[-1]

    def fire(self):
        live = [h for h in self.pending if not h.cancelled]
        self.pending = []
        for h in live:
            h.callback()
        return len(live)


def test_debouncer_calls_once_with_the_last_value():
    calls, clock = [], ManualClock()
    d = wt.Debouncer(calls.append, 0.15, schedule=clock)
    for text in ["H", "He", "Hel"]:
        d(text)
    assert calls == [] and len(clock.pending) == 3 and clock.pending[0].delay == 0.15
    assert clock.fire() == 1 and calls == ["Hel"]  # two waits were cancelled by later keystrokes
    d.flush()
    assert calls == ["Hel"]  # nothing pending: flush does nothing


def test_token_box_updates_while_typing_after_the_pause(tok):
    clock = ManualClock()
    box = wt.token_box(tok, "Hi", schedule=clock)
    _, text, view = box.children
    assert text.continuous_update is True  # every keystroke reaches the kernel, not only on blur
    text.value = "Hello"
    text.value = "Hello, world!"
    assert view.value.count('class="il-chip"') == 1  # still showing "Hi": the wait has not ended
    clock.fire()
    assert view.value.count('class="il-chip"') == 4  # 'Hello' ',' ' world' '!'


def test_token_box_without_an_event_loop_redraws_at_once(tok):
    box = wt.token_box(tok, "Hi")  # no running asyncio loop here (plain pytest): no wait
    box.children[1].value = "Hello, world!"
    assert box.children[2].value.count('class="il-chip"') == 4


def test_views_have_a_readable_text_and_html_form(tok):
    box = wt.token_box(tok)
    for view in (box, wt.bpe_stepper(" inference")):
        bundle = view._repr_mimebundle_()
        assert not bundle["text/plain"].startswith("VBox(") and "run the cell to use it" in bundle["text/plain"]
        assert ("token box" if view is box else "bpe stepper") in bundle["text/html"].lower()
        assert "application/vnd.jupyter.widget-view+json" in bundle  # still a live widget in JupyterLab


# ----------------------------------------------------------------------------- chat templates
def test_chat_text_two_messages_by_hand(tok):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a token?"}]
    # ChatML, written out by hand: each message is <|im_start|>role, newline, content, <|im_end|>, newline
    expected = ("<|im_start|>system\nBe brief.<|im_end|>\n"
                "<|im_start|>user\nWhat is a token?<|im_end|>\n"
                "<|im_start|>assistant\n")
    assert T.chat_text(tok, messages) == expected
    assert T.chat_text(tok, messages, add_generation_prompt=False) == expected.removesuffix("<|im_start|>assistant\n")


def test_gpt2_splits_chat_markers_into_ordinary_pieces(tok):
    pieces = [p.text for p in T.tokenize(tok, "<|im_end|>").pieces]
    assert pieces == ["<", "|", "im", "_", "end", "|", ">"]  # 7 ordinary tokens: GPT-2 has no such token
    assert T.tokenize(tok, "<|endoftext|>").ids == [50256]   # its own special token stays one


@pytest.mark.parametrize("bad", [[], "hi", [{"role": "user"}], [{"role": "user", "content": 3}]])
def test_chat_text_refuses_bad_messages(tok, bad):
    with pytest.raises(ValueError, match=r"messages=.*Fix"):
        T.chat_text(tok, bad)


# ----------------------------------------------------------------------------- narration (notebook 01)
def test_narrate_character_cost_both_branches():
    from inferlab.narrate import n01
    text = n01.character_cost(n_chars=7, n_bytes=21, n_tokens=14, whole=2)
    assert "**7 characters**" in text and "2.0 tokens per character" in text and "other 12 hold byte" in text
    whole = n01.character_cost(n_chars=1, n_bytes=3, n_tokens=1, whole=1)
    assert "**1 character**" in whole and "**1 token**" in whole and "no character was cut" in whole


def test_narrate_article_count_both_branches():
    from inferlab.narrate import n01
    more = n01.article_word_count("什么是量子计算", 14, 4)
    assert "**14**" in more and "3.5x more" in more and "00_start_here.ipynb#the-two-source-articles" in more
    assert '*"four tokens"* (our translation)' in more and "byte-level BPE" in more
    same = n01.article_word_count("x", 4, 4)
    assert "the same count" in same and "3.5x" not in same


def test_narrate_chat_template_both_branches():
    from inferlab.narrate import n01
    split = n01.chat_template(2, 80, 30, ["<|im_start|>"], ["<|im_start|>", "<|im_end|>"])
    assert "2 messages" in split and "**30 tokens**" in split and "not in its vocabulary" in split
    whole = n01.chat_template(1, 20, 9, ["<|im_start|>", "<|im_end|>"], [])
    assert "1 message " in whole and "one special token of this vocabulary" in whole


def test_narrate_language_cost_both_branches():
    from inferlab.narrate import n01
    text = n01.language_cost(10, 4.5, "Greek", 52, 11, 19)
    assert "**Greek**: 52 tokens, **5.2x** English" in text and "but pays 19 tokens (1.73 per character, 1.9x" in text
    cheap = n01.language_cost(10, 4.5, "English", 10, 11, 9)
    assert "No other language here costs more" in cheap and "and pays 9" in cheap


def test_narrate_rule_of_thumb_both_branches():
    from inferlab.narrate import n01
    assert "about 224 tokens" in n01.chars_per_token_rule(4.46, 224.2)
    assert "count tokens for your own text" in n01.chars_per_token_rule(2.0, 500)
