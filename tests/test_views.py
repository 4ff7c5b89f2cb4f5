"""Views as a hurried learner meets them: no side effects at import, data in, a message (never a traceback) out."""

from __future__ import annotations

import html
import importlib
import itertools
import re
import subprocess
import sys

import ipywidgets as w
import plotly.io as pio
import pytest
import torch

import inferlab as il
from inferlab import viz
from inferlab.viz import sampling as vs
from inferlab.viz import tokens as vt
from inferlab.widgets import sampling as ws
from inferlab.widgets import show_figure
from inferlab.widgets import start as wstart
from inferlab.widgets import streaming as wstream
from inferlab.widgets import tokens as wt

PIECES = ["a", " b", "\n"]
HAND = torch.tensor([2.0, 1.0, 0.0])  # softmax 0.6652, 0.2447, 0.0900 (worked in test_sampling.py)
PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture
def plotly_defaults():
    """Plotly's global defaults set to markers, restored after the test."""
    saved = pio.renderers.default, pio.templates.default
    pio.renderers.default, pio.templates.default = "json", "none"
    yield
    pio.renderers.default, pio.templates.default = saved


# ----------------------------------------------------------------------------- importing changes nothing
def test_importing_views_changes_nothing(plotly_defaults):
    for module in (viz, vs, vt, ws, wstart, wstream, wt):
        importlib.reload(module)  # runs each module's top level again, as a first import would
    assert (pio.renderers.default, pio.templates.default) == ("json", "none")


def test_setup_notebook_sets_renderer_and_template(plotly_defaults, monkeypatch):
    monkeypatch.delenv("INFERLAB_PLOTLY_RENDERER", raising=False)
    assert viz.setup_notebook() == "plotly_mimetype"
    assert (pio.renderers.default, pio.templates.default) == ("plotly_mimetype", "plotly_white")
    monkeypatch.setenv("INFERLAB_PLOTLY_RENDERER", "png")
    assert viz.setup_notebook() == "png" and pio.renderers.default == "png"


def test_setup_notebook_spares_the_kernel_jsonschemas_iri_parser():
    """A fresh process, as a kernel: after setup_notebook plotly still renders figures, jsonschema still validates,
    and the IRI parser (1.2 s of a 4.3 s first cell) was never built."""
    code = """import sys
import plotly.graph_objects as go
from inferlab import viz
viz.setup_notebook()
import jsonschema
import plotly.io as pio
assert pio.to_json(go.Figure(go.Bar(y=[1])))
jsonschema.validate({"a": 1}, {"type": "object", "properties": {"a": {"type": "integer"}}})
print(sys.modules.get("rfc3987_syntax"), "nbformat" in sys.modules)"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]  # a busy machine's note (setup_notebook's one line) may come first
    assert last.split() == ["None", "True"], out.stdout  # plotly imported nbformat; the parser stayed out


def test_figures_carry_the_template_without_setup():
    fig = vs.candidate_bars(HAND.softmax(-1), PIECES)
    assert fig.layout.template.layout.plot_bgcolor == "white"  # plotly_white, whatever the global default


def test_show_figure_always_stores_the_plotly_mimetype():
    out = w.Output()
    show_figure(out, vs.candidate_bars(HAND.softmax(-1), PIECES), "bars")
    show_figure(out, vs.candidate_bars(HAND.softmax(-1), PIECES, k=2), "bars")  # replaces, never stacks
    assert len(out.outputs) == 1
    data = out.outputs[0]["data"]
    assert data["text/plain"] == "<bars>" and len(data[PLOTLY]["data"][0]["y"]) == 2


# ----------------------------------------------------------------------------- the start notebook's peek
def test_next_token_peek_redraws_from_the_logits():
    box = wstart.next_token_peek(HAND, PIECES, prompt="x", n=2)
    slider, (text, out) = box.children[0], box.children[1].children
    assert "inferlab-peek" in text.value and "66.5%" in text.value and "24.5%" in text.value
    assert "9.0%" not in text.value  # n=2: the third token is not listed
    assert "&#x27;·b&#x27;" in text.value  # the leading space made visible
    assert out.outputs[0]["data"][PLOTLY]["layout"]["xaxis"]["range"] == [0, 1.0]
    slider.value = 0.0
    assert "greedy" in text.value and "100.0%" in text.value
    slider.value = 0.5  # logits doubled: 0.8668, 0.1173 (worked in test_sampling.py)
    assert "86.7%" in text.value and "11.7%" in text.value


def test_next_token_peek_more_candidates_than_tokens():
    box = wstart.next_token_peek(HAND, PIECES, n=50)
    assert box.children[1].children[0].value.count("<li>") == 3


@pytest.mark.parametrize("bad,match", [(HAND.unsqueeze(0), r"logits\[0\]"), ([2.0, 1.0], "1-D"), (HAND, "n=0")])
def test_next_token_peek_refuses_bad_arguments(bad, match):
    with pytest.raises(ValueError, match=match):
        wstart.next_token_peek(bad, PIECES, n=0 if match == "n=0" else 8)


# ----------------------------------------------------------------------------- tokens widgets
@pytest.mark.parametrize("text", ["a\ud800b", "\udfff"])
def test_bpe_stepper_lone_surrogate_is_a_message(text):
    st = wt.bpe_stepper(text)
    (_, chunk), view = st.children[0].children, st.children[2]
    assert "surrogate" in view.value and "Fix" in view.value and list(chunk.options) == []
    st.children[0].children[0].value = " inference"  # recovers
    assert "no pair left" not in view.value and "merge" in view.value


@pytest.mark.parametrize("text,chunks", [("   ", ["···"]), ("<|endoftext|>", ["<|endoftext|>"]),
                                         ("🍕!", ["🍕!"]), ("a\u200db", ["a", "⟨U+200D⟩", "b"])])
def test_bpe_stepper_weird_text(text, chunks):
    st = wt.bpe_stepper(text)
    assert list(st.children[0].children[1].options) == chunks
    assert "<table" in st.children[2].value


def test_token_box_lone_surrogate_and_weird_unicode(model):
    box = wt.token_box(model.tokenizer)
    text, view = box.children[1], box.children[2]
    text.value = "ok \ud83d then"
    assert "surrogate U+D83D at character 3" in view.value and "il-chip" not in view.value
    text.value = "e\u0301 \u200b 👨‍👩‍👧"
    assert "il-chip" in view.value and "\ufffd" not in view.value


# ----------------------------------------------------------------------------- streaming
def _answer(view) -> str:
    return re.search(r"<b>(.*)</b></div>$", view.text.value, re.S).group(1)


def test_streaming_view_shows_pieces_then_the_trace_text(model):
    settings = {"temperature": 1.0, "top_k": 40, "seed": 3, "stop_at_eos": False}
    free = il.generate(model, "To be, or not to be", 12, **settings)
    stop = next(p.strip() for p in free.generated_pieces[3:] if p.strip())
    view = wstream.streaming_view(model, "To be, or not to be", 12, run=False, stop_strings=[stop], **settings)
    shown = []
    view._show = lambda prompt, answer: shown.append(answer)  # record every redraw
    view.run()
    assert view.trace.stop_reason.startswith("stop string") and view.error.value == ""
    assert shown[-1] == view.trace.text and stop not in view.trace.text
    pieces = shown[1:-1]  # after the empty start: one redraw per event, each the one before plus a piece
    assert len(pieces) == len(view.trace.generated_ids)
    assert all(b.startswith(a) for a, b in itertools.pairwise(pieces))
    view = wstream.streaming_view(model, "To be, or not to be", 12, stop_strings=[stop], **settings)
    assert _answer(view) == html.escape(view.trace.text)


@pytest.mark.parametrize("prompt,settings,shown", [
    ("To be", {"top_p": 0.0}, "top_p"),
    ("To be", {"temperature": -1.0}, "temperature"),
    ("", {}, "prompt"),
    ("a\ud800b", {}, "prompt"),
    ("word " * 2000, {}, "512-token context"),
])
def test_streaming_view_hurried_learner_gets_messages(model, prompt, settings, shown):
    view = wstream.streaming_view(model, prompt, 3, **settings)
    assert view.trace is None and shown in view.error.value and not view.button.disabled


@pytest.mark.parametrize("settings", [{"temperature": 0.0}, {"top_k": 10**6, "temperature": 1.0, "seed": 0}])
def test_streaming_view_edge_settings_run(model, settings):
    view = wstream.streaming_view(model, "To be", 3, stop_at_eos=False, **settings)
    assert view.error.value == "" and len(view.trace.generated_ids) == 3 and "done" in view.readout.value


def test_streaming_box_scrolls_instead_of_spilling_over_its_buttons(model):
    """ipywidgets 8 knows ``overflow`` only; an ``overflow_y`` was dropped and a long answer covered the buttons."""
    view = wstream.streaming_view(model, "To be", 3, run=False)
    assert view.text.layout.overflow == "auto" and view.text.layout.max_height


def test_streaming_slider_offers_only_what_fits_after_the_prompt(model):
    prompt = "To be, or not to be"
    view = wstream.streaming_view(model, prompt, 10_000, run=False)
    assert view.tokens.max == model.info.n_ctx - len(model.encode(prompt)) == view.tokens.value
    view.prompt_box.value = "word " * 100  # a longer prompt leaves less room: the slider follows
    assert view.tokens.max == model.info.n_ctx - len(model.encode("word " * 100)) == view.tokens.value


def test_streaming_button_shows_a_runtime_error_instead_of_raising(model, monkeypatch):
    view = wstream.streaming_view(model, "To be", 3, run=False)

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(wstream, "stream", out_of_memory)
    view.button.click()  # the button's callback: an exception here would only reach the kernel's log
    assert "CUDA out of memory" in view.error.value and not view.button.disabled
    view.replay_button.click()  # nothing to replay yet: a message, no exception
    assert "Run again" in view.error.value


# ----------------------------------------------------------------------------- byte tokens name their character
def test_byte_chips_name_the_character_they_belong_to(model):
    ids = model.encode("床前明月光，疑")
    parts = vs.character_parts(model.decode, ids)
    assert all(c for t, c in parts if "⟨" in t) and {c for _, c in parts} >= {"床", "前", "，", "疑"}
    assert vs.character_parts(model.decode, ids[:-1])[-1][1] == ""  # cut inside 疑: its bytes stay unnamed
    assert vs.character_parts(model.decode, ids[1:], context=ids[:1])[0] == (vs.piece(model.decode, ids[1]), "床")
    fig = vs.repeated_tokens(ids, model.decode)
    chips = [a.text for a in fig.layout.annotations]
    assert any("⟨" in c and c.endswith("of 床") for c in chips), chips


def test_peek_names_the_character_a_byte_candidate_makes(model):
    prompt = "床前明月光，"
    logits, _ = il.prefill(model, model.encode(prompt))
    begun = wstart.characters_begun(model, prompt, logits[0])
    byte_candidates = [i for i in torch.topk(logits[0], 8).indices.tolist() if "⟨" in vs.piece(model.decode, i)]
    assert byte_candidates and sorted(begun) == sorted(byte_candidates)
    for token_id, chars in begun.items():  # the candidate's bytes are where the character starts
        raw = bytes(int(h, 16) for h in re.findall(r"⟨(..)⟩", vs.piece(model.decode, token_id)))
        assert chars.encode("utf-8").startswith(raw) and len(chars) == 1, (token_id, chars)
    peek = wstart.next_token_peek(logits[0], model.decode, prompt=prompt, begun=begun)
    listed = peek.children[1].children[0].value
    assert all(f"→{c}" in html.unescape(listed) for c in begun.values())


def test_setup_says_in_one_line_when_the_machine_is_busy(plotly_defaults, monkeypatch, capsys):
    from inferlab import timing

    assert timing.busy_note(load=1.0, cores=2) is None
    note = timing.busy_note(load=3.6, cores=2)
    assert "busy (load 3.6 on 2 cores)" in note and "\n" not in note
    monkeypatch.setattr("os.getloadavg", lambda: (3.6, 3.0, 2.0))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    il.viz.setup_notebook()
    assert capsys.readouterr().out.strip() == note
    monkeypatch.setattr("os.getloadavg", lambda: (0.2, 0.2, 0.2))
    il.viz.setup_notebook()
    assert capsys.readouterr().out == ""
