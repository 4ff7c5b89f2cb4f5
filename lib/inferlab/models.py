"""Loading a model: real GPT-2 when it can be had, any local folder, or the bundled tiny GPT-2.

``load()`` is the one entry point. It never hangs without a network: ``model="auto"`` checks the local
Hugging Face cache, then whether the hub answers within a few seconds, and otherwise falls back to the
bundled model, saying which it chose and how to change it. ``as_ids`` and ``check_model`` are the input checks
every job runs on a ``Model`` and its token ids (the engine, fast, serve and speculative import them here).
One piece (just over 300 lines): a model, how it is loaded and the checks on what is handed to it.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import _hf, checkpoints, hub
from .cost import GPT2_SHAPES
from .errors import bad_value, check_number, check_utf8
from .i18n import by_language, tr
from .paths import BUNDLED_DIR

BUNDLED_NAMES = ("bundled", "tiny", "tiny-gpt2-bilingual")
ENV_MODEL = "INFERLAB_MODEL"
ATTENTION_KERNELS = ("eager", "sdpa")


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

    @property
    def source_text(self) -> str:
        """Where the weights came from, in the reader's language (``source`` itself stays the identifier)."""
        return by_language(en=self.source, zh={"bundled": "内置模型", "hub-cache": "本地 Hugging Face 缓存",
                                               "hub-download": "从 Hugging Face 下载", "folder": "本地文件夹",
                                               "random-weights": "随机权重"}.get(self.source, self.source))

    def __repr__(self) -> str:
        return tr("ModelInfo({name!r} from {source}: {n_layer} layers x {n_head} heads, d_model={d_model}, "
                  "head_dim={head_dim}, n_ctx={n_ctx}, vocab={vocab}, {params:.1f}M params, {mb:.1f} MB of {dtype} "
                  "weights on {device})", name=self.name, source=self.source_text, n_layer=self.n_layer,
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
        check_utf8("text", text)
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def decode(self, ids) -> str:
        """Token ids -> text. Every id must be a whole number in ``[0, vocab)``: an id past the vocabulary has no
        text (the tokenizer would silently give ``""``), and a negative one no meaning."""
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TypeError(f"ids must be a list of token ids, got {type(ids).__name__} {ids!r:.40}. "
                            "Fix: pass e.g. m.encode(text), or [token_id] for one token.")
        ids = list(ids)
        vocab = len(self.tokenizer)
        bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= i < vocab]
        if bad:
            raise bad_value("ids", bad[:5], f"whole-number token ids in [0, {vocab})",
                            "use ids from m.encode(text) or from a generated trace")
        return self.tokenizer.decode([int(i) for i in ids])

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


def _count(module: torch.nn.Module) -> tuple[int, int]:
    """(parameters, bytes), each tensor counted once (GPT-2's LM head shares ``wte``)."""
    seen: dict[int, torch.Tensor] = {p.data_ptr(): p for p in module.parameters()}
    return (sum(p.numel() for p in seen.values()),
            sum(p.numel() * p.element_size() for p in seen.values()))


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
    if not isinstance(verbose, bool):  # verbose="no" is a non-empty string: it would print
        raise TypeError(f"verbose must be True or False, got {type(verbose).__name__} {verbose!r}. "
                        "Fix: pass verbose=False to load quietly.")
    if not isinstance(model, str) or not model.strip():
        raise bad_value("model", model, "'auto', 'bundled', a hub name like 'gpt2', a folder, or 'random:gpt2'",
                        "pass one of those strings")
    if n_layer is not None:
        check_number("n_layer", n_layer, low=1, integer=True, fix="pass a whole number of blocks, e.g. n_layer=2")
        if not model.startswith("random:"):
            raise bad_value("n_layer", n_layer, "None unless model is 'random:<family>'",
                            "a trained checkpoint keeps all its blocks; use e.g. load('random:gpt2', n_layer=2)")
    dev = checkpoints.resolve_device(device)
    dt = checkpoints.resolve_dtype(dtype, dev)
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
        if hub.hub_cached("gpt2"):
            model, reason = "gpt2", tr("real GPT-2 found in the local Hugging Face cache")
        elif _hf.hub_offline():
            model = "bundled"
            reason = tr("HF_HUB_OFFLINE is set and GPT-2 is not in the local cache")
        elif (problem := hub.hub_problem("gpt2")) is None:
            model, reason = "gpt2", tr("real GPT-2 downloaded from the Hugging Face Hub")
        else:
            model, reason = "bundled", tr("the Hugging Face Hub cannot be used from here: {problem}", problem=problem)

    source: str
    if model in BUNDLED_NAMES:
        hf, tok = checkpoints.from_folder(BUNDLED_DIR, dt, dev)
        name, source, path = "tiny-gpt2-bilingual", "bundled", str(BUNDLED_DIR)
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
        tok = checkpoints.bundled_tokenizer()
        name = family if blocks == shape.n_layer else tr("{family} ({blocks} of {n} blocks)", family=family,
                                                         blocks=blocks, n=shape.n_layer)
        source, path = "random-weights", model  # path: what load() needs to build it again (with n_layer)
        reason = reason or tr("random weights with the published shape (for timing; its text is noise)")
        notes.append("random weights: the speed is real, the text is not")
    elif os.path.sep in model or model.startswith((".", "~")) or Path(model).expanduser().is_dir():
        folder = Path(model).expanduser().resolve()
        hf, tok = checkpoints.from_folder(folder, dt, dev)
        name, source, path = folder.name, "folder", str(folder)
        reason = reason or tr("a local folder")
    else:
        try:
            hf, tok, source = hub.from_hub(model, dt, dev)
        except (ConnectionError, OSError) as exc:
            if requested != "auto":
                raise
            return _load("bundled", dev, dt, dtype, tr("the download of real GPT-2 failed ({why})", why=exc), verbose)
        name, path = model, model
        reason = reason or (tr("found in the local Hugging Face cache") if source == "hub-cache"
                            else tr("downloaded from the Hugging Face Hub"))

    shape = _hf.loaded_shape(hf)
    n_params, n_bytes = _count(hf)
    info = ModelInfo(
        name=name, source=source, path=path,
        reason=reason if source != "bundled" else tr(
            "{reason}. To use real GPT-2: load(model='gpt2') with a network, a folder path, or set INFERLAB_MODEL",
            reason=reason),
        n_layer=shape.n_layer, n_head=shape.n_head, d_model=shape.d_model, head_dim=shape.head_dim,
        n_ctx=shape.n_ctx, vocab_size=shape.vocab_size, n_params=n_params, weight_bytes=n_bytes,
        dtype=dt, device=str(dev), attention=_hf.loaded_attention(hf), notes=tuple(notes),
    )
    if verbose:
        print(tr("inferlab: loaded {name} ({source}; {reason}) on {device}, {dtype}", name=info.name,
                 source=info.source, reason=info.reason, device=info.device, dtype=str(dt).removeprefix("torch.")))
    return Model(hf, tokenizer=tok, info=info)


def as_ids(model: Model, ids) -> torch.Tensor:
    """Token ids (a list, ``[tokens]`` or ``[batch, tokens]``) as a ``[batch, tokens]`` long tensor.

    The tensor is on the model's device. Refuses what is not a rectangle of integers in ``[0, vocab)``
    at most the context length long.
    """
    check_model(model)
    fix = "pass integer token ids, e.g. model.encode(text)"
    if isinstance(ids, torch.Tensor):
        t = ids
    else:
        try:
            t = torch.as_tensor(ids)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise bad_value("ids", _short(ids), "a [tokens] or [batch, tokens] rectangle of integer token ids "
                            f"(every row the same length; {exc})", fix) from None
    if t.numel() == 0:
        raise bad_value("ids", _short(ids), "a non-empty [tokens] or [batch, tokens] sequence of token ids",
                        "tokenize a non-empty prompt first")
    if t.dtype == torch.bool or t.dtype.is_floating_point or t.dtype.is_complex:
        raise TypeError(f"ids must be integer token ids, got {t.dtype} values {_short(ids)}. Fix: {fix}.")
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2 or t.shape[1] == 0 or t.shape[0] == 0:
        raise bad_value("ids", tuple(t.shape), "a non-empty [tokens] or [batch, tokens] sequence of token ids",
                        "tokenize a non-empty prompt first")
    vocab, n_ctx = model.info.vocab_size, model.info.n_ctx
    if int(t.min()) < 0 or int(t.max()) >= vocab:
        bad = int(t.max()) if int(t.max()) >= vocab else int(t.min())
        raise bad_value("ids", f"[... {bad} ...]", f"token ids in [0, {vocab})", "use ids from model.encode(text)")
    if t.shape[1] > n_ctx:
        raise bad_value("ids", tr("{n} tokens", n=t.shape[1]),
                        tr("at most the context length, {n_ctx} tokens", n_ctx=n_ctx), tr("shorten the prompt"))
    return t.to(dtype=torch.long, device=model.device)


def check_model(model) -> None:
    """Refuse what is not a loaded ``Model`` (a name such as ``"bundled"``, ``None``) before anything runs."""
    if not isinstance(model, Model):
        raise TypeError(f"model must be a Model from il.load(), got {type(model).__name__} {model!r:.40}. "
                        f"Fix: m = il.load({model!r:.40}) if it names a model (or il.load() for the default), "
                        "then pass m.")


def _short(x) -> str:
    return f"{x!r:.60}"
