"""Bad networks: the hub probe is one real HTTP request with a short timeout, so ``load()`` never hangs.

Local servers on 127.0.0.1 stand in for the networks a learner meets: a proxy that accepts and never
answers, a captive portal's login page, a connection that is reset, a hub that answers, and one that
does not know the model. ``HF_ENDPOINT`` points the loader at them.
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time

import pytest

import inferlab as il
from inferlab import hub

LIMIT_S = hub.HUB_PROBE_SECONDS + 3  # the probe's budget, and some room for loading the bundled model


class _Handler(http.server.BaseHTTPRequestHandler):
    body, status, kind = b"", 200, "text/html"

    def do_GET(self):
        self.send_response(self.status)
        self.send_header("Content-Type", self.kind)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):  # keep the test output quiet
        pass


def _http_server(body: bytes, status: int = 200, kind: str = "text/html"):
    handler = type("H", (_Handler,), {"body": body, "status": status, "kind": kind})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _silent_server():
    """Accepts connections (the kernel completes the handshake) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def _resetting_server():
    """Accepts each connection and resets it at once (RST, as a dropped VPN or a firewall does)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def online(monkeypatch):
    """The environment of a learner with a network: not offline, no model chosen by the environment."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("INFERLAB_MODEL", raising=False)
    monkeypatch.setattr(hub, "hub_cached", lambda name: False)  # as on a machine that never downloaded it

    def at(endpoint: str) -> None:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
    return at


@pytest.mark.parametrize("network", ["silent proxy", "login page", "reset"])
def test_auto_falls_back_quickly_and_says_why(online, network):
    if network == "silent proxy":
        server, url = _silent_server()
    elif network == "login page":
        server, url = _http_server(b"<html><body><form>Log in to the campus Wi-Fi</form></body></html>")
    else:
        server, url = _resetting_server()
    online(url)
    try:
        t0 = time.perf_counter()
        m = il.load("auto", verbose=False)
        waited = time.perf_counter() - t0
        assert m.info.source == "bundled" and waited < LIMIT_S, (m.info.reason, waited)
        assert url in m.info.reason and "cannot be used from here" in m.info.reason
        expected = {"silent proxy": "did not answer within", "login page": "web page",
                    "reset": "could not be reached"}[network]
        assert expected in m.info.reason

        t0 = time.perf_counter()
        with pytest.raises(ConnectionError, match="cannot be used from here") as info:
            il.load("gpt2", verbose=False)
        assert time.perf_counter() - t0 < LIMIT_S and "spelling" not in str(info.value)
    finally:
        server.close() if isinstance(server, socket.socket) else server.shutdown()


def test_the_probe_accepts_a_hub_that_answers_and_names_a_missing_model(online):
    server, url = _http_server(json.dumps({"id": "gpt2", "modelId": "gpt2"}).encode(), kind="application/json")
    missing, missing_url = _http_server(b'{"error": "Repository not found"}', status=404, kind="application/json")
    try:
        online(url)
        assert hub.hub_problem("gpt2") is None and hub.hub_reachable()
        online(missing_url)
        assert "HTTP 404" in hub.hub_problem("gtp2")
        with pytest.raises(ValueError, match=r"no public model by that name.*spelling"):
            il.load("gtp2", verbose=False)
        online("ftp://example.org")
        assert "not an http(s) address" in hub.hub_problem("gpt2")
    finally:
        server.shutdown()
        missing.shutdown()
