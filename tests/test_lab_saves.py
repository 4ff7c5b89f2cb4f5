"""Opening and saving a notebook in JupyterLab changes no byte of it (issue 29, item 3).

JupyterLab rewrites a notebook it opens when the stored kernelspec is not the kernel it starts, and saves
numbers through JavaScript (``1.0`` comes back as ``1``); either marks a tracked notebook modified and stops
``git pull``. ``notebook_tools tidy`` (and ``execute``) store notebooks as JupyterLab saves them. Here a real
JupyterLab in Chromium opens notebook 00 as committed and as tidied; the tidied one stays clean and a save
leaves it byte for byte the same.
"""

from __future__ import annotations

import json
import shutil

from test_browser import ROOT, browser, lab  # noqa: F401  (fixtures used below)

from inferlab.tools import notebook_tools

# the lab fixture exposes the app (LabApp.expose_app_in_browser): the open notebook's kernel, connected and idle
KERNEL_READY = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }"""


def _open_and_save(browser, lab, name: str) -> bool:  # noqa: F811
    """Open ``name`` (in the served notebooks/) in JupyterLab, wait for its kernel; True if JupyterLab marked it edited.
    Then save."""
    base, token, _ = lab
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{base}/lab/tree/{name}?token={token}")
        page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=120_000)
        page.wait_for_function(KERNEL_READY, timeout=120_000)
        page.wait_for_timeout(1500)  # the kernel's spec and info have reached the notebook's metadata
        edited = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
        page.keyboard.press("Control+s")
        page.wait_for_timeout(2000)
        return edited
    finally:
        page.close()


def test_a_tidied_notebook_survives_opening_and_saving_unchanged(browser, lab):  # noqa: F811
    _, _, folder = lab  # the folder JupyterLab serves (notebooks/, started the README's way)
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", folder / "tidied.ipynb")
    assert notebook_tools.tidy(folder / "tidied.ipynb") in (True, False)
    assert notebook_tools.tidy(folder / "tidied.ipynb") is False  # tidy is stable
    assert notebook_tools.problems(folder / "tidied.ipynb", working_tree=True) == []  # still executed and fresh
    before = (folder / "tidied.ipynb").read_bytes()
    assert _open_and_save(browser, lab, "tidied.ipynb") is False
    assert (folder / "tidied.ipynb").read_bytes() == before
    # the same notebook stored as JupyterLab 4 does not write it ("Python 3", an older name): seen as edited
    nb = json.loads(before)
    nb["metadata"]["kernelspec"]["display_name"] = "Python 3"
    (folder / "old_kernelspec.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _open_and_save(browser, lab, "old_kernelspec.ipynb") is True
