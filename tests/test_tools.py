"""The command-line tools under ``inferlab.tools``: bad input ends in one line and exit 1, nothing half-written.

One test per tool runs the real command (``python -m inferlab.tools...``) in a subprocess; the other cases
call the same ``main(argv)`` in this process (each subprocess pays ~5-10 s importing torch), where an escaping
exception fails the test just as a traceback would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from inferlab.tools import download, export_html, notebook_files, notebook_run, notebook_tools

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "lib" / "inferlab" / "tools"


def _run(module: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
    return subprocess.run([sys.executable, "-m", f"inferlab.tools.{module}", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**base, "INFERLAB_MODEL": "bundled", **(env or {})})


def _lines(text: str) -> list[str]:
    assert "Traceback" not in text, text
    return [line for line in text.splitlines() if line.strip()]


def _notebook(path: Path, *sources: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A notebook"),
                                         *(nbformat.v4.new_code_cell(s) for s in sources)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _clone(tmp_path: Path) -> Path:
    """A second copy of the course: notebooks/ with the first two real notebooks."""
    clone = tmp_path / "clone"
    (clone / "notebooks").mkdir(parents=True)
    for src in sorted((ROOT / "notebooks").glob("*.ipynb"))[:2]:
        shutil.copy(src, clone / "notebooks" / src.name)
    return clone


# --- notebook_tools -------------------------------------------------------------------------------------------


def test_check_checks_the_clone_it_runs_in_and_names_each_bad_notebook(tmp_path):
    clone = _clone(tmp_path)
    first, second = sorted((clone / "notebooks").glob("*.ipynb"))
    first.write_text(first.read_text(encoding="utf-8")[:5000], encoding="utf-8")  # truncated: invalid JSON
    nb = nbformat.read(second, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.source += "\n# edited after it was run"
    nbformat.write(nb, second)

    result = _run("notebook_tools", "check", cwd=clone)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = _lines(result.stdout + result.stderr)
    # one line for the truncated notebook, and the one after it was still checked (found stale)
    assert [line for line in lines if first.name in line] == [
        f"notebooks/{first.name}: is not valid JSON ({_json_error(first)}); the file is truncated or was edited "
        f"by hand. Fix: restore it (git checkout -- notebooks/{first.name})."]
    assert any(line.startswith(f"notebooks/{second.name}: code changed after") for line in lines), lines
    assert lines[-1] == f"checked 2 notebook(s) in {(clone / 'notebooks').resolve()}: 2 problem(s)"


def test_check_refuses_a_notebook_stored_at_the_test_scale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _notebook(tmp_path / "notebooks" / "00_x.ipynb", "print(1)")
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].execution_count = 1
    nb.metadata["inferlab"] = {"code_sha256": notebook_tools.code_hash(nb), "model": "bundled"}
    nbformat.write(nb, path)
    assert notebook_tools.problems(path) == []  # a stamp from before the test scale existed: a full-scale run
    nb.metadata["inferlab"]["scale"] = "test"
    nbformat.write(nb, path)
    assert notebook_tools.problems(path) == [
        "was executed at the 'test' scale; the stored run must be the lesson's: re-run "
        "`python -m inferlab.tools.notebook_tools execute notebooks/00_x.ipynb`"]


def test_tools_answer_help_without_importing_torch():
    """Every tool's --help (and `import inferlab`) answers at once: torch and transformers are imported lazily."""
    script = ("import runpy, sys\n"
              "import inferlab\n"
              "assert 'torch' not in sys.modules, 'import inferlab imported torch'\n"
              "for tool in sys.argv[1:]:\n"
              "    sys.argv = [tool, '--help']\n"
              "    try:\n"
              "        runpy.run_module('inferlab.tools.' + tool, run_name='__main__')\n"
              "    except SystemExit as stop:\n"
              "        assert stop.code == 0, (tool, stop.code)\n"
              "    heavy = sorted(m for m in ('torch', 'transformers', 'plotly') if m in sys.modules)\n"
              "    print(tool, 'imported', heavy)\n")
    tools = ["notebook_tools", "export_html", "download", "bench", "gpu_check"]
    done = subprocess.run([sys.executable, "-c", script, *tools], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line for line in done.stdout.splitlines() if " imported " in line] == [f"{t} imported []" for t in tools]


def _json_error(path: Path) -> str:
    import json

    try:
        json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        return str(e)
    raise AssertionError(f"{path} is valid JSON")


def test_check_from_a_subfolder_and_with_root(tmp_path, capsys, monkeypatch):
    clone = _clone(tmp_path)
    monkeypatch.chdir(clone / "notebooks")  # the course folder is found by walking up
    assert notebook_tools.main(["check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        f"checked 2 notebook(s) in {(clone / 'notebooks').resolve()}: all executed and fresh"
    monkeypatch.chdir(tmp_path)
    assert notebook_tools.main(["check", "--root", "clone"]) == 0
    assert "all executed and fresh" in capsys.readouterr().out


def test_check_outside_a_course_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert notebook_tools.main(["check"]) == 1
    assert _lines(capsys.readouterr().err) == [
        f"{tmp_path}: no notebooks/ folder here or in any folder above. "
        "Fix: cd into your copy of the course, or pass --root PATH."]
    assert notebook_tools.main(["check", "--root", str(tmp_path)]) == 1
    assert _lines(capsys.readouterr().err) == [
        f"{tmp_path}: has no notebooks/ folder. Fix: pass --root the top folder of the course."]


@pytest.mark.parametrize("name, content, says", [
    ("missing.ipynb", None, "no such file"),
    ("README.md", "# not a notebook", "is not a notebook (expected a .ipynb file)"),
    ("a_folder.ipynb", "<dir>", "is a folder, not a notebook"),
    ("empty.ipynb", "", "is not valid JSON"),
    ("list.ipynb", "[]", "is JSON but not a notebook"),
    ("bad_cell.ipynb", '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [5]}',
     "is not a valid notebook"),
], ids=["missing", "not-ipynb", "folder", "empty", "json-list", "bad-cell"])
@pytest.mark.parametrize("command", ["check", "execute"])
def test_a_path_that_is_not_a_notebook_is_one_line(tmp_path, capsys, monkeypatch, command, name, content, says):
    monkeypatch.chdir(tmp_path)
    if content == "<dir>":
        (tmp_path / name).mkdir()
    elif content is not None:
        (tmp_path / name).write_text(content)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert notebook_tools.main([command, name]) == 1
    out = capsys.readouterr()
    bad = [line for line in _lines(out.out + out.err) if line.startswith(f"{name}: ")]
    assert len(bad) == 1 and says in bad[0], out
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["execute", "--timeout", "0", "x.ipynb"]])
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as stop:
        notebook_tools.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err  # the one line that matters, not argparse's usage block first
    assert err.startswith("python -m inferlab.tools.notebook_tools") and ": error: " in err
    assert err.rstrip().endswith("--help)"), err
    assert "Traceback" not in err


def test_execute_keeps_going_saves_good_notebooks_and_leaves_failed_ones_untouched(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERLAB_MODEL", "bundled")  # execute() sets it when missing; restored afterwards
    monkeypatch.setenv("INFERLAB_SCALE", "test")  # as in the suite: the stored run is made at the full scale anyway
    bad = _notebook(tmp_path / "notebooks" / "01_bad.ipynb", "x = 1", "1 / 0")
    good = _notebook(tmp_path / "notebooks" / "02_good.ipynb", "print(6 * 7)",
                     "import os; print(os.environ['INFERLAB_SCALE'], os.environ['HF_HUB_OFFLINE'])")
    bad_before = bad.read_bytes()
    good.chmod(0o640)  # neither mkstemp's 0600 nor the umask's default
    kernels_before = _kernels()
    assert notebook_tools.main(["execute", "--timeout", "120"]) == 2  # every notebook needs --all
    assert "--all" in capsys.readouterr().err
    assert any("never executed" in problem for problem in notebook_tools.problems(good))  # nothing ran
    assert notebook_tools.main(["execute", "--all", "--timeout", "120"]) == 1
    out = capsys.readouterr()
    assert _lines(out.err) == ["notebooks/01_bad.ipynb: not saved, cell 3 raised ZeroDivisionError: division by zero. "
                               "Fix: run it in JupyterLab to see the whole error."]
    assert bad.read_bytes() == bad_before
    assert notebook_tools.problems(good) == []
    stored = nbformat.read(good, as_version=4)
    assert stored.cells[1].outputs[0]["text"] == "42\n"
    assert stored.cells[2].outputs[0]["text"] == "full 1\n"  # the kernel ran at the full scale, offline
    assert stored.metadata["inferlab"]["scale"] == "full" and os.environ["INFERLAB_SCALE"] == "test"
    assert good.stat().st_mode & 0o777 == 0o640  # the notebook keeps its mode
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == ["01_bad.ipynb", "02_good.ipynb"]
    assert _kernels() == kernels_before  # each notebook's kernel stopped when it was done, the failed one's too


def _kernels() -> set[int]:
    """The ids of this process's kernels still running (a stopped one reaped, not a zombie)."""
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)
            if "ipykernel" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE}


def test_execute_refuses_a_folder_it_cannot_write_before_running(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = _notebook(tmp_path / "notebooks" / "01_one.ipynb", "print(1)")
    before = nb.read_bytes()

    def read_only(*args, **kwargs):  # what a read-only folder gives (chmod cannot show it when tests run as root)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(notebook_files.tempfile, "mkstemp", read_only)
    monkeypatch.setattr(notebook_run, "NotebookClient", None, raising=False)
    started = []
    monkeypatch.setattr("jupyter_client.manager.KernelManager.start_kernel", lambda *a, **k: started.append(1))
    assert notebook_tools.main(["execute", "notebooks/01_one.ipynb"]) == 1
    assert _lines(capsys.readouterr().err) == [
        "notebooks/01_one.ipynb: not run, its folder cannot be written (Permission denied). Fix: make the folder "
        "writable (or free some disk space), or execute a copy elsewhere."]
    assert started == [] and nb.read_bytes() == before


def test_execute_on_a_disk_that_fills_up_during_the_run_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERLAB_MODEL", "bundled")
    nb = _notebook(tmp_path / "notebooks" / "01_one.ipynb", "print(1)")
    before = nb.read_bytes()
    real, calls = notebook_files.tempfile.mkstemp, []

    def full_after_the_check(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(notebook_files.tempfile, "mkstemp", full_after_the_check)
    assert notebook_tools.main(["execute", "--timeout", "120", "notebooks/01_one.ipynb"]) == 1
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("notebooks/01_one.ipynb: ran in ") and lines[0].endswith(
        "could not be saved (No space left on device); the stored notebook is unchanged. Fix: free some disk space "
        "(or make the folder writable) and run it again."), lines
    assert nb.read_bytes() == before and sorted(p.name for p in nb.parent.iterdir()) == ["01_one.ipynb"]


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_execute_stops_at_once_on_ctrl_c(tmp_path, inherited):
    import signal
    import time

    # "ignored": started by a parent that ignores SIGINT (the disposition survives exec), as a test worker can be
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherited == "ignored" else None

    nb = _notebook(tmp_path / "notebooks" / "01_slow.ipynb",
                   "open('started', 'w').close()\nimport time\nfor _ in range(600): time.sleep(0.5)")
    nb.chmod(0o644)
    before = nb.read_bytes()
    env = {k: v for k, v in os.environ.items() if k != "INFERLAB_SCALE"}
    command = [sys.executable, "-m", "inferlab.tools.notebook_tools", "execute", "notebooks/01_slow.ipynb"]
    run = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True, preexec_fn=ignore)
    try:
        deadline = time.time() + 90
        while not (nb.parent / "started").exists():  # the kernel is running the slow cell
            assert time.time() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.2)
        pressed = time.time()
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C in a terminal: SIGINT to the foreground process group
        _, err = run.communicate(timeout=20)  # it used to go on until killed with -9
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert time.time() - pressed < 10
    assert run.returncode == 130
    assert _lines(err) == ["notebooks/01_slow.ipynb: interrupted; the stored notebook is unchanged."]
    assert nb.read_bytes() == before and nb.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in nb.parent.iterdir()) == ["01_slow.ipynb", "started"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args], check=True,
                   capture_output=True)


def _git_clone_with_two_notebooks(tmp_path: Path) -> tuple[Path, Path]:
    clone = _clone(tmp_path)
    _git(clone, "init", "-q")
    _git(clone, "add", "notebooks")
    _git(clone, "commit", "-q", "-m", "course")
    return clone, sorted((clone / "notebooks").glob("*.ipynb"))[1]


def test_check_reads_what_git_holds_so_a_learners_session_does_not_fail_it(tmp_path, capsys, monkeypatch):
    clone, used = _git_clone_with_two_notebooks(tmp_path)
    nb = nbformat.read(used, as_version=4)  # a learner's session: cells re-run out of order, one raised, autosaved
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[0].execution_count, code[-1].execution_count = 99, 1
    code[1].outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[])]
    nbformat.write(nb, used)
    monkeypatch.chdir(clone)

    assert notebook_tools.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "all executed and fresh" in out and "1 of them differ in your working tree" in out
    assert notebook_tools.main(["check", "--working-tree"]) == 1  # the file itself is what the learner made
    assert f"notebooks/{used.name}: has an error output: KeyboardInterrupt" in capsys.readouterr().out


def test_check_still_fails_a_notebook_committed_stale(tmp_path, capsys, monkeypatch):
    clone, used = _git_clone_with_two_notebooks(tmp_path)
    nb = nbformat.read(used, as_version=4)
    next(c for c in nb.cells if c.cell_type == "code").source += "\n# edited after it was run"
    nbformat.write(nb, used)
    _git(clone, "commit", "-q", "-am", "edit without re-running")
    monkeypatch.chdir(clone)

    assert notebook_tools.main(["check"]) == 1
    assert f"notebooks/{used.name}: code changed after the stored outputs were made" in capsys.readouterr().out
    (clone / "notebooks" / "03_new.ipynb").write_text("{not json")  # untracked: the file itself is read
    assert notebook_tools.problems(clone / "notebooks" / "03_new.ipynb")[0].startswith("is not valid JSON")


# --- export_html ----------------------------------------------------------------------------------------------


def test_export_out_pointing_at_a_file(tmp_path):
    clone = _clone(tmp_path)
    (clone / "site").write_text("keep me")
    result = _run("export_html", "--out", "site", cwd=clone)
    assert result.returncode == 1
    fix = "Fix: pass a folder name (it is created if missing), e.g. --out site."
    assert _lines(result.stdout + result.stderr) == [f"--out site: site is a file, not a folder. {fix}"]
    assert (clone / "site").read_text() == "keep me"
    assert sorted(p.name for p in clone.iterdir()) == ["notebooks", "site"]


def test_export_with_a_bad_notebook_writes_nothing(tmp_path, capsys, monkeypatch):
    clone = _clone(tmp_path)
    monkeypatch.chdir(clone)
    broken = sorted((clone / "notebooks").glob("*.ipynb"))[1]
    broken.write_text("{")
    assert export_html.main(["--out", "out/site"]) == 1
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(f"notebooks/{broken.name}: is not valid JSON"), lines
    assert sorted(p.name for p in clone.iterdir()) == ["notebooks"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _two_editions(tmp_path: Path) -> list[Path]:
    return [_notebook(tmp_path / "notebooks" / "01_one.ipynb", "print(1)"),
            _notebook(tmp_path / "notebooks" / "zh" / "01_one.ipynb", "print(1)"),
            _notebook(tmp_path / "notebooks" / "02_two.ipynb", "print(2)")]


def test_export_twice_into_the_same_folder_replaces_the_site_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    en, zh, two = _two_editions(tmp_path)
    assert export_html.main(["--out", "site", str(en), str(zh), str(two)]) == 0
    site = tmp_path / "site"
    assert (site / "02_two.html").is_file() and (site / "zh" / "01_one.html").is_file()
    assert site.stat().st_mode & 0o777 == 0o777 & ~_umask()  # not mkdtemp's 0700: a web server can read it
    site.chmod(0o750)
    # The second export (zh/ already there: it failed before and left the site half-updated) replaces it whole.
    assert export_html.main(["--out", "site", str(en), str(zh)]) == 0
    assert sorted(_tree(site)) == [".inferlab-site", "01_one.html", "index.html", "plotly.min.js",
                                   "zh/01_one.html", "zh/index.html"]  # 02_two.html went with its notebook
    assert "02_two" not in (site / "index.html").read_text(encoding="utf-8")
    assert site.stat().st_mode & 0o777 == 0o750  # the folder keeps its permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks", "site"]  # no .partial or .old folder left
    assert capsys.readouterr().out.splitlines()[-1] == "open site/index.html"


def test_export_keeps_the_old_site_whole_when_the_new_one_cannot_be_moved_in(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    en, zh, two = _two_editions(tmp_path)
    assert export_html.main(["--out", "site", str(en), str(zh), str(two)]) == 0
    before = _tree(tmp_path / "site")
    capsys.readouterr()
    real_replace = os.replace

    def disk_full_at_the_swap(src, dst):
        if ".partial-" in str(src) and Path(dst).name == "site":
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(export_html.os, "replace", disk_full_at_the_swap)
    assert export_html.main(["--out", "site", str(en)]) == 1
    assert _lines(capsys.readouterr().err) == [
        "--out site: cannot write there (No space left on device); nothing was changed. "
        "Fix: choose a folder you can write to, on a disk with room."]
    assert _tree(tmp_path / "site") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks", "site"]


def test_export_refuses_a_folder_that_holds_other_files(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = _notebook(tmp_path / "notebooks" / "01_one.ipynb", "print(1)")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "notes.txt").write_text("mine")
    for out in ("site", "."):  # "." is the course folder itself: replacing it would delete the course
        assert export_html.main(["--out", out, str(nb)]) == 1
        lines = _lines(capsys.readouterr().err)
        assert len(lines) == 1 and lines[0].startswith(f"--out {out}: the folder exists and holds other files"), lines
    assert _tree(tmp_path / "site") == {"notes.txt": b"mine"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks", "site"]


def test_export_reads_what_git_holds_and_says_which_notebooks_differ(tmp_path, capsys, monkeypatch):
    clone, used = _git_clone_with_two_notebooks(tmp_path)
    committed = nbformat.read(used, as_version=4)
    figures = sum(export_html.PLOTLY_MIME in o.get("data", {}) for c in committed.cells for o in c.get("outputs", []))
    assert figures > 0
    for cell in committed.cells:  # a learner's session: outputs cleared, autosaved
        if cell.cell_type == "code":
            cell.outputs = []
    nbformat.write(committed, used)
    monkeypatch.chdir(clone)
    assert export_html.main(["--out", "site"]) == 0
    out = capsys.readouterr().out
    assert f"site/{used.stem}.html: {figures} figures" in out
    assert "(1 notebook(s) differ in your working tree" in out
    assert export_html.main(["--out", "site", "--working-tree"]) == 0
    assert f"site/{used.stem}.html: 0 figures" in capsys.readouterr().out


ODD_NOTEBOOKS = {  # name -> how to spoil a real notebook's JSON, and what check/export say about it
    "a_metadata_string.ipynb": (lambda nb: nb["metadata"].update(inferlab="x"), "metadata.inferlab must be an object"),
    "b_count_string.ipynb": (lambda nb: [c.update(execution_count="3") for c in nb["cells"]
                                         if c["cell_type"] == "code"], "is not a valid notebook ('3' is not of type"),
    "c_widgets_list.ipynb": (lambda nb: nb["metadata"].update(widgets=[1, 2]), "metadata.widgets must be an object"),
    "d_markdown_number.ipynb": (lambda nb: next(c for c in nb["cells"] if c["cell_type"] == "markdown").update(
        source=5), "is not a valid notebook (5 is not valid"),
    "e_cells_object.ipynb": (lambda nb: nb.update(cells={}), "is JSON but not a notebook"),
}


def _odd_clone(tmp_path: Path) -> Path:
    import json

    clone = _clone(tmp_path)
    real = sorted((clone / "notebooks").glob("*.ipynb"))[1]
    for name, (spoil, _) in ODD_NOTEBOOKS.items():
        nb = json.loads(real.read_text(encoding="utf-8"))
        spoil(nb)
        (clone / "notebooks" / name).write_text(json.dumps(nb), encoding="utf-8")
    deep = '{"cells": [], "metadata": {"x": ' + "[" * 100_000 + "]" * 100_000 + '}, "nbformat": 4, "nbformat_minor": 5}'
    (clone / "notebooks" / "f_deep.ipynb").write_text(deep, encoding="utf-8")
    shutil.copy(real, clone / "notebooks" / "01_tokens copy.ipynb")  # a name with a space is a fine notebook
    return clone


def test_check_and_export_name_every_odd_notebook_in_one_line_each(tmp_path, capsys, monkeypatch):
    clone = _odd_clone(tmp_path)
    monkeypatch.chdir(clone)
    says = {**{name: why for name, (_, why) in ODD_NOTEBOOKS.items()}, "f_deep.ipynb": "nested too deeply"}
    assert notebook_tools.main(["check"]) == 1
    out = capsys.readouterr()
    lines = _lines(out.out + out.err)
    for name, why in says.items():  # every one is reported: check does not stop at the first
        mine = [line for line in lines if line.startswith(f"notebooks/{name}: ")]
        assert len(mine) == 1 and why in mine[0], (name, lines)
    assert not any("copy.ipynb" in line for line in lines[:-1])
    assert lines[-1].startswith(f"checked 9 notebook(s) in {clone / 'notebooks'}: {len(says)} problem(s)")

    assert export_html.main(["--out", "site"]) == 1
    lines = _lines(capsys.readouterr().err)
    assert sorted(line.split(":")[0] for line in lines) == sorted(f"notebooks/{n}" for n in says)
    assert sorted(p.name for p in clone.iterdir()) == ["notebooks"]  # nothing written
    copy = clone / "notebooks" / "01_tokens copy.ipynb"
    assert export_html.main(["--out", "site", str(copy)]) == 0
    assert (clone / "site" / "01_tokens copy.html").is_file()
    assert 'href="01_tokens%20copy.html"' in (clone / "site" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(("output", "metadata", "exported"), [
    ({export_html.PLOTLY_MIME: [1, 2]}, {}, False),  # a figure that is not an object
    ({export_html.WIDGET_MIME: "abc"}, {}, False),  # a widget view that is not an object
    ({export_html.WIDGET_MIME: {"model_id": "m"}}, {"widgets": {"application/vnd.jupyter.widget-state+json": {
        "state": []}}}, True),  # an odd stored widget state: the view shows its note
], ids=["figure-list", "view-string", "state-list"])
def test_export_names_a_notebook_with_an_odd_output(tmp_path, capsys, monkeypatch, output, metadata, exported):
    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", execution_count=1, outputs=[
        nbformat.v4.new_output("display_data", data=output)])], metadata=metadata)
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nb, tmp_path / "notebooks" / "01_odd.ipynb")
    assert export_html.main(["--out", "site", "notebooks/01_odd.ipynb"]) == (0 if exported else 1)
    err = _lines(capsys.readouterr().err)
    if exported:
        assert err == [] and (tmp_path / "site" / "01_odd.html").is_file()
    else:
        assert len(err) == 1 and err[0].startswith("notebooks/01_odd.ipynb: cannot be exported, an output is not "), err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks"]


# --- download -------------------------------------------------------------------------------------------------


def test_download_with_the_hub_unreachable_is_one_line_and_leaves_no_folder(tmp_path):
    # TEST-NET-1 (RFC 5737) is never routed: packets vanish, so this also proves the probe gives up after 3 s
    result = _run("download", "gpt2", "--out", "models/gpt2", cwd=tmp_path, env={"HF_ENDPOINT": "https://192.0.2.1"})
    assert result.returncode == 1
    assert _lines(result.stdout + result.stderr) == [
        "could not download 'gpt2': the Hugging Face Hub (192.0.2.1) is not reachable from this machine within 3 s. "
        "Fix: run this once where there is a network (or set HTTPS_PROXY), then copy the --out folder to this machine."]
    assert list(tmp_path.iterdir()) == []


def test_download_with_hf_hub_offline_is_one_line_and_leaves_no_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert download.main(["gpt2", "--out", "models/gpt2"]) == 1
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(
        "could not download 'gpt2': HF_HUB_OFFLINE is set, so the Hugging Face Hub is not contacted. Fix: "), lines
    assert list(tmp_path.iterdir()) == []


def test_download_refuses_an_out_that_is_taken(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "config.json").write_text("{}")
    for out, says in [("a_file", "--out a_file: a_file is a file, not a folder."),
                      ("a_file/gpt2", "--out a_file/gpt2: a_file is a file, not a folder."),
                      ("full", "--out full: the folder exists and is not empty.")]:
        assert download.main(["gpt2", "--out", out]) == 1
        lines = _lines(capsys.readouterr().err)
        assert len(lines) == 1 and lines[0].startswith(says), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "full"]
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["config.json"]


def test_download_into_a_folder_it_cannot_write_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    asked = []
    monkeypatch.setattr(download, "_fetch", lambda *a: asked.append(a))

    def read_only(*args, **kwargs):  # what a read-only folder gives (chmod cannot show it when tests run as root)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(download.tempfile, "mkdtemp", read_only)
    assert download.main(["gpt2", "--out", "models/gpt2"]) == 1
    assert _lines(capsys.readouterr().err) == [
        f"--out models/gpt2: cannot write in {tmp_path.resolve()} (Permission denied). "
        "Fix: choose a folder you can write to."]
    assert asked == [] and list(tmp_path.iterdir()) == []


def test_download_renames_only_a_folder_that_loads(tmp_path, capsys, monkeypatch):
    bundled = ROOT / "data" / "models" / "tiny-gpt2-bilingual"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # verify() sets it; monkeypatch restores it afterwards

    def fetch_config_only(name, into, revision):  # what a hub checkpoint without tokenizer/weights would give
        shutil.copy(bundled / "config.json", into)

    monkeypatch.setattr(download, "_fetch", fetch_config_only)
    assert download.main(["gpt2", "--out", "models/gpt2"]) == 1
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("downloaded 'gpt2' but it does not load as a GPT-2 model: ")
    assert list(tmp_path.iterdir()) == []

    def fetch_bundled(name, into, revision):
        for f in bundled.iterdir():
            shutil.copy(f, into)

    monkeypatch.setattr(download, "_fetch", fetch_bundled)
    assert download.main(["gpt2", "--out", "models/gpt2"]) == 0
    assert sorted(p.name for p in (tmp_path / "models" / "gpt2").iterdir()) == sorted(p.name for p in bundled.iterdir())
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["gpt2"]  # the temporary folder was renamed
    assert "partial" not in capsys.readouterr().out


# --- bench ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "says"), [
    (["--new-tokens", "1"], "--new-tokens 1: must be at least 2"),
    (["--new-tokens", "0"], "--new-tokens 0: must be at least 2"),
    (["--prompt-tokens", "0"], "--prompt-tokens 0: must be at least 1"),
    (["--repeats", "-3"], "--repeats -3: must be at least 1"),
    (["--prompt-tokens", "1000", "--new-tokens", "100"], "more than 1024 positions"),
    (["--threads", "0"], "--threads 0: must be at least 1"),
    (["--dtype", "float64"], "--dtype float64: not one of float32, float16, bfloat16"),
    (["--device", "nonsense"], "--device nonsense: not a device name"),
    (["--device", "cuda:7"], "--device cuda:7: no such CUDA device here"),
    (["--models", " "], "--models: an empty name"),
    (["--models", "bundled", "random:gtp2"], "--models random:gtp2: model='random:gtp2' is not allowed"),
    (["--models", "./no-such-folder"], "--models ./no-such-folder: model="),
    (["--out", "."], "--out .: is a folder"),
    (["--out", "missing/folder/r.json"], "--out missing/folder/r.json: cannot be written (No such file or directory)"),
    (["--variants", "turbo"], "argument --variants: invalid choice: 'turbo'"),
    (["--new-tokens", "x"], "argument --new-tokens: invalid int value: 'x'"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_bench_refuses_bad_arguments_before_any_measurement(tmp_path, capsys, monkeypatch, args, says):
    from inferlab.tools import bench

    monkeypatch.chdir(tmp_path)
    measured = []
    monkeypatch.setattr("inferlab.measure.machine.measure_machine", lambda *a, **k: measured.append(a))
    with pytest.raises(SystemExit) as stop:
        bench.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert len(err.splitlines()) == 1, err  # the option, the value and the fix: no usage block before it
    assert err.startswith("python -m inferlab.tools.bench: error: ") and says in err, err
    assert measured == [] and list(tmp_path.iterdir()) == []


# --- layout ---------------------------------------------------------------------------------------------------


def test_tooling_lives_under_tools_and_not_at_the_package_root():
    for name in ("__init__.py", "notebook_tools.py", "export_html.py", "download.py", "bench.py"):
        assert (TOOLS / name).is_file(), f"lib/inferlab/tools/{name} is missing"
    for name in ("bench.py", "notebook_tools.py", "export_html.py", "download.py"):
        assert not (ROOT / "lib" / "inferlab" / name).exists(), f"lib/inferlab/{name}: tooling belongs in tools/"
    doc = (TOOLS / "__init__.py").read_text()
    for name in ("notebook_tools", "export_html", "download", "bench"):
        assert f"python -m inferlab.tools.{name}" in doc, name


def test_docs_and_scripts_name_the_tools_by_their_new_path():
    import re

    old = re.compile(r"inferlab\.(bench|notebook_tools|export_html|download)\b")
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "tests" / "run.sh", ROOT / ".ci" / "run",
             *(ROOT / "docs").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "lib").rglob("*.py"),
             *(ROOT / "tests").glob("*.py")]
    stale = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files for m in old.finditer(p.read_text(encoding="utf-8"))]
    assert not stale, f"old tool paths (now inferlab.tools.*): {stale}"
    assert "python -m inferlab.tools.notebook_tools check" in (ROOT / "tests" / "run.sh").read_text()


def test_check_reads_only_regular_files_of_a_notebooks_size(tmp_path, capsys, monkeypatch):
    """A FIFO would block the read forever and an endless device would fill memory: each is one line, at once."""
    import os

    fifo = tmp_path / "pipe.ipynb"
    os.mkfifo(fifo)
    endless = tmp_path / "zero.ipynb"
    endless.symlink_to("/dev/zero")
    big = tmp_path / "big.ipynb"
    big.write_bytes(b" ")
    monkeypatch.setattr(notebook_files, "MAX_NOTEBOOK_BYTES", 0)
    for path, says in ((fifo, "is not a regular file"), (endless, "is not a regular file"), (big, "more than")):
        with pytest.raises(notebook_files.NotebookError, match=says):
            notebook_files.read_notebook(path)
