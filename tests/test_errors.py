"""Bad input gets a clear error (parameter, value, allowed range, fix); odd but valid text works."""

from __future__ import annotations

import pytest

import inferlab as il


@pytest.mark.parametrize("prompt,kwargs,exc,words", [
    ("", {}, ValueError, ["prompt", "non-empty", "Fix"]),
    (None, {}, TypeError, ["prompt", "str"]),
    (123, {}, TypeError, ["prompt", "str"]),
    ("Hi", {"max_new_tokens": 0}, ValueError, ["max_new_tokens", "Fix"]),
    ("Hi", {"max_new_tokens": 2.5}, TypeError, ["max_new_tokens"]),
    ("Hi", {"temperature": -1}, ValueError, ["temperature", "expected", "Fix"]),
    ("Hi", {"temperature": float("nan")}, ValueError, ["temperature"]),
    ("Hi", {"top_p": 0}, ValueError, ["top_p", "0 < top_p <= 1"]),
    ("Hi", {"top_p": 1.01}, ValueError, ["top_p"]),
    ("Hi", {"top_k": -5}, ValueError, ["top_k", "0 <= top_k"]),
    ("Hi", {"record": "everything"}, ValueError, ["record", "attention"]),
])
def test_bad_input(model, prompt, kwargs, exc, words):
    with pytest.raises(exc) as err:
        il.generate(model, prompt, **{"max_new_tokens": 3, **kwargs})
    for w in words:
        assert w in str(err.value)


def test_context_overflow_names_both_numbers_and_the_limit(model):
    prompt = "word " * 100
    n = len(model.encode(prompt))
    limit = model.info.n_ctx
    with pytest.raises(ValueError) as err:
        il.generate(model, prompt, max_new_tokens=limit)
    msg = str(err.value)
    assert f"({n} tokens)" in msg and f"({limit})" in msg and f"context length of {limit}" in msg
    assert f"max_new_tokens <= {limit - n}" in msg
    # streaming checks before the first token, too
    with pytest.raises(ValueError):
        il.stream(model, prompt, max_new_tokens=limit)


@pytest.mark.parametrize("text", ["Hello 👋🏽 world 🎉", "tab\tbell\x07null\x00end",
                                  "Mixed: 中文, русский, العربية, 日本語", "\n\n\n", "   leading spaces",
                                  "<|endoftext|> as text"])
def test_unusual_text_works(model, text):
    trace = il.generate(model, text, 4)
    assert len(trace.generated_ids) >= 1 and trace.prompt_ids
    assert model.decode(trace.prompt_ids) == text


def test_unknown_device_message():
    with pytest.raises(ValueError) as err:
        il.load("bundled", device="quantum", verbose=False)
    assert "device='quantum'" in str(err.value) and "Fix" in str(err.value)


def test_one_line_is_the_first_line_after_the_type_cut_at_the_limit():
    from inferlab.errors import one_line

    long = RuntimeError("  no C++ compiler found\nTraceback (most recent call last):\n  File ...  ")
    assert one_line(long) == "RuntimeError: no C++ compiler found"
    assert one_line(long, named=False) == "no C++ compiler found"
    assert one_line(ValueError("x" * 300)) == "ValueError: " + "x" * 200
    assert one_line(ValueError("abcdef"), 3, named=False) == "abc"
    assert one_line(KeyError()) == one_line(KeyError(), named=False) == "KeyError"  # no text: the type's name
    assert one_line(OSError(" \n ")) == "OSError"
