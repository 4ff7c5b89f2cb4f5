"""The one-command GPU check: ``python -m inferlab.tools.gpu_check``.

On a CUDA GPU it
1. loads GPT-2's full shape with random weights (``random:gpt2``: the real bytes and FLOPs) in float16
   and float32;
2. times the engine (``inferlab.generate``), Hugging Face's ``generate()`` and the fast path (CUDA
   graphs on, and ``torch.compile`` where it compiles), interleaved, with ``tools.bench.bench_model``;
3. prints one table of median TTFT and TPOT against the GPU's floors: the floor from the bandwidth
   measured here and, for a GPU on the published list (``cost.PUBLISHED_MEMORY``), the
   floor from its vendor's specification;
4. executes every notebook of the course on the GPU (a copy of each: the stored notebooks are not
   touched), and prints each one's time or the cell that failed.

Without a GPU it says so and exits 0 (the check has nothing to check). Exit status 1 means a
notebook failed on the GPU.

    python -m inferlab.tools.gpu_check                  # everything (several minutes on an H100)
    python -m inferlab.tools.gpu_check --no-notebooks   # only the timing table
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from ..cost import Shape, decode_cost
from . import Parser
from .notebook_files import NotebookError, find_root, notebooks_in

DTYPES = ("float16", "float32")
VARIANTS = ("engine", "generate()", "fast", "fast+compile")


def published_bandwidth(gpu_name: str) -> tuple[str, float] | None:
    """(spec name, bytes/s) of the published entry whose name appears in ``gpu_name``, else None.

    >>> published_bandwidth("NVIDIA H200")[1] / 1e12
    4.8
    """
    from ..cost import PUBLISHED_MEMORY

    lowered = gpu_name.lower()
    for name, spec in PUBLISHED_MEMORY.items():
        if spec.match and all(part.lower() in lowered for part in spec.match):
            return name, spec.bytes_per_s
    return None


def floor_table(results: list[dict], published: tuple[str, float] | None = None) -> str:
    """One text table: each model x variant's median TTFT and TPOT, and TPOT against the floors.

    Args:
        results: ``tools.bench.bench_model`` results (``apply_floors`` done: they hold ``tpot_floor_s``).
        published: ``(spec name, bytes/s)`` of this GPU's published memory bandwidth, or None.
            Its floor is (weights + KV cache) bytes of a mid-answer step / published bandwidth.
    """
    head = f"{'model':<24}{'variant':<15}{'TTFT ms':>9}{'TPOT us':>9}{'x measured floor':>18}"
    head += f"{'x spec floor':>14}" if published else ""
    lines = [head, "-" * len(head)]
    for r in results:
        label = f"{r['model']} {r['dtype'].removeprefix('torch.')}"[:23]
        shape = Shape(r["model"], *r["shape"])
        step_bytes = decode_cost(shape, r["prompt_tokens"] + r["new_tokens"] // 2).bytes
        spec_floor = step_bytes / published[1] if published else None
        floor_row = f"{label:<24}{'(floor)':<15}{'':>9}{r['tpot_floor_s'] * 1e6:>9.1f}{1:>18.2f}"
        lines.append(floor_row + (f"{spec_floor * 1e6:>14.1f}" if published else ""))
        for k, v in r["variants"].items():
            row = f"{label:<24}{k:<15}{v['ttft_s'] * 1e3:>9.2f}{v['tpot_s'] * 1e6:>9.1f}{v['tpot_x_floor']:>18.2f}"
            lines.append(row + (f"{v['tpot_s'] / spec_floor:>14.2f}" if published else ""))
        for k, why in r.get("skipped", {}).items():
            lines.append(f"  {k} left out: {why}")
    lines.append("")
    lines.append("measured floor: a decode step's bytes (weights + KV cache) / the copy bandwidth measured here;")
    if published:
        lines.append(f"spec floor: the same bytes / {published[1] / 1e12:.2f} TB/s, the published bandwidth of "
                     f"the {published[0]} (its floor row shows that floor in us)")
    return "\n".join(lines)


def time_gpt2(repeats: int, new_tokens: int, log=print) -> list[dict]:
    """``bench_model`` on ``random:gpt2`` in each of ``DTYPES`` on CUDA (the engine, ``generate()``, fast paths)."""
    import torch

    from ..measure.machine import measure_machine
    from ..models import load
    from .bench import bench_model

    results = []
    for dtype in DTYPES:
        model = load("random:gpt2", device="cuda", dtype=dtype, verbose=False)
        machine = measure_machine("cuda", model.info.dtype)
        log(f"{dtype}: {machine!r}")
        results.append(bench_model(model, prompt_tokens=64, new_tokens=new_tokens, repeats=repeats,
                                   variants=VARIANTS, machine=machine, log=log))
        del model
        torch.cuda.empty_cache()
    return results


def run_notebooks(root: Path, timeout: int, log=print) -> list[str]:
    """Execute a copy of every notebook under ``root`` (the device is ``il.load()``'s "auto": the GPU).

    Returns one line per failed notebook (empty when all ran).
    """
    from .notebook_run import execute

    failures = []
    with tempfile.TemporaryDirectory(prefix="inferlab-gpu-check-") as tmp:
        for path in notebooks_in(root):
            copy = Path(tmp) / path.name
            shutil.copy(path, copy)
            try:
                log(f"{path.name}: ran in {execute(copy, timeout):.1f} s on the GPU")
            except NotebookError as exc:
                failures.append(str(exc).replace(str(copy), path.name))
                log(failures[-1])
    return failures


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m inferlab.tools.gpu_check", description=__doc__.split("\n\n")[0],
                                epilog="Without a CUDA GPU it prints that there is none and exits 0.")
    p.add_argument("--no-notebooks", action="store_true", help="only time GPT-2's shape; do not run the notebooks")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per variant (default: 5)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens per answer (default: 32)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per notebook cell (default: 900)")
    p.add_argument("--root", type=Path, default=None, help="the course folder (default: the one you are in)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the check; returns the exit status (0: fine or no GPU; 1: a notebook failed)."""
    args = parser().parse_args(argv)
    import torch  # after the arguments: --help answers without it

    if not torch.cuda.is_available():
        print("No CUDA GPU on this machine (torch.cuda.is_available() is False): nothing to check. "
              "Run this on a machine with an NVIDIA GPU and a CUDA build of PyTorch.")
        return 0
    gpu = torch.cuda.get_device_name(0)
    print(f"GPU: {gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    published = published_bandwidth(gpu)
    print(f"published memory bandwidth: {published[1] / 1e9:.0f} GB/s ({published[0]})" if published
          else "this GPU is not on the published list: only the measured floor is shown")
    print(floor_table(time_gpt2(args.repeats, args.new_tokens), published))
    if args.no_notebooks:
        return 0
    failures = run_notebooks(find_root(args.root), args.timeout)
    print(f"notebooks: {'all ran' if not failures else f'{len(failures)} failed'} on the GPU")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
