"""install.py: the torch build it picks for each kind of machine, its fallback, and that it skips a present torch.

The choice is tested on fake machines (this machine resolves torch from a local CPU wheel and cannot reach
download.pytorch.org); pip itself is replaced by a recorder, so nothing is installed.
"""

from __future__ import annotations

import importlib.util
import re
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
LOCAL_TORCH_WHEELS = install.local_torch_wheels  # the real one (the fixture below stubs it)


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

    def __init__(self, torch_version: str | None, failing: tuple[str, ...] = (), cuda: str | None = None):
        self.torch_version, self.failing, self.commands = torch_version, failing, []
        self.cuda = cuda or ("12.8" if torch_version and "+cu" in torch_version else None)

    def __call__(self, cmd, **kwargs):
        if "-c" in cmd:  # the probe prints torch.__version__ and torch.version.cuda
            ok = self.torch_version is not None
            out = f"{self.torch_version} {self.cuda or '-'}\n" if ok else ""
            return subprocess.CompletedProcess(cmd, 0 if ok else 1, stdout=out)
        self.commands.append(cmd)
        self.cwd = kwargs.get("cwd")
        return subprocess.CompletedProcess(cmd, 1 if any(f in cmd for f in self.failing) else 0)


@pytest.fixture(autouse=True)
def scratch_prefix(monkeypatch, tmp_path):
    """main() writes Jupyter's settings into this scratch prefix, not into the .venv running the tests."""
    monkeypatch.setattr(install, "PREFIX", tmp_path / "venv")
    return tmp_path / "venv"


@pytest.fixture
def no_gpu_linux(monkeypatch):
    monkeypatch.setattr(install.sys, "platform", "linux")
    monkeypatch.setattr(install, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(install, "reachable", lambda url: True)  # no network in unit tests
    monkeypatch.setattr(install, "local_torch_wheels", lambda folders=None: [])  # no torch wheel on this disk
    monkeypatch.delenv("INFERLAB_TORCH", raising=False)


def test_cpu_index_first_then_requirements(no_gpu_linux, capsys):
    pip = FakePip(torch_version=None)
    assert install.main([], run=pip) == 0
    assert pip.commands[0][-5:] == ["torch==2.13.0+cpu", "--index-url", CPU, "--retries", "1"]
    assert pip.commands[1][-2:] == ["-r", str(ROOT / "requirements.txt")] and len(pip.commands) == 2
    assert "cpu build (about 200 MB): no NVIDIA GPU found" in capsys.readouterr().out


def test_dev_installs_the_suites_requirements_in_the_same_one_pip_run(no_gpu_linux):
    """``tests/run.sh`` runs ``install.py --dev``: requirements-dev.txt (the course's file and the training extra)."""
    pip = FakePip(torch_version="2.13.0+cpu")
    assert install.main(["--dev"], run=pip) == 0
    assert pip.commands == [[sys.executable, "-m", "pip", "install", "-r", str(ROOT / "requirements-dev.txt")]]


def test_no_compile_reaches_every_pip_install_and_no_uninstall(no_gpu_linux):
    pip = FakePip(torch_version="2.13.0+cpu")  # a CPU build replaced by the CUDA one: uninstall, torch, requirements
    assert install.main(["--cuda", "-q", "--no-compile"], run=pip) == 0
    uninstall, *installs = pip.commands
    assert "--no-compile" not in uninstall and len(installs) == 2
    assert all("--no-compile" in cmd for cmd in installs)
    plain = FakePip(torch_version=None)
    assert install.main([], run=plain) == 0 and not any("--no-compile" in cmd for cmd in plain.commands)


def test_failing_cpu_index_asks_before_pypis_cuda_build(no_gpu_linux, capsys):
    asked = []
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main([], run=pip, ask=lambda q: asked.append(q) or "n") == 1  # "no": nothing more is installed
    assert len(asked) == 1 and "CUDA build" in asked[0] and "[y/N]" in asked[0]
    assert len(pip.commands) == 1 and CPU in pip.commands[0]
    assert "--pypi-fallback" in capsys.readouterr().err
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main([], run=pip, ask=lambda q: "y") == 0
    assert [c[-1] for c in pip.commands] == ["1", "torch==2.13.0", str(ROOT / "requirements.txt")]


def test_a_torch_wheel_on_disk_is_no_big_download(no_gpu_linux, tmp_path, monkeypatch):
    """pip's --find-links folder holds torch 2.13.0 (a CI image, a workshop's USB stick): the fallback downloads
    nothing, so it runs without asking, even with nobody to ask."""
    wheel = tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    (tmp_path / "torch-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert LOCAL_TORCH_WHEELS([f"file://{tmp_path}"]) == [wheel]
    assert LOCAL_TORCH_WHEELS([str(tmp_path / "missing")]) == []
    monkeypatch.setattr(install, "local_torch_wheels", lambda folders=None: [tmp_path / "torch-2.13.0-x.whl"])
    monkeypatch.setattr(install.sys, "stdin", None)
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main([], run=pip) == 0
    assert [c[-1] for c in pip.commands] == ["1", "torch==2.13.0", str(ROOT / "requirements.txt")]


def test_without_a_terminal_the_big_fallback_needs_the_flag(no_gpu_linux, capsys, monkeypatch):
    monkeypatch.setattr(install.sys, "stdin", None)  # nobody to ask (CI, a pipe)
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main([], run=pip) == 1 and len(pip.commands) == 1
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main(["--pypi-fallback"], run=pip) == 0
    assert [c[-1] for c in pip.commands] == ["1", "torch==2.13.0", str(ROOT / "requirements.txt")]
    assert "plain PyPI is next (on Linux that is the CUDA build" in capsys.readouterr().out


def test_windows_falls_back_to_pypis_cpu_wheel_without_asking(no_gpu_linux, monkeypatch):
    monkeypatch.setattr(install.sys, "platform", "win32")
    pip = FakePip(torch_version=None, failing=(CPU,))
    assert install.main([], run=pip, ask=lambda q: pytest.fail("asked on Windows")) == 0
    assert pip.commands[1][-1] == "torch==2.13.0"


def test_an_index_that_does_not_answer_is_skipped_without_pips_retries(no_gpu_linux, capsys):
    pip = FakePip(torch_version=None)
    assert install.main([], run=pip, probe=lambda url: False, ask=lambda q: "y") == 0
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
    pip = FakePip(torch_version=None, failing=("torch==2.13.0+cpu", "torch==2.13.0"))
    assert install.main([], run=pip, ask=lambda q: "y") == 1
    assert all("-r" not in c for c in pip.commands)
    assert "torch could not be installed" in capsys.readouterr().err


@pytest.mark.parametrize(("version", "cuda", "argv", "gpu"), [
    ("2.13.0+cpu", None, [], False), ("2.13.0+cpu", None, ["--cpu"], True), ("2.13.0", "12.8", [], True),
    ("2.13.0+cu128", None, ["--cuda"], False),
    ("2.13.0+cpu", None, [], True),  # a CPU build on a GPU machine stays unless --cuda says otherwise
])
def test_present_torch_of_the_chosen_build_is_kept(no_gpu_linux, monkeypatch, capsys, version, cuda, argv, gpu):
    monkeypatch.setattr(install, "has_nvidia_gpu", lambda: gpu)
    pip = FakePip(torch_version=version, cuda=cuda)
    assert install.main(argv, run=pip) == 0
    assert len(pip.commands) == 1 and "-r" in pip.commands[0]
    assert "keeping it" in capsys.readouterr().out


@pytest.mark.parametrize(("version", "argv"), [("2.13.0", []), ("2.13.0+cu128", ["--cpu"]), ("2.13.0", ["--cpu"])])
def test_cpu_choice_replaces_a_cuda_build(no_gpu_linux, capsys, version, argv):
    """PyPI's Linux wheel (``2.13.0``, CUDA inside) left by a fallback, or any CUDA build under --cpu: replaced."""
    pip = FakePip(torch_version=version, cuda="12.8")
    assert install.main(argv, run=pip) == 0
    assert pip.commands[0][-5:] == ["torch==2.13.0+cpu", "--index-url", CPU, "--retries", "1"]
    assert "replacing it with the CPU build" in capsys.readouterr().out


def test_cuda_flag_replaces_a_cpu_build(no_gpu_linux, capsys):
    pip = FakePip(torch_version="2.13.0+cpu")
    assert install.main(["--cuda"], run=pip) == 0
    assert "replacing it with the CUDA build" in capsys.readouterr().out
    assert pip.commands[0][-3:] == ["uninstall", "-y", "torch"]  # else "torch==2.13.0" is satisfied by +cpu
    assert pip.commands[1][-1] == "torch==2.13.0" and "--index-url" not in pip.commands[1]


def test_dry_run_shows_the_replacement_and_the_asked_fallback(no_gpu_linux, capsys):
    pip = FakePip(torch_version="2.13.0", cuda="12.8")
    assert install.main(["--cpu", "--dry-run"], run=pip, ask=lambda q: pytest.fail("a dry run asks nothing")) == 0
    out = capsys.readouterr().out
    assert "replacing it with the CPU build" in out and "torch==2.13.0+cpu --index-url" in out
    assert "asks first: PyPI's CUDA build" in out and pip.commands == []


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


def test_requirements_install_from_the_course_folder_wherever_it_is_started(no_gpu_linux, monkeypatch, tmp_path):
    """``-e .`` in requirements.txt is relative to the working folder: a JupyterHub admin runs it from elsewhere."""
    monkeypatch.chdir(tmp_path)
    pip = FakePip(torch_version="2.13.0+cpu")
    assert install.main([], run=pip) == 0
    assert pip.commands[-1][-2:] == ["-r", str(ROOT / "requirements.txt")] and pip.cwd == ROOT


def test_workshop_guide_installs_through_install_py():
    """The JupyterHub step must pick the server's torch build (install.py), not PyPI's CUDA one via plain pip."""
    guide = (ROOT / "docs" / "WORKSHOP.md").read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", guide, re.S))
    assert "pip install -r" not in blocks
    assert re.search(r"/opt/tljh/user/bin/python \S*install\.py", blocks)


# ------------------------------------------------------------------------------------------- Jupyter's settings
# Issue 50: a learner's own notebook, reopened, showed "Error displaying widget: model not found" where its views were
# (JupyterLab saves no widget state by default), and kernels piled up (one per notebook opened from a link).
# test_browser_lab.py starts its JupyterLab with these files and reopens a notebook that ran.
VIEW, STATE = "application/vnd.jupyter.widget-view+json", "application/vnd.jupyter.widget-state+json"


def _server_config(path: Path):
    """What the written jupyter_server_config.py sets, read the way Jupyter reads it (traitlets' loader)."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader(path.name, str(path.parent)).load_config()


def test_install_writes_jupyters_settings_after_the_requirements(no_gpu_linux, scratch_prefix):
    import json

    assert install.main([], run=FakePip(torch_version="2.13.0+cpu")) == 0
    lab = scratch_prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "inferlab.json"
    assert json.loads(lab.read_text())["@jupyterlab/notebook-extension:tracker"] == {"kernelShutdown": True}
    config = _server_config(scratch_prefix / "etc" / "jupyter" / "jupyter_server_config.py")
    culling = config.MappingKernelManager
    assert culling.cull_idle_timeout == 3600 and culling.cull_connected is True and culling.cull_interval == 300
    assert config.FileContentsManager.pre_save_hook.__name__ == "keep_views_readable"
    assert install.main([], run=FakePip(torch_version="2.13.0+cpu")) == 0  # a rerun writes its own files anew


def test_no_settings_when_pip_fails_or_on_a_dry_run(no_gpu_linux, scratch_prefix, capsys):
    assert install.main([], run=FakePip(torch_version="2.13.0+cpu", failing=("-r",))) == 1
    assert not scratch_prefix.exists()
    assert install.main(["--dry-run"], run=FakePip(torch_version="2.13.0+cpu")) == 0
    assert not scratch_prefix.exists() and "would write: " + str(scratch_prefix / "etc") in capsys.readouterr().out


def test_settings_that_cannot_be_written_are_one_line_not_a_failure(no_gpu_linux, scratch_prefix, capsys):
    scratch_prefix.parent.mkdir(exist_ok=True)
    scratch_prefix.write_text("a file where the prefix's folders would go")
    assert install.main([], run=FakePip(torch_version="2.13.0+cpu")) == 0  # the course is installed all the same
    assert "could not write" in capsys.readouterr().err


def test_a_server_config_of_the_learners_own_is_left_alone(no_gpu_linux, scratch_prefix, capsys):
    mine = scratch_prefix / "etc" / "jupyter" / "jupyter_server_config.py"
    mine.parent.mkdir(parents=True)
    mine.write_text("c.ServerApp.port = 9999\n")
    assert install.main([], run=FakePip(torch_version="2.13.0+cpu")) == 0
    assert mine.read_text() == "c.ServerApp.port = 9999\n" and "of your own" in capsys.readouterr().err


def test_settings_go_where_this_jupyter_reads_them_under_names_it_knows(tmp_path, monkeypatch):
    """The files land in the folders the installed JupyterLab and Jupyter Server read for this Python, they read them
    (a config in the server's ``.d`` folder, for one, is read for extension switches only), and each setting is one
    the installed versions define: a renamed setting would be ignored without a word."""
    import json

    from jupyter_core.paths import jupyter_config_path, jupyter_path
    from jupyter_server.serverapp import ServerApp
    from jupyterlab.labapp import LabApp
    from jupyterlab_server.settings_utils import _get_overrides

    lab, server = install.jupyter_settings(Path(sys.prefix))
    assert lab.parent.parent == Path(LabApp().app_settings_dir)
    assert str(server.parent) in jupyter_config_path()
    assert install.write_jupyter_settings(tmp_path)
    lab, server = install.jupyter_settings(tmp_path)
    assert _get_overrides(str(lab.parent.parent)) == (install.LAB_SETTINGS, "")
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(server.parent))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "user"))
    app = ServerApp()
    app.load_config_file()
    assert app.config.MappingKernelManager.cull_idle_timeout == install.IDLE_HOUR
    assert callable(app.config.FileContentsManager.pre_save_hook)
    for plugin, settings in install.LAB_SETTINGS.items():
        package, name = plugin.split(":")
        schemas = [Path(d) / "lab" / "schemas" / package / f"{name}.json" for d in jupyter_path()]
        schemas += [Path(d) / "labextensions" / package / "schemas" / package / f"{name}.json" for d in jupyter_path()]
        schema = next((json.loads(f.read_text()) for f in schemas if f.is_file()), None)
        assert schema is not None, f"no installed JupyterLab plugin {plugin}"
        for key, value in settings.items():
            assert schema["properties"][key]["type"] == "boolean" and isinstance(value, bool), (plugin, key)
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

    for key in install.SERVER_SETTINGS["MappingKernelManager"]:
        assert MappingKernelManager.class_traits().get(key) is not None, key
    assert FileContentsManager.class_traits().get("pre_save_hook") is not None


def _view(model_id: str, *fallbacks: str) -> dict:
    data = {VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id}}
    return {"output_type": "display_data", "metadata": {}, "data": {**data, **dict.fromkeys(fallbacks, "as text")}}


def test_the_pre_save_hook_saves_a_view_without_its_state_as_its_text():
    outputs = [_view("stored", "text/html"), _view("run", "text/html", "text/plain"), _view("bare"),
               {"output_type": "stream", "text": "hi"}]
    widgets = {STATE: {"state": {"stored": {}}}}  # the state saved with the notebook: of the view "stored" only
    nb = {"cells": [{"cell_type": "code", "outputs": outputs}], "metadata": {"widgets": widgets}}
    install.keep_views_readable(model={"type": "notebook", "content": nb}, path="x.ipynb", contents_manager=None)
    stored, run, bare, stream = nb["cells"][0]["outputs"]
    assert VIEW in stored["data"]  # its state is saved: JupyterLab draws it from there
    assert set(run["data"]) == {"text/html", "text/plain"}  # a view of this run: its text, not "model not found"
    assert VIEW in bare["data"] and stream == {"output_type": "stream", "text": "hi"}  # nothing else to show: as it was
    other = {"type": "file", "content": "text"}
    install.keep_views_readable(model=other, path="x.txt")
    assert other == {"type": "file", "content": "text"}


def test_the_pre_save_hook_changes_no_stored_notebook():
    """Every view in the course's stored notebooks has its state stored: saving one changes no byte (issue 29)."""
    import json

    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        before = json.dumps(nb)
        install.keep_views_readable(model={"type": "notebook", "content": nb}, path=str(path))
        assert json.dumps(nb) == before, f"{path.name}: a stored view without its state"
