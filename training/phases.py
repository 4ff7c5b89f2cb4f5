"""One training run, phase by phase: ``prepare`` (the corpora, the restricted vocabulary, the model and the
streams of rows), ``copy_warmup`` (phase 0, ``--copy-steps``), ``phase1`` (the output layer restricted to the ids
the training data use) and ``phase2`` (GPT-2's full 50257-token softmax). ``Run`` carries what the phases share;
``training.train`` calls them in this order, which is the order of the random draws (the same draws, and the same
model, as the single script this package was split from).
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from transformers import GPT2LMHeadModel

from . import corpus as corpora
from . import gpt2_parts
from .guide import HeadGuide
from .loop import heldout_loss, load_checkpoint, save_checkpoint, train_loop
from .options import TrainConfig
from .rows import copy_batches, frequent_pool, mixed_batches, with_copy_rows, with_language, with_passages, with_repeats

EOT = corpora.EOT
COMMAND = "python -m training.train"  # how the card and training_stats.json write this run's command


@dataclass
class Run:
    """What the phases share: the options, the random generator, the data, the model of phase 1 and the notes."""

    cfg: TrainConfig
    device: torch.device
    gen: torch.Generator
    t_start: float
    tok: object
    corpus: corpora.Corpus
    resumed: dict | None
    used: torch.Tensor  # the ids phase 1's output layer keeps
    remap: torch.Tensor  # an id's row in phase 1's output layer (-1: not kept)
    ctx: int
    budget: float = 0.0  # seconds for phases 1 and 2 (without --steps), set before the warm-up as it always was
    small: dict = field(default_factory=dict)  # the model's size (``gpt2_parts.size_of``'s keys)
    model: GPT2LMHeadModel | None = None
    base: GPT2LMHeadModel | None = None  # the starting checkpoint (``--init``)
    start_stats: dict | None = None
    notes: dict = field(default_factory=dict)  # what the card reports (the history, the warm-up's steps): checkpointed
    guide: HeadGuide | None = None  # phase 1's head guide (``--guide``)
    short: Iterator | None = None  # phase 1's rows: half-context windows ...
    long: Iterator | None = None  # ... and, for the last ``--long-share`` of it, full-context windows
    report_x: torch.Tensor | None = None  # fixed windows of each language (phase 2's rows for never-seen ids)
    pool0: torch.Tensor | None = None  # the copy warm-up's pool of frequent ids (and the probe's)
    probe: tuple[torch.Tensor, torch.Tensor] | None = None  # fixed copy rows: has copying formed?
    copying: dict[str, float] = field(default_factory=dict)  # the probe's last losses

    @property
    def minutes_before(self) -> float:
        return self.resumed["minutes"] if self.resumed else 0.0

    @property
    def grown(self) -> int:  # blocks appended to the start
        return self.cfg.grow_layers - self.cfg.grow_from if self.cfg.grow_layers is not None else 0


def command(cfg: TrainConfig, argv: list[str]) -> str:
    """This call's command, the starting checkpoint shown as /tmp/start (the lineage says which)."""
    argv = list(argv)
    if "--why" in argv:  # the reason is stored beside the command, not in it
        del argv[argv.index("--why"):argv.index("--why") + 2]
    return f"{COMMAND} " + shlex.join("/tmp/start" if cfg.init is not None and a == str(cfg.init) else a
                                      for a in argv)


def prepare(cfg: TrainConfig, argv: list[str]) -> Run:
    """Seed, read the corpora (``corpus.corpus_tokens``), build phase 1's model and its streams of rows."""
    resumed = load_checkpoint(cfg.checkpoint) if cfg.resume else None
    if cfg.resume and resumed is None:
        print(f"no checkpoint in {cfg.checkpoint}: starting from the beginning", flush=True)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    t_start = time.time()
    tok = corpora.gpt2_tokenizer()
    corpus = corpora.corpus_tokens(tok)
    en_train, en_held, zh_train, zh_held = (getattr(corpus, name) for name in corpora.STREAMS)
    zh_tokens = len(zh_train) + len(zh_held) - corpus.poems  # without the <|endoftext|> separators
    print(f"Shakespeare: train tokens {len(en_train):,}  held-out tokens {len(en_held):,}", flush=True)
    print(f"Tang poems: {corpus.poems:,} poems, {corpus.zh_chars:,} characters, "
          f"{zh_tokens / corpus.zh_chars:.2f} tokens/character; train tokens {len(zh_train):,}  held-out tokens "
          f"{len(zh_held):,} ({corpus.held_out_poems} poems)", flush=True)
    mix = cfg.mix
    # Phase 1: restricted output vocabulary (the ids that occur in the training data actually used).
    used = torch.unique(torch.cat([en_train] * (mix < 1) + [zh_train] * (mix > 0)))
    remap = torch.full((tok.vocab_size,), -1, dtype=torch.long)
    remap[used] = torch.arange(len(used))
    run = Run(cfg, cfg.torch_device(), gen, t_start, tok, corpus, resumed, used, remap, cfg.context)
    if cfg.init is not None:
        run.base = gpt2_parts.load_saved(cfg.init)
        run.model, run.small, n_new = gpt2_parts.warm_start(run.base, used, remap, cfg.attn_dropout, cfg.grow_layers)
        run.ctx = min(run.ctx, gpt2_parts.context_of(run.small))
        print(f"{n_new} token ids new to the starting checkpoint get fresh random rows", flush=True)
        run.start_stats = json.loads((cfg.init / "training_stats.json").read_text(encoding="utf-8"))
    else:
        run.small = gpt2_parts.size_of(run.ctx, cfg.d_model, cfg.layers, cfg.heads, cfg.attn_dropout)
        run.model = gpt2_parts.new_model(len(used), run.small)
    run.model.to(run.device)
    print(f"training on {run.device}" + (f" ({torch.cuda.get_device_name(run.device)})"
                                         if run.device.type == "cuda" else ""), flush=True)
    run.guide = guide_for(cfg, run.model)
    # Short windows are much cheaper (attention backward); most steps use half the context, the
    # last quarter uses the full context so every position embedding is trained.
    sources1 = [remap[en_train]] * (mix < 1) + [remap[zh_train]] * (mix > 0)
    pool1 = frequent_pool(torch.cat(sources1), cfg.repeat_pool, int(remap[EOT]))
    eot1 = int(remap[EOT])
    run.short = repeats(run, mixed_batches(remap[en_train], remap[zh_train], run.ctx // 2, cfg.batch * 2, mix, gen),
                        sources1, pool1, eot1)
    run.long = repeats(run, mixed_batches(remap[en_train], remap[zh_train], run.ctx, cfg.batch, mix, gen),
                       sources1, pool1, eot1)
    run.budget = cfg.minutes * 60 - (time.time() - t_start)
    print(f"phase 1: {len(used):,} output ids", flush=True)
    # Phase 2's rows for never-seen ids must be low after English and after Chinese: their direction is
    # set on windows of both (what phase 1 trains on; for the reports, fixed windows from each language).
    run.report_x = torch.cat([remap[data][: cfg.batch * run.ctx].view(cfg.batch, run.ctx)
                              for data in [en_train] * (mix < 1) + [zh_train] * (mix > 0)])
    run.notes = dict(resumed.get("notes", {})) if resumed else {}
    # Each start of the run (the first and every --resume) with its command and first step: a run resumed with other
    # arguments is not the one command's result, and the card says so.
    run.notes["history"] = [*run.notes.get("history", []), {
        "from_step": f"phase {resumed['phase']}, step {resumed['step']}" if resumed else "the start",
        "command": command(cfg, argv), **({"why": cfg.why} if cfg.why else {})}]
    # The copy probe: fixed rows like the warm-up's (random ids, one span appearing twice at random places).
    run.pool0 = pool1[: cfg.copy_pool] if cfg.copy_pool else pool1  # the warm-up's pool (and the probe's)
    run.probe = next(copy_batches(run.pool0, cfg.copy_context + 1, 32, torch.Generator().manual_seed(7)))
    return run


def guide_for(cfg: TrainConfig, net: GPT2LMHeadModel) -> HeadGuide | None:
    return HeadGuide(net, tuple(cfg.guide_previous), tuple(cfg.guide_induction), cfg.guide,
                     tuple(cfg.guide_copy) if cfg.guide_copy else None, cfg.guide_copy_n) if cfg.guide else None


def repeats(run: Run, stream: Iterator[torch.Tensor], sources: list[torch.Tensor], pool: torch.Tensor, eot: int):
    """``stream`` with the rows the options ask for mixed in: repeated spans, copy rows, passage rows."""
    cfg = run.cfg
    stream = with_repeats(stream, sources, pool, cfg.repeat_share, run.gen)
    if not cfg.copy_share and not cfg.passage_share:
        return stream
    # --copy-by-language: a copy row of one language's frequent tokens looks like that language's text (03 repeats
    # common English tokens), not only like the mixture no text is; both languages, or either, at even odds
    pools = [pool, *(frequent_pool(src, cfg.repeat_pool // 2, eot) for src in sources)] \
        if cfg.copy_by_language and len(sources) > 1 else pool
    rows = with_copy_rows(stream, pools, cfg.copy_share, run.gen)
    return with_passages(rows, sources, cfg.passage_share, run.gen) if cfg.passage_share else rows


def losses(run: Run, full_model: GPT2LMHeadModel) -> str:
    en = heldout_loss(full_model, run.corpus.en_held, run.ctx, run.cfg.report_windows)
    zh = heldout_loss(full_model, run.corpus.zh_held, run.ctx, run.cfg.report_windows)
    return f"en {en:.3f} zh {zh:.3f} nats/token"


def report1(run: Run) -> str:
    with torch.random.fork_rng():  # building the model draws random numbers; training must not notice
        return losses(run, gpt2_parts.full_vocabulary(run.model, run.used, run.small, run.report_x,
                                                       fit_unseen=True))


def copy_report(run: Run) -> str:
    """The probe rows' losses: copying has formed when the copied ids cost far less than the random ones."""
    probe, probe_targets = run.probe
    copied, copying = probe_targets != -100, run.copying
    run.model.eval()
    with torch.no_grad():
        logits = run.model(input_ids=probe[:, :-1].to(run.device)).logits.float().cpu()
    run.model.train()
    per = torch.nn.functional.cross_entropy(logits.transpose(1, 2), probe[:, 1:], reduction="none")
    copying["other"], copying["second"] = per[~copied].mean().item(), per[copied].mean().item()
    return f"copy rows: random ids {copying['other']:.2f}, second copy {copying['second']:.2f} nats/token"


def saver(run: Run, phase: int, net: GPT2LMHeadModel) -> Callable[[int, torch.optim.Optimizer], None]:
    def save(step: int, opt: torch.optim.Optimizer) -> None:
        save_checkpoint(run.cfg.checkpoint, phase, step, net, opt, run.gen,
                        run.minutes_before + (time.time() - run.t_start) / 60, run.notes)
        print(f"[phase{phase}] checkpoint at step {step} in {run.cfg.checkpoint}", flush=True)
    return save


def resume_into(run: Run, net: GPT2LMHeadModel, phase: int) -> tuple[int, dict | None]:
    """Load the checkpoint into ``net`` if it belongs to ``phase``: (first step, optimizer state)."""
    resumed = run.resumed
    if resumed is None or resumed["phase"] != phase:
        return 0, None
    from safetensors.torch import load_model

    load_model(net, resumed["model_file"])
    run.gen.set_state(resumed["rng_data"])
    torch.set_rng_state(resumed["rng_torch"])
    print(f"[phase{phase}] resumed at step {resumed['step']} (saved {resumed['saved']})", flush=True)
    return resumed["step"], resumed["optimizer"]


def copy_warmup(run: Run) -> None:
    """Phase 0 (``--copy-steps``): rows where only copying predicts anything, until induction heads form."""
    cfg, model = run.cfg, run.model
    if not (cfg.copy_steps and (run.resumed is None or run.resumed["phase"] == 0)):
        return
    start, opt_state = resume_into(run, model, 0)
    copies = copy_batches(run.pool0, cfg.copy_context + 1, cfg.batch * 4, run.gen)
    n_lm = round(cfg.batch * 4 * cfg.copy_lm_share)
    if n_lm:  # language rows beside the copy rows: the circuit forms without wrecking the language model
        remap = run.remap
        language = mixed_batches(remap[run.corpus.en_train], remap[run.corpus.zh_train], cfg.copy_context, n_lm,
                                 cfg.mix, run.gen)
        copies = with_language(copies, language)
    until = None if cfg.copy_until is None else (lambda: run.copying["second"] < cfg.copy_until)
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    rates = [m.p for m in dropouts]
    if cfg.copy_dropout is not None:
        for m in dropouts:
            m.p = cfg.copy_dropout
    run.notes["copy_steps_taken"] = train_loop(
        model, lambda _: copies, 0, cfg.lr, 30, "phase0", steps=cfg.copy_steps, start_step=start,
        report=lambda: copy_report(run), report_every=50 if until else 100, opt_state=opt_state,
        checkpoint=saver(run, 0, model), checkpoint_seconds=cfg.checkpoint_minutes * 60, constant=until is not None,
        until=until, wpe_lr=cfg.wpe_lr, guide=run.guide)
    for m, rate in zip(dropouts, rates, strict=True):  # phase 1 trains with the model's own dropout
        m.p = rate


def phase1(run: Run) -> int | None:
    """Phase 1: the output layer restricted to the ids the training data use; returns the steps taken."""
    cfg, model = run.cfg, run.model
    steps1 = cfg.steps[0] if cfg.steps else None
    if not (run.resumed is None or run.resumed["phase"] in (0, 1)):
        return steps1
    start, opt_state = resume_into(run, model, 1)
    if run.base is None:
        report = None
    elif cfg.copy_steps or cfg.copy_share:  # is there copying (formed by the warm-up, or forming)?
        def report() -> str:
            return f"{report1(run)}; {copy_report(run)}"
    else:
        def report() -> str:
            return report1(run)
    short, long = run.short, run.long

    def stream(progress: float):
        return short if progress < 1 - cfg.long_share else long
    return train_loop(model, stream, run.budget * (1 - cfg.full_vocab_fraction), cfg.lr1 or cfg.lr,
                      cfg.warmup or (100 if run.base is None else 10), "phase1", steps=steps1,
                      report=report, bf16=cfg.bf16, start_step=start, opt_state=opt_state,
                      checkpoint=saver(run, 1, model), checkpoint_seconds=cfg.checkpoint_minutes * 60,
                      wpe_lr=cfg.wpe_lr, guide=run.guide, copy_weight=cfg.copy_weight,
                      new_layers=run.grown, new_lr=cfg.new_lr)


def phase2(run: Run) -> tuple[GPT2LMHeadModel, int]:
    """Phase 2: the full GPT-2 vocabulary (the same for a warm start and a run from scratch); returns the model and
    the steps taken."""
    cfg, c, gen = run.cfg, run.corpus, run.gen
    if run.resumed is None or run.resumed["phase"] in (0, 1):
        with torch.no_grad():
            x = next(mixed_batches(run.remap[c.en_train], run.remap[c.zh_train], run.ctx, cfg.batch, cfg.mix,
                                   gen))[:, :-1]
        full = gpt2_parts.full_vocabulary(run.model, run.used, run.small, x, fit_unseen=run.base is not None)
        start, opt_state = 0, None
    else:
        full = gpt2_parts.new_model(EOT + 1, run.small).to(run.device)
        start, opt_state = resume_into(run, full, 2)
    sources2 = [c.en_train] * (cfg.mix < 1) + [c.zh_train] * (cfg.mix > 0)
    stream_full = repeats(run, mixed_batches(c.en_train, c.zh_train, run.ctx, cfg.batch, cfg.mix, gen), sources2,
                          frequent_pool(torch.cat(sources2), cfg.repeat_pool, EOT), EOT)
    print("phase 2: full vocabulary", flush=True)
    steps2 = train_loop(full, lambda _: stream_full, run.budget * cfg.full_vocab_fraction, cfg.lr / 3, 10, "phase2",
                        steps=cfg.steps[1] if cfg.steps else None, report=lambda: losses(run, full), bf16=cfg.bf16,
                        start_step=start, opt_state=opt_state, checkpoint=saver(run, 2, full),
                        checkpoint_seconds=cfg.checkpoint_minutes * 60, wpe_lr=cfg.wpe_lr,
                        guide=guide_for(cfg, full), copy_weight=cfg.copy_weight, new_layers=run.grown,
                        new_lr=cfg.new_lr)
    return full, steps2
