"""Checkpoints: where a model's weights come from, checked before transformers sees them.

The device and dtype a model runs in; whether the Hugging Face Hub answers (a probe that never hangs);
and a checkpoint folder's checks: its ``config.json`` read by us first (no code from a model folder ever
runs), safetensors only (never pickles), tokenizer files present and GPT-2's. ``models.load`` calls these.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import torch

from . import _hf
from .errors import bad_value
from .i18n import tr
from .paths import BUNDLED_DIR

HUB_PROBE_SECONDS = 3.0
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


def hub_cached(name: str) -> bool:
    """True when the Hugging Face checkpoint ``name`` (e.g. ``"gpt2"``) is complete in the local cache."""
    return _hf.hub_cached(name)


def hub_address() -> tuple[str, int]:
    """(host, port) of the Hugging Face Hub, from ``HF_ENDPOINT`` when set (a mirror or a proxy)."""
    url = urlsplit(hub_endpoint())
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def hub_endpoint() -> str:
    """The Hugging Face Hub's base address: ``HF_ENDPOINT`` when set (a mirror), else https://huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co"


def hub_problem(name: str = "gpt2", timeout: float = HUB_PROBE_SECONDS) -> str | None:
    """Why the hub cannot serve ``name`` now, in a few words; ``None`` when it can.

    One real HTTP request (the hub's model API, ``{endpoint}/api/models/{name}``), at most ``timeout`` seconds
    in all, DNS and proxies (``HTTPS_PROXY``) included, no retries. A TCP connection alone is not enough: a
    proxy that accepts and never answers, a captive portal's login page, or a connection reset all open one.
    Without this probe the hub client waits for minutes and then blames the model's name.
    """
    url = f"{hub_endpoint()}/api/models/{urllib.parse.quote(name, safe='/')}"
    result: list[str | None] = []

    def probe() -> None:
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "inferlab", "Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(1_000_000)
            data = json.loads(body)
            ok = isinstance(data, dict) and (data.get("id") or data.get("modelId"))
            result.append(None if ok else tr("{url} answered, but not as the hub does (not its JSON)", url=url))
        except urllib.error.HTTPError as exc:
            result.append(tr("{url} answered HTTP {code}", url=url, code=exc.code))
        except (json.JSONDecodeError, UnicodeDecodeError):
            result.append(tr("{url} answered with a web page, not the hub's JSON (a login page or a proxy?)",
                             url=url))
        except (OSError, ValueError) as exc:  # refused, reset, DNS, TLS, timeout; ValueError: a malformed address
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):  # connected (or not) and then nothing came back
                result.append(tr("{url} did not answer within {seconds:.0f} s", url=url, seconds=timeout))
                return
            result.append(tr("{url} could not be reached ({why})", url=url, why=f"{type(reason).__name__}: "
                             f"{reason}"[:160]))

    if urlsplit(url).scheme not in ("http", "https"):
        return tr("HF_ENDPOINT={endpoint!r} is not an http(s) address", endpoint=hub_endpoint())
    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    if not result:
        return tr("{url} did not answer within {seconds:.0f} s", url=url, seconds=timeout)
    return result[0]


def hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Does the hub answer a real request within ``timeout`` seconds? (``hub_problem`` says why not.)"""
    return hub_problem("gpt2", timeout) is None


def bundled_tokenizer():
    """GPT-2's tokenizer from the bundled model's files (what random-weight models use)."""
    return _hf.gpt2_tokenizer_from_files(BUNDLED_DIR / "vocab.json", BUNDLED_DIR / "merges.txt")


def check_config(config_path: Path, label: str) -> None:
    """Read a checkpoint's ``config.json`` ourselves, before transformers sees it.

    Refuses what is not plain GPT-2: a config that names custom code (``auto_map``), an unknown or
    non-GPT-2 ``model_type``. So no code from a model folder ever runs, and transformers never asks.
    """
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
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


def check_tokenizer(tokenizer, label: str) -> None:
    """Refuse a tokenizer that loaded empty (transformers builds one from a folder with no tokenizer files)."""
    if len(tokenizer) < 257 or tokenizer.eos_token_id is None:
        raise ValueError(f"model={label!r}: its tokenizer has {len(tokenizer)} entries and "
                         f"eos_token_id={tokenizer.eos_token_id}: not GPT-2's byte-level BPE. Fix: save the "
                         "tokenizer beside the weights (tokenizer.save_pretrained(folder)).")


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
    try:
        hf = _hf.load_folder(path, dtype=dtype, device=device, local_only=True)
    except ValueError:
        raise
    except Exception as exc:  # corrupt weights, wrong shapes, unreadable config ...
        raise ValueError(f"model={label!r}: could not load the weights ({type(exc).__name__}: {exc}). "
                         "Fix: re-save the folder with save_pretrained().") from exc
    if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        tok = _hf.gpt2_tokenizer_from_files(path / "vocab.json", path / "merges.txt")
    else:
        tok = _hf.load_tokenizer(path, local_only=True)
    check_tokenizer(tok, label)
    return hf, tok


def from_hub(name: str, dtype, device):
    """A hub name: local cache first; the network only when allowed and reachable."""
    if _hf.hub_cached(name):
        check_config(_hf.hub_file(name, "config.json", local_only=True), name)
        tok = _hf.load_tokenizer(name, local_only=True)
        check_tokenizer(tok, name)
        return _hf.load_folder(name, dtype=dtype, device=device, local_only=True), tok, "hub-cache"
    if _hf.hub_offline():
        raise FileNotFoundError(
            f"model={name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set. Fix: "
            "download it once on a machine with a network (see the README's workshop guide), pass a "
            "local folder, or use model='bundled'.")
    problem = hub_problem(name)
    if problem is not None and any(f"HTTP {code}" in problem for code in (401, 404)):
        raise ValueError(f"model={name!r}: not a folder, not in the local Hugging Face cache, and the hub has no "
                         f"public model by that name ({problem}). Fix: check the spelling (gpt2, distilgpt2, "
                         "gpt2-medium, gpt2-large, gpt2-xl), pass a folder written by save_pretrained(), or use "
                         "model='bundled'.")
    if problem is not None:
        raise ConnectionError(f"model={name!r}: not a folder, not in the local Hugging Face cache, and the hub "
                              f"cannot be used from here: {problem}. Fix: check the network (or HF_ENDPOINT, "
                              "HTTPS_PROXY), pass a folder written by save_pretrained(), or use model='bundled'.")
    try:
        check_config(_hf.hub_file(name, "config.json", local_only=False), name)
        tok = _hf.load_tokenizer(name, local_only=False)
        check_tokenizer(tok, name)
        return _hf.load_folder(name, dtype=dtype, device=device, local_only=False), tok, "hub-download"
    except ValueError:
        raise
    except Exception as exc:  # the hub knows the name (the probe said so): the transfer failed
        raise ConnectionError(f"model={name!r}: the hub knows this model, but downloading it failed "
                              f"({type(exc).__name__}: {str(exc)[:200]}). Fix: try again, check the network, or "
                              "use model='bundled'.") from exc
