"""The one adapter to Hugging Face ``transformers`` (5.x): the only place in the library that names transformers'
GPT-2 classes and internals (``GPT2LMHeadModel``, ``transformer.h``, ``c_attn``, ``ln_f``, the config keys).

A transformers upgrade should touch this package only. The rest of the library sees plain tensors, a cache object
with per-layer ``[batch, heads, tokens, head_dim]`` keys and values, and named modules; it imports this face
(``from . import _hf``; ``_hf.forward(model, ...)``), never a module inside it. Every function that runs a loaded
model takes the course's ``Model`` and refuses a raw module (``run.module``). Inside:

- ``run``: the model's lock, the module behind a ``Model``, the KV caches, one forward, the attention kernel;
- ``load``: checkpoints, their checks and tokenizer files, the hub, new and copied modules (the only part that
  takes or returns a raw module: while loading, before a ``Model`` exists);
- ``tensors``: the shape, weights as plain tensors, swapping projections, capture and head-ablation points;
- ``peers``: transformers' own ``generate`` paths, which inferlab's are checked and timed against.
"""

from .load import (
    CONFIG_KEYS,
    SIZE_LIMITS,
    TOKENIZER_FILES,
    config_size_problem,
    copy_module,
    first_blocks,
    gpt2_tokenizer_from_files,
    hub_cached,
    hub_file,
    hub_offline,
    load_folder,
    load_tokenizer,
    loaded_attention,
    loaded_shape,
    new_gpt2,
    nonfinite_weights,
)
from .peers import hf_generate, hf_generate_assisted, hf_generate_batch, hf_generate_padded
from .run import (
    attention_implementation,
    cache_crop,
    cache_length,
    cache_tensors,
    current_attention,
    forward,
    model_lock,
    module,
    new_cache,
    new_static_cache,
)
from .tensors import (
    BlockTensors,
    CapturePoints,
    NormTensors,
    ProjTensors,
    ShapeFacts,
    attention_probs,
    block_input,
    block_tensors,
    capture_points,
    embedding_tensors,
    final_norm_tensors,
    follows_plain_gpt2,
    head_mask_point,
    head_weight,
    replace_projections,
    shape_facts,
    tied_head,
)

__all__ = [
    "CONFIG_KEYS", "SIZE_LIMITS", "TOKENIZER_FILES", "BlockTensors", "CapturePoints", "NormTensors", "ProjTensors",
    "ShapeFacts", "attention_implementation", "attention_probs", "block_input", "block_tensors", "cache_crop",
    "cache_length", "cache_tensors", "capture_points", "config_size_problem", "copy_module", "current_attention",
    "embedding_tensors", "final_norm_tensors", "first_blocks", "follows_plain_gpt2", "forward",
    "gpt2_tokenizer_from_files", "head_mask_point", "head_weight", "hf_generate", "hf_generate_assisted",
    "hf_generate_batch", "hf_generate_padded", "hub_cached", "hub_file", "hub_offline", "load_folder",
    "load_tokenizer", "loaded_attention", "loaded_shape", "model_lock", "module", "new_cache", "new_gpt2",
    "new_static_cache", "nonfinite_weights", "replace_projections", "shape_facts", "tied_head",
]
