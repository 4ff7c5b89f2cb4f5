"""Hugging Face's own ways to generate, run on a ``Model``: the peers inferlab's engine, speculative decoding
and server are checked and timed against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from transformers.utils import logging as hf_logging

from .run import _lock, module

if TYPE_CHECKING:  # annotations only: models imports this package, not the other way round
    from ..models import Model


def hf_generate(model: Model, ids: torch.Tensor, *, max_new_tokens: int,
                do_sample: bool, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                eos_token_id: int | None = None) -> torch.Tensor:
    """Hugging Face's ``generate()`` with every sampling knob explicit; returns new ids ``[batch, N]``.

    ``top_k=0`` is passed explicitly: ``GenerationConfig`` defaults to ``top_k=50`` otherwise.
    """
    hf = module(model)
    kwargs = {"do_sample": do_sample, "max_new_tokens": max_new_tokens,
              "pad_token_id": eos_token_id if eos_token_id is not None else 0,
              "eos_token_id": eos_token_id, "attention_mask": torch.ones_like(ids)}
    if do_sample:
        kwargs.update(temperature=temperature, top_k=top_k, top_p=top_p)
    else:  # silence "temperature is set but do_sample=False" style warnings
        kwargs.update(temperature=None, top_k=None, top_p=None)
    with torch.inference_mode(), _lock(hf):
        out = hf.generate(ids, **kwargs)
    return out[:, ids.shape[1]:]


def hf_generate_assisted(model: Model, ids: torch.Tensor, *, max_new_tokens: int, k: int,
                         ngram: int | None = None, assistant: Model | None = None,
                         eos_token_id: int | None = None) -> torch.Tensor:
    """Hugging Face's own speculative decoding, greedy: ``prompt_lookup_num_tokens=k`` (with ``ngram`` as its
    ``max_matching_ngram_size``) or ``assistant_model=assistant`` proposing ``k`` tokens a round. Returns new ids.

    transformers reads a draft model's settings from the draft's own ``generation_config`` (its default schedule
    changes k as it goes, and a confidence threshold stops a round early): both are set here to a constant ``k``,
    so the comparison runs the same rounds as ``inferlab.speculative``, and put back afterwards.
    """
    hf = module(model)
    kwargs = {"do_sample": False, "max_new_tokens": max_new_tokens, "temperature": None, "top_k": None,
              "top_p": None, "pad_token_id": eos_token_id if eos_token_id is not None else 0,
              "eos_token_id": eos_token_id, "attention_mask": torch.ones_like(ids)}
    with torch.inference_mode(), _lock(hf):
        if assistant is None:
            out = hf.generate(ids, prompt_lookup_num_tokens=k, max_matching_ngram_size=ngram, **kwargs)
            return out[:, ids.shape[1]:]
        draft = module(assistant)
        config = draft.generation_config
        before = (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                  config.assistant_confidence_threshold)
        config.num_assistant_tokens, config.num_assistant_tokens_schedule = k, "constant"
        config.assistant_confidence_threshold = 0.0
        before_level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # its warning about its own internal call would land in a notebook's output
        try:
            out = hf.generate(ids, assistant_model=draft, **kwargs)
        finally:
            hf_logging.set_verbosity(before_level)
            (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
             config.assistant_confidence_threshold) = before
    return out[:, ids.shape[1]:]


def hf_generate_padded(model: Model, inputs: list[list[int]], *, max_new_tokens: int) -> list[list[int]]:
    """Hugging Face's ``generate()`` on one left-padded batch of prompts of token ids, greedy, no stop token; the
    new ids of each prompt, in order. Static batching as most code does it: every row runs until the last is done."""
    hf = module(model)
    width = max(len(p) for p in inputs)
    ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in inputs], device=hf.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in inputs], device=hf.device)
    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # eos_token_id=-1 (no stop token) draws a warning on stderr; it is meant
    try:
        with torch.inference_mode(), _lock(hf):  # padded on the left: every row's next token is at the end
            out = hf.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens, eos_token_id=-1,
                              do_sample=False, temperature=None, top_k=None, top_p=None, pad_token_id=0)
    finally:
        hf_logging.set_verbosity(before)
    return out[:, width:].tolist()


def hf_generate_batch(model: Model, inputs: list[list[int]], *, max_new_tokens: int, max_batch: int,
                      block_size: int, kv_blocks: int, warmup: bool = False) -> list[list[int]]:
    """Hugging Face's own continuous batching (``generate_batch``, paged attention) on prompts of token ids,
    greedy, no stop token; the new ids of each prompt, in order. The peer ``inferlab.serve`` is measured against.

    Its cache and batch are sized explicitly: left to infer them on a CPU, transformers 5.24 took ~75x longer.
    """
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    hf = module(model)
    # eos_token_id=-1: no stop token, said the way generate_batch itself says it (None makes it warn on stderr)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=0)
    batching = ContinuousBatchingConfig(page_size=block_size, num_blocks=kv_blocks, max_requests_per_batch=max_batch,
                                        max_batch_tokens=max(256, max_batch * block_size))
    with torch.inference_mode(), _lock(hf):
        out = hf.generate_batch(inputs=inputs, generation_config=config, continuous_batching_config=batching,
                                warmup=warmup)
    return [list(out[f"req_{i}"].generated_tokens) for i in range(len(inputs))]
