"""Checkpoints: a model folder's files, checked before and after transformers reads them.

The device and dtype a model runs in, and a checkpoint folder's checks: its ``config.json`` read by us first
(no code from a model folder ever runs; sizes a GPT-2 can have), safetensors only (never pickles), weights that
match the config and are finite, a shard index that stays in its folder, tokenizer files that are whole and
fit the model. ``models.load`` calls these; ``hub.py`` fetches from the Hugging Face Hub.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from . import _hf
from .errors import bad_value, one_line
from .paths import BUNDLED_DIR

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16,
           "fp16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA, then Apple MPS, then CPU; other names are checked against what exists."""
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'auto', 'cpu', 'cuda' or 'mps', got {device!r}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    kind = device.split(":")[0]
    available = {"cpu": True, "cuda": torch.cuda.is_available(),
                 "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())}
    if kind not in available:
        raise bad_value("device", device, "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'",
                        "use device='auto' to pick the best one present")
    if not available[kind]:
        present = ", ".join(k for k, v in available.items() if v)
        raise bad_value("device", device, f"a device present on this machine ({present})",
                        "use device='auto' or 'cpu'")
    return torch.device(device)


def resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    """``None`` -> float16 on CUDA (half the bytes, tensor cores), float32 elsewhere."""
    if dtype is None:
        return torch.float16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in _DTYPES:
        return _DTYPES[dtype.removeprefix("torch.")]
    raise bad_value("dtype", dtype, "None, 'float32', 'float16' or 'bfloat16' (or the torch dtypes)",
                    "leave dtype=None for the device's default")


def bundled_tokenizer():
    """GPT-2's tokenizer from the bundled model's files (what random-weight models use)."""
    return _hf.gpt2_tokenizer_from_files(BUNDLED_DIR / "vocab.json", BUNDLED_DIR / "merges.txt")


CONFIG_MAX_BYTES = 1_000_000  # a GPT-2 config.json is about 1 KB; a 3 GB one is not a config


def check_config(config_path: Path, label: str) -> None:
    """Read a checkpoint's ``config.json`` ourselves, before transformers sees it.

    Refuses what is not plain GPT-2: a config that names custom code (``auto_map``), an unknown or
    non-GPT-2 ``model_type``. So no code from a model folder ever runs, and transformers never asks.
    """
    try:
        size = config_path.stat().st_size
        if size > CONFIG_MAX_BYTES:
            raise ValueError(f"model={label!r}: config.json is {size:,} bytes; a model's config is a few KB. "
                             "Fix: re-save the model with save_pretrained().")
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"model={label!r}: config.json could not be read as JSON ({type(exc).__name__}: {exc}). "
                         "Fix: re-save the model with save_pretrained().") from None
    if not isinstance(config, dict):
        raise ValueError(f"model={label!r}: config.json holds {type(config).__name__}, not a JSON object. "
                         "Fix: re-save the model with save_pretrained().")
    if "auto_map" in config:
        raise ValueError(f"model={label!r}: its config.json names Python code to run (auto_map: "
                         f"{config['auto_map']!r:.80}); inferlab never runs code from a model folder. Fix: use a "
                         "GPT-2-family checkpoint saved by transformers' own GPT2LMHeadModel.save_pretrained().")
    if config.get("model_type") != "gpt2":
        raise ValueError(f"model={label!r} is a {config.get('model_type')!r} model; inferlab's hooks follow GPT-2's "
                         "modules. Fix: use a GPT-2-family model (gpt2, distilgpt2, gpt2-medium, ...) or the "
                         "bundled one.")
    problem = _hf.config_size_problem(config)
    if problem:
        raise ValueError(f"model={label!r}: config.json {problem}. Fix: correct config.json, or re-save the model "
                         "with save_pretrained().")


def check_tokenizer(tokenizer, label: str, vocab_size: int | None = None) -> None:
    """Refuse a tokenizer that loaded empty (transformers builds one from a folder with no tokenizer files), and
    one whose ids go past the model's embedding table (``vocab_size`` rows)."""
    if len(tokenizer) < 257 or tokenizer.eos_token_id is None:
        raise ValueError(f"model={label!r}: its tokenizer has {len(tokenizer)} entries and "
                         f"eos_token_id={tokenizer.eos_token_id}: not GPT-2's byte-level BPE. Fix: save the "
                         "tokenizer beside the weights (tokenizer.save_pretrained(folder)).")
    if vocab_size is not None and len(tokenizer) > vocab_size:
        raise ValueError(f"model={label!r}: its tokenizer has {len(tokenizer):,} tokens but the model's embedding "
                         f"table only {vocab_size:,} rows, so some ids have no vector. Fix: save the tokenizer that "
                         "was trained with these weights.")


def from_folder(path: Path, dtype, device):
    label = str(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model={label!r}: no such folder. Fix: pass a folder written by save_pretrained(), "
            "a hub name such as 'gpt2', or 'bundled'.")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model={label!r}: the folder has no config.json, so it is not a saved model. Fix: pass "
            "the folder that save_pretrained() wrote (config.json + model.safetensors + tokenizer files).")
    check_config(path / "config.json", label)
    if not list(path.glob("*.safetensors")):
        raise FileNotFoundError(
            f"model={label!r}: no *.safetensors weights in the folder (inferlab never loads pickle "
            "files such as pytorch_model.bin). Fix: re-save with save_pretrained(safe_serialization=True).")
    if not any(all((path / f).is_file() for f in files) for files in _hf.TOKENIZER_FILES):
        names = " or ".join(" + ".join(files) for files in _hf.TOKENIZER_FILES)
        raise FileNotFoundError(
            f"model={label!r}: the folder has no tokenizer files ({names}). Fix: save the tokenizer beside "
            "the weights: tokenizer.save_pretrained(folder).")
    check_shards(path, label)
    try:
        hf = _hf.load_folder(path, dtype=dtype, device=device, local_only=True)
    except ValueError:
        raise
    except Exception as exc:  # corrupt weights, wrong shapes, unreadable config ...
        raise ValueError(f"model={label!r}: could not load the weights ({type(exc).__name__}: {exc}). "
                         "Fix: re-save the folder with save_pretrained().") from exc
    check_finite(hf, label)
    try:
        if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
            check_bpe_files(path, label)
            tok = _hf.gpt2_tokenizer_from_files(path / "vocab.json", path / "merges.txt")
        else:
            tok = _hf.load_tokenizer(path, local_only=True)
    except ValueError:
        raise
    except Exception as exc:  # a tokenizer.json that is not one, unreadable files ...
        raise ValueError(f"model={label!r}: its tokenizer files could not be read ({one_line(exc)}). "
                         "Fix: tokenizer.save_pretrained(folder) from the model's "
                         "tokenizer.") from None
    check_tokenizer(tok, label, vocab_size=_hf.loaded_shape(hf).vocab_size)
    return hf, tok


def check_shards(path: Path, label: str) -> None:
    """A sharded checkpoint's index may name only files inside its own folder (no ``../`` or absolute paths)."""
    for index in path.glob("*.safetensors.index.json"):
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
            files = set(weight_map.values())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, TypeError) as exc:
            raise ValueError(f"model={label!r}: {index.name} is not a weight index ({type(exc).__name__}). "
                             "Fix: re-save the model with save_pretrained().") from None
        outside = sorted(str(f) for f in files if not isinstance(f, str) or
                         not (path / f).resolve().is_relative_to(path.resolve()))
        if outside:
            raise ValueError(f"model={label!r}: {index.name} points outside the model's folder ({outside[:2]}); "
                             "inferlab reads weights only from the folder itself. Fix: re-save the model with "
                             "save_pretrained().")


def check_finite(model, label: str) -> None:
    """Refuse weights holding NaN or infinity: every logit would be NaN, and sampling would fail later."""
    bad = _hf.nonfinite_weights(model)
    if bad:
        raise ValueError(f"model={label!r}: {len(bad)} weight tensor(s) hold NaN or infinity (e.g. {bad[0]}). "
                         "Fix: use a checkpoint saved from a healthy model (a training run that diverged writes such "
                         "weights).")


def check_bpe_files(path: Path, label: str) -> None:
    """``vocab.json`` must be a JSON table of tokens and ``merges.txt`` must hold merges (an empty one would
    tokenize every text into single bytes, silently)."""
    try:
        vocab = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"model={label!r}: vocab.json could not be read as JSON ({type(exc).__name__}: {exc}); "
                         "it may be cut short. Fix: tokenizer.save_pretrained(folder) again.") from None
    if not isinstance(vocab, dict) or len(vocab) < 257:
        raise ValueError(f"model={label!r}: vocab.json holds {len(vocab) if isinstance(vocab, dict) else 0} tokens; "
                         "GPT-2's byte-level BPE needs at least 257. Fix: tokenizer.save_pretrained(folder) again.")
    try:
        merges = [line for line in (path / "merges.txt").read_text(encoding="utf-8").splitlines()
                  if line.strip() and not line.startswith("#version")]
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"model={label!r}: merges.txt could not be read ({type(exc).__name__}). Fix: "
                         "tokenizer.save_pretrained(folder) again.") from None
    if not merges:
        raise ValueError(f"model={label!r}: merges.txt holds no merges, so every text would become single bytes. "
                         "Fix: tokenizer.save_pretrained(folder) again.")
