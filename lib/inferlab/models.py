"""Loading a model: real GPT-2 when it can be had, any local folder, or the bundled tiny GPT-2.

``load()`` is the one entry point. It never hangs without a network: ``model="auto"`` checks the local
Hugging Face cache, then whether the hub answers within a few seconds, and otherwise falls back to the
bundled model, saying which it chose and how to change it.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import _hf
from .errors import bad_value

BUNDLED_DIR = Path(__file__).resolve().parents[2] / "data" / "models" / "tiny-gpt2-shakespeare"
BUNDLED_NAMES = ("bundled", "tiny", "tiny-gpt2-shakespeare")
ENV_MODEL = "INFERLAB_MODEL"
HUB_PROBE_SECONDS = 3.0
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

    def __repr__(self) -> str:
        return (f"ModelInfo({self.name!r} from {self.source}: {self.n_layer} layers x {self.n_head} heads, "
                f"d_model={self.d_model}, head_dim={self.head_dim}, n_ctx={self.n_ctx}, "
                f"vocab={self.vocab_size}, {self.n_params / 1e6:.1f}M params, "
                f"{self.weight_bytes / 1e6:.1f} MB of {str(self.dtype).removeprefix('torch.')} weights "
                f"on {self.device})")


@dataclass
class Model:
    """A loaded model: the ``torch`` module (``hf``), its tokenizer and its ``info``."""

    hf: torch.nn.Module
    tokenizer: object
    info: ModelInfo

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return next(self.hf.parameters()).device

    @property
    def eos_id(self) -> int:
        """The id of ``<|endoftext|>`` (GPT-2's stop token)."""
        return int(self.tokenizer.eos_token_id)

    def encode(self, text: str) -> list[int]:
        """Text -> token ids (no special tokens added)."""
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def decode(self, ids) -> str:
        """Token ids -> text."""
        return self.tokenizer.decode(list(ids))

    def __repr__(self) -> str:
        return f"Model({self.info!r})"


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


def _hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Can we open a TCP connection to the hub within ``timeout`` seconds? (DNS included, in a thread.)"""
    result: list[bool] = []

    def probe() -> None:
        try:
            host = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("//")[-1].split("/")[0]
            with socket.create_connection((host, 443), timeout=timeout):
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


def _from_folder(path: Path, dtype, device):
    if not path.is_dir():
        raise FileNotFoundError(
            f"model={str(path)!r}: no such folder. Fix: pass a folder written by save_pretrained(), "
            "a hub name such as 'gpt2', or 'bundled'.")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model={str(path)!r}: the folder has no config.json, so it is not a saved model. Fix: pass "
            "the folder that save_pretrained() wrote (config.json + model.safetensors + tokenizer files).")
    if not list(path.glob("*.safetensors")):
        raise FileNotFoundError(
            f"model={str(path)!r}: no *.safetensors weights in the folder (inferlab never loads pickle "
            "files such as pytorch_model.bin). Fix: re-save with save_pretrained(safe_serialization=True).")
    try:
        hf = _hf.load_folder(path, dtype=dtype, device=device, local_only=True)
    except ValueError:
        raise
    except Exception as exc:  # corrupt weights, wrong shapes, unreadable config ...
        raise ValueError(f"model={str(path)!r}: could not load the weights ({type(exc).__name__}: {exc}). "
                         "Fix: re-save the folder with save_pretrained().") from exc
    if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        tok = _hf.gpt2_tokenizer_from_files(path / "vocab.json", path / "merges.txt")
    else:
        tok = _hf.load_tokenizer(path, local_only=True)
    return hf, tok


def load(model: str | os.PathLike = "auto", device: str | torch.device = "auto", dtype=None,
         *, verbose: bool = True) -> Model:
    """Load a GPT-2-family model and its tokenizer.

    Args:
        model: ``"auto"`` (real GPT-2 if cached or downloadable, else the bundled model; the
            ``INFERLAB_MODEL`` environment variable overrides it), ``"bundled"``, a hub name
            (``"gpt2"``, ``"distilgpt2"``, ``"gpt2-medium"``, ...), a folder written by
            ``save_pretrained``, or ``"random:gpt2"`` (published shape, random weights; for timing).
        device: ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.
        dtype: ``None`` (float16 on CUDA, float32 elsewhere) or ``"float32"``/``"float16"``/``"bfloat16"``.
        verbose: print one line saying what was loaded and why.

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
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    notes: list[str] = []
    if dev.type == "cuda" and dtype is None:
        notes.append("float16 chosen by default on CUDA (pass dtype='float32' for full precision)")
    requested = model
    reason = ""
    if model == "auto" and os.environ.get(ENV_MODEL):
        model = os.environ[ENV_MODEL]
        reason = f"chosen by {ENV_MODEL}={model}"
    if model == "auto":
        if _hf.hub_cached("gpt2"):
            model, reason = "gpt2", "real GPT-2 found in the local Hugging Face cache"
        elif _hf.hub_offline():
            model = "bundled"
            reason = "HF_HUB_OFFLINE is set and GPT-2 is not in the local cache"
        elif _hub_reachable():
            model, reason = "gpt2", "real GPT-2 downloaded from the Hugging Face Hub"
        else:
            model = "bundled"
            reason = f"the Hugging Face Hub did not answer within {HUB_PROBE_SECONDS:.0f} s"

    source: str
    if model in BUNDLED_NAMES:
        hf, tok = _from_folder(BUNDLED_DIR, dt, dev)
        name, source, path = "tiny-gpt2-shakespeare", "bundled", str(BUNDLED_DIR)
        reason = reason or "asked for the bundled model"
    elif model.startswith("random:"):
        family = model.split(":", 1)[1]
        if family not in _hf.GPT2_FAMILY:
            raise bad_value("model", requested, f"'random:' + one of {sorted(_hf.GPT2_FAMILY)}",
                            "e.g. model='random:gpt2' for GPT-2 small's shape with random weights")
        hf = _hf.random_gpt2(family, dtype=dt, device=dev)
        tok = _bundled_tokenizer()
        name, source, path = family, "random-weights", ""
        reason = reason or "random weights with the published shape (for timing; its text is noise)"
        notes.append("random weights: the speed is real, the text is not")
    elif os.path.sep in model or model.startswith((".", "~")) or Path(model).expanduser().is_dir():
        folder = Path(model).expanduser().resolve()
        hf, tok = _from_folder(folder, dt, dev)
        name, source, path = folder.name, "folder", str(folder)
        reason = reason or "a local folder"
    else:
        hf, tok, source = _from_hub(model, dt, dev)
        name, path = model, model
        reason = reason or ("found in the local Hugging Face cache" if source == "hub-cache"
                            else "downloaded from the Hugging Face Hub")

    cfg = hf.config
    n_params, n_bytes = _count(hf)
    info = ModelInfo(
        name=name, source=source, path=path,
        reason=reason + ("" if source != "bundled" else
                         ". To use real GPT-2: load(model='gpt2') with a network, a folder path, "
                         "or set INFERLAB_MODEL"),
        n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.n_embd, head_dim=cfg.n_embd // cfg.n_head,
        n_ctx=cfg.n_positions, vocab_size=cfg.vocab_size, n_params=n_params, weight_bytes=n_bytes,
        dtype=dt, device=str(dev), attention=_hf.current_attention(hf), notes=tuple(notes),
    )
    if verbose:
        print(f"inferlab: loaded {info.name} ({info.source}; {info.reason}) on {info.device}, "
              f"{str(dt).removeprefix('torch.')}")
    return Model(hf=hf, tokenizer=tok, info=info)


def _from_hub(name: str, dtype, device):
    """A hub name: local cache first; the network only when allowed and reachable."""
    if _hf.hub_cached(name):
        return (_hf.load_folder(name, dtype=dtype, device=device, local_only=True),
                _hf.load_tokenizer(name, local_only=True), "hub-cache")
    if _hf.hub_offline():
        raise FileNotFoundError(
            f"model={name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set. Fix: "
            "download it once on a machine with a network (see the README's workshop guide), pass a "
            "local folder, or use model='bundled'.")
    if not _hub_reachable():
        raise ConnectionError(
            f"model={name!r}: not a folder, not in the local Hugging Face cache, and the hub did not answer "
            f"within {HUB_PROBE_SECONDS:.0f} s. Fix: check the network, pass a folder written by "
            "save_pretrained(), or use model='bundled'.")
    try:
        return (_hf.load_folder(name, dtype=dtype, device=device, local_only=False),
                _hf.load_tokenizer(name, local_only=False), "hub-download")
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"model={name!r}: the hub has no usable GPT-2 checkpoint under that name "
                         f"({type(exc).__name__}: {exc}). Fix: check the spelling (gpt2, distilgpt2, "
                         "gpt2-medium, gpt2-large, gpt2-xl) or use model='bundled'.") from exc
