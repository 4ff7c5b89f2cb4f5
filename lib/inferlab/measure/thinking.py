"""A reasoning model's thinking, timed: hidden tokens first, then the visible answer (notebook 07, section 8).

Thinking is ordinary decoding whose first ``budget`` tokens the user never sees: ``thinking_sweep`` measures
how long the first *visible* token waits, and ``split_thinking`` cuts one run's text and latency in two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import bad_value, check_number
from ..i18n import tr
from ..models import Model
from ..timing import Latency, summarize
from ..trace import Trace
from ..units import ms_cell
from .latency import measure


@dataclass(frozen=True)
class ThinkingPoint:
    """One thinking budget: ``budget`` hidden tokens first, then the visible answer. Seconds per repeat."""

    budget: int
    first_token: tuple[float, ...]  # TTFT of the stream (the first hidden token when budget > 0)
    first_visible: tuple[float, ...]  # time to the first token the user sees
    visible_tpot: tuple[float, ...]

    def __repr__(self) -> str:
        return tr("ThinkingPoint({budget} hidden tokens: first visible token after {ms} ms)", budget=self.budget,
                  ms=ms_cell(summarize(self.first_visible).median))


def token_times(latency: Latency) -> list[float]:
    """Each token's arrival time since the request, rebuilt from TTFT and the gaps (seconds)."""
    times = [latency.ttft]
    for gap in latency.itl:
        times.append(times[-1] + gap)
    return times


def split_thinking(trace: Trace, budget: int) -> tuple[str, str, Latency]:
    """(hidden text, visible text, the visible part's latency measured from the request).

    The texts are what a stream showed token by token (``trace.shown_pieces``), so a character cut between
    the last hidden token and the first visible one is shown whole on the visible side, never as U+FFFD.
    """
    if not 0 <= budget < len(trace.token_times):
        raise bad_value("budget", budget, f"0 <= budget < {len(trace.token_times)} generated tokens",
                        "generate more tokens than the thinking budget")
    shown = trace.shown_pieces or trace.generated_pieces  # a trace saved before shown_pieces existed
    hidden = "".join(shown[:budget])
    return hidden, "".join(shown[budget:]), Latency.from_times(0.0, trace.token_times[budget:])


def thinking_sweep(model: Model, prompt: str, budgets: Sequence[int] = (0, 8, 16, 32), *, answer_tokens: int = 8,
                   repeats: int = 3, warmup: int = 1, **sampling) -> list[ThinkingPoint]:
    """Simulate a reasoning model: generate ``budget`` hidden tokens, then ``answer_tokens`` visible ones.

    It is one ordinary generation whose first ``budget`` tokens are not shown: exactly what a reasoning
    model's thinking costs in time (its hidden tokens are real decode steps).
    """
    check_number("answer_tokens", answer_tokens, low=1, integer=True)
    out = []
    for i, n in enumerate(budgets):
        check_number("budget", n, low=0, integer=True)
        # one warm-up before the first budget is enough: every budget runs the same shapes
        r = measure(model, prompt, n + answer_tokens, repeats=repeats, warmup=warmup if i == 0 else 0, **sampling)
        visible = [Latency.from_times(0.0, token_times(run)[n:]) for run in r.runs]
        out.append(ThinkingPoint(n, tuple(x.ttft for x in r.runs), tuple(v.ttft for v in visible),
                                 tuple(v.tpot for v in visible)))
    return out
