"""The speculative loop: guess, verify all guesses in one forward, keep what the target agrees with.

    logits = target.prefill(prompt)                       # job 1, as always: the first token (TTFT unchanged)
    repeat:
        guesses = draft.propose(sequence, k)              # cheap: copied from the prompt, or a small model
        logits = target.extend([last] + guesses)          # ONE forward reads the weights once for k + 1 tokens
        accepted, token = accept(logits, guesses)         # the target's own choice decides every position
        emit(guesses[:accepted] + [token])                # 1 to k + 1 tokens for one target step
        target.crop(...); draft.keep(...)                 # the caches forget the rejected guesses

Exact: greedy, every emitted token is the target's argmax at its position, so the answer equals
``inferlab.generate``'s token for token (up to float rounding: one forward of k + 1 rows may differ from k + 1
one-row forwards in the last bits, which flips only a near-tie). Sampling: the rejection rule of Leviathan et
al. (2023) and Chen et al. (2023), on the same temperature / top-k / top-p filtering of both p (target) and q
(draft): accept a guess x with probability min(1, p(x) / q(x)), else draw from max(0, p - q) renormalised;
after a round with every guess accepted, one more token from p. The output's distribution is then the
target's own (a lookup guess is a one-hot q).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from ..errors import check_number
from ..generation import GenerationConfig, TextAssembler, stop_reason
from ..i18n import tr
from ..models import Model, check_model
from ..plain import plain
from ..sampling import SamplingConfig, _filter, draw
from ..timing import clock
from ..tokens import piece_text
from ..trace import Trace
from .drafts import MAX_K, LookupDraft, ModelDraft, check_draft
from .runners import runner


@dataclass(frozen=True)
class Round:
    """One verify round: guesses proposed and accepted, tokens it emitted, and what each part cost."""

    proposed: int
    accepted: int
    emitted: int  # accepted + the target's own token (fewer when a stop came inside the round)
    draft_s: float
    verify_s: float
    guesses: tuple[int, ...] = ()  # the proposal (its first ``accepted`` ids stand)
    token: int = -1  # the target's own token after them (a correction, or the bonus after a full round)

    def to_dict(self) -> dict:
        return plain(self)


@dataclass
class SpeculativeTrace(Trace):
    """A ``Trace`` (``.generated_ids``, ``.text``, ``.latency`` ...) plus the rounds that made it."""

    rounds: list[Round] = field(default_factory=list)
    draft: str = "lookup"
    k: int = 4

    @property
    def acceptance(self) -> float:
        """Guesses accepted / guesses proposed (nan when nothing was proposed)."""
        proposed = sum(r.proposed for r in self.rounds)
        return sum(r.accepted for r in self.rounds) / proposed if proposed else math.nan

    @property
    def alpha(self) -> float:
        """The chance a guess is accepted, as Leviathan et al.'s formula uses it: accepted / guesses *tested* (a
        round stops testing at its first rejection, so ``acceptance`` counts untested guesses as failures)."""
        tested = sum(r.accepted + (r.accepted < r.proposed) for r in self.rounds)
        return sum(r.accepted for r in self.rounds) / tested if tested else math.nan

    @property
    def tokens_per_round(self) -> float:
        """Tokens emitted per target forward after the prefill (1.0 is plain decoding)."""
        return sum(r.emitted for r in self.rounds) / len(self.rounds) if self.rounds else math.nan

    @property
    def draft_seconds(self) -> float:
        return sum(r.draft_s for r in self.rounds)

    @property
    def verify_seconds(self) -> float:
        return sum(r.verify_s for r in self.rounds)

    def __repr__(self) -> str:
        return tr("SpeculativeTrace({n} tokens in {rounds} rounds after the first, {per:.2f} tokens per round, "
                  "acceptance {acc:.0%}, draft {draft}, k={k}; {latency})", n=len(self.generated_ids),
                  rounds=len(self.rounds), per=self.tokens_per_round, acc=self.acceptance, draft=self.draft,
                  k=self.k, latency=self.latency)


def accept(logits: torch.Tensor, guesses: list[int], qs: list[torch.Tensor] | None, sampling: SamplingConfig,
           generator: torch.Generator | None) -> tuple[int, int]:
    """The verify rule. ``logits`` ``[len(guesses) + 1, vocab]``: the target's logits before each guess and after
    the last. ``qs``: each guess's draft distribution (None: a certainty, as lookup's guesses and greedy drafts).
    Returns ``(accepted, token)``: how many guesses stand, and the target's own token after them."""
    for i, guess in enumerate(guesses):
        if sampling.greedy:
            choice = int(torch.argmax(logits[i]))
            if choice != guess:
                return i, choice
            continue
        p = _filter(logits[i], sampling).softmax(-1)
        q = qs[i] if qs is not None else None
        q_x = 1.0 if q is None else float(q[guess])
        if float(torch.rand((), generator=generator)) < min(1.0, float(p[guess]) / q_x):
            continue
        residual = p.clone()
        if q is None:
            residual[guess] = 0.0
        else:
            residual = (p - q).clamp_(min=0.0)
        if float(residual.sum()) <= 0.0:  # p == q exactly: a rejection had probability 0
            residual = p
        return i, int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
    return len(guesses), int(draw(logits[len(guesses)], sampling, generator))


def _draft_for(model: Model, draft, ngram: int, path: str, slots: int):
    if isinstance(draft, str):
        return LookupDraft(ngram if draft == "lookup" else 0), draft
    return ModelDraft(runner(draft, path, slots)), draft.info.name


def generate(model: Model, prompt: str, max_new_tokens: int | None = None, *, draft="lookup", k: int = 4,
             ngram: int = 3, path: str = "auto", config: GenerationConfig | None = None,
             **settings) -> SpeculativeTrace:
    """Speculative decoding of ``prompt``: ``inferlab.generate``'s answer, several tokens per target forward.

    Args:
        draft: ``"lookup"`` (guesses copied from prompt + answer), a ``Model`` with the target's tokenizer,
            device and dtype (e.g. ``first_layers(model, 2)``), or ``"none"`` (no guesses: plain decoding on the
            same path, the baseline a gain is measured against).
        k: guesses per round (1 to 64). ngram: the longest n-gram lookup matches (at least 1).
        path: ``"auto"`` (the fast path where it runs the model), ``"fast"`` or ``"engine"``.
        **settings: ``inferlab.generate``'s: ``temperature``, ``top_k``, ``top_p``, ``seed``, ``stop_strings``,
            ``stop_at_eos``, ``stop_token_ids`` (checked the same way, before any forward pass).
    """
    check_model(model)
    t_req = clock(model.device)
    check_number("k", k, low=1, high=MAX_K, integer=True, fix="guess 1 to 64 tokens a round (4 is typical)")
    check_number("ngram", ngram, low=1, integer=True, fix="match at least the last token (3 is typical)")
    check_draft(model, draft)
    config = GenerationConfig.from_arguments(config, max_new_tokens, None, **settings)
    ids = config.check(model, prompt)
    slots = len(ids) + config.max_new_tokens
    t_build = clock(model.device)  # decoders and caches are set up off the clock, as a server holds them ready
    target = runner(model, path, slots)
    guesser, name = _draft_for(model, draft, ngram, path, slots)
    t_req += clock(model.device) - t_build
    sampling, device = config.sampling, model.device
    generator = sampling.generator(device if device.type == "cuda" else "cpu")
    text = TextAssembler(model.tokenizer, config.stop_strings)
    trace = SpeculativeTrace.start(model, prompt, ids, config, tokenize_seconds=clock(device) - t_req,
                                   runner=tr("speculative ({draft}, k={k})", draft=name, k=k))
    trace.draft, trace.k = name, k
    sequence = list(ids)
    guesser.start(ids)
    token = int(draw(target.prefill(ids), sampling, generator))                   # the first token: TTFT
    pending = [token]
    while True:
        t_emit, first = clock(device) - t_req, len(trace.generated_ids)
        for token in pending:                                                     # emit, and stop?
            stop = stop_reason(model, config, token, len(trace.generated_ids))
            piece = text.add(token, final=stop is not None)
            stop = text.stopped or stop
            trace.add_token(token, piece_text(model.tokenizer, token), t_emit, piece)
            sequence.append(token)
            if stop is not None:
                trace.stop_reason, trace.text = stop, text.text
                if trace.rounds:  # a stop inside a round: it emitted only the tokens up to the stop
                    trace.rounds[-1] = dataclasses.replace(trace.rounds[-1], emitted=len(trace.generated_ids) - first)
                return trace
        room = config.max_new_tokens - len(trace.generated_ids) - 1  # guesses that could still be emitted
        t0 = clock(device)
        guesses, qs = guesser.propose(sequence, min(k, room), sampling, generator) if room > 0 else ([], None)
        t1 = clock(device)
        logits = target.extend([sequence[-1], *guesses])                           # verify: one forward
        accepted, token = accept(logits, guesses, qs, sampling, generator)
        t2 = clock(device)
        kept = len(sequence) + accepted                                           # last token + accepted guesses
        target.crop(kept)
        guesser.keep(kept)
        pending = [*guesses[:accepted], token]
        trace.rounds.append(Round(len(guesses), accepted, len(pending), t1 - t0, t2 - t1, tuple(guesses), token))
