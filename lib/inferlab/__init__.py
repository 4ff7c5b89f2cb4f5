"""inferlab: run GPT-2 and record every step of inference, so notebooks can draw it.

The flat public API (everything else is importable by path, e.g. ``inferlab.viz.tokens``)::

    import inferlab as il
    m = il.load()                                  # real GPT-2 if it can be had, else the bundled model
    logits, cache = il.prefill(m, m.encode("To be, or not"))   # job 1: read the prompt at once
    logits, cache = il.decode_step(m, int(logits.argmax()), cache)  # job 2: one token at a time
    trace = il.generate(m, "To be, or not", max_new_tokens=20, record="all")
    trace.latency                                  # TTFT, TPOT, E2E, ITL
    il.serve.run(m, il.serve.workload(8, 4.0, model=m))   # many users at once: continuous batching, paged KV

Imported lazily (PEP 562): ``import inferlab`` costs milliseconds, and torch and transformers are imported
the first time a name that needs them is used (``il.load``, ``il.generate``, ...). A command-line tool's
``--help`` therefore never waits for them; a notebook pays once, on its first ``il.load()``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# public name -> the module that defines it (relative to this package)
_NAMES: dict[str, str] = {
    **dict.fromkeys(("KVCache", "CacheSnapshot"), "cache"),
    **dict.fromkeys(("Stream", "decode_step", "forward_full", "generate", "prefill", "recompute_step",
                     "reference_generate", "stream"), "engine"),
    **dict.fromkeys(("eager_attention", "online_softmax_steps", "tiled_attention"), "flash"),
    **dict.fromkeys(("GenerationConfig", "TokenEvent"), "generation"),
    **dict.fromkeys(("by_language", "language", "set_language", "tr"), "i18n"),
    **dict.fromkeys(("Model", "ModelInfo", "load"), "models"),
    **dict.fromkeys(("GREEDY", "SamplingConfig", "SamplingStep", "filter_logits", "sample", "sample_with_steps"),
                    "sampling"),
    **dict.fromkeys(("Latency", "Summary", "summarize"), "timing"),
    **dict.fromkeys(("StepRecord", "Trace"), "trace"),
}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    """``il.load`` imports ``inferlab.models`` on first use; ``il.viz``, ``il.cost``... import that submodule."""
    if name in _NAMES:
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":  # the submodule exists but something it imports does not
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})


if TYPE_CHECKING:  # what static tools and editors see; nothing is imported at run time
    from . import cost, measure, narrate, serve, timing, viz, widgets  # noqa: F401
    from .cache import CacheSnapshot, KVCache  # noqa: F401
    from .engine import (  # noqa: F401
        Stream,
        decode_step,
        forward_full,
        generate,
        prefill,
        recompute_step,
        reference_generate,
        stream,
    )
    from .generation import GenerationConfig, TokenEvent  # noqa: F401
    from .i18n import by_language, language, set_language, tr  # noqa: F401
    from .models import Model, ModelInfo, load  # noqa: F401
    from .sampling import (  # noqa: F401
        GREEDY,
        SamplingConfig,
        SamplingStep,
        filter_logits,
        sample,
        sample_with_steps,
    )
    from .timing import Latency, Summary, summarize  # noqa: F401
    from .trace import StepRecord, Trace  # noqa: F401
