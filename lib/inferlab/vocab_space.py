"""The vocabulary as a space: the token table's rows as points, their neighbours and a projection (notebook 02).

``VocabSpace`` holds the token table once (rows, unit rows, which rows are shared copies) so neighbour
searches and projections reuse it. Every statement about structure is a number computed here.

    >>> space = vocab_space(m)                              # doctest: +SKIP
    >>> space.nearest("king", k=5)                          # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from .embeddings import token_table
from .errors import bad_value
from .i18n import by_language, tr
from .models import Model
from .tokens import piece_text, tokenize

MAX_WORD_CHARS = 100

# Word groups for the projection. Each word is looked up with its leading space (" king"), the form a
# word has inside a sentence. Words the tokenizer splits, or that the model never saw, are reported.
WORD_GROUPS: dict[str, list[str]] = {
    "numbers": ["one", "two", "three", "four", "five", "six", "seven", "ten"],
    "family": ["father", "mother", "son", "daughter", "brother", "sister", "wife", "husband"],
    "rank": ["king", "queen", "prince", "duke", "lord", "lady", "emperor", "knight"],
    "body": ["hand", "eye", "heart", "head", "face", "blood", "arm", "tongue"],
    "verbs": ["speak", "come", "go", "give", "take", "see", "say", "run"],
    "colours": ["red", "green", "white", "black", "blue"],
    "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Sunday"],
}


def group_name(group: str) -> str:
    """A ``WORD_GROUPS`` key in the reader's language (legends, tables); any other name as it is."""
    return {"numbers": tr("numbers"), "family": tr("family"), "rank": tr("rank"), "body": tr("body"),
            "verbs": tr("verbs"), "colours": tr("colours"), "days": tr("days")}.get(group, group)


class NotOneToken(ValueError):
    """A word that is not one token, so it has no row of its own (``pieces`` says what it became)."""

    def __init__(self, text: str, pieces: list[str], ids: list[int]):
        self.text, self.pieces, self.ids = text, pieces, ids
        super().__init__(tr(
            "{text!r} is not one token in GPT-2's vocabulary: the tokenizer cuts it into {n} pieces {pieces} (ids "
            "{ids}). The embedding table has one row per token, so there is no single row to compare. Fix: try one "
            "of the pieces, a more common word, or switch the leading space.", text=text, n=len(ids), pieces=pieces,
            ids=ids))


@dataclass(frozen=True)
class Neighbour:
    id: int
    token: str
    cosine: float


@dataclass(frozen=True)
class Neighbours:
    """The tokens whose rows point the most the same way as the query's row."""

    query: str
    query_id: int
    items: list[Neighbour]
    chance: list[float] = field(default_factory=list)  # the same ranks against a random table (see nearest)
    note: str = ""

    def __repr__(self) -> str:
        shown = ", ".join(f"{n.token!r} {n.cosine:.2f}" for n in self.items[:6])
        more = " ..." if len(self.items) > 6 else ""
        head = tr("Neighbours({query!r} -> {shown}{more})", query=self.query, shown=shown, more=more)
        return f"{head} {self.note}" if self.note else head


@dataclass(frozen=True)
class Projection:
    """Words projected on their top principal components; ``explained`` is each axis' share of the variance."""

    words: list[str]
    groups: list[str]
    coords: torch.Tensor            # [n_words, dims]
    explained: list[float]          # fraction of the words' variance on each axis
    skipped: dict[str, str] = field(default_factory=dict)  # word -> why it was left out

    def __repr__(self) -> str:
        kept = by_language(en=", ", zh="、").join(f"{e:.0%}" for e in self.explained)
        return tr("Projection({n} words on {axes} axes keeping {kept} of the variance)", n=len(self.words),
                  axes=len(self.explained), kept=kept)


@dataclass(frozen=True)
class VocabSpace:
    """The token table ``wte`` ``[vocab, d_model]`` with what searches need, computed once."""

    tokenizer: object
    wte: torch.Tensor               # [vocab, d_model]
    unit: torch.Tensor              # [vocab, d_model], each row scaled to length 1
    shared: torch.Tensor            # [vocab] bool: the row is an exact copy shared by many tokens

    @functools.cached_property
    def null_unit(self) -> torch.Tensor:
        """A random table, as many rows as learned ones, same average row and spread per dimension, unit rows.

        Among thousands of rows something always lies close by chance; a neighbour means something only
        if it beats the same rank in this table. (Built once, with a fixed seed.)
        """
        rows = self.wte[~self.shared]
        g = torch.Generator().manual_seed(0)
        null = rows.mean(0) + rows.std(0) * torch.randn(rows.shape, generator=g)
        return torch.nn.functional.normalize(null, dim=-1)

    @property
    def n_shared(self) -> int:
        return int(self.shared.sum())

    def token_id(self, word: str, leading_space: bool = True) -> int:
        """The id of ``word`` (with a leading space unless ``leading_space=False``); ``NotOneToken`` if split."""
        if not isinstance(word, str) or not word.strip():
            raise bad_value("word", word, tr("a word such as 'king'"), tr("type a word"))
        if len(word) > MAX_WORD_CHARS:
            raise bad_value("word", word[:20] + "...", tr("at most {n} characters", n=MAX_WORD_CHARS),
                            tr("type one word"))
        text = " " + word.strip() if leading_space else word.strip()
        pieces = tokenize(self.tokenizer, text).pieces
        if len(pieces) != 1:
            raise NotOneToken(text, [p.label for p in pieces], [p.id for p in pieces])
        return pieces[0].id

    def nearest(self, word: str | int, k: int = 10, *, leading_space: bool = True) -> Neighbours:
        """The ``k`` tokens with the highest cosine similarity to ``word``'s row (shared rows left out)."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 200:
            raise bad_value("k", k, "an integer 1 <= k <= 200", "e.g. k=10")
        qid = word if isinstance(word, int) else self.token_id(word, leading_space)
        query = piece_text(self.tokenizer, qid)
        if bool(self.shared[qid]):
            return Neighbours(query, qid, [], note=tr(
                "{query!r} has the same row as {others:,} other tokens: the model never learned a vector of its own "
                "for it (it did not occur in training), so its neighbours mean nothing.", query=query,
                others=self.n_shared - 1))
        scores = self.unit @ self.unit[qid]
        scores[self.shared] = -2.0
        scores[qid] = -2.0
        top = torch.topk(scores, k)
        items = [Neighbour(int(i), piece_text(self.tokenizer, int(i)), float(s))
                 for s, i in zip(top.values, top.indices)]
        chance = torch.topk(self.null_unit @ self.unit[qid], k).values
        return Neighbours(query, qid, items, [float(c) for c in chance])

    def typical_cosine(self, n: int = 4000, seed: int = 0) -> tuple[float, float]:
        """Cosine of random pairs of (non-shared) tokens: (median, 99th percentile), to judge a score."""
        g = torch.Generator().manual_seed(seed)
        rows = torch.nonzero(~self.shared).squeeze(1)
        a, b = (rows[torch.randint(len(rows), (n,), generator=g)] for _ in range(2))
        cos = (self.unit[a] * self.unit[b]).sum(-1)
        return float(cos.median()), float(cos.quantile(0.99))

    def background(self, word: str | int, share: float = 0.999, *, leading_space: bool = True) -> tuple[float, float]:
        """``word``'s cosines with every learned token: (median, the ``share`` quantile), to judge a neighbour.

        A neighbour means something when it beats the query's own random-pair distribution: e.g. above its
        99.9th percentile (``share=0.999``), higher than all but 1 in 1,000 random tokens.
        """
        if not 0.5 <= share < 1:
            raise bad_value("share", share, "0.5 <= share < 1", "e.g. share=0.999 (the top 0.1%)")
        qid = word if isinstance(word, int) else self.token_id(word, leading_space)
        mask = ~self.shared
        mask[qid] = False
        cos = self.unit[mask] @ self.unit[qid]
        return float(cos.median()), float(cos.quantile(share))

    def lookup_words(self, groups: Mapping[str, Sequence[str]]) -> tuple[list[str], list[str], list[int], dict]:
        """(words, group names, ids, skipped) for the words that are one token with a learned row."""
        words, names, ids, skipped = [], [], [], {}
        for group, items in groups.items():
            for word in items:
                try:
                    i = self.token_id(word)
                except ValueError as exc:
                    split = isinstance(exc, NotOneToken)
                    skipped[word] = (tr("not one token: {pieces}", pieces=" + ".join(map(repr, exc.pieces))) if split
                                     else str(exc))
                    continue
                if bool(self.shared[i]):
                    skipped[word] = tr("the model never saw it (its row is a shared copy)")
                    continue
                if i not in ids:
                    words.append(word)
                    names.append(group)
                    ids.append(i)
        return words, names, ids, skipped

    def project(self, groups: Mapping[str, Sequence[str]], dims: int = 2) -> Projection:
        """PCA of the chosen words' unit rows (centred on their mean) onto ``dims`` (2 or 3) axes."""
        if dims not in (2, 3):
            raise bad_value("dims", dims, "2 or 3", "pick a 2-D or 3-D view")
        words, names, ids, skipped = self.lookup_words(groups)
        if len(words) <= dims:
            raise ValueError(tr("only {n} usable words ({words}); a {dims}-D projection needs more than {dims}. Fix: "
                                "add common one-token words. Left out: {skipped}", n=len(words),
                                words=", ".join(words) or tr("none"), dims=dims, skipped=skipped))
        x = self.unit[ids]
        x = x - x.mean(0)
        _, s, vh = torch.linalg.svd(x, full_matrices=False)
        var = s**2 / (s**2).sum()
        return Projection(words, names, x @ vh[:dims].T, [float(v) for v in var[:dims]], skipped)

    def cohesion(self, groups: Mapping[str, Sequence[str]], n_background: int = 2000,
                 seed: int = 0) -> dict[str, tuple[float, float]]:
        """Per group: (mean cosine between its words, mean cosine from its words to random learned tokens).

        The second number is the background: learned rows are not spread evenly, so words can look alike
        only because they are all rare (or all common). A group is "together" when the first clearly beats it.
        """
        _, names, ids, _ = self.lookup_words(groups)
        g = torch.Generator().manual_seed(seed)
        learned = torch.nonzero(~self.shared).squeeze(1)
        background = self.unit[learned[torch.randint(len(learned), (n_background,), generator=g)]]
        out = {}
        for name in groups:
            rows = self.unit[[i for i, n in zip(ids, names) if n == name]]
            n = len(rows)
            if n < 2:
                continue
            within = (rows @ rows.T).sum() - n  # leave out each word's cosine with itself (1)
            out[name] = (float(within / (n * n - n)), float((rows @ background.T).mean()))
        return out

    def __repr__(self) -> str:
        v, d = self.wte.shape
        return tr("VocabSpace({v:,} tokens x {d} dims; {shared:,} rows are one shared copy)", v=v, d=d,
                  shared=self.n_shared)


@torch.no_grad()
def shared_rows(wte: torch.Tensor, min_copies: int = 100) -> torch.Tensor:
    """``[vocab]`` bool: rows that are exact copies of a vector at least ``min_copies`` tokens share.

    A model trained on a small corpus can leave every token it never saw at one common starting vector;
    such rows carry no meaning. Exact copies are found by projecting on a random direction first (fast).
    """
    key = wte.float() @ torch.randn(wte.shape[1], generator=torch.Generator().manual_seed(0))
    _, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
    mask = counts[inverse] >= min_copies
    for v in torch.nonzero(counts >= min_copies).squeeze(1):  # confirm: same projection -> same row
        rows = torch.nonzero(inverse == v).squeeze(1)
        mask[rows] = (wte[rows] == wte[rows[0]]).all(dim=1)
    return mask


def vocab_space(model: Model) -> VocabSpace:
    """Build the ``VocabSpace`` of a loaded model (under a second)."""
    wte = token_table(model).float().cpu()
    return VocabSpace(model.tokenizer, wte, torch.nn.functional.normalize(wte, dim=-1), shared_rows(wte))
