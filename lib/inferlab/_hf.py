"""The one adapter to Hugging Face ``transformers`` (5.x): every HF detail lives here.

A transformers upgrade should touch this file only. The rest of the library sees plain tensors, a
cache object with per-layer ``[batch, heads, tokens, head_dim]`` keys and values, and named modules.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    DynamicCache,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2TokenizerFast,
    PreTrainedTokenizerBase,
    StaticCache,
)
from transformers.utils import logging as hf_logging

# Published configs of the GPT-2 family (Radford et al. 2019), for random-weight models and the cost model.
GPT2_FAMILY: dict[str, dict[str, int]] = {
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768},
    "distilgpt2": {"n_layer": 6, "n_head": 12, "n_embd": 768},
    "gpt2-medium": {"n_layer": 24, "n_head": 16, "n_embd": 1024},
    "gpt2-large": {"n_layer": 36, "n_head": 20, "n_embd": 1280},
    "gpt2-xl": {"n_layer": 48, "n_head": 25, "n_embd": 1600},
}


def load_folder(path: Path | str, *, dtype: torch.dtype, device: torch.device,
                local_only: bool) -> GPT2LMHeadModel:
    """Load a GPT-2 checkpoint (a folder or a hub name). Safetensors only; never remote code."""
    config = AutoConfig.from_pretrained(path, local_files_only=local_only)
    if config.model_type != "gpt2":
        raise ValueError(
            f"model={str(path)!r} is a {config.model_type!r} model; inferlab's hooks follow GPT-2's "
            "modules. Fix: use a GPT-2-family model (gpt2, distilgpt2, gpt2-medium, ...) or the bundled one."
        )
    hf_logging.disable_progress_bar()  # a loading bar on stderr would break checked notebook cells
    model = GPT2LMHeadModel.from_pretrained(
        path, dtype=dtype, use_safetensors=True, local_files_only=local_only,
        attn_implementation="sdpa",
    )
    return model.to(device).eval()


def load_tokenizer(path: Path | str, *, local_only: bool) -> PreTrainedTokenizerBase:
    """The tokenizer saved with a checkpoint (GPT-2's byte-level BPE)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=local_only)


def gpt2_tokenizer_from_files(vocab: Path, merges: Path) -> GPT2TokenizerFast:
    """GPT-2's tokenizer built from ``vocab.json`` + ``merges.txt`` (transformers 5 keywords)."""
    # `vocab_file=` silently builds an empty tokenizer in transformers 5; `vocab=`/`merges=` work.
    return GPT2TokenizerFast(vocab=str(vocab), merges=str(merges))


def random_gpt2(name: str, *, n_positions: int = 1024, dtype: torch.dtype,
                device: torch.device, seed: int = 0) -> GPT2LMHeadModel:
    """A GPT-2-family model with its published shape and random weights (speed needs no trained values)."""
    torch.manual_seed(seed)
    config = GPT2Config(n_positions=n_positions, **GPT2_FAMILY[name])
    config._attn_implementation = "sdpa"
    model = GPT2LMHeadModel(config).to(dtype)
    return model.to(device).eval()


def hub_cached(name: str) -> bool:
    """True when ``name`` has a complete safetensors checkpoint in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache

        weights = try_to_load_from_cache(name, "model.safetensors")
        config = try_to_load_from_cache(name, "config.json")
    except Exception:
        return False
    return isinstance(weights, str) and isinstance(config, str)


def hub_offline() -> bool:
    """The hub client's own offline switch (``HF_HUB_OFFLINE=1``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


# ----------------------------------------------------------------------------- forward and cache
def new_cache(model: GPT2LMHeadModel) -> DynamicCache:
    """An empty growing KV cache: one layer entry per block, filled on the first forward."""
    return DynamicCache(config=model.config)


def new_static_cache(model: GPT2LMHeadModel, max_tokens: int, batch: int = 1) -> StaticCache:
    """A pre-allocated KV cache of ``max_tokens`` positions (no reallocation while decoding)."""
    return StaticCache(config=model.config, max_cache_len=max_tokens, max_batch_size=batch)


def forward(model: GPT2LMHeadModel, ids: torch.Tensor, cache: DynamicCache | None = None, *,
            use_cache: bool = True, cache_position: torch.Tensor | None = None,
            last_only: bool = False) -> tuple[torch.Tensor, DynamicCache | None]:
    """Run ``ids`` ``[batch, T]`` through the model; returns logits ``[batch, T, vocab]`` and the cache.

    With ``last_only`` only the last position goes through the LM head (``[batch, 1, vocab]``).
    """
    kwargs = {}
    if cache_position is not None:
        kwargs["cache_position"] = cache_position
        kwargs["position_ids"] = cache_position.unsqueeze(0)
    out = model(input_ids=ids, cache=cache, use_cache=use_cache,
                logits_to_keep=1 if last_only else 0, **kwargs)
    return out.logits, (out.cache if use_cache else None)


def cache_tensors(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``(keys, values)``, each ``[batch, heads, tokens, head_dim]`` (static: all slots)."""
    return [(layer.keys, layer.values) for layer in cache.layers if layer.keys is not None]


def cache_length(cache) -> int:
    """How many positions the cache holds."""
    return int(cache.get_seq_length())


@contextlib.contextmanager
def attention_implementation(model: GPT2LMHeadModel, name: str) -> Iterator[None]:
    """Temporarily switch the attention kernel ("eager" returns probabilities; "sdpa" does not)."""
    before = model.config._attn_implementation
    if before == name:
        yield
        return
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def current_attention(model: GPT2LMHeadModel) -> str:
    """The attention kernel in use ("sdpa", "eager", ...)."""
    return model.config._attn_implementation


def hf_generate(model: GPT2LMHeadModel, ids: torch.Tensor, *, max_new_tokens: int,
                do_sample: bool, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                eos_token_id: int | None = None) -> torch.Tensor:
    """Hugging Face's ``generate()`` with every sampling knob explicit; returns new ids ``[batch, N]``.

    ``top_k=0`` is passed explicitly: ``GenerationConfig`` defaults to ``top_k=50`` otherwise.
    """
    kwargs = {"do_sample": do_sample, "max_new_tokens": max_new_tokens,
              "pad_token_id": eos_token_id if eos_token_id is not None else 0,
              "eos_token_id": eos_token_id, "attention_mask": torch.ones_like(ids)}
    if do_sample:
        kwargs.update(temperature=temperature, top_k=top_k, top_p=top_p)
    else:  # silence "temperature is set but do_sample=False" style warnings
        kwargs.update(temperature=None, top_k=None, top_p=None)
    with torch.inference_mode():
        out = model.generate(ids, **kwargs)
    return out[:, ids.shape[1]:]


# ----------------------------------------------------------------------------- named modules
def token_embedding(model: GPT2LMHeadModel) -> torch.nn.Embedding:
    """``wte``: ``[vocab, d_model]``."""
    return model.transformer.wte


def position_embedding(model: GPT2LMHeadModel) -> torch.nn.Embedding:
    """``wpe``: ``[n_ctx, d_model]``."""
    return model.transformer.wpe


def blocks(model: GPT2LMHeadModel) -> list[torch.nn.Module]:
    """The transformer blocks, in order."""
    return list(model.transformer.h)


def final_norm(model: GPT2LMHeadModel) -> torch.nn.Module:
    """``ln_f``, applied before the LM head."""
    return model.transformer.ln_f


def lm_head(model: GPT2LMHeadModel) -> torch.nn.Module:
    """The LM head (tied to ``wte`` in GPT-2)."""
    return model.lm_head


def qkv_weights(block: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.nn.Module]:
    """A block's fused QKV weight ``[d_model, 3*d_model]``, bias ``[3*d_model]`` and output projection.

    GPT-2 uses ``Conv1D`` (weight stored ``[in, out]``), so ``x @ W + b`` is the projection.
    """
    return block.attn.c_attn.weight, block.attn.c_attn.bias, block.attn.c_proj
