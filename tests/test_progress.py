"""The line under a slow cell: shown in a live kernel after the threshold, counting, and gone when the cell ends."""

from __future__ import annotations

import os
import re

from jupyter_client.manager import start_new_kernel

from inferlab import progress


def _run(client, code: str, timeout: float = 60) -> list[dict]:
    """Execute ``code`` and return the iopub messages of that execution."""
    msg_id = client.execute(code)
    messages = []
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages


def _seconds(text: str) -> int:
    """The seconds a slow-cell line shows."""
    found = re.search(r"still running: (\d+) s", text)
    assert found, text
    return int(found.group(1))


def test_slow_cell_shows_a_counting_line_that_goes_when_it_ends():
    env = {**os.environ, progress.QUIET_ENV: "0", "HF_HUB_OFFLINE": "1"}
    km, client = start_new_kernel(kernel_name="python3", env=env)
    try:
        setup = _run(client, "from inferlab import progress\nprint(progress.watch_slow_cells(after_s=1.0))")
        assert any(m["msg_type"] == "stream" and "True" in m["content"]["text"] for m in setup)
        quick = _run(client, "x = 1")
        assert not [m for m in quick if m["msg_type"] == "display_data"], "a quick cell got a line"
        slow = _run(client, "import time\ntime.sleep(3.5)")
        kinds = [m["msg_type"] for m in slow]
        shown = [m for m in slow if m["msg_type"] == "display_data"]
        assert len(shown) == 1 and "application/vnd.jupyter.widget-view+json" in shown[0]["content"]["data"]
        first = _seconds(shown[0]["content"]["data"]["text/plain"])
        values = [m["content"]["data"]["state"].get("value", "") for m in slow if m["msg_type"] == "comm_msg"
                  and m["content"]["data"].get("method") == "update"]
        counted = [_seconds(v) for v in values if "still running" in v]
        assert counted and max(counted) > first, (first, values)  # it counts (how far depends on the load)
        assert "comm_close" in kinds, "the line must be closed when the cell ends"
        again = _run(client, "print(progress.watch_slow_cells(after_s=1.0))")  # a second call registers nothing
        assert sum(m["msg_type"] == "display_data" for m in _run(client, "time.sleep(1.5)")) == 1
        assert any("True" in m["content"].get("text", "") for m in again)
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def test_off_outside_a_kernel_and_when_quiet(monkeypatch):
    assert progress.watch_slow_cells() is False  # pytest is no Jupyter kernel
    monkeypatch.setenv(progress.QUIET_ENV, "1")
    assert progress.watch_slow_cells() is False
