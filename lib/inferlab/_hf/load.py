"""Loading: a checkpoint folder or hub name into a ``transformers`` GPT-2, the checks on its files, its tokenizer,
new and copied modules.

The functions here that take or return a raw ``GPT2LMHeadModel`` run while a model is being built, before there is
a ``Model`` to hand (``load_folder``, ``new_gpt2``, ``loaded_shape``, ``loaded_attention``, ``nonfinite_weights``),
or make the module a new ``Model`` will wrap (``copy_module``, ``first_blocks``). This is the only module of the
package typed with the transformers class; everything that runs a loaded model takes the ``Model``.
"""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoConfig, GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from .run import module
from .tensors import ShapeFacts

if TYPE_CHECKING:  # annotations only: models imports this package, not the other way round
    from ..models import Model

# transformers builds a model under process-wide switches (weights first made on the "meta" device, the default
# dtype), and new_gpt2 seeds the global RNG: two threads building at once broke each other ("Cannot copy out of
# meta tensor"). Models are built one at a time.
_BUILD_LOCK = threading.Lock()


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


def nonfinite_weights(hf: GPT2LMHeadModel) -> list[str]:
    """Names of the weights holding NaN or infinity (a checkpoint that would make every logit NaN).

    Raw module: a loaded checkpoint is checked before it becomes a ``Model``."""
    return [name for name, p in hf.named_parameters() if not bool(torch.isfinite(p).all())]


def loaded_shape(hf: GPT2LMHeadModel) -> ShapeFacts:
    """``shape_facts`` of a module just loaded or built, before it becomes a ``Model`` (``ModelInfo`` is made from
    it)."""
    return ShapeFacts.from_config(hf.config)


def loaded_attention(hf: GPT2LMHeadModel) -> str:
    """``current_attention`` of a module just loaded or built, before it becomes a ``Model``."""
    return hf.config._attn_implementation


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


def copy_module(model: Model) -> GPT2LMHeadModel:
    """An independent copy of the model's module (weights included): what a quantized variant starts from."""
    return copy.deepcopy(module(model))


def first_blocks(model: Model, n_layer: int) -> GPT2LMHeadModel:
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
