"""Loading a model: real GPT-2 when it can be had, any local folder, or the bundled tiny GPT-2.

``load()`` is the one entry point. It never hangs without a network: ``model="auto"`` checks the local
Hugging Face cache, then whether the hub answers within a few seconds, and otherwise falls back to the
bundled model, saying which it chose and how to change it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import torch

from . import _hf
from .cost import GPT2_SHAPES
from .errors import bad_value, check_number
from .i18n import tr
from .paths import BUNDLED_DIR

BUNDLED_NAMES = ("bundled", "tiny", "tiny-gpt2-shakespeare")
ENV_MODEL = "INFERLAB_MODEL"
HUB_PROBE_SECONDS = 3.0
ATTENTION_KERNELS = ("eager", "sdpa")
_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16,
           "fp16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class ModelInfo:
    """The facts a notebook reads about the loaded model (never typed into prose)."""

    name: str
    source: str  # "bundled", "hub-cache", "hub-download", "folder" or "random-weights"
    path: str
    reason: str
    n_layer: int
    n_head: int
    d_model: int
    head_dim: int
    n_ctx: int
    vocab_size: int
    n_params: int
    weight_bytes: int
    dtype: torch.dtype
    device: str
    attention: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bytes_per_element(self) -> int:
        """Bytes of one weight (and one KV-cache element) in this dtype."""
        return torch.empty((), dtype=self.dtype).element_size()

    def summary(self) -> dict:
        """The facts a trace keeps about its model (plain data)."""
        return {"name": self.name, "source": self.source, "n_layer": self.n_layer, "n_head": self.n_head,
                "d_model": self.d_model, "dtype": str(self.dtype), "device": self.device}

    def __repr__(self) -> str:
        return tr("ModelInfo({name!r} from {source}: {n_layer} layers x {n_head} heads, d_model={d_model}, "
                  "head_dim={head_dim}, n_ctx={n_ctx}, vocab={vocab}, {params:.1f}M params, {mb:.1f} MB of {dtype} "
                  "weights on {device})", name=self.name, source=self.source, n_layer=self.n_layer,
                  n_head=self.n_head, d_model=self.d_model, head_dim=self.head_dim, n_ctx=self.n_ctx,
                  vocab=self.vocab_size, params=self.n_params / 1e6, mb=self.weight_bytes / 1e6,
                  dtype=str(self.dtype).removeprefix("torch."), device=self.device)


@dataclass
class Model:
    """A loaded model: its tokenizer, its ``info``, and (privately) the ``transformers`` module that runs it.

    The library reaches the module only through ``inferlab._hf``, which accepts the ``Model`` itself; run it
    with ``inferlab.engine`` (``prefill``, ``decode_step``, ``forward_full``) and watch it with
    ``inferlab.hooks.capture(model, ...)``. ``transformers_module()`` hands the raw module to a learner who
    wants to explore Hugging Face's own objects.
    """

    _module: torch.nn.Module = field(repr=False)
    tokenizer: object
    info: ModelInfo

    def transformers_module(self) -> torch.nn.Module:
        """The Hugging Face ``GPT2LMHeadModel`` behind this model, for exploring ``transformers`` itself.

        >>> type(m.transformers_module()).__name__      # doctest: +SKIP
        'GPT2LMHeadModel'

        Changing it changes this model. The course's own code never uses it.
        """
        return self._module

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return next(self._module.parameters()).device

    @property
    def eos_id(self) -> int:
        """The id of ``<|endoftext|>`` (GPT-2's stop token)."""
        return int(self.tokenizer.eos_token_id)

    def encode(self, text: str) -> list[int]:
        """Text -> token ids (no special tokens added)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__} {text!r:.60}. Fix: pass text.")
        check_text("text", text)
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def decode(self, ids) -> str:
        """Token ids -> text."""
        return self.tokenizer.decode(list(ids))

    def attention_kernel(self, name: str):
        """A context manager: run attention with kernel ``name`` ("eager" or "sdpa") inside the block.

        ``"eager"`` materializes the probabilities ``[batch, heads, query_pos, key_pos]``; ``"sdpa"`` is
        PyTorch's fused kernel (what the model uses by default). The previous kernel comes back after.
        """
        if name not in ATTENTION_KERNELS:
            raise bad_value("name", name, f"one of {list(ATTENTION_KERNELS)}", "use 'eager' or 'sdpa'")
        return _hf.attention_implementation(self, name)

    def __repr__(self) -> str:
        return f"Model({self.info!r})"


def hub_cached(name: str) -> bool:
    """True when the Hugging Face checkpoint ``name`` (e.g. ``"gpt2"``) is complete in the local cache."""
    return _hf.hub_cached(name)


def check_text(name: str, text: str) -> None:
    """Refuse text that cannot be written as UTF-8 (a lone surrogate such as ``"\\ud800"``) with a clear error."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad_value(name, text[max(exc.start - 10, 0):exc.end + 10],
                        tr("text that can be written as UTF-8 (no lone surrogate halves like \\ud800)"),
                        tr("remove or replace the character at position {position}, e.g. "
                           "text.encode('utf-8', 'replace').decode()", position=exc.start)) from None


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


def hub_address() -> tuple[str, int]:
    """(host, port) of the Hugging Face Hub, from ``HF_ENDPOINT`` when set (a mirror or a proxy)."""
    url = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Can a TCP connection to the hub open within ``timeout`` seconds? (DNS included, in a thread.)

    Without this probe a network that drops packets makes the hub client retry for minutes.
    """
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection(hub_address(), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def _count(module: torch.nn.Module) -> tuple[int, int]:
    """(parameters, bytes), each tensor counted once (GPT-2's LM head shares ``wte``)."""
    seen: dict[int, torch.Tensor] = {p.data_ptr(): p for p in module.parameters()}
    return (sum(p.numel() for p in seen.values()),
            sum(p.numel() * p.element_size() for p in seen.values()))


def _bundled_tokenizer():
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


def _from_folder(path: Path, dtype, device):
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


def load(model: str | os.PathLike = "auto", device: str | torch.device = "auto", dtype=None,
         *, verbose: bool = True, n_layer: int | None = None) -> Model:
    """Load a GPT-2-family model and its tokenizer.

    Args:
        model: ``"auto"`` (real GPT-2 if cached or downloadable, else the bundled model; the
            ``INFERLAB_MODEL`` environment variable overrides it), ``"bundled"``, a hub name
            (``"gpt2"``, ``"distilgpt2"``, ``"gpt2-medium"``, ...), a folder written by
            ``save_pretrained``, or ``"random:gpt2"`` (published shape, random weights; for timing).
        device: ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.
        dtype: ``None`` (float16 on CUDA, float32 elsewhere) or ``"float32"``/``"float16"``/``"bfloat16"``.
        verbose: print one line saying what was loaded and why.
        n_layer: ``"random:"`` models only: build this many of the family's blocks instead of all of them
            (the same width, heads, context and vocabulary). The test suite's scale times GPT-2's shape
            with 2 of its 12 blocks (``inferlab.scale``); ``None`` (the default) builds the published depth.

    Example:
        >>> m = load("bundled")                     # doctest: +SKIP
        >>> m.info.n_layer, m.info.vocab_size       # doctest: +SKIP
        (4, 50257)
    """
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if not isinstance(model, str) or not model.strip():
        raise bad_value("model", model, "'auto', 'bundled', a hub name like 'gpt2', a folder, or 'random:gpt2'",
                        "pass one of those strings")
    if n_layer is not None:
        check_number("n_layer", n_layer, low=1, integer=True, fix="pass a whole number of blocks, e.g. n_layer=2")
        if not model.startswith("random:"):
            raise bad_value("n_layer", n_layer, "None unless model is 'random:<family>'",
                            "a trained checkpoint keeps all its blocks; use e.g. load('random:gpt2', n_layer=2)")
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if model == "auto" and os.environ.get(ENV_MODEL):
        chosen = os.environ[ENV_MODEL]
        try:
            return _load(chosen, dev, dt, dtype, tr("chosen by {variable}={value}", variable=ENV_MODEL, value=chosen),
                         verbose)
        except (ValueError, FileNotFoundError, ConnectionError) as exc:
            raise type(exc)(f"the environment variable {ENV_MODEL}={chosen!r} chose the model, and: {exc} "
                            f"(Or unset {ENV_MODEL} to use model='auto'.)") from None
    return _load(model, dev, dt, dtype, "", verbose, n_layer)


def _load(model: str, dev: torch.device, dt: torch.dtype, dtype, reason: str, verbose: bool,
          n_layer: int | None = None) -> Model:
    """``load`` once the device, dtype and the ``INFERLAB_MODEL`` choice are settled."""
    notes: list[str] = []
    if dev.type == "cuda" and dtype is None:
        notes.append("float16 chosen by default on CUDA (pass dtype='float32' for full precision)")
    requested = model
    if model == "auto":
        if _hf.hub_cached("gpt2"):
            model, reason = "gpt2", tr("real GPT-2 found in the local Hugging Face cache")
        elif _hf.hub_offline():
            model = "bundled"
            reason = tr("HF_HUB_OFFLINE is set and GPT-2 is not in the local cache")
        elif hub_reachable():
            model, reason = "gpt2", tr("real GPT-2 downloaded from the Hugging Face Hub")
        else:
            model = "bundled"
            reason = tr("the Hugging Face Hub did not answer within {seconds:.0f} s", seconds=HUB_PROBE_SECONDS)

    source: str
    if model in BUNDLED_NAMES:
        hf, tok = _from_folder(BUNDLED_DIR, dt, dev)
        name, source, path = "tiny-gpt2-shakespeare", "bundled", str(BUNDLED_DIR)
        reason = reason or tr("asked for the bundled model")
    elif model.startswith("random:"):
        family = model.split(":", 1)[1]
        if family not in GPT2_SHAPES:
            raise bad_value("model", requested, f"'random:' + one of {sorted(GPT2_SHAPES)}",
                            "e.g. model='random:gpt2' for GPT-2 small's shape with random weights")
        shape = GPT2_SHAPES[family]
        if n_layer is not None and n_layer > shape.n_layer:
            raise bad_value("n_layer", n_layer, f"1 to {shape.n_layer} ({family} has {shape.n_layer} blocks)",
                            f"pass at most {shape.n_layer}, or None for all of them")
        blocks = shape.n_layer if n_layer is None else n_layer
        hf = _hf.new_gpt2(n_layer=blocks, n_head=shape.n_head, d_model=shape.d_model, n_ctx=shape.n_ctx,
                          vocab_size=shape.vocab_size, dtype=dt, device=dev)
        tok = _bundled_tokenizer()
        name = family if blocks == shape.n_layer else tr("{family} ({blocks} of {n} blocks)", family=family,
                                                         blocks=blocks, n=shape.n_layer)
        source, path = "random-weights", model  # path: what load() needs to build it again (with n_layer)
        reason = reason or tr("random weights with the published shape (for timing; its text is noise)")
        notes.append("random weights: the speed is real, the text is not")
    elif os.path.sep in model or model.startswith((".", "~")) or Path(model).expanduser().is_dir():
        folder = Path(model).expanduser().resolve()
        hf, tok = _from_folder(folder, dt, dev)
        name, source, path = folder.name, "folder", str(folder)
        reason = reason or tr("a local folder")
    else:
        hf, tok, source = _from_hub(model, dt, dev)
        name, path = model, model
        reason = reason or (tr("found in the local Hugging Face cache") if source == "hub-cache"
                            else tr("downloaded from the Hugging Face Hub"))

    shape = _hf.shape_facts(hf)
    n_params, n_bytes = _count(hf)
    info = ModelInfo(
        name=name, source=source, path=path,
        reason=reason if source != "bundled" else tr(
            "{reason}. To use real GPT-2: load(model='gpt2') with a network, a folder path, or set INFERLAB_MODEL",
            reason=reason),
        n_layer=shape.n_layer, n_head=shape.n_head, d_model=shape.d_model, head_dim=shape.head_dim,
        n_ctx=shape.n_ctx, vocab_size=shape.vocab_size, n_params=n_params, weight_bytes=n_bytes,
        dtype=dt, device=str(dev), attention=_hf.current_attention(hf), notes=tuple(notes),
    )
    if verbose:
        print(tr("inferlab: loaded {name} ({source}; {reason}) on {device}, {dtype}", name=info.name,
                 source=info.source, reason=info.reason, device=info.device, dtype=str(dt).removeprefix("torch.")))
    return Model(hf, tokenizer=tok, info=info)


def _from_hub(name: str, dtype, device):
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
    if not hub_reachable():
        raise ConnectionError(
            f"model={name!r}: not a folder, not in the local Hugging Face cache, and the hub did not answer "
            f"within {HUB_PROBE_SECONDS:.0f} s. Fix: check the network, pass a folder written by "
            "save_pretrained(), or use model='bundled'.")
    try:
        check_config(_hf.hub_file(name, "config.json", local_only=False), name)
        tok = _hf.load_tokenizer(name, local_only=False)
        check_tokenizer(tok, name)
        return _hf.load_folder(name, dtype=dtype, device=device, local_only=False), tok, "hub-download"
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"model={name!r}: the hub has no usable GPT-2 checkpoint under that name "
                         f"({type(exc).__name__}: {exc}). Fix: check the spelling (gpt2, distilgpt2, "
                         "gpt2-medium, gpt2-large, gpt2-xl) or use model='bundled'.") from exc
