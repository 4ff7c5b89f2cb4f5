"""The one adapter to Hugging Face ``transformers`` (5.x): every HF detail lives here.

A transformers upgrade should touch this file only. The rest of the library sees plain tensors, a
cache object with per-layer ``[batch, heads, tokens, head_dim]`` keys and values, and named modules.
It is one piece (over 300 lines) on purpose: splitting it would make two doors to Hugging Face.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
from transformers.pytorch_utils import Conv1D
from transformers.utils import logging as hf_logging

_LOCKS: weakref.WeakKeyDictionary[torch.nn.Module, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()
# transformers builds a model under process-wide switches (weights first made on the "meta" device, the default
# dtype), and new_gpt2 seeds the global RNG: two threads building at once broke each other ("Cannot copy out of
# meta tensor"). Models are built one at a time.
_BUILD_LOCK = threading.Lock()


def model_lock(model) -> threading.RLock:
    """The model's lock: every forward here holds it, and so does anything that changes the model for a while
    (a recording's eager kernel and hooks, a head switched off). So a thread's plain forward never runs while
    another thread has the model in a changed state, and never sees it. Re-entrant: a thread may nest them."""
    model = module(model)
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
        return lock


def module(model) -> GPT2LMHeadModel:
    """The ``transformers`` module behind an inferlab ``Model`` (a bare module passes through).

    Every function below that takes a model accepts either, so the rest of the library hands the
    ``Model`` itself and never touches the Hugging Face object.
    """
    return getattr(model, "_module", model)


def load_folder(path: Path | str, *, dtype: torch.dtype, device: torch.device,
                local_only: bool) -> GPT2LMHeadModel:
    """Load a GPT-2 checkpoint (a folder or a hub name). Safetensors only; never remote code.

    The caller has already read ``config.json`` itself (``checkpoints.check_config``); every call here refuses
    remote code explicitly anyway, so transformers raises instead of asking on standard input.
    """
    config = AutoConfig.from_pretrained(path, local_files_only=local_only, trust_remote_code=False)
    if config.model_type != "gpt2":
        raise ValueError(
            f"model={str(path)!r} is a {config.model_type!r} model; inferlab's hooks follow GPT-2's "
            "modules. Fix: use a GPT-2-family model (gpt2, distilgpt2, gpt2-medium, ...) or the bundled one."
        )
    hf_logging.disable_progress_bar()  # a loading bar on stderr would break checked notebook cells
    with _BUILD_LOCK:
        before = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # transformers' own load report: we read it below and say it better
        try:
            model, report = GPT2LMHeadModel.from_pretrained(
                path, config=config, dtype=dtype, use_safetensors=True, local_files_only=local_only,
                attn_implementation="sdpa", trust_remote_code=False, output_loading_info=True,
                ignore_mismatched_sizes=True,  # listed in the report below, and refused there by name
            )
        finally:
            hf_logging.set_verbosity(before)
    wrong = {kind: sorted(str(k) for k in report.get(kind) or ()) for kind in
             ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")}
    if any(wrong.values()):
        said = "; ".join(f"{len(v)} {kind.replace('_', ' ')} (e.g. {', '.join(v[:2])})" for kind, v in wrong.items()
                         if v)
        raise ValueError(f"model={str(path)!r}: its weights do not match its config.json: {said}. A model built "
                         "from it would run with made-up or dropped weights. Fix: re-save the folder with "
                         "save_pretrained() from the model whose weights these are.")
    return model.to(device).eval()


# The largest sizes a GPT-2-family config may ask for: gpt2-xl is 48 layers x 25 heads x 1600 wide, 1024 positions.
# A config far beyond them is a typo or a trap (n_layer: 1000000 would build for hours before failing).
SIZE_LIMITS = {"n_layer": 256, "n_head": 256, "n_embd": 16384, "n_positions": 131072, "vocab_size": 1_000_000}
# inferlab's names for a shape (ModelInfo's) -> the keys of a GPT-2 config.json that hold them
CONFIG_KEYS = {"n_layer": "n_layer", "n_head": "n_head", "d_model": "n_embd", "n_ctx": "n_positions",
               "vocab_size": "vocab_size"}


def config_size_problem(config: dict) -> str | None:
    """What in a GPT-2 ``config.json`` (read as a dict) cannot build a model, in words; ``None`` if nothing.

    Missing, non-integer, non-positive or absurdly large sizes; heads that do not divide the width; and the
    cross-attention a decoder-only GPT-2 does not have.
    """
    for key, most in SIZE_LIMITS.items():
        value = config.get(key, config.get("n_ctx") if key == "n_positions" else None)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            return f"has {key}={value!r}; a GPT-2 needs a whole number from 1 to {most:,}"
    if config["n_embd"] % config["n_head"]:
        return (f"has n_head={config['n_head']}, which does not divide n_embd={config['n_embd']} (each head gets "
                "n_embd / n_head dimensions)")
    if config.get("add_cross_attention"):
        return ("sets add_cross_attention=true (an encoder-decoder's cross-attention); the course's GPT-2 is "
                "decoder-only")
    return None


def nonfinite_weights(model) -> list[str]:
    """Names of the weights holding NaN or infinity (a checkpoint that would make every logit NaN)."""
    return [name for name, p in module(model).named_parameters() if not bool(torch.isfinite(p).all())]


def load_tokenizer(path: Path | str, *, local_only: bool) -> PreTrainedTokenizerBase:
    """The tokenizer saved with a checkpoint (GPT-2's byte-level BPE); never remote code."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=local_only, trust_remote_code=False)


def hub_file(name: str, filename: str, *, local_only: bool) -> Path | None:
    """One file of a hub checkpoint (``config.json`` ...): from the cache, or downloaded alone when allowed."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cached = try_to_load_from_cache(name, filename)
    if isinstance(cached, str):
        return Path(cached)
    if local_only:
        return None
    return Path(hf_hub_download(name, filename))


TOKENIZER_FILES = (("vocab.json", "merges.txt"), ("tokenizer.json",))


def gpt2_tokenizer_from_files(vocab: Path, merges: Path) -> GPT2TokenizerFast:
    """GPT-2's tokenizer built from ``vocab.json`` + ``merges.txt`` (transformers 5 keywords)."""
    # `vocab_file=` silently builds an empty tokenizer in transformers 5; `vocab=`/`merges=` work.
    return GPT2TokenizerFast(vocab=str(vocab), merges=str(merges))


def new_gpt2(*, n_layer: int, n_head: int, d_model: int, n_ctx: int = 1024, vocab_size: int = 50257,
             dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu", seed: int = 0) -> GPT2LMHeadModel:
    """A GPT-2 with the given shape and random weights (timing needs the shape, not trained values).

    Tests also use it to write small checkpoints with ``save_pretrained``.
    """
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=d_model, n_positions=n_ctx, vocab_size=vocab_size)
    config._attn_implementation = "sdpa"
    with _BUILD_LOCK:
        torch.manual_seed(seed)
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


def copy_module(model) -> GPT2LMHeadModel:
    """An independent copy of the model's module (weights included): what a quantized variant starts from."""
    return copy.deepcopy(module(model))


# ----------------------------------------------------------------------------- forward and cache
def new_cache(model: GPT2LMHeadModel) -> DynamicCache:
    """An empty growing KV cache: one layer entry per block, filled on the first forward."""
    model = module(model)
    return DynamicCache(config=model.config)


def new_static_cache(model: GPT2LMHeadModel, max_tokens: int, batch: int = 1) -> StaticCache:
    """A pre-allocated KV cache of ``max_tokens`` positions (no reallocation while decoding)."""
    model = module(model)
    return StaticCache(config=model.config, max_cache_len=max_tokens, max_batch_size=batch)


def forward(model: GPT2LMHeadModel, ids: torch.Tensor, cache: DynamicCache | None = None, *,
            use_cache: bool = True, cache_position: torch.Tensor | None = None,
            last_only: bool = False) -> tuple[torch.Tensor, DynamicCache | None]:
    """Run ``ids`` ``[batch, T]`` through the model; returns logits ``[batch, T, vocab]`` and the cache.

    With ``last_only`` only the last position goes through the LM head (``[batch, 1, vocab]``).
    """
    model, cache = module(model), getattr(cache, "_hf_cache", cache)  # inferlab's KVCache wraps HF's cache
    if model.training:  # dropout on: every run would give other logits, silently
        raise ValueError("the model is in training mode (dropout is on, so the same input gives different logits "
                         "each run). Fix: m.transformers_module().eval() puts it back in inference mode.")
    kwargs = {}
    if cache_position is not None:
        kwargs["cache_position"] = cache_position
        kwargs["position_ids"] = cache_position.unsqueeze(0)
    with model_lock(model):
        out = model(input_ids=ids, cache=cache, use_cache=use_cache,
                    logits_to_keep=1 if last_only else 0, **kwargs)
    return out.logits, (out.cache if use_cache else None)


def cache_tensors(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``(keys, values)``, each ``[batch, heads, tokens, head_dim]`` (static: all slots)."""
    return [(layer.keys, layer.values) for layer in cache.layers if layer.keys is not None]


def cache_length(cache) -> int:
    """How many positions the cache holds."""
    return int(cache.get_seq_length())


def cache_crop(cache, tokens: int) -> None:
    """Keep the first ``tokens`` positions of a ``DynamicCache`` (transformers 5: ``crop(-n)`` removes the last n)."""
    cache.crop(tokens - cache_length(cache))


@contextlib.contextmanager
def attention_implementation(model: GPT2LMHeadModel, name: str) -> Iterator[None]:
    """Temporarily switch the attention kernel ("eager" returns probabilities; "sdpa" does not)."""
    model = module(model)
    with model_lock(model):  # no other thread's forward runs with the kernel switched
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
    model = module(model)
    return model.config._attn_implementation


def hf_generate(model: GPT2LMHeadModel, ids: torch.Tensor, *, max_new_tokens: int,
                do_sample: bool, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                eos_token_id: int | None = None) -> torch.Tensor:
    """Hugging Face's ``generate()`` with every sampling knob explicit; returns new ids ``[batch, N]``.

    ``top_k=0`` is passed explicitly: ``GenerationConfig`` defaults to ``top_k=50`` otherwise.
    """
    model = module(model)
    kwargs = {"do_sample": do_sample, "max_new_tokens": max_new_tokens,
              "pad_token_id": eos_token_id if eos_token_id is not None else 0,
              "eos_token_id": eos_token_id, "attention_mask": torch.ones_like(ids)}
    if do_sample:
        kwargs.update(temperature=temperature, top_k=top_k, top_p=top_p)
    else:  # silence "temperature is set but do_sample=False" style warnings
        kwargs.update(temperature=None, top_k=None, top_p=None)
    with torch.inference_mode(), model_lock(model):
        out = model.generate(ids, **kwargs)
    return out[:, ids.shape[1]:]


def hf_generate_assisted(model: GPT2LMHeadModel, ids: torch.Tensor, *, max_new_tokens: int, k: int,
                         ngram: int | None = None, assistant=None, eos_token_id: int | None = None) -> torch.Tensor:
    """Hugging Face's own speculative decoding, greedy: ``prompt_lookup_num_tokens=k`` (with ``ngram`` as its
    ``max_matching_ngram_size``) or ``assistant_model=assistant`` proposing ``k`` tokens a round. Returns new ids.

    transformers reads a draft model's settings from the draft's own ``generation_config`` (its default schedule
    changes k as it goes, and a confidence threshold stops a round early): both are set here to a constant ``k``,
    so the comparison runs the same rounds as ``inferlab.speculative``, and put back afterwards.
    """
    model = module(model)
    kwargs = {"do_sample": False, "max_new_tokens": max_new_tokens, "temperature": None, "top_k": None,
              "top_p": None, "pad_token_id": eos_token_id if eos_token_id is not None else 0,
              "eos_token_id": eos_token_id, "attention_mask": torch.ones_like(ids)}
    with torch.inference_mode(), model_lock(model):
        if assistant is None:
            out = model.generate(ids, prompt_lookup_num_tokens=k, max_matching_ngram_size=ngram, **kwargs)
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
            out = model.generate(ids, assistant_model=draft, **kwargs)
        finally:
            hf_logging.set_verbosity(before_level)
            (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
             config.assistant_confidence_threshold) = before
    return out[:, ids.shape[1]:]


def first_blocks(model: GPT2LMHeadModel, n_layer: int) -> GPT2LMHeadModel:
    """A GPT-2 made of ``model``'s embeddings, its first ``n_layer`` blocks, its final norm and its head: the
    same tensors, not copies (self-speculation's draft: the target's early layers, exited early)."""
    src = module(model)
    config = copy.deepcopy(src.config)
    config.n_layer = n_layer
    with torch.device("meta"):  # no weights of its own: every module below is the target's
        new = GPT2LMHeadModel(config)
    new.transformer.wte, new.transformer.wpe = src.transformer.wte, src.transformer.wpe
    new.transformer.h = torch.nn.ModuleList(src.transformer.h[:n_layer])
    new.transformer.ln_f, new.lm_head = src.transformer.ln_f, src.lm_head
    new.transformer.drop = src.transformer.drop
    new.generation_config = copy.deepcopy(src.generation_config)
    return new.eval()


def hf_generate_padded(model: GPT2LMHeadModel, inputs: list[list[int]], *, max_new_tokens: int) -> list[list[int]]:
    """Hugging Face's ``generate()`` on one left-padded batch of prompts of token ids, greedy, no stop token; the
    new ids of each prompt, in order. Static batching as most code does it: every row runs until the last is done."""
    model = module(model)
    width = max(len(p) for p in inputs)
    ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in inputs], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in inputs], device=model.device)
    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # eos_token_id=-1 (no stop token) draws a warning on stderr; it is meant
    try:
        with torch.inference_mode(), model_lock(model):  # padded on the left: every row's next token is at the end
            out = model.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens, eos_token_id=-1,
                                 do_sample=False, temperature=None, top_k=None, top_p=None, pad_token_id=0)
    finally:
        hf_logging.set_verbosity(before)
    return out[:, width:].tolist()


def hf_generate_batch(model: GPT2LMHeadModel, inputs: list[list[int]], *, max_new_tokens: int, max_batch: int,
                      block_size: int, kv_blocks: int, warmup: bool = False) -> list[list[int]]:
    """Hugging Face's own continuous batching (``generate_batch``, paged attention) on prompts of token ids,
    greedy, no stop token; the new ids of each prompt, in order. The peer ``inferlab.serve`` is measured against.

    Its cache and batch are sized explicitly: left to infer them on a CPU, transformers 5.24 took ~75x longer.
    """
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    model = module(model)
    # eos_token_id=-1: no stop token, said the way generate_batch itself says it (None makes it warn on stderr)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=0)
    batching = ContinuousBatchingConfig(page_size=block_size, num_blocks=kv_blocks, max_requests_per_batch=max_batch,
                                        max_batch_tokens=max(256, max_batch * block_size))
    with torch.inference_mode(), model_lock(model):
        out = model.generate_batch(inputs=inputs, generation_config=config, continuous_batching_config=batching,
                                   warmup=warmup)
    return [list(out[f"req_{i}"].generated_tokens) for i in range(len(inputs))]

# ----------------------------------------------------------------------------- shape facts
@dataclass(frozen=True)
class ShapeFacts:
    """The numbers ``ModelInfo`` and the fast path need, read from the config in one place."""

    n_layer: int
    n_head: int
    d_model: int
    head_dim: int  # d_model // n_head
    n_ctx: int  # positions in the position table (the context length)
    vocab_size: int
    layer_norm_eps: float
    activation: str  # the MLP's activation by Hugging Face's name (GPT-2: "gelu_new", the tanh GELU)


def shape_facts(model: GPT2LMHeadModel) -> ShapeFacts:
    """The model's shape: layers, heads, widths, context, vocabulary, norm epsilon and activation."""
    model = module(model)
    cfg = model.config
    return ShapeFacts(n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.n_embd, head_dim=cfg.n_embd // cfg.n_head,
                      n_ctx=cfg.n_positions, vocab_size=cfg.vocab_size, layer_norm_eps=cfg.layer_norm_epsilon,
                      activation=cfg.activation_function)


def follows_plain_gpt2(model: GPT2LMHeadModel) -> bool:
    """Whether the config is GPT-2 as published: tanh GELU, one ``1/sqrt(head_dim)`` attention scale, no
    re-ordered attention. A hand-written GPT-2 block (``fast.py``) is exact only for these."""
    model = module(model)
    cfg = model.config
    return (cfg.activation_function == "gelu_new" and cfg.scale_attn_weights
            and not cfg.scale_attn_by_inverse_layer_idx and not cfg.reorder_and_upcast_attn)


# ----------------------------------------------------------------------------- weights as plain tensors
@dataclass(frozen=True)
class NormTensors:
    """A LayerNorm as plain tensors: ``F.layer_norm(x, (d_model,), weight, bias, eps)``."""

    weight: torch.Tensor  # [d_model]
    bias: torch.Tensor  # [d_model]
    eps: float


@dataclass(frozen=True)
class ProjTensors:
    """One projection as plain tensors: ``y = x @ weight + bias`` for ``x`` ``[tokens, in]``."""

    weight: torch.Tensor  # [in, out]: GPT-2's Conv1D layout (nn.Linear stores the transpose)
    bias: torch.Tensor  # [out]


@dataclass(frozen=True)
class BlockTensors:
    """One transformer block's weights: detached views of the model's own tensors (don't write to them)."""

    ln1: NormTensors  # before attention
    qkv: ProjTensors  # [d_model, 3 * d_model]: queries, keys and values side by side
    attn_out: ProjTensors  # [d_model, d_model]: the merged heads back into the residual stream
    ln2: NormTensors  # before the MLP
    fc: ProjTensors  # [d_model, d_mlp]: the MLP's first product (d_mlp = 4 * d_model in GPT-2)
    mlp_out: ProjTensors  # [d_mlp, d_model]
    attention_scale: float  # the factor on q @ k^T: 1/sqrt(head_dim) in GPT-2
    activation: Callable[[torch.Tensor], torch.Tensor]  # between fc and mlp_out (GPT-2: the tanh GELU)


def _norm(ln: torch.nn.LayerNorm) -> NormTensors:
    return NormTensors(ln.weight.detach(), ln.bias.detach(), float(ln.eps))


def _proj(module: torch.nn.Module) -> ProjTensors:
    if isinstance(module, Conv1D):
        return ProjTensors(module.weight.detach(), module.bias.detach())
    if isinstance(module, torch.nn.Linear):  # already swapped (e.g. quantize.as_linear): nn.Linear stores W.T
        return ProjTensors(module.weight.detach().t(), module.bias.detach())
    raise ValueError(f"a projection is a {type(module).__name__}, not plain float weights (a quantized copy?). "
                     "Fix: use the original model from inferlab.load().")


def block_tensors(model: GPT2LMHeadModel) -> list[BlockTensors]:
    """Every block's weights, in order, as plain tensors (``[in, out]`` projections: ``x @ W + b``)."""
    model = module(model)
    return [BlockTensors(_norm(b.ln_1), _proj(b.attn.c_attn), _proj(b.attn.c_proj), _norm(b.ln_2),
                         _proj(b.mlp.c_fc), _proj(b.mlp.c_proj), float(b.attn.scaling), b.mlp.act)
            for b in model.transformer.h]


def final_norm_tensors(model: GPT2LMHeadModel) -> NormTensors:
    """The LayerNorm after the last block (``ln_f``), applied before the LM head."""
    model = module(model)
    return _norm(model.transformer.ln_f)


def embedding_tensors(model: GPT2LMHeadModel) -> tuple[torch.Tensor, torch.Tensor]:
    """The token table ``[vocab, d_model]`` and the position table ``[n_ctx, d_model]`` (detached views)."""
    model = module(model)
    return model.transformer.wte.weight.detach(), model.transformer.wpe.weight.detach()


def head_weight(model: GPT2LMHeadModel) -> torch.Tensor:
    """The LM head ``[vocab, d_model]``: logits = ``h @ W.T``. GPT-2 ties it to the token table (same tensor)."""
    model = module(model)
    head = model.lm_head
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        raise ValueError(f"the LM head is a {type(head).__name__}, not a plain weight (a quantized copy?). "
                         "Fix: use the original model from inferlab.load().")
    return head.weight.detach()


def tied_head(model: GPT2LMHeadModel) -> bool:
    """Whether the LM head reads the token table itself (GPT-2's tied weights; not after swapping the head)."""
    model = module(model)
    head = model.lm_head
    return isinstance(head, torch.nn.Linear) and head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()


# ----------------------------------------------------------------------------- swapping projections
def replace_projections(model: GPT2LMHeadModel, make: Callable[[torch.Tensor, torch.Tensor | None], torch.nn.Module],
                        *, blocks: bool = True, head: bool = False) -> None:
    """Replace projections in place by ``make(weight, bias)``, ``weight`` ``[out, in]`` (nn.Linear's layout).

    ``blocks``: every block's four (qkv, attention out, MLP in, MLP out); ``head``: the LM head (``bias``
    None). The new module maps ``[..., in]`` to ``[..., out]``. For quantized copies: use on a copy.
    """
    model = module(model)
    if blocks:
        for b in model.transformer.h:
            for parent, name in ((b.attn, "c_attn"), (b.attn, "c_proj"), (b.mlp, "c_fc"), (b.mlp, "c_proj")):
                p = _proj(getattr(parent, name))
                setattr(parent, name, make(p.weight.t(), p.bias))
    if head:
        model.lm_head = make(head_weight(model), None)


# ----------------------------------------------------------------------------- capture points (hooks.py)
@dataclass(frozen=True)
class CapturePoints:
    """The modules ``hooks.capture`` registers on, found by GPT-2's names here so nothing else names them."""

    token_embedding: torch.nn.Module  # output [batch, tokens, d_model]
    position_embedding: torch.nn.Module  # output [batch, tokens, d_model] (or [1, tokens, d_model])
    blocks: tuple[torch.nn.Module, ...]  # input/output hidden states [batch, tokens, d_model]
    attentions: tuple[torch.nn.Module, ...]  # output (mixed, probs [batch, heads, query_pos, key_pos])


def capture_points(model: GPT2LMHeadModel) -> CapturePoints:
    """Where the named capture points live in a GPT-2 model."""
    model = module(model)
    blocks = tuple(model.transformer.h)
    return CapturePoints(model.transformer.wte, model.transformer.wpe, blocks, tuple(b.attn for b in blocks))


def block_input(args: tuple, kwargs: dict) -> torch.Tensor:
    """The hidden states ``[batch, tokens, d_model]`` a block's forward pre-hook receives."""
    return args[0] if args else kwargs["hidden_states"]


def attention_probs(output) -> torch.Tensor | None:
    """The probabilities ``[batch, heads, query_pos, key_pos]`` in an attention module's output (eager only)."""
    return output[1] if isinstance(output, tuple) and len(output) > 1 else None


# ----------------------------------------------------------------------------- head ablation
def head_mask_point(model: GPT2LMHeadModel, layer: int) -> torch.nn.Module:
    """The module whose input is block ``layer``'s heads side by side, ``[batch, tokens, heads * head_dim]``
    (head ``h`` in columns ``h * head_dim`` to ``(h + 1) * head_dim``): the attention's output projection.

    A forward pre-hook on it can switch heads off before they are mixed back into the residual stream.
    """
    model = module(model)
    return model.transformer.h[layer].attn.c_proj
