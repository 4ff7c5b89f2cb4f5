"""inferlab: run GPT-2 and record every step of inference, so notebooks can draw it.

The flat public API (everything else is importable by path, e.g. ``inferlab.viz.tokens``)::

    import inferlab as il
    m = il.load()                                  # real GPT-2 if it can be had, else the bundled model
    logits, cache = il.prefill(m, m.encode("To be, or not"))   # job 1: read the prompt at once
    logits, cache = il.decode_step(m, int(logits.argmax()), cache)  # job 2: one token at a time
    trace = il.generate(m, "To be, or not", max_new_tokens=20, record="all")
    trace.latency                                  # TTFT, TPOT, E2E, ITL
"""

from . import cost, timing  # noqa: F401 - il.cost and il.timing for notebooks
from .cache import CacheSnapshot, KVCache
from .engine import Stream, decode_step, forward_full, generate, prefill, reference_generate, stream
from .generation import GenerationConfig, TokenEvent
from .i18n import by_language, language, set_language, tr
from .models import Model, ModelInfo, load
from .sampling import GREEDY, SamplingConfig, SamplingStep, filter_logits, sample, sample_with_steps
from .timing import Latency, Summary, summarize
from .trace import StepRecord, Trace

__version__ = "0.1.0"

__all__ = [
    "GREEDY", "CacheSnapshot", "GenerationConfig", "KVCache", "Latency", "Model", "ModelInfo", "SamplingConfig",
    "SamplingStep", "StepRecord", "Stream", "Summary", "TokenEvent", "Trace", "by_language", "decode_step",
    "filter_logits", "forward_full", "generate", "language", "load", "prefill", "reference_generate", "sample",
    "sample_with_steps", "set_language", "stream", "summarize", "tr",
]
