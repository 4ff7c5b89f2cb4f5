"""Every option of a training run in one place: ``TrainConfig``, a dataclass with one field per command-line option
(its default, its help and how argparse reads it), whose ``__post_init__`` holds every check, so a bad value is
refused before any work, with a message that names the option, the value, the range and a fix. ``parser()`` builds
``python -m training.train``'s argparse from the fields; ``TrainConfig.from_args`` maps the parsed options back.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import gpt2_parts
from .corpus import CACHE, OUT


class OptionError(ValueError):
    """A training option with a value the run cannot use; the message names the option, the range and a fix."""


def option(default, help: str | None = None, **argparse_kwargs):
    """A ``TrainConfig`` field: its default, and how ``parser()`` reads it from the command line."""
    return field(default=default, metadata={"help": help, **argparse_kwargs})


def resolve_device(name: str) -> str:
    """``--device``'s value as a torch device: ``"auto"`` is ``"cuda"`` where torch sees a CUDA GPU, else ``"cpu"``."""
    return ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name


@dataclass
class TrainConfig:
    """One training run's options (``--minutes`` is ``minutes``, ``--d-model`` is ``d_model``, and so on)."""

    minutes: float = option(22.0, "wall-clock budget for both phases")
    steps: tuple[int, int] | None = option(
        None, "fixed step counts instead of a time budget (reproducible on a busy machine)", type=int, nargs=2,
        metavar=("PHASE1", "PHASE2"))
    init: Path | None = option(  # noqa: RUF009 (option() is a dataclasses.field)
        None, "warm start from this saved model (its config sets the size; --d-model etc. are ignored)", type=Path)
    grow_layers: int | None = option(
        None, "with --init: append blocks up to N layers, their output projections at zero (the starting model's "
        "function and its heads' places are unchanged; the new blocks then learn)", type=int, metavar="N")
    new_lr: float = option(
        1.0, "with --grow-layers: the appended blocks learn at this multiple of the rate (e.g. 3)", metavar="SCALE")
    warmup: int | None = option(
        None, "phase 1's linear warm-up (default 100 from scratch, 10 for a warm start; a grown model's fresh AdamW "
        "moments disturb the trained layers less over a longer one, e.g. 100)", type=int, metavar="STEPS")
    mix: float = option(0.5, "share of each batch from the Tang poems (0: Shakespeare only)")
    d_model: int = option(160)
    layers: int = option(4)
    heads: int = option(5)
    context: int = option(512)
    batch: int = option(8)
    lr: float = option(3e-3)
    full_vocab_fraction: float = option(0.12, "share of the budget spent in phase 2 (full 50257-token softmax)")
    report_windows: int = option(12, "held-out windows per language in the losses printed every 100 steps")
    bf16: bool = option(False, "bfloat16 autocast (the from-scratch run used it; fast on a GPU, 10x slower on CPUs "
                        "without AVX512-BF16)")
    repeat_share: float = option(
        0.0, "chance that a training row is a repeated span instead (makes induction heads form)")
    repeat_pool: int = option(2000, "repeated random spans draw from this many most frequent training ids")
    copy_steps: int = option(
        0, "steps of the copy warm-up before phase 1: rows that repeat a random span of frequent tokens once "
        "(copy_batches), so that induction heads form before the ordinary data")
    copy_context: int = option(64, "row length in the copy warm-up")
    copy_until: float | None = option(
        None, "end the copy warm-up once the probe's second copy costs less than NATS per token (checked every 50 "
        "steps; --copy-steps is then the most it may take, at a constant rate)", type=float, metavar="NATS")
    wpe_lr: float = option(
        1.0, "position embeddings learn at SCALE x the rate, without weight decay: in the bundled model they were 15x "
        "smaller than the token embeddings, too small for heads that attend by position (a previous-token head, "
        "which an induction head needs)", metavar="SCALE")
    copy_pool: int | None = option(
        None, "the copy warm-up draws from this many most frequent ids (default: --repeat-pool); fewer ids are told "
        "apart more easily by heads of 32 dimensions, so copying forms sooner", type=int)
    copy_dropout: float | None = option(
        None, "dropout of every layer during the copy warm-up only (default: as in phase 1); the induction circuit "
        "matches tokens exactly, and dropout on the residual stream blurs that", type=float)
    copy_share: float = option(
        0.0, "chance that a row of phase 1 is a copy row like the warm-up's (keeps its induction heads)")
    passage_share: float = option(
        0.0, "chance that a row of phase 1 and 2 is a passage row: real text that appears twice, the loss on its "
        "second copy (passage_row; teaches copying text, which prompt lookup pays on)")
    lr1: float | None = option(
        None, "phase 1's peak learning rate when it differs from --lr (the copy warm-up's)", type=float)
    copy_lm_share: float = option(
        0.0, "share of the copy warm-up's rows that are language windows instead (0-1); 100%% copy rows left "
        "held-out losses of 12-13 (en) and 9-10 (zh) nats/token")
    guide: float = option(
        0.0, "weight of the head guide's attention loss (HeadGuide; 0: none, e.g. 0.2)", metavar="WEIGHT")
    guide_previous: tuple[int, int] = option(
        (0, 0), "the head the guide teaches to attend to the previous token", type=int, nargs=2,
        metavar=("LAYER", "HEAD"))
    guide_induction: tuple[int, int] = option(
        (1, 0), "the head the guide teaches induction (a later layer than --guide-previous)", type=int, nargs=2,
        metavar=("LAYER", "HEAD"))
    guide_copy: tuple[int, int] | None = option(
        None, "with --guide: a third head pushed to attend from each token to the one that followed an earlier "
        "occurrence of its last --guide-copy-n ids (copying text, not only random ids)", type=int, nargs=2,
        metavar=("LAYER", "HEAD"))
    guide_copy_n: int = option(2, "ids in a row the --guide-copy head matches (default 2)", metavar="N")
    copy_weight: float = option(
        1.0, "each copy-row target counts W times in a step's mean loss (phase 1 and 2; e.g. 5)", metavar="W")
    copy_by_language: bool = option(
        False, "copy rows draw from one language's frequent tokens, or from both, at even odds")
    long_share: float = option(
        0.25, "the last share of phase 1 that trains on full-context windows (the rest: half the context)")
    attn_dropout: float = option(
        0.1, "dropout on attention weights (0 saves a tenth of a step; the first run used 0.1)")
    checkpoint: Path = option(  # noqa: RUF009 (option() is a dataclasses.field)
        CACHE / "checkpoint", "folder for the resumable checkpoint (model, optimizer, random states)")
    checkpoint_minutes: float = option(5.0)
    why: str | None = option(None, "with --resume and other arguments: why (the card says it)", type=str)
    resume: bool = option(
        False, "carry on from --checkpoint (needs --steps; other arguments than the first call's: say --why)")
    seed: int = option(1234)
    device: str = option("auto", "where to train: auto (a CUDA GPU when torch sees one, else the CPU), cpu or cuda",
                         choices=("auto", "cpu", "cuda"))
    out: Path = option(OUT)  # noqa: RUF009 (option() is a dataclasses.field)
    grow_from: int | None = field(default=None, init=False)  # --init's layers (read from its config), or None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainConfig:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.init})

    def torch_device(self) -> torch.device:
        return torch.device(resolve_device(self.device))

    def __post_init__(self) -> None:
        for name in ("steps", "guide_previous", "guide_induction", "guide_copy"):  # argparse gives lists
            if getattr(self, name) is not None:
                setattr(self, name, tuple(getattr(self, name)))
        if self.device == "cuda" and not torch.cuda.is_available():
            raise OptionError(f"--device cuda: torch {torch.__version__} sees no CUDA GPU on this machine; use "
                              "--device cpu (or auto, which takes a GPU where there is one)")
        if self.resume and not self.steps:
            raise OptionError("--resume needs --steps (a wall-clock schedule cannot be carried on exactly)")
        if self.copy_until is not None and not (self.copy_steps and 0 < self.copy_until < 10):
            raise OptionError(f"--copy-until {self.copy_until}: needs --copy-steps (the most the warm-up may take) "
                              "and a loss between 0 and 10 nats/token (e.g. 1.0; the first copy costs about 7.6)")
        longest_span = (self.copy_context + 1) // 2  # a span's ids are distinct
        if not 0 < self.wpe_lr <= 100:
            raise OptionError(f"--wpe-lr {self.wpe_lr}: a multiple of the learning rate above 0 and at most 100 "
                              "(e.g. 10)")
        if self.copy_pool is not None and not longest_span <= self.copy_pool <= self.repeat_pool:
            raise OptionError(f"--copy-pool {self.copy_pool}: between {longest_span} (the longest span of "
                              f"--copy-context {self.copy_context}, all distinct ids) and --repeat-pool "
                              f"({self.repeat_pool}) ids (e.g. 300)")
        if self.copy_dropout is not None and not 0 <= self.copy_dropout < 1:
            raise OptionError(f"--copy-dropout {self.copy_dropout}: a dropout rate is at least 0 and below 1 (e.g. 0)")
        if self.copy_share and self.repeat_pool < (self.context + 1) // 2:
            raise OptionError(f"--repeat-pool {self.repeat_pool}: phase 1's copy rows (--copy-share) draw spans of "
                              f"up to {(self.context + 1) // 2} distinct ids (half of --context {self.context}); "
                              "use at least that many")
        if not 0 <= self.copy_share < 1:
            raise OptionError(f"--copy-share {self.copy_share}: the share of phase 1's rows that are copy rows must "
                              "be at least 0 and below 1 (e.g. 0.1)")
        if not 0 <= self.passage_share < 1 or self.copy_share + self.passage_share >= 1:
            raise OptionError(f"--passage-share {self.passage_share}: the share of rows that are passage rows must be "
                              f"at least 0, and with --copy-share ({self.copy_share}) below 1 (e.g. 0.2), so "
                              "ordinary text remains")
        if not 0 <= self.copy_lm_share < 1:
            raise OptionError(f"--copy-lm-share {self.copy_lm_share}: the share of the copy warm-up's rows that are "
                              "language windows must be at least 0 and below 1 (e.g. 0.5)")
        if not 1 <= self.copy_weight <= 100:
            raise OptionError(f"--copy-weight {self.copy_weight}: a copy row's targets count at least once and at "
                              "most 100 times (e.g. 5)")
        if not 0 < self.long_share <= 1:
            raise OptionError(f"--long-share {self.long_share}: the share of phase 1 on full-context windows must be "
                              "above 0 (every position embedding must be trained) and at most 1 (e.g. 0.5)")
        if not 0 <= self.guide <= 10:
            raise OptionError(f"--guide {self.guide}: the guide's weight must be between 0 (no guide) and 10 "
                              "(e.g. 0.2)")
        if self.guide and not self.guide_previous[0] < self.guide_induction[0]:
            raise OptionError(f"--guide-induction {self.guide_induction[0]} {self.guide_induction[1]}: an induction "
                              "head reads what a previous-token head wrote, so its layer must come after "
                              f"--guide-previous's ({self.guide_previous[0]}); e.g. --guide-previous 0 0 "
                              "--guide-induction 1 0")
        start = gpt2_parts.saved_shape(self.init) if self.init is not None else None  # (layers, heads) of --init
        self.grow_from = start[0] if start is not None else None
        if self.grow_layers is not None and self.grow_from is None:
            raise OptionError(f"--grow-layers {self.grow_layers}: needs --init (the model to grow); e.g. --init "
                              "data/models/tiny-gpt2-bilingual --grow-layers 8")
        if self.grow_layers is not None and not self.grow_from < self.grow_layers <= 48:
            raise OptionError(f"--grow-layers {self.grow_layers}: needs more layers than --init's {self.grow_from} "
                              f"and at most 48 (e.g. {self.grow_from * 2})")
        if self.warmup is not None and not 1 <= self.warmup <= 2000:
            raise OptionError(f"--warmup {self.warmup}: between 1 and 2000 steps of phase 1 (e.g. 100)")
        if not 0 < self.new_lr <= 100 or (self.new_lr != 1 and self.grow_layers is None):
            raise OptionError(f"--new-lr {self.new_lr}: a multiple of the learning rate above 0 and at most 100, and "
                              "only with --grow-layers (the blocks it appends are the ones it speeds up); e.g. "
                              "--grow-layers 8 --new-lr 3")
        if self.guide:  # the guided heads must exist in the model trained (the starting checkpoint's shape, --init)
            n_layer, n_head = start if start is not None else (self.layers, self.heads)
            for name, (layer, head) in (("--guide-previous", self.guide_previous),
                                        ("--guide-induction", self.guide_induction),
                                        *((("--guide-copy", self.guide_copy),) if self.guide_copy else ())):
                if not (0 <= layer < n_layer and 0 <= head < n_head):
                    raise OptionError(f"{name} {layer} {head}: this model has layers 0..{n_layer - 1} and heads "
                                      f"0..{n_head - 1}; pick a head in them")


def parser(description: str) -> argparse.ArgumentParser:
    """``python -m training.train``'s options, one per ``TrainConfig`` field (``d_model`` is ``--d-model``)."""
    ap = argparse.ArgumentParser(prog="python -m training.train", description=description)
    for f in dataclasses.fields(TrainConfig):
        if not f.init:
            continue
        kwargs = dict(f.metadata)
        if kwargs.get("help") is None:
            del kwargs["help"]
        if isinstance(f.default, bool):
            kwargs["action"] = "store_true"
        elif "type" not in kwargs and "choices" not in kwargs:
            kwargs["type"] = type(f.default)
        ap.add_argument("--" + f.name.replace("_", "-"), default=f.default, **kwargs)
    return ap
