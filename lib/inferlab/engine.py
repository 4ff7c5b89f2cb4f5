"""The two jobs, in code that reads like the articles.

    ids    = tokenize(prompt)
    logits, cache = prefill(model, ids)          # read the whole prompt at once
    token  = sample(logits)
    while token is not the stop token and fewer than max_new_tokens:
        logits, cache = decode_step(model, token, cache)   # one token against the cache
        token = sample(logits)

``generate`` runs that loop and returns a ``Trace``; ``stream`` yields each token as it is made.
``use_cache=False`` recomputes the whole sequence every step instead (notebook 05 compares them).
Shapes: ``ids`` ``[batch, T]``; ``logits`` ``[batch, vocab]`` (the last position).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from . import _hf
from .cache import KVCache
from .errors import bad_value, check_number
from .hooks import capture
from .models import Model
from .sampling import GREEDY, SamplingConfig, sample, sample_with_steps
from .timing import clock
from .trace import StepRecord, Trace, parse_record

DEFAULT_MAX_ATTENTION_BYTES = 512 * 2**20


def as_ids(model: Model, ids) -> torch.Tensor:
    """Token ids (a list, ``[T]`` or ``[batch, T]`` tensor) as a ``[batch, T]`` long tensor on the model's device."""
    t = torch.as_tensor(ids, dtype=torch.long)
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2 or t.shape[1] == 0:
        raise bad_value("ids", tuple(t.shape), "a non-empty [T] or [batch, T] sequence of token ids",
                        "tokenize a non-empty prompt first")
    return t.to(model.device)


@torch.inference_mode()
def prefill(model: Model, ids, *, static_tokens: int | None = None) -> tuple[torch.Tensor, KVCache]:
    """Run the whole prompt ``[batch, T]`` in one forward pass.

    Returns the last position's logits ``[batch, vocab]`` and a new ``KVCache`` holding T positions.
    ``static_tokens`` pre-allocates a cache of that many positions (no growth while decoding).
    """
    ids = as_ids(model, ids)
    if static_tokens is not None:
        hf_cache = _hf.new_static_cache(model.hf, static_tokens, batch=ids.shape[0])
        positions = torch.arange(ids.shape[1], device=ids.device)
        logits, hf_cache = _hf.forward(model.hf, ids, hf_cache, cache_position=positions, last_only=True)
        return logits[:, -1, :], KVCache(hf_cache, static=True)
    logits, hf_cache = _hf.forward(model.hf, ids, _hf.new_cache(model.hf), last_only=True)
    return logits[:, -1, :], KVCache(hf_cache)


@torch.inference_mode()
def decode_step(model: Model, token, cache: KVCache) -> tuple[torch.Tensor, KVCache]:
    """Run one new token per sequence (``int``, ``[batch]`` or ``[batch, 1]``) against ``cache``.

    The cache grows by one position (in place); returns logits ``[batch, vocab]`` and the same cache.
    """
    t = torch.as_tensor(token, dtype=torch.long, device=model.device).reshape(-1, 1)
    if cache.static:
        pos = torch.tensor([cache.tokens], device=model.device)
        logits, _ = _hf.forward(model.hf, t, cache.hf, cache_position=pos)
    else:
        logits, _ = _hf.forward(model.hf, t, cache.hf)
    return logits[:, -1, :], cache


@torch.inference_mode()
def forward_full(model: Model, ids, *, last_only: bool = False) -> torch.Tensor:
    """No cache: run the whole sequence ``[batch, T]``; returns logits for every position ``[batch, T, vocab]``.

    ``last_only`` applies the LM head to the last position only (``[batch, 1, vocab]``): all a
    cache-less decode step needs, and the same work ``prefill`` does.
    """
    logits, _ = _hf.forward(model.hf, as_ids(model, ids), None, use_cache=False, last_only=last_only)
    return logits


@dataclass(frozen=True)
class TokenEvent:
    """One streamed token: its id, the text it completes (may be "" mid-character), and when it arrived."""

    index: int
    token_id: int
    text: str
    t: float  # seconds since the request
    step_seconds: float

    def __repr__(self) -> str:
        return f"TokenEvent(#{self.index} id={self.token_id} {self.text!r} at {self.t * 1e3:.1f} ms)"


def _check_prompt(model: Model, prompt, max_new_tokens) -> list[int]:
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__} {prompt!r:.60}. "
                        "Fix: pass text; to start from token ids use prefill(model, ids).")
    if not prompt:
        raise bad_value("prompt", prompt, "a non-empty string", "type at least one character")
    check_number("max_new_tokens", max_new_tokens, low=1, integer=True,
                 fix="ask for at least one new token")
    ids = model.encode(prompt)
    limit = model.info.n_ctx
    if len(ids) + max_new_tokens > limit:
        raise ValueError(
            f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) = {len(ids) + max_new_tokens} "
            f"exceeds the model's context length of {limit} tokens. Fix: shorten the prompt or use "
            f"max_new_tokens <= {max(limit - len(ids), 0)}.")
    return ids


def _sampling_from(sampling, temperature, top_k, top_p, seed) -> SamplingConfig:
    if sampling is not None:
        if not isinstance(sampling, SamplingConfig):
            raise TypeError(f"sampling must be a SamplingConfig or None, got {type(sampling).__name__}")
        return sampling
    if temperature is None and top_k is None and top_p is None:
        return GREEDY if seed is None else SamplingConfig(temperature=1.0, seed=seed)
    return SamplingConfig(temperature=1.0 if temperature is None else temperature,
                          top_k=0 if top_k is None else top_k,
                          top_p=1.0 if top_p is None else top_p, seed=seed)


def _estimate_attention_bytes(model: Model, prompt_len: int, new_tokens: int) -> int:
    per_cell = model.info.n_layer * model.info.n_head * 4
    rows = prompt_len * prompt_len + sum(prompt_len + i for i in range(1, new_tokens))
    return per_cell * rows


def _run(model: Model, prompt: str, max_new_tokens: int, config: SamplingConfig, stop: Sequence[str],
         stop_at_eos: bool, use_cache: bool, record, max_attention_bytes: int,
         stop_token_ids: Sequence[int] = ()) -> Iterator[TokenEvent]:
    """The loop itself, as a generator of ``TokenEvent``; its return value is the ``Trace``."""
    device = model.device
    t_req = clock(device)
    ids = _check_prompt(model, prompt, max_new_tokens)
    kinds = parse_record(record)
    if isinstance(stop, str):
        stop = (stop,)
    if "attention" in kinds:
        need = _estimate_attention_bytes(model, len(ids), max_new_tokens)
        if need > max_attention_bytes:
            raise ValueError(
                f"recording attention for {len(ids)} prompt tokens + {max_new_tokens} new ones needs about "
                f"{need / 2**20:.0f} MiB (layers x heads x T^2 x 4 bytes); the limit is "
                f"max_attention_bytes={max_attention_bytes / 2**20:.0f} MiB. Fix: shorten the prompt, "
                "drop 'attention' from record, or raise max_attention_bytes.")
    generator = config.generator(device if device.type == "cuda" else "cpu")
    t_tok = clock(device)
    trace = Trace(prompt=prompt, prompt_ids=ids, prompt_pieces=[model.decode([i]) for i in ids],
                  tokenize_seconds=t_tok - t_req, recorded=kinds,
                  settings={"max_new_tokens": max_new_tokens, "temperature": config.temperature,
                            "top_k": config.top_k, "top_p": config.top_p, "seed": config.seed,
                            "stop": list(stop), "stop_at_eos": stop_at_eos, "use_cache": use_cache,
                            "stop_token_ids": list(stop_token_ids)},
                  model={"name": model.info.name, "source": model.info.source,
                         "n_layer": model.info.n_layer, "n_head": model.info.n_head,
                         "d_model": model.info.d_model, "dtype": str(model.info.dtype), "device": str(device)})
    hook_kinds = {k for k in kinds if k in ("embeddings", "attention", "residual")}
    if "residual" in hook_kinds:
        hook_kinds.add("embeddings")  # the residual stream starts at embed.sum
    sequence = list(ids)
    cache = None
    emitted = ""
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(capture(model.hf, hook_kinds)) if hook_kinds else {}
        stack.enter_context(torch.inference_mode())
        for index in range(max_new_tokens):
            t_start = clock(device) - t_req
            if index == 0 and use_cache:
                step_input, position = list(ids), 0
                logits, cache = prefill(model, [ids])
            elif use_cache:
                step_input, position = [sequence[-1]], len(sequence) - 1
                logits, cache = decode_step(model, sequence[-1], cache)
            else:
                step_input, position = list(sequence), 0
                logits = forward_full(model, [sequence], last_only=True)[:, -1, :]
            row = logits[0]
            if "sampling" in kinds:
                step_info = sample_with_steps(row, config, generator)
                token = step_info.token_id
            else:
                step_info = None
                token = int(sample(row, config, generator))
            t_end = clock(device) - t_req
            record_step = StepRecord(index=index, kind="prefill" if index == 0 else "decode",
                                     input_ids=step_input, position=position, token_id=token,
                                     t_start=t_start, t_end=t_end, sampling=step_info)
            if "attention" in kinds:
                record_step.attention = [store[f"blocks.{i}.attn.pattern"].float().cpu()
                                         for i in range(model.info.n_layer)]
            if "residual" in kinds:
                record_step.residual = torch.stack(
                    [store["embed.sum"]] + [store[f"blocks.{i}.resid_post"] for i in range(model.info.n_layer)]
                ).float().cpu()
            if "embeddings" in kinds and index == 0:
                trace.embeddings = {k: store[f"embed.{k}"].float().cpu() for k in ("tok", "pos", "sum")}
            if "cache" in kinds and cache is not None:
                record_step.cache = cache.snapshot()
            trace.steps.append(record_step)
            trace.token_times.append(t_end)
            sequence.append(token)
            trace.generated_ids.append(token)
            trace.generated_pieces.append(model.decode([token]))
            # Stream only complete characters: byte-level BPE may split one character over tokens.
            text = model.tokenizer.decode(trace.generated_ids, skip_special_tokens=True)
            piece = "" if text.endswith("\ufffd") else text[len(emitted):]
            emitted += piece
            yield TokenEvent(index, token, piece, t_end, t_end - t_start)
            if (stop_at_eos and token == model.eos_id) or token in stop_token_ids:
                trace.stop_reason = "stop token"
                break
            hit = [s for s in stop if s and s in text]
            if hit:
                trace.stop_reason = f"stop string {hit[0]!r}"
                text = text[: text.index(hit[0])]
                break
        else:
            trace.stop_reason = "max_new_tokens"
    trace.text = text
    return trace


class Stream:
    """Iterate to get ``TokenEvent``s as they are made; ``.trace`` holds the full ``Trace`` afterwards."""

    def __init__(self, gen: Iterator[TokenEvent]) -> None:
        self._gen = gen
        self.trace: Trace | None = None

    def __iter__(self) -> Iterator[TokenEvent]:
        self.trace = yield from self._gen
        return self.trace


def stream(model: Model, prompt: str, max_new_tokens: int = 40, sampling: SamplingConfig | None = None, *,
           temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
           seed: int | None = None, stop: Sequence[str] = (), stop_at_eos: bool = True,
           stop_token_ids: Sequence[int] = (), use_cache: bool = True, record=None,
           max_attention_bytes: int = DEFAULT_MAX_ATTENTION_BYTES) -> Stream:
    """Like ``generate`` but yields each ``TokenEvent`` as soon as its id is on the host.

    Settings are checked before the first token (bad input raises at once, not mid-stream).

    >>> s = stream(m, "To be, or not")                       # doctest: +SKIP
    >>> for ev in s: print(ev.text, end="", flush=True)      # doctest: +SKIP
    >>> s.trace.latency                                      # doctest: +SKIP
    """
    config = _sampling_from(sampling, temperature, top_k, top_p, seed)
    _check_prompt(model, prompt, max_new_tokens)
    parse_record(record)
    stop_token_ids = tuple(int(t) for t in stop_token_ids)
    bad = [t for t in stop_token_ids if not 0 <= t < model.info.vocab_size]
    if bad:
        raise bad_value("stop_token_ids", bad, f"token ids in [0, {model.info.vocab_size})",
                        "use model.encode(text) to find a token's id")
    return Stream(_run(model, prompt, max_new_tokens, config, stop, stop_at_eos, use_cache, record,
                       max_attention_bytes, stop_token_ids))


def generate(model: Model, prompt: str, max_new_tokens: int = 40, sampling: SamplingConfig | None = None, *,
             temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
             seed: int | None = None, stop: Sequence[str] = (), stop_at_eos: bool = True,
             stop_token_ids: Sequence[int] = (), use_cache: bool = True, record=None,
             max_attention_bytes: int = DEFAULT_MAX_ATTENTION_BYTES) -> Trace:
    """Prefill, then sample and decode until the stop token, a stop string or ``max_new_tokens``.

    Args:
        model: from ``inferlab.load()``.
        prompt: the text to continue (any Unicode; must not be empty).
        max_new_tokens: at most this many new tokens (>= 1; prompt + this <= the context length).
        sampling: a ``SamplingConfig``; or give ``temperature``/``top_k``/``top_p``/``seed`` directly.
            With none of them the choice is greedy.
        stop: strings that end the generation (``Trace.text`` is cut before the stop string).
        stop_at_eos: stop at ``<|endoftext|>``.
        stop_token_ids: more ids that end the generation like the stop token (chat models have several).
        use_cache: False recomputes the whole sequence each step (no KV cache).
        record: ``None``, ``"all"``, or names from ``("embeddings", "attention", "residual",
            "cache", "sampling")``. Attention switches to the eager kernel for this run (slower).
        max_attention_bytes: refuse to record attention above this estimate.

    Returns:
        A ``Trace``: ``.text``, ``.generated_ids``, ``.latency`` (TTFT/TPOT), ``.steps`` ...

    >>> generate(m, "ROMEO.", max_new_tokens=8).text            # doctest: +SKIP
    """
    s = stream(model, prompt, max_new_tokens, sampling, temperature=temperature, top_k=top_k,
               top_p=top_p, seed=seed, stop=stop, stop_at_eos=stop_at_eos, stop_token_ids=stop_token_ids,
               use_cache=use_cache, record=record, max_attention_bytes=max_attention_bytes)
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
    config = sampling or GREEDY
    ids = torch.tensor([_check_prompt(model, prompt, max_new_tokens)], device=model.device)
    if not config.greedy and config.seed is not None:
        torch.manual_seed(config.seed)
    out = _hf.hf_generate(model.hf, ids, max_new_tokens=max_new_tokens, do_sample=not config.greedy,
                          temperature=config.temperature, top_k=config.top_k, top_p=config.top_p,
                          eos_token_id=model.eos_id if stop_at_eos else None)
    return [int(t) for t in out[0]]
