"""The two jobs, in code that reads like the articles.

    ids           = tokenize(prompt)
    logits, cache = prefill(model, ids)                # job 1: read the whole prompt at once
    repeat:
        token = sample(logits)                         # choose the next token
        emit(token)                                    # the learner sees it now
        if token is a stop token or max_new_tokens reached: stop
        logits, cache = decode_step(model, token, cache)   # job 2: one token against the cache

``generate`` runs that loop (``_loop`` below is exactly it) and returns a ``Trace``; ``stream`` yields
each token as it is made. Settings travel as one ``GenerationConfig`` (Hugging Face's names). Recording is a
``Recorder``: a context around each forward pass (``recorder.capturing()``) and a record of each step.
``use_cache=False`` runs ``recompute_step`` over the whole sequence every step instead of ``decode_step``
against the cache (notebook 05 compares them).

Shapes: ``ids`` ``[batch, tokens]``; ``logits`` ``[batch, vocab]`` (the last position). The input checks on a
``Model`` and its ids (``as_ids``, ``check_model``) live in ``models.py``.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator

import torch

from . import _hf
from .cache import KVCache
from .errors import bad_value, check_number
from .generation import GenerationConfig, TextAssembler, TokenEvent, stop_reason
from .i18n import tr
from .models import Model, as_ids, check_model
from .recorder import DEFAULT_MAX_RECORD_BYTES, Recorder
from .sampling import GREEDY, SamplingConfig, draw, sample_with_steps
from .timing import clock
from .tokens import piece_text
from .trace import Trace

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "GenerationConfig", "Stream", "TokenEvent", "as_ids", "decode_step",
           "forward_full", "generate", "prefill", "recompute_step", "reference_generate", "stream"]


@torch.no_grad()  # not inference_mode: a learner may edit the logits in place (mask a token), as with any tensor
def prefill(model: Model, ids, *, static_tokens: int | None = None) -> tuple[torch.Tensor, KVCache]:
    """Run the whole prompt ``[batch, tokens]`` in one forward pass.

    Returns the last position's logits ``[batch, vocab]`` and a new ``KVCache`` holding ``tokens`` positions.
    ``static_tokens`` pre-allocates a cache of that many positions (no growth while decoding).
    """
    ids = as_ids(model, ids)
    if static_tokens is not None:
        check_number("static_tokens", static_tokens, low=ids.shape[1], high=model.info.n_ctx, integer=True,
                     fix="size the cache for the prompt plus the new tokens, within the context length")
        hf_cache = _hf.new_static_cache(model, static_tokens, batch=ids.shape[0])
        positions = torch.arange(ids.shape[1], device=ids.device)
        logits, hf_cache = _hf.forward(model, ids, hf_cache, cache_position=positions, last_only=True)
        return logits[:, -1, :], KVCache(hf_cache, model, static=True)
    logits, hf_cache = _hf.forward(model, ids, _hf.new_cache(model), last_only=True)
    return logits[:, -1, :], KVCache(hf_cache, model)


@torch.no_grad()
def decode_step(model: Model, token, cache: KVCache) -> tuple[torch.Tensor, KVCache]:
    """Run one new token per sequence (``int``, ``[batch]`` or ``[batch, 1]``) against ``cache``.

    The cache grows by one position (in place); returns logits ``[batch, vocab]`` and the same cache.
    """
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be the KVCache that prefill returned, got {type(cache).__name__}. "
                        "Fix: logits, cache = il.prefill(model, ids) first, then pass that cache.")
    cache.check_owner(model)
    if isinstance(token, torch.Tensor):
        token = token.reshape(-1)
    elif isinstance(token, numbers.Integral) and not isinstance(token, bool):
        token = [int(token)]
    t = as_ids(model, token).reshape(-1, 1)
    if t.shape[0] != cache.batch:
        raise bad_value("token", f"{t.shape[0]} token(s)", f"one token per sequence in the cache ({cache.batch})",
                        "pass the tokens chosen for every sequence of the batch, shaped [batch]")
    if cache.tokens + 1 > cache.capacity:
        raise bad_value("cache", f"{cache.tokens} tokens held", f"room for one more (capacity {cache.capacity})",
                        "the context is full: start a new prefill with a shorter prompt, or a larger "
                        "static_tokens" if cache.static else "the context is full: start again with a shorter prompt")
    if cache.static:
        pos = torch.tensor([cache.tokens], device=model.device)
        logits, _ = _hf.forward(model, t, cache, cache_position=pos)
    else:
        logits, _ = _hf.forward(model, t, cache)
    return logits[:, -1, :], cache


@torch.no_grad()
def forward_full(model: Model, ids, *, last_only: bool = False) -> torch.Tensor:
    """No cache: run the whole sequence ``[batch, tokens]``; returns logits ``[batch, tokens, vocab]``.

    ``last_only`` applies the LM head to the last position only (``[batch, 1, vocab]``): all a
    cache-less decode step needs, and the same work ``prefill`` does.
    """
    logits, _ = _hf.forward(model, as_ids(model, ids), None, use_cache=False, last_only=last_only)
    return logits


# ----------------------------------------------------------------------------- the loop
@torch.inference_mode()
def _choose(logits: torch.Tensor, config: SamplingConfig, generator, show_work: bool):
    """Sample one token from ``logits`` ``[vocab]``; with ``show_work`` also each filter's effect."""
    if show_work:
        step = sample_with_steps(logits, config, generator)
        return step.token_id, step
    return int(draw(logits, config, generator)), None


def recompute_step(model: Model, sequence) -> torch.Tensor:
    """Without a cache: run the whole ``sequence`` again for one new token; the last position's logits
    ``[batch, vocab]``. Each step repeats the prompt's work plus every token so far (notebook 05 times it)."""
    return forward_full(model, sequence, last_only=True)[:, -1, :]


def _loop(model: Model, ids: list[int], config: GenerationConfig, recorder: Recorder, trace: Trace,
          t_req: float) -> Iterator[TokenEvent]:
    """The generation loop as a generator of ``TokenEvent``; fills ``trace`` as it goes.

    Without the cache (``use_cache=False``) each job runs ``recompute_step`` over the whole sequence instead.
    """
    device = model.device
    generator = config.sampling.generator(device if device.type == "cuda" else "cpu")
    text = TextAssembler(model.tokenizer, config.stop_strings)
    static = len(ids) + config.max_new_tokens if config.cache_implementation == "static" else None
    sequence, cache = list(ids), None

    t_start = clock(device) - t_req
    with recorder.capturing():                                                            # job 1: prefill, once
        if config.use_cache:
            logits, cache = prefill(model, [ids], static_tokens=static)
        else:
            logits = recompute_step(model, [ids])
    for index in range(config.max_new_tokens):
        token, work = _choose(logits[0], config.sampling, generator, recorder.wants("sampling"))  # sample
        t_end = clock(device) - t_req
        sequence.append(token)
        stop = stop_reason(model, config, token, index)                                   # a stop token? the length?
        piece = text.add(token, final=stop is not None)                                   # the text; a stop string?
        stop = text.stopped or stop
        recorder.step(trace, index, sequence, t_start, t_end, work, cache)
        trace.add_token(token, piece_text(model.tokenizer, token), t_end, piece)
        yield TokenEvent(index, token, piece, t_end, t_end - t_start)                       # emit
        if stop is not None:
            trace.stop_reason, trace.text = stop, text.text
            return
        t_start = clock(device) - t_req
        with recorder.capturing():                                                        # job 2: one token
            if config.use_cache:
                logits, cache = decode_step(model, token, cache)
            else:
                logits = recompute_step(model, [sequence])


class Stream:
    """Iterate to get ``TokenEvent``s as they are made; ``.trace`` holds the full ``Trace`` afterwards.

    The model runs during the first iteration. Iterating again replays the same events from memory
    (the model does not run again) and leaves ``.trace`` as it was. One reader at a time: a second loop
    (or thread) that starts while the first is still reading gets a clear error, not a silent partial list.
    """

    def __init__(self, gen: Iterator[TokenEvent], trace: Trace) -> None:
        self._gen = gen
        self._trace = trace
        self.events: list[TokenEvent] = []
        self.trace: Trace | None = None
        self._reading = False  # a loop is reading the model's events now

    def __iter__(self) -> Iterator[TokenEvent]:
        if self._gen is None:
            if self._reading:
                raise RuntimeError(tr("this stream is being read by another loop or thread ({n} events so far): one "
                                      "stream runs the model once, for one reader. Fix: read it in one loop (iterate "
                                      "again after it finishes to replay it), or start one il.stream(...) per reader.",
                                      n=len(self.events)))
            yield from list(self.events)
            return
        gen, self._gen = self._gen, None
        self._reading = True
        try:
            for event in gen:
                self.events.append(event)
                yield event
            self.trace = self._trace
        finally:
            self._reading = False
    def __repr__(self) -> str:
        n = len(self.events)
        if self.trace is not None:
            return tr("Stream({n} events, finished)", n=n)
        return tr("Stream({n} events, running)", n=n) if self.events else tr("Stream({n} events, not started)", n=n)


def stream(model: Model, prompt: str, max_new_tokens: int | None = None, sampling: SamplingConfig | None = None,
           *, config: GenerationConfig | None = None, record=None,
           max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, **settings) -> Stream:
    """Like ``generate`` but yields each ``TokenEvent`` as soon as its id is on the host.

    Every setting is checked here, before the first token and before any forward pass.

    >>> s = stream(m, "To be, or not")                       # doctest: +SKIP
    >>> for ev in s: print(ev.text, end="", flush=True)      # doctest: +SKIP
    >>> s.trace.latency                                      # doctest: +SKIP
    """
    check_model(model)
    t_req = clock(model.device)
    config = GenerationConfig.from_arguments(config, max_new_tokens, sampling, **settings)
    ids = config.check(model, prompt)
    recorder = Recorder(model, record, prompt_tokens=len(ids), new_tokens=config.max_new_tokens,
                        use_cache=config.use_cache, max_record_bytes=max_record_bytes)
    t_tok = clock(model.device)
    trace = Trace.start(model, prompt, ids, config, tokenize_seconds=t_tok - t_req, recorded=recorder.kinds)
    return Stream(_loop(model, ids, config, recorder, trace, t_req), trace)


def generate(model: Model, prompt: str, max_new_tokens: int | None = None, sampling: SamplingConfig | None = None,
             *, config: GenerationConfig | None = None, record=None,
             max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, **settings) -> Trace:
    """Prefill, then sample and decode until a stop token, a stop string or ``max_new_tokens``.

    Args:
        model: from ``inferlab.load()``.
        prompt: the text to continue (any Unicode; must not be empty).
        max_new_tokens: at most this many new tokens (default 40; prompt + this <= the context length).
        sampling: a ``SamplingConfig``; or give ``temperature``/``top_k``/``top_p``/``seed`` as keywords
            (not both). With none of them the choice is greedy.
        config: a ``GenerationConfig`` holding all the settings (keywords override its fields).
        record: ``None``, ``"all"``, or names from ``("embeddings", "attention", "residual", "cache",
            "sampling")``. Attention switches to the eager kernel for each recorded forward (slower).
        max_record_bytes: refuse, before any work, a recording whose tensors (attention, residual stream,
            embeddings) would exceed this estimate (bytes; default 512 MiB).
        **settings: any ``GenerationConfig`` field: ``temperature``, ``top_k``, ``top_p``, ``seed``,
            ``stop_strings`` (text that ends the answer; ``Trace.text`` is cut before it), ``stop_at_eos``,
            ``stop_token_ids`` (more ids that end it, as chat models have), ``use_cache``,
            ``cache_implementation`` (``"dynamic"``, or ``"static"``: allocated once for prompt + answer).

    Returns:
        A ``Trace``: ``.text``, ``.generated_ids``, ``.latency`` (TTFT/TPOT), ``.steps`` ...

    >>> generate(m, "ROMEO.", max_new_tokens=8, temperature=0.8, seed=1).text   # doctest: +SKIP
    """
    s = stream(model, prompt, max_new_tokens, sampling, config=config, record=record,
               max_record_bytes=max_record_bytes, **settings)
    for _ in s:
        pass
    return s.trace


def reference_generate(model: Model, prompt: str, max_new_tokens: int = 40,
                       sampling: SamplingConfig | None = None, *, stop_at_eos: bool = True) -> list[int]:
    """Hugging Face's own ``model.generate()`` with the same settings, for side-by-side checks.

    Seeded sampling lines up with ``generate`` here because both draw with ``torch.multinomial`` from
    the same probabilities: this function seeds the global RNG with ``sampling.seed`` (as
    ``torch.manual_seed`` would) and ``generate`` uses a fresh ``torch.Generator`` with that seed.
    Returns the new token ids (the stop token included when it was produced).
    """
    check_model(model)
    config = GenerationConfig.from_arguments(None, max_new_tokens, sampling or GREEDY, stop_at_eos=stop_at_eos)
    ids = torch.tensor([config.check(model, prompt)], device=model.device)
    s = config.sampling
    if not s.greedy and s.seed is not None:
        torch.manual_seed(s.seed)
    out = _hf.hf_generate(model, ids, max_new_tokens=config.max_new_tokens, do_sample=not s.greedy,
                          temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                          eos_token_id=model.eos_id if stop_at_eos else None)
    return [int(t) for t in out[0]]
