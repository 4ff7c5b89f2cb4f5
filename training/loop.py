"""The training loop and what it needs around it: ``train_loop`` (AdamW, warm-up, cosine schedule, optional head
guide and copy-row weighting, checkpoints on the way), resumable checkpoints in safetensors and JSON
(``save_checkpoint``, ``load_checkpoint``), and the held-out loss the runs report (``heldout_loss``).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import GPT2LMHeadModel

from . import gpt2_parts
from .guide import HeadGuide


@torch.no_grad()
def heldout_loss(model: GPT2LMHeadModel, data: torch.Tensor, block: int, windows: int | None = None) -> float:
    """Mean next-token loss (nats/token) over the held-out stream, in non-overlapping windows.

    With ``windows``, only that many windows spread evenly over the stream (a quick estimate).
    """
    model.eval()
    starts = list(range(0, len(data) - 1, block))
    if windows is not None and windows < len(starts):
        starts = [starts[i * len(starts) // windows] for i in range(windows)]
    total, count, device = 0.0, 0, next(model.parameters()).device
    for s in starts:
        chunk = data[s : s + block + 1].unsqueeze(0).to(device)
        if chunk.shape[1] < 2:
            break
        logits = model(input_ids=chunk[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[0], chunk[0, 1:], reduction="sum")
        total += loss.item()
        count += chunk.shape[1] - 1
    model.train()
    return total / count


def save_checkpoint(folder: Path, phase: int, step: int, model, opt, gen: torch.Generator,
                    minutes: float = 0.0, notes: dict | None = None) -> None:
    """Everything a resumed run needs, as safetensors and JSON (never a pickle): the model, AdamW's moments,
    the step, and both random states (the data draws and dropout). Written to a temporary name, then moved."""
    from safetensors.torch import save_file, save_model

    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    opt_sd = opt.state_dict()
    tensors = {f"state.{i}.{k}": v.contiguous() for i, st in opt_sd["state"].items() for k, v in st.items()}
    tensors["rng.data"] = gen.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    save_file(tensors, str(tmp / "optimizer.safetensors"))
    meta = {"phase": phase, "step": step, "param_groups": opt_sd["param_groups"],
            "vocab_size": gpt2_parts.vocab_size(model), "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
            "minutes": round(minutes, 2),  # wall time of the run so far, across resumes
            "notes": notes or {}}  # what the run learnt on the way that the model card reports
    (tmp / "state.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def load_checkpoint(folder: Path) -> dict | None:
    """``save_checkpoint``'s folder as ``{"phase", "step", "optimizer" (a state dict), "model_file", rng...}``."""
    from safetensors.torch import load_file

    if not (folder / "state.json").is_file():
        return None
    meta = json.loads((folder / "state.json").read_text())
    tensors = load_file(str(folder / "optimizer.safetensors"))
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, i, name = key.split(".", 2)
            state.setdefault(int(i), {})[name] = value
    meta["optimizer"] = {"state": state, "param_groups": meta.pop("param_groups")}
    meta["rng_data"], meta["rng_torch"] = tensors["rng.data"], tensors["rng.torch"]
    meta["model_file"] = str(folder / "model.safetensors")
    return meta


def train_loop(model, stream_at, seconds: float, lr: float, warmup: int, label: str,
               steps: int | None = None, report: Callable[[], str] | None = None, report_every: int = 100,
               bf16: bool = False, start_step: int = 0, opt_state: dict | None = None,
               checkpoint: Callable[[int, torch.optim.Optimizer], None] | None = None,
               checkpoint_seconds: float = 300.0, constant: bool = False,
               until: Callable[[], bool] | None = None, wpe_lr: float = 1.0,
               guide: HeadGuide | None = None, copy_weight: float = 1.0, new_layers: int = 0,
               new_lr: float = 1.0) -> int:
    """AdamW, linear warm-up, cosine decay over a wall-clock budget; returns the steps taken.

    The schedule follows elapsed time rather than a step count, so the run ends on budget on any
    machine (a faster machine simply takes more steps). ``stream_at(progress)`` gives the batch
    stream to use at that point of the run (0..1), so the window length can change on the way.
    With ``steps`` the schedule follows the step count instead (same result on a busy machine, later).
    ``report()`` (the held-out losses, say) is printed every ``report_every`` steps and at the end.
    ``bf16`` runs the forward pass under bfloat16 autocast (on a GPU; on a CPU only fast with native bfloat16).
    Batches come from the stream on the CPU and move to the model's device (``--device``).
    ``checkpoint(step, opt)`` is called every ``checkpoint_seconds``; a resumed run passes the step and the
    optimizer state it saved (``start_step``, ``opt_state``; with ``steps`` the schedule carries on exactly).
    A stream yields ``x`` ``[batch, tokens + 1]`` (targets: the next ids) or ``(x, targets)`` (-100: no loss; the
    output layer, most of a step's cost, then runs only where a target is kept).
    ``constant`` keeps the rate at ``lr`` after the warm-up; ``until()``, asked after each report, ends the loop
    early when it returns True (the copy warm-up stops once copying has formed, not on a step count).
    ``wpe_lr`` != 1: the position embeddings learn at that multiple of the rate, without weight decay (a third
    parameter group; an optimizer state saved with two groups then starts afresh).
    ``guide`` (a ``HeadGuide`` on ``model``) adds its attention loss to each step's loss. ``copy_weight``: each
    kept target of a row with masked targets (a copy row's second copy) counts that many times in the mean.
    ``new_layers`` > 0 with ``new_lr`` != 1: the last ``new_layers`` blocks (appended by ``--grow-layers``) learn at
    that multiple of the rate (two more parameter groups, with and without weight decay).
    """
    own = (lambda n: n.endswith("wpe.weight")) if wpe_lr != 1 else (lambda n: False)
    grown = gpt2_parts.block_prefixes(model, new_layers) if new_lr != 1 else set()

    def is_new(n: str) -> bool:
        return any(n.startswith(prefix) for prefix in grown)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not own(n) and not is_new(n)]
    other = [p for n, p in model.named_parameters() if p.dim() < 2 and not is_new(n)]
    groups = [{"params": decay, "weight_decay": 0.1, "scale": 1.0},
              {"params": other, "weight_decay": 0.0, "scale": 1.0}]
    groups += [{"params": [p for n, p in model.named_parameters() if own(n)], "weight_decay": 0.0, "scale": wpe_lr}
               ] if wpe_lr != 1 else []
    groups += [{"params": [p for n, p in model.named_parameters() if is_new(n) and p.dim() >= 2],
                "weight_decay": 0.1, "scale": new_lr},
               {"params": [p for n, p in model.named_parameters() if is_new(n) and p.dim() < 2],
                "weight_decay": 0.0, "scale": new_lr}] if grown else []
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    if opt_state is not None and len(opt_state["param_groups"]) == len(groups):
        opt.load_state_dict(opt_state)
    elif opt_state is not None:
        print(f"[{label}] the saved optimizer state has {len(opt_state['param_groups'])} parameter groups, this run "
              f"{len(groups)} (--wpe-lr, --new-lr): AdamW's moments start afresh", flush=True)
    t0 = last_save = time.time()
    step, reported = start_step, None
    device = next(model.parameters()).device
    def progress_now() -> float:
        return step / steps if steps else (time.time() - t0) / seconds

    while (progress := progress_now()) < 1.0:
        if report is not None and step % report_every == 0:
            print(f"[{label}] step {step:5d} held-out {report()} ({time.time() - t0:.0f}s)", flush=True)
            reported = step
            if until is not None and until():
                print(f"[{label}] stopping at step {step}: its goal is reached", flush=True)
                break
        cosine = 1.0 if constant else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
        scale = min(1.0, (step + 1) / warmup) * cosine
        for group in opt.param_groups:
            group["lr"] = lr * scale * group.get("scale", 1.0)
        x = next(stream_at(progress))
        x = tuple(t.to(device) for t in x) if isinstance(x, tuple) else x.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            if isinstance(x, tuple):  # (rows, targets): the output layer runs only where a target is kept
                x, targets = x
                keep = targets != -100
                hidden = gpt2_parts.final_hidden(model, x[:, :-1])
                copy_rows = (~keep).any(1, keepdim=True).expand_as(keep)[keep]
                logits, targets = gpt2_parts.output_logits(model, hidden[keep]), targets[keep]
            else:
                logits, targets = model(input_ids=x[:, :-1]).logits.flatten(0, 1), x[:, 1:].flatten()
                copy_rows = None
        if copy_rows is None or copy_weight == 1:
            loss = torch.nn.functional.cross_entropy(logits.float(), targets)
        else:
            each = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
            weights = torch.where(copy_rows, copy_weight, 1.0)
            loss = (each * weights).sum() / weights.sum()
        guided = guide.losses(x[:, :-1]) if guide is not None else None
        total = loss if guided is None else loss + guide.weight * sum(guided)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 25 == 0:
            heads = "" if guided is None else (f" (guide: previous {guided[0].item():.2f}, "
                                               f"induction {guided[1].item():.2f}"
                                               + (f", copy {guided[2].item():.2f})" if len(guided) > 2 else ")"))
            print(f"[{label}] step {step:5d} loss {loss.item():.3f}{heads} ({time.time() - t0:.0f}s)", flush=True)
        step += 1
        if checkpoint is not None and time.time() - last_save > checkpoint_seconds:
            checkpoint(step, opt)
            last_save = time.time()
    if report is not None and reported != step:
        print(f"[{label}] step {step:5d} held-out {report()} ({time.time() - t0:.0f}s)", flush=True)
    print(f"[{label}] done: {step} steps in {time.time() - t0:.0f}s", flush=True)
    return step
