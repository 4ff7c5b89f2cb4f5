"""Which weight layout the fast path uses on this machine: measured where it runs, then remembered.

No rule picks the fastest matrix-vector kernel on every CPU: the compiled reductions stream GPT-2's
weights best on the AMD EPYC the course was built on, MKL's own products match them on an Intel
Xeon, oneDNN wins elsewhere. So ``FastDecoder(weights="auto")`` asks ``choose``: every candidate
layout for this model's shapes (``candidates``) takes a few decode steps in turn
(``time_candidates``, on ``timing.interleave``), the fastest is kept, and the choice is remembered
per machine, shape, dtype, thread count and ``compile`` setting, in this process and in a small JSON
file (``cache_file()``: ``$INFERLAB_CACHE/fast_choice.json``, else ``~/.cache/inferlab/``; the file keeps the
name it had when this module was ``inferlab.fast_choice``, so choices measured before are still found).

``"tied"`` (eager, the model's own tensors through ``F.linear``/``addmm`` as Hugging Face runs them)
is always a candidate, so the choice can fall back to the plain path: the fast path is then never
slower than the engine's arithmetic, only leaner around it.

    >>> FastDecoder(m, 128, compile=True).choice      # doctest: +SKIP
    Choice(rows+compile won: 38.1 ms/step, 1.21x faster than packed (46.2 ms); measured)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import kept
from ..errors import one_line
from ..i18n import tr
from ..plain import plain
from ..timing import interleave, summarize, time_call

ROUNDS = 3  # interleaved rounds per candidate (after one warm-up step each)
STEPS = 3  # decode steps timed per round
PROMPT_TOKENS = 8  # the measured steps decode after this many cached tokens

_MEMORY: dict[str, dict] = {}  # this process's choices, by cache key


def library_versions() -> dict[str, str | int]:
    """torch, MKL and oneDNN versions as PyTorch was built (``torch.__config__.show()``), and the threads."""
    shown = torch.__config__.show()

    def version(word: str, pattern: str) -> str:  # e.g. "Intel(R) MKL-DNN v3.12.0 (Git Hash ...)" -> "v3.12.0"
        found = [s.strip().lstrip("- ") for s in shown.splitlines() if word in s]
        if not found:
            return "not built in"
        short = re.search(pattern, found[0])
        return short.group(1) if short else found[0]

    return {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "mkl": version("Math Kernel Library", r"Version (\S+)") if torch.backends.mkl.is_available()
            else "not available",
            "onednn": version("MKL-DNN", r"(v[\d.]+)") if torch.backends.mkldnn.is_available() else "not available"}


def label(weights: str, compiled: bool) -> str:
    """A candidate's name: ``"rows+compile"``, ``"packed"`` ..."""
    return f"{weights}+compile" if compiled else weights


def candidates(device: torch.device, *, batch: int, compile: bool, onednn: bool) -> list[tuple[str, bool]]:
    """The (weights, compiled) layouts worth measuring here; the plain ``("tied", False)`` always last."""
    cpu = device.type == "cpu"
    out = []
    if compile:  # on a CPU at batch 1 the compiled step writes each product as a reduction ("rows")
        out.append(("rows" if cpu and batch == 1 else "tied", True))
    if cpu and onednn:
        out.append(("packed", False))
    if cpu:
        out.append(("transposed", False))
    return [*out, ("tied", False)]


@dataclass(frozen=True)
class Choice:
    """The layout ``FastDecoder(weights="auto")`` took, and the measured step time of every candidate."""

    weights: str
    compiled: bool
    step_s: dict[str, float] = field(default_factory=dict)  # candidate label -> median seconds per decode step
    source: str = "measured"  # "measured" now, "cached" (an earlier measurement), or "only candidate"
    left_out: dict[str, str] = field(default_factory=dict)  # candidate label -> why it could not run
    measured_at: str = ""  # when the candidates were timed ("2026-12-04 13:20 UTC"); "" where not recorded

    @property
    def winner(self) -> str:
        return label(self.weights, self.compiled)

    @property
    def runner_up(self) -> str | None:
        """The second-fastest candidate (``None`` when only one was timed)."""
        rest = sorted((s, k) for k, s in self.step_s.items() if k != self.winner)
        return rest[0][1] if rest else None

    @property
    def margin(self) -> float | None:
        """How many times faster the winner stepped than the runner-up (1.0 = a tie)."""
        other = self.runner_up
        return None if other is None else self.step_s[other] / self.step_s[self.winner]

    def summary(self) -> str:
        """One line: which layout won and by how much."""
        source = {"measured": tr("measured"), "cached": tr("cached"),
                  "only candidate": tr("only candidate")}.get(self.source, self.source)
        if self.runner_up is None:
            return tr("{winner} ({source})", winner=self.winner, source=source)
        return tr("{winner} won: {ms:.2f} ms/step, {margin:.2f}x faster than {runner_up} ({runner_ms:.2f} ms); "
                  "{source}", winner=self.winner, ms=self.step_s[self.winner] * 1e3, margin=self.margin,
                  runner_up=self.runner_up, runner_ms=self.step_s[self.runner_up] * 1e3, source=source)

    def __repr__(self) -> str:
        return f"Choice({self.summary()})"

    def to_dict(self) -> dict:
        """Plain-Python form (what the cache file stores), field by field (``inferlab.plain``)."""
        return plain(self)


CACHE_NAME = "fast_choice.json"  # the name it had when this module was inferlab.fast_choice


def cache_file() -> Path:
    """Where choices are remembered between processes: ``$INFERLAB_CACHE``, else the user's cache folder
    (``kept.folder``)."""
    return kept.path(CACHE_NAME)


LAYOUTS_VERSION = 3  # bumped when a layout changes how fast it runs: choices measured before are measured again


def cache_key(model, *, batch: int, compile: bool, what: str = "layout") -> str:
    """Machine + shape + dtype + threads + compile: a choice measured under one key holds for all its decoders.
    ``what``: ``"layout"`` (``choose``) or ``"packed rows"`` (``packed_rows``)."""
    info = model.info
    return kept.machine_key(device=str(model.device), dtype=str(info.dtype),
                            shape=[info.n_layer, info.n_head, info.d_model, info.vocab_size], batch=batch,
                            threads=torch.get_num_threads(), compile=compile, torch=torch.__version__,
                            layouts=LAYOUTS_VERSION, **({} if what == "layout" else {"what": what}))


def _read_file() -> dict:
    """The cache file's choices; an unreadable or corrupt file counts as empty, said once (``kept.read``), and is
    rewritten on the next save."""
    return kept.read(CACHE_NAME, "FastDecoder(weights='auto')")


def remembered(key: str) -> Choice | None:
    """A choice made earlier under ``key`` (this process first, then the cache file), or ``None``."""
    entry = _MEMORY.get(key) or _read_file().get(key)
    try:
        choice = Choice(entry["weights"], bool(entry["compiled"]), {k: float(v) for k, v in entry["step_s"].items()},
                        "cached", dict(entry.get("left_out", {})), str(entry.get("measured_at", "")))
    except (TypeError, KeyError, AttributeError, ValueError):
        return None  # no entry, or one this version cannot read: measure again
    _MEMORY[key] = choice.to_dict()
    return choice


def remember(key: str, choice: Choice | dict) -> None:
    """Keep ``choice`` in this process and in the cache file (silently skipped where the file cannot be written)."""
    entry = choice if isinstance(choice, dict) else choice.to_dict()
    _MEMORY[key] = entry
    kept.write(CACHE_NAME, {**_read_file(), key: entry})


def forget() -> None:
    """Drop every remembered choice (this process and the cache file): the next ``"auto"`` measures again."""
    _MEMORY.clear()
    try:
        cache_file().unlink()
    except OSError:
        pass


def time_candidates(runs: dict[str, Callable[[], object]], device=None, rounds: int = ROUNDS) -> dict[str, float | str]:
    """Median seconds per call of each run, ``rounds`` interleaved rounds of ``STEPS`` calls after one warm-up.

    A run whose warm-up raises (e.g. ``torch.compile`` without a C++ compiler) gets the reason instead.
    """
    out: dict[str, float | str] = {}
    for name, run in runs.items():
        try:
            run()  # the first call compiles a compiled candidate
        except Exception as e:  # torch.compile raises many kinds
            out[name] = one_line(e)
    ok = {k: (lambda r=r: summarize(time_call(r, repeats=STEPS, warmup=0, device=device)).median)
          for k, r in runs.items() if k not in out}
    timed = interleave(ok, rounds, warmup=0)
    return {**{k: summarize(v).median for k, v in timed.items()}, **out}


def choose(model, build: Callable[[str, bool], object], *, batch: int, compile: bool, onednn: bool,
           max_tokens: int) -> tuple[Choice, object | None]:
    """Pick the fastest layout for ``model`` here: remembered if it was measured before, else measured now.

    Args:
        build: ``build(weights, compiled)`` -> a ``FastDecoder`` with that layout.
        max_tokens: the decoders' cache slots (the measured steps need ``PROMPT_TOKENS`` + 1 of them, or 2).
    Returns:
        The ``Choice`` and, when it was measured now, the winning decoder (so its compiled step is reused).
    """
    options = candidates(model.device, batch=batch, compile=compile, onednn=onednn)
    if len(options) == 1 or max_tokens < 2:
        return Choice(*options[-1], source="only candidate"), None
    key = cache_key(model, batch=batch, compile=compile)
    known = remembered(key)
    if known is not None and (known.weights, known.compiled) in options:
        return known, None
    n = min(PROMPT_TOKENS, max_tokens - 1)
    decoders = {label(w, c): build(w, c) for w, c in options}
    for dec in decoders.values():
        dec.prefill([[model.eos_id] * n] * batch)

    measured = time_candidates({k: (lambda d=d: d.step_again(n)) for k, d in decoders.items()}, device=model.device)
    times = {k: v for k, v in measured.items() if isinstance(v, float)}
    best = min(times, key=times.get)
    weights, compiled = next((w, c) for w, c in options if label(w, c) == best)
    choice = Choice(weights, compiled, times, "measured", {k: v for k, v in measured.items() if isinstance(v, str)},
                    time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))  # a remembered time says when it was true
    remember(key, choice)
    winner = decoders[best]
    winner.tokens = 0
    return choice, winner

