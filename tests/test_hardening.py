"""Adversarial cases: model folders that try to run code, runs that overlap, leaks, and bad input.

Every bad input must give a ``TypeError``/``ValueError`` naming the parameter before any forward pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import ForwardCounter

import inferlab as il
from inferlab import _hf, engine, hooks
from inferlab.generation import TextAssembler
from inferlab.models import BUNDLED_DIR
from inferlab.recorder import record_bytes

PROMPT_A, PROMPT_B = "ROMEO.", "JULIET. O Romeo"
REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- no code from a model folder
EVIL_CONFIGS = {
    "unknown-model-type": {"model_type": "evilgpt", "auto_map": {"AutoConfig": "evil_code.EvilConfig"}},
    "gpt2-with-auto-map": {"model_type": "gpt2", "auto_map": {"AutoConfig": "evil_code.EvilConfig"}},
}


@pytest.fixture(scope="module")
def evil_loads(tmp_path_factory) -> dict[str, tuple[bool, str]]:
    """Load each evil folder in one fresh Python that answers "y" to every question on standard input.

    Returns, per folder, whether its code ran (a marker file) and what the loader printed.
    """
    root = tmp_path_factory.mktemp("evil")
    folders = {}
    for name, config in EVIL_CONFIGS.items():
        folder, marker = root / name, root / f"{name}.ran"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "evil_code.py").write_text(
            f"open({str(marker)!r}, 'w').write('the folder ran its code')\n"
            "from transformers import PretrainedConfig\n"
            "class EvilConfig(PretrainedConfig):\n    model_type = 'evilgpt'\n")
        (folder / "model.safetensors").write_bytes(b"")
        folders[name] = (folder, marker)
    script = ("import sys, inferlab as il\n"
              "for name, folder in zip(sys.argv[1::2], sys.argv[2::2]):\n"
              "    try:\n        il.load(folder, verbose=False)\n        print(name, 'LOADED')\n"
              "    except ValueError as e:\n        print(name, 'REFUSED', e)\n")
    args = [x for name, (folder, _m) in folders.items() for x in (name, str(folder))]
    out = subprocess.run([sys.executable, "-c", script, *args], input="y\n" * 10, capture_output=True, text=True,
                         timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines = {line.split(" ", 1)[0]: line for line in out.stdout.splitlines()}
    return {name: (marker.exists(), lines.get(name, "") + out.stderr) for name, (_f, marker) in folders.items()}


@pytest.mark.parametrize("name", list(EVIL_CONFIGS))
def test_a_model_folder_never_runs_its_code(evil_loads, name):
    """docs/INSTALL.md: 'remote code is never run'. Even answering "y" on standard input must not run it."""
    ran, printed = evil_loads[name]
    assert not ran, "the model folder's Python code was imported"
    assert "REFUSED" in printed and "never runs code from a model folder" in printed, printed
    assert "Do you wish to run the custom code" not in printed


def test_a_folder_without_tokenizer_files_is_refused(tmp_path):
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((BUNDLED_DIR / name).read_bytes())
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        il.load(folder, verbose=False)


def test_a_garbage_environment_model_names_the_variable(monkeypatch):
    monkeypatch.setenv("INFERLAB_MODEL", "random:bogus")
    with pytest.raises(ValueError, match="INFERLAB_MODEL='random:bogus'") as err:
        il.load(verbose=False)
    assert "'random:' + one of" in str(err.value) and "model='auto'" not in str(err.value).split("(Or")[0]


# ----------------------------------------------------------------------------- overlapping recorded runs
def _alone(model, prompt, n):
    return il.generate(model, prompt, n, record="attention", stop_at_eos=False)


def _same_records(a: il.Trace, b: il.Trace) -> None:
    assert a.generated_ids == b.generated_ids
    assert len(a.steps) == len(b.steps)
    for sa, sb in zip(a.steps, b.steps):
        for la, lb in zip(sa.attention, sb.attention):
            assert la.shape == lb.shape and torch.allclose(la, lb, atol=1e-6)


@pytest.mark.parametrize("order", ["a-first", "b-first"])
def test_interleaved_recorded_streams_keep_their_own_data(model, order):
    ref_a, ref_b = _alone(model, PROMPT_A, 3), _alone(model, PROMPT_B, 6)
    a = il.stream(model, PROMPT_A, 3, record="attention", stop_at_eos=False)
    b = il.stream(model, PROMPT_B, 6, record="attention", stop_at_eos=False)
    ia, ib = iter(a), iter(b)
    next(ia), next(ib)
    first, second = (ia, ib) if order == "a-first" else (ib, ia)
    list(first), list(second)
    _same_records(a.trace, ref_a)
    _same_records(b.trace, ref_b)
    assert hooks.active_hook_count(model) == 0 and _hf.current_attention(model) == "sdpa"


def test_an_unrecorded_stream_beside_a_recorded_one(model):
    ref = _alone(model, PROMPT_A, 4)
    plain_ref = il.generate(model, PROMPT_B, 4, stop_at_eos=False)
    rec = iter(il.stream(model, PROMPT_A, 4, record="attention", stop_at_eos=False))
    plain = il.stream(model, PROMPT_B, 4, stop_at_eos=False)
    next(rec)
    events = list(plain)
    rest = list(rec)
    assert [e.token_id for e in events] == plain_ref.generated_ids and plain.trace.steps[0].attention is None
    assert len(rest) == 3 and ref.generated_ids


def test_threads_recording_at_once_keep_their_own_data(model):
    ref_a, ref_b = _alone(model, PROMPT_A, 5), _alone(model, PROMPT_B, 5)
    results: dict[str, list] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def run(key, prompt):
        try:
            for _ in range(3):
                results[key].append(_alone(model, prompt, 5))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=("a", PROMPT_A)), threading.Thread(target=run, args=("b", PROMPT_B))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for trace in results["a"]:
        _same_records(trace, ref_a)
    for trace in results["b"]:
        _same_records(trace, ref_b)
    assert hooks.active_hook_count(model) == 0 and _hf.current_attention(model) == "sdpa"


def test_another_threads_forward_waits_for_a_recording(model):
    """Thread A records; while A's forward is paused after its last block (eager kernel on, hooks attached),
    thread B starts an unrecorded generate on the same model. B must wait for A's forward to end rather
    than run in A's changed model; then B's answer is its own, and A's trace holds A's attention."""
    ref = _alone(model, PROMPT_A, 2)
    plain_ref = il.generate(model, PROMPT_B, 2, stop_at_eos=False).generated_ids
    recorder_thread: list[int] = []
    plain: list[list[int]] = []
    b_threads: list[threading.Thread] = []
    ran_while_paused: list[bool] = []

    def pause(_module, _inputs, _output):
        if threading.get_ident() in recorder_thread and not b_threads:
            b = threading.Thread(target=lambda: plain.append(il.generate(model, PROMPT_B, 2,
                                                                          stop_at_eos=False).generated_ids))
            b_threads.append(b)
            b.start()
            b.join(1.0)  # B gets a second to run; it must still be waiting for A's forward
            ran_while_paused.append(bool(plain))

    handle = _hf.capture_points(model).blocks[-1].register_forward_hook(pause)
    try:
        traces: list[il.Trace] = []
        a = threading.Thread(target=lambda: (recorder_thread.append(threading.get_ident()),
                                             traces.append(_alone(model, PROMPT_A, 2))))
        a.start()
        a.join(120)
        b_threads[0].join(120)
    finally:
        handle.remove()
    assert ran_while_paused == [False]
    assert plain == [plain_ref]
    _same_records(traces[0], ref)


def test_unrecorded_answers_stay_right_while_another_thread_records(model):
    """The probe's case: one thread records attention over and over while another generates unrecorded.
    Every unrecorded answer must be the right one (not merely unrecorded), and nothing may raise."""
    plain_ref = il.generate(model, PROMPT_B, 6, stop_at_eos=False).generated_ids
    ref = _alone(model, PROMPT_A, 3)
    answers: list[list[int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def record():
        try:
            while not stop.is_set():
                _same_records(_alone(model, PROMPT_A, 3), ref)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def plain():
        try:
            for _ in range(40):
                answers.append(il.generate(model, PROMPT_B, 6, stop_at_eos=False).generated_ids)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            stop.set()

    threads = [threading.Thread(target=record), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert len(answers) == 40 and all(a == plain_ref for a in answers)
    assert hooks.active_hook_count(model) == 0 and _hf.current_attention(model) == "sdpa"


def test_capture_refuses_a_batch(model):
    ids = torch.tensor([model.encode("ROMEO. My lord")[:4], model.encode("JULIET. O Romeo")[:4]])
    with pytest.raises(ValueError, match="batch=2"), hooks.capture(model, {"attention"}):
        engine.forward_full(model, ids)
    assert hooks.active_hook_count(model) == 0


# ----------------------------------------------------------------------------- nothing leaks
def test_inference_mode_is_not_left_on(model):
    assert not torch.is_inference_mode_enabled()
    a, b = iter(il.stream(model, PROMPT_A, 4)), iter(il.stream(model, PROMPT_B, 4))
    next(a)
    assert not torch.is_inference_mode_enabled(), "on in the caller's loop body"
    next(b)
    list(a), list(b)  # finished in non-LIFO order
    assert not torch.is_inference_mode_enabled()
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_a_stream_iterated_twice_keeps_its_trace(model):
    s = il.stream(model, PROMPT_A, 5)
    first = list(s)
    trace = s.trace
    again = list(s)
    assert s.trace is trace and trace is not None
    assert [e.token_id for e in again] == [e.token_id for e in first]


def test_the_attention_guard_counts_uncached_steps(model):
    prompt = "word " * 100
    n = len(model.encode(prompt))
    cached = 4 * model.info.n_layer * model.info.n_head * (n * n + sum(n + i for i in range(1, 60)))
    limit = cached + 1  # enough for the cached run, far too little for 60 full squares
    il.generate(model, prompt, 2, record="attention", max_record_bytes=limit)
    with pytest.raises(ValueError, match="use_cache=False keeps the whole sequence again"):
        il.generate(model, prompt, 60, record="attention", use_cache=False, max_record_bytes=limit)


def test_streamed_text_never_shows_half_a_character(model):
    # "é" is two bytes; byte-level BPE can give each its own token. Feed them one at a time.
    tok = model.tokenizer
    byte_ids = [tok.convert_tokens_to_ids(t) for t in ("Ã", "©")]  # GPT-2's symbols for bytes 0xC3, 0xA9
    text = TextAssembler(tok)
    assert text.add(byte_ids[0]) == ""  # held back: only the first byte of "é"
    assert text.add(byte_ids[1]) == "é"


def test_a_run_that_ends_inside_a_character_never_shows_it(model):
    # "明" is e6 98 8e: GPT-2 splits it into two tokens (e6 98 | 8e). Stop after the first of them.
    tok = model.tokenizer
    first, _rest = model.encode("明")
    assert tok.decode([first]) == "\ufffd"  # on its own, the first token decodes to U+FFFD
    text = TextAssembler(tok)
    assert text.add(model.encode("A")[0]) == "A"
    assert text.add(first, final=True) == ""  # the run ended: the missing byte never comes, nothing shown
    assert text.text == "A" and text.unfinished == 1


def test_streamed_text_holds_back_a_possible_stop_string(model):
    tok = model.tokenizer
    text = TextAssembler(tok, stop_strings=["\n\n"])
    nl = model.encode("\n")[0]
    assert text.add(model.encode("Hi")[0]) == "Hi"
    assert text.add(nl) == ""  # could be the start of "\n\n"
    assert text.add(nl) == "" and text.stop_hit == "\n\n" and text.text == "Hi"


# ----------------------------------------------------------------------------- bad input, refused before any work
BAD_SETTINGS = [
    ({"cache_implementation": "static", "use_cache": False}, ValueError, "only with use_cache=True"),
    ({"use_cache": "no"}, TypeError, "use_cache"),
    ({"use_cache": None}, TypeError, "use_cache"),
    ({"stop_at_eos": "False"}, TypeError, "stop_at_eos"),
    ({"stop_token_ids": ["198"]}, TypeError, "stop_token_ids"),
    ({"stop_token_ids": [198.9]}, TypeError, "stop_token_ids"),
    ({"stop_token_ids": ["a"]}, TypeError, "stop_token_ids"),
    ({"stop_token_ids": 5}, TypeError, "stop_token_ids"),
    ({"stop_token_ids": [-1]}, ValueError, "stop_token_ids"),
    ({"stop_strings": None}, TypeError, "stop_strings"),
    ({"stop_strings": 5}, TypeError, "stop_strings"),
    ({"stop_strings": [1, 2]}, TypeError, "stop_strings"),
    ({"stop_strings": [""]}, ValueError, "stop_strings"),
    ({"stop": ["\n"]}, TypeError, "stop_strings"),
    ({"record": 1}, TypeError, "record"),
    ({"record": "attn"}, ValueError, "record"),
    ({"max_record_bytes": "x"}, TypeError, "max_record_bytes"),
    ({"seed": 2**70}, ValueError, "seed"),
    ({"temperature": -1}, ValueError, "temperature"),
    ({"top_p": 0}, ValueError, "top_p"),
    ({"temprature": 0.5}, TypeError, "unknown setting"),
    ({"sampling": il.SamplingConfig(temperature=0.5), "temperature": 0.9}, ValueError, "sampling"),
    ({"max_new_tokens": 0}, ValueError, "max_new_tokens"),
    ({"max_new_tokens": 2.5}, TypeError, "max_new_tokens"),
    ({"max_new_tokens": True}, TypeError, "max_new_tokens"),
    ({"prompt": ""}, ValueError, "prompt"),
    ({"prompt": b"bytes"}, TypeError, "prompt"),
    ({"prompt": "a\ud800b"}, ValueError, "prompt"),
    ({"prompt": "word " * 600}, ValueError, "prompt"),
    ({"config": {"max_new_tokens": 3}}, TypeError, "config"),
    ({"cache_implementation": "paged"}, ValueError, "cache_implementation"),
]


def refusal_problem(model, entry, kwargs: dict, error: type, names: str) -> str | None:
    """What is wrong with how ``entry`` (``il.stream`` or ``il.generate``) treats one bad setting, or None.

    Right: ``error`` naming ``names`` with a "Fix", raised before any forward pass (a stream is not iterated).
    """
    kwargs = dict(kwargs)
    prompt = kwargs.pop("prompt", "ROMEO.")
    with ForwardCounter(model) as count:
        try:
            entry(model, prompt, kwargs.pop("max_new_tokens", 4), **kwargs)
        except error as err:
            if not re.search(names, str(err)):
                return f"{kwargs}: the message does not name {names!r}: {err}"
            if "Fix" not in str(err) and "unknown setting" not in str(err):
                return f"{kwargs}: the message says no Fix: {err}"
        except Exception as err:
            return f"{kwargs}: raised {type(err).__name__}, not {error.__name__}: {err}"
        else:
            return f"{kwargs}: raised nothing (expected {error.__name__} naming {names!r})"
    return f"{kwargs}: {count.n} forward pass(es) before the refusal" if count.n else None


def test_bad_settings_are_refused_before_any_forward(model):
    # every case through stream(), which generate() runs on; all failures are listed at once
    problems = [p for case in BAD_SETTINGS if (p := refusal_problem(model, il.stream, *case))]
    assert not problems, "\n".join(problems)


def test_generate_refuses_through_stream_and_the_check_can_fail(model):
    assert refusal_problem(model, il.generate, {"temprature": 0.5}, TypeError, "unknown setting") is None
    assert refusal_problem(model, il.generate, {"top_p": 0}, ValueError, "top_p") is None
    # a good setting is reported, as is a wrong exception type
    assert "raised nothing" in refusal_problem(model, il.stream, {"temperature": 0.5}, ValueError, "temperature")
    assert "not TypeError" in refusal_problem(model, il.stream, {"top_p": 0}, TypeError, "top_p")


def test_a_prompt_longer_than_the_context_says_so(model):
    with pytest.raises(ValueError, match="shorten the prompt by at least") as err:
        il.generate(model, "word " * 12_500, 5)
    assert "max_new_tokens <=" not in str(err.value)


@pytest.mark.parametrize("record", ["residual", "embeddings"])
def test_the_memory_guard_covers_every_recording(model, record):
    """The probe's case: record='residual' without a cache kept 228 MiB under a 1 MiB limit."""
    prompt = "word " * 200
    limit = 2**20 if record == "residual" else 100_000
    with pytest.raises(ValueError, match=rf"needs about .*{record} .*max_record_bytes={limit:,}") as err:
        il.generate(model, prompt, 200 if record == "residual" else 1, record=record, use_cache=False,
                    max_record_bytes=limit)
    assert "Fix:" in str(err.value)
    d, n = model.info.d_model, len(model.encode(prompt))
    assert record_bytes({"residual"}, model.info.n_layer, 1, d, n, 200, use_cache=False)["residual"] == \
        (model.info.n_layer + 1) * sum(n + i for i in range(200)) * d * 4  # every step keeps the whole sequence
    trace = il.generate(model, "ROMEO.", 3, record="residual", max_record_bytes=2**20)  # small runs still record
    assert trace.steps[0].residual is not None


def test_a_tiny_attention_limit_reports_real_sizes(model):
    with pytest.raises(ValueError) as err:
        il.generate(model, "ROMEO. My lord", 5, record="attention", max_record_bytes=1000)
    assert "0 MiB" not in str(err.value) and "KiB" in str(err.value) and "1,000" in str(err.value)


BAD_IDS = [
    ([1.5, 2.7], TypeError), ([True, False], TypeError), ([[1, 2], [3]], ValueError), ([], ValueError),
    ([50257], ValueError), ([-1], ValueError), (["a"], ValueError), ([1] * 513, ValueError),
]


@pytest.mark.parametrize(("ids", "error"), BAD_IDS, ids=lambda v: repr(v)[:30])
def test_bad_ids_are_refused(model, ids, error):
    with ForwardCounter(model) as count, pytest.raises(error, match="ids"):
        il.prefill(model, ids)
    with pytest.raises(error, match="ids"):
        il.forward_full(model, ids)
    assert count.n == 0


def test_prefill_static_tokens_is_checked(model):
    with pytest.raises(ValueError, match="static_tokens"):
        il.prefill(model, [1, 2, 3], static_tokens=600)  # the bundled model's context is 512
    with pytest.raises(ValueError, match="static_tokens"):
        il.prefill(model, [1, 2, 3], static_tokens=2)
    with pytest.raises(TypeError, match="static_tokens"):
        il.prefill(model, [1, 2, 3], static_tokens=4.5)


def test_decode_step_refuses_what_does_not_fit(model):
    _logits, cache = il.prefill(model, [1, 2, 3])
    with ForwardCounter(model) as count:
        with pytest.raises(TypeError, match="ids"):
            il.decode_step(model, 198.7, cache)
        with pytest.raises(ValueError, match="token"):
            il.decode_step(model, torch.tensor([[2], [1]]), cache)  # two tokens for a batch-1 cache
        with pytest.raises(ValueError, match="ids"):
            il.decode_step(model, 10**6, cache)
        with pytest.raises(TypeError, match="cache"):
            il.decode_step(model, 5, None)
        other = il.load("bundled", verbose=False)
        with pytest.raises(ValueError, match="cache"):
            il.decode_step(other, 5, cache)
        _, full = il.prefill(model, [1, 2, 3], static_tokens=3)
        count.n = 0
        with pytest.raises(ValueError, match="capacity 3"):
            il.decode_step(model, 5, full)
    assert count.n == 0
    assert cache.tokens == 3
    _, long = il.prefill(model, [1] * model.info.n_ctx)
    with pytest.raises(ValueError, match="context is full"):
        il.decode_step(model, 5, long)


def test_encode_refuses_a_lone_surrogate(model):
    with pytest.raises(ValueError, match=r"U\+D800 at character 1"):
        model.encode("a\ud800b")


def test_a_stream_has_one_reader_at_a_time(model):
    s = il.stream(model, PROMPT_B, 4, stop_at_eos=False)
    first = iter(s)
    next(first)
    got: list = []

    def second_reader():
        try:
            got.append(list(s))
        except RuntimeError as exc:
            got.append(exc)

    t = threading.Thread(target=second_reader)
    t.start()
    t.join(60)
    assert isinstance(got[0], RuntimeError) and "being read by another loop or thread" in str(got[0])
    rest = list(first)
    assert len(rest) == 3 and [e.token_id for e in s] == s.trace.generated_ids  # finished: a replay works


def test_threads_loading_the_same_model_at_once(model):
    loaded: list = []
    errors: list[BaseException] = []

    def load():
        try:
            loaded.append(il.load("bundled", verbose=False))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    ids = [model.encode(PROMPT_A)]
    assert len(loaded) == 3 and all(torch.equal(il.forward_full(m, ids), il.forward_full(model, ids)) for m in loaded)


@pytest.mark.parametrize("verbose", ["no", 0, None, "False"])
def test_load_refuses_a_verbose_that_is_not_a_bool(verbose, capsys):
    with pytest.raises(TypeError, match="verbose must be True or False"):
        il.load("bundled", verbose=verbose)
    assert capsys.readouterr().out == ""  # refused before it loaded (and printed) anything
