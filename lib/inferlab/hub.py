"""The Hugging Face Hub: is it usable from here (a probe that never hangs), and a checkpoint by name.

``hub_problem`` asks the hub one real question within a few seconds and says, in words, why it cannot be used
(a silent proxy, a login page, a reset, a missing model); ``from_hub`` loads a hub name, from the local cache
first, checked like a folder (``checkpoints``). ``HF_ENDPOINT`` (a mirror) and ``HTTPS_PROXY`` are honoured.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import urlsplit

from . import _hf
from .checkpoints import check_config, check_tokenizer
from .errors import one_line
from .i18n import tr

HUB_PROBE_SECONDS = 3.0


def hub_cached(name: str) -> bool:
    """True when the Hugging Face checkpoint ``name`` (e.g. ``"gpt2"``) is complete in the local cache."""
    return _hf.hub_cached(name)


def hub_address() -> tuple[str, int]:
    """(host, port) of the Hugging Face Hub, from ``HF_ENDPOINT`` when set (a mirror or a proxy)."""
    url = urlsplit(hub_endpoint())
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def hub_endpoint() -> str:
    """The Hugging Face Hub's base address: ``HF_ENDPOINT`` when set (a mirror), else https://huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co"


def hub_problem(name: str = "gpt2", timeout: float = HUB_PROBE_SECONDS) -> str | None:
    """Why the hub cannot serve ``name`` now, in a few words; ``None`` when it can.

    One real HTTP request (the hub's model API, ``{endpoint}/api/models/{name}``), at most ``timeout`` seconds
    in all, DNS and proxies (``HTTPS_PROXY``) included, no retries. A TCP connection alone is not enough: a
    proxy that accepts and never answers, a captive portal's login page, or a connection reset all open one.
    Without this probe the hub client waits for minutes and then blames the model's name.
    """
    url = f"{hub_endpoint()}/api/models/{urllib.parse.quote(name, safe='/')}"
    result: list[str | None] = []

    def probe() -> None:
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "inferlab", "Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(1_000_000)
            data = json.loads(body)
            ok = isinstance(data, dict) and (data.get("id") or data.get("modelId"))
            result.append(None if ok else tr("{url} answered, but not as the hub does (not its JSON)", url=url))
        except urllib.error.HTTPError as exc:
            result.append(tr("{url} answered HTTP {code}", url=url, code=exc.code))
        except (json.JSONDecodeError, UnicodeDecodeError):
            result.append(tr("{url} answered with a web page, not the hub's JSON (a login page or a proxy?)",
                             url=url))
        except (OSError, ValueError) as exc:  # refused, reset, DNS, TLS, timeout; ValueError: a malformed address
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):  # connected (or not) and then nothing came back
                result.append(tr("{url} did not answer within {seconds:.0f} s", url=url, seconds=timeout))
                return
            result.append(tr("{url} could not be reached ({why})", url=url, why=f"{type(reason).__name__}: "
                             f"{reason}"[:160]))

    if urlsplit(url).scheme not in ("http", "https"):
        return tr("HF_ENDPOINT={endpoint!r} is not an http(s) address", endpoint=hub_endpoint())
    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    if not result:
        return tr("{url} did not answer within {seconds:.0f} s", url=url, seconds=timeout)
    return result[0]


def hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Does the hub answer a real request within ``timeout`` seconds? (``hub_problem`` says why not.)"""
    return hub_problem("gpt2", timeout) is None


def from_hub(name: str, dtype, device):
    """A hub name: local cache first; the network only when allowed and reachable."""
    if _hf.hub_cached(name):
        check_config(_hf.hub_file(name, "config.json", local_only=True), name)
        tok = _hf.load_tokenizer(name, local_only=True)
        check_tokenizer(tok, name)
        return _hf.load_folder(name, dtype=dtype, device=device, local_only=True), tok, "hub-cache"
    if _hf.hub_offline():
        raise FileNotFoundError(
            f"model={name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set. Fix: "
            "download it once on a machine with a network (see the README's workshop guide), pass a "
            "local folder, or use model='bundled'.")
    problem = hub_problem(name)
    if problem is not None and any(f"HTTP {code}" in problem for code in (401, 404)):
        raise ValueError(f"model={name!r}: not a folder, not in the local Hugging Face cache, and the hub has no "
                         f"public model by that name ({problem}). Fix: check the spelling (gpt2, distilgpt2, "
                         "gpt2-medium, gpt2-large, gpt2-xl), pass a folder written by save_pretrained(), or use "
                         "model='bundled'.")
    if problem is not None:
        raise ConnectionError(f"model={name!r}: not a folder, not in the local Hugging Face cache, and the hub "
                              f"cannot be used from here: {problem}. Fix: check the network (or HF_ENDPOINT, "
                              "HTTPS_PROXY), pass a folder written by save_pretrained(), or use model='bundled'.")
    try:
        check_config(_hf.hub_file(name, "config.json", local_only=False), name)
        tok = _hf.load_tokenizer(name, local_only=False)
        check_tokenizer(tok, name)
        return _hf.load_folder(name, dtype=dtype, device=device, local_only=False), tok, "hub-download"
    except ValueError:
        raise
    except Exception as exc:  # the hub knows the name (the probe said so): the transfer failed
        raise ConnectionError(f"model={name!r}: the hub knows this model, but downloading it failed "
                              f"({one_line(exc)}). Fix: try again, check the network, or "
                              "use model='bundled'.") from exc
