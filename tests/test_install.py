"""install.py: the torch build it picks for each kind of machine, its fallback, and that it skips a present torch.

The choice is tested on fake machines (this machine resolves torch from a local CPU wheel and cannot reach
download.pytorch.org); pip itself is replaced by a recorder, so nothing is installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("course_install", ROOT / "install.py")
install = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = install  # dataclasses look their module up there
_spec.loader.exec_module(install)
CPU = "https://download.pytorch.org/whl/cpu"


@pytest.mark.parametrize(("platform", "nvidia", "override", "build", "index"), [
    ("linux", False, None, "cpu", CPU),       # a laptop: the 200 MB CPU wheel, not the CUDA one
    ("win32", False, None, "cpu", CPU),
    ("linux", True, None, "cuda", None),      # a GPU box: PyPI's CUDA wheel
    ("win32", True, None, "cuda", None),
    ("darwin", False, None, "pypi", None),    # macOS: PyPI's wheel is CPU/MPS already
    ("darwin", False, "cpu", "pypi", None),   # ...and there is no CPU index wheel to prefer
    ("linux", True, "cpu", "cpu", CPU),       # the override wins over the detection
    ("linux", False, "cuda", "cuda", None),
])
def test_choice_per_machine(platform, nvidia, override, build, index):
    choice = install.choose(install.Machine(platform, nvidia, override))
    assert (choice.build, choice.index_url) == (build, index)


def test_bad_override_names_the_allowed_values():
    with pytest.raises(SystemExit, match="allowed are 'cpu' and 'cuda'"):
        install.choose(install.Machine("linux", False, "gpu"))


@pytest.mark.parametrize(("on_path", "proc", "expected"), [
    (None, False, False), ("/usr/bin/nvidia-smi", False, True), (None, True, True)])
def test_nvidia_detection(on_path, proc, expected):
    assert install.has_nvidia_gpu(which=lambda name: on_path, exists=lambda path: proc) is expected


class FakePip:
    """Stands in for subprocess.run: answers the torch probe, records pip commands, fails the ones asked to."""

    def __init__(self, torch_version: str | None, failing: tuple[str, ...] = ()):
        self.torch_version, self.failing, self.commands = torch_version, failing, []

    def __call__(self, cmd, **kwargs):
        if "-c" in cmd:
            ok = self.torch_version is not None
            return subprocess.CompletedProcess(cmd, 0 if ok else 1, stdout=(self.torch_version or "") + "\n")
        self.commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 1 if any(f in cmd for f in self.failing) else 0)


@pytest.fixture
def no_gpu_linux(monkeypatch):
    monkeypatch.setattr(install.sys, "platform", "linux")
    monkeypatch.setattr(install, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(install, "reachable", lambda url: True)  # no network in unit tests
    monkeypatch.delenv("INFERLAB_TORCH", raising=False)


def test_cpu_index_first_then_requirements(no_gpu_linux, capsys):
    pip = FakePip(torch_version=None)
    assert install.main([], run=pip) == 0
    assert pip.commands[0][-5:] == ["torch==2.13.0", "--index-url", CPU, "--retries", "1"]
    assert pip.commands[1][-2:] == ["-r", str(ROOT / "requirements.txt")] and len(pip.commands) == 2
    assert "cpu build (about 200 MB): no NVIDIA GPU found" in capsys.readouterr().out


def test_unreachable_cpu_index_falls_back_to_pypi(no_gpu_linux, capsys):
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main([], run=pip) == 0
    assert [c[-1] for c in pip.commands] == ["1", "torch==2.13.0", str(ROOT / "requirements.txt")]
    assert CPU in pip.commands[0]
    assert "trying plain PyPI" in capsys.readouterr().out


def test_an_index_that_does_not_answer_is_skipped_without_pips_retries(no_gpu_linux, capsys):
    pip = FakePip(torch_version=None)
    assert install.main([], run=pip, probe=lambda url: False) == 0
    assert [c[-1] for c in pip.commands] == ["torch==2.13.0", str(ROOT / "requirements.txt")]
    assert "download.pytorch.org did not answer within 3 s" in capsys.readouterr().out


def test_reachable_probes_the_indexs_host_and_port():
    seen = []

    class Conn:
        def close(self):
            seen.append("closed")

    def connect(address, timeout):
        seen.append((address, timeout))
        return Conn()

    assert install.reachable(CPU, connect=connect) and seen == [(("download.pytorch.org", 443), 3.0), "closed"]

    def refuse(address, timeout):
        raise OSError("Name or service not known")

    assert not install.reachable(CPU, connect=refuse)


def test_torch_that_cannot_be_installed_stops_before_the_rest(no_gpu_linux, capsys):
    pip = FakePip(torch_version=None, failing=("torch==2.13.0",))
    assert install.main([], run=pip) == 1
    assert all("-r" not in c for c in pip.commands)
    assert "torch could not be installed" in capsys.readouterr().err


def test_present_torch_is_kept(no_gpu_linux, capsys):
    pip = FakePip(torch_version="2.13.0+cu128")
    assert install.main(["--cpu"], run=pip) == 0
    assert len(pip.commands) == 1 and "-r" in pip.commands[0]
    assert "torch 2.13.0+cu128 is already installed" in capsys.readouterr().out


def test_other_torch_version_is_replaced(no_gpu_linux, monkeypatch):
    monkeypatch.setenv("INFERLAB_TORCH", "cuda")
    pip = FakePip(torch_version="2.4.1")
    assert install.main([], run=pip) == 0
    assert pip.commands[0][-1] == "torch==2.13.0"  # the env override: plain PyPI, no CPU index


def test_runs_with_the_standard_library_only():
    """It must run before anything is installed: a dry run in an isolated interpreter (-I, no site-packages)."""
    result = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "install.py"), "--dry-run"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "would run:" in result.stdout and "requirements.txt" in result.stdout
