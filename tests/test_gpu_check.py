"""``python -m inferlab.tools.gpu_check``: --help and the no-GPU path as a learner runs them, the table on fake numbers.

The GPU path itself (timing and notebooks on CUDA) needs a GPU; it reuses ``tools.bench.bench_model``
and ``tools.notebook_run.execute``, which have their own tests.
"""

from __future__ import annotations

import os
import subprocess
import sys

from inferlab import cost
from inferlab.cost import Shape
from inferlab.tools import gpu_check, notebook_files, notebook_run


def run_command(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU, even on a machine that has one
    return subprocess.run([sys.executable, "-m", "inferlab.tools.gpu_check", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_help_works_anywhere():
    done = run_command("--help")
    assert done.returncode == 0
    assert "--no-notebooks" in done.stdout and "Without a CUDA GPU" in done.stdout


def test_without_a_gpu_it_says_so_and_exits_0():
    done = run_command()
    assert done.returncode == 0, done.stderr
    assert "No CUDA GPU on this machine" in done.stdout
    assert "Traceback" not in done.stderr


def test_published_bandwidth_matches_device_names():
    assert gpu_check.published_bandwidth("NVIDIA H200") == ("NVIDIA H200", 4800e9)
    assert gpu_check.published_bandwidth("NVIDIA A100-SXM4-80GB")[1] == 2039e9
    assert gpu_check.published_bandwidth("NVIDIA A100-PCIE-40GB")[1] == 1555e9
    assert gpu_check.published_bandwidth("NVIDIA GeForce RTX 4090") is None  # not on the list: no spec floor


def fake_result() -> dict:
    # GPT-2 small in fp16, 64 prompt + 32 new tokens: the mid-answer step has 64 + 16 = 80 tokens cached.
    # By hand: a block has 768*768*2 (Q, out) + 2*768*768 (K, V) + 2*768*3072 (MLP) = 7,077,888 weights;
    # 12 blocks = 84,934,656, + the tied embedding 50257*768 = 38,597,376 -> 123,532,032 weights = 247,064,064 B.
    # KV per token 2*12*12*64*2 = 36,864 B, for 81 positions = 2,985,984 B. Step: 250,050,048 B.
    # On an H200 (4.8e12 B/s): 52.094 us. A TPOT of 2 x that = 104.1875 us is "2.00x the spec floor".
    return {"model": "gpt2", "dtype": "torch.float16", "shape": [12, 12, 768, 50257, 1024, 2],
            "prompt_tokens": 64, "new_tokens": 32, "tpot_floor_s": 80e-6,
            "variants": {"fast": {"ttft_s": 2e-3, "tpot_s": 104.1875e-6, "tpot_x_floor": 104.1875 / 80}},
            "skipped": {"fast+compile": "torch.compile failed: no compiler"}}


def test_floor_table_on_fake_numbers():
    text = gpu_check.floor_table([fake_result()], ("NVIDIA H200", 4800e9))
    floor_row, fast_row = text.splitlines()[2:4]
    assert floor_row.split()[-3:] == ["80.0", "1.00", "52.1"]  # microseconds: measured floor 80, spec floor 52.094
    assert fast_row.split()[-4:] == ["2.00", "104.2", "1.30", "2.00"]  # TTFT ms, TPOT us, x measured, x spec
    assert "fast+compile left out: torch.compile failed" in text
    assert "4.80 TB/s, the published bandwidth of the NVIDIA H200" in text


def test_floor_table_without_a_published_spec():
    text = gpu_check.floor_table([fake_result()])
    assert "x spec floor" not in text and "published bandwidth" not in text
    assert text.splitlines()[3].split()[-2:] == ["104.2", "1.30"]


def test_run_notebooks_reports_each_failure_and_never_touches_the_originals(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    for name in ("00_a.ipynb", "01_b.ipynb"):
        (tmp_path / "notebooks" / name).write_text("{}")
    ran = []

    def fake_execute(path, timeout):
        ran.append(path)
        if path.name == "01_b.ipynb":
            raise notebook_files.NotebookError(f"{path}: not saved, cell 3 raised ValueError")
        path.write_text("executed")
        return 1.5

    monkeypatch.setattr(notebook_run, "execute", fake_execute)
    lines = []
    failures = gpu_check.run_notebooks(tmp_path, 60, log=lines.append)
    assert [p.name for p in ran] == ["00_a.ipynb", "01_b.ipynb"]
    assert all(p.parent != tmp_path / "notebooks" for p in ran)  # copies were executed
    assert failures == ["01_b.ipynb: not saved, cell 3 raised ValueError"]
    assert lines[0] == "00_a.ipynb: ran in 1.5 s on the GPU"
    assert (tmp_path / "notebooks" / "00_a.ipynb").read_text() == "{}"


def test_hardware_floors_by_hand():
    # 7B-class model in fp16 (Mistral-7B's published shape): weights + 257 cached positions per step.
    shapes = {"mistral": Shape("m", 32, 32, 4096, 32000, 32768, bytes_per_element=2, n_kv_head=8,
                                       d_ff=14336, tied_head=False)}
    rows = cost.hardware_floors(shapes, context=256)
    by_name = {r.spec.name: r for r in rows}
    # by hand: block = 4096*4096*2 + 2*4096*1024 + 3*4096*14336 = 33,554,432 + 8,388,608 + 176,160,768
    # = 218,103,808; x32 = 6,979,321,856; + 2 x 32000*4096 = 262,144,000 -> 7,241,465,856 weights = 14,482,931,712 B;
    # KV: 2*32*8*128*2 = 131,072 B per token x 257 = 33,685,504 B. Step: 14,516,617,216 B.
    assert by_name["NVIDIA H200"].step_bytes["mistral"] == 14_516_617_216
    assert round(by_name["NVIDIA H200"].floors["mistral"] * 1e3, 3) == 3.024  # ms, at 4.8 TB/s
    assert round(by_name["Apple M2"].floors["mistral"] * 1e3, 1) == 145.2  # ms, at 100 GB/s
    assert [r.spec.bytes_per_s for r in rows] == sorted(r.spec.bytes_per_s for r in rows)  # slowest first
