"""LongMemEval's retrieval metrics under its ``official`` definition: what its own code computes.

The definition is the behaviour of ``src/retrieval/run_retrieval.py`` and
``src/retrieval/eval_utils.py`` (xiaowu0162/LongMemEval @ 9e0b455; the files are in
``data/evaluators/longmemeval/``), reimplemented here and tested against cases computed from
that code. Its corpus, gold relabelling, metrics, the session level from a turn ranking, the
questions skipped and ``mrr`` (this project's addition): docs/scoring.md, the one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Granularity = Literal["session", "turn"]
GRANULARITIES: tuple[Granularity, ...] = ("session", "turn")
#: The cut-offs run_retrieval.py reports.
CUTOFFS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)
#: The one definition the project implements; a future one gets a name of its own here.
DEFINITIONS: tuple[str, ...] = ("official",)
ANSWER, NOANS = "answer", "noans"
SKIP_ABSTENTION = "abstention question (_abs)"
SKIP_NO_TARGET = "no user turn marked has_answer"


class RankingError(ValueError):
    """A ranking names an id that is not in its question's haystack, or repeats one."""


@dataclass(frozen=True)
class SessionTurns:
    """One haystack session as the official corpus reads it: its dataset id and, per turn,
    ``(role, has_answer)`` (``has_answer`` None where the data has no flag)."""

    session_id: str
    turns: tuple[tuple[str, bool | None], ...]


def turn_id(session_id: str, position: int) -> str:
    """The official id of the turn at 0-based ``position`` of its session."""
    return f"{session_id}_{position + 1}"


def session_of(corpus_id: str) -> str:
    """eval_utils' ``strip_turn_id``: everything before the last ``_``."""
    return "_".join(corpus_id.split("_")[:-1])


def relabelled(corpus_id: str) -> str:
    """``corpus_id`` with every ``answer`` replaced by ``noans``."""
    return corpus_id.replace(ANSWER, NOANS)


@dataclass(frozen=True)
class Index:
    """One granularity's corpus: the relabelled id of each entry, and where each id a ranking
    may use (the dataset's form or the relabelled one) sits."""

    ids: tuple[str, ...]
    slots: Mapping[str, tuple[int, ...]]
    #: Ids of the haystack that are not corpus entries (assistant turns): dropped from a ranking.
    outside: frozenset[str] = frozenset()

    @property
    def gold(self) -> frozenset[str]:
        return frozenset(entry for entry in self.ids if ANSWER in entry)

    @classmethod
    def of(cls, entries: Iterable[tuple[str, str]], outside: Iterable[str] = ()) -> Index:
        """From ``(dataset_id, relabelled_id)`` per corpus entry, in corpus order."""
        ids: list[str] = []
        slots: dict[str, list[int]] = {}
        for position, (raw, label) in enumerate(entries):
            ids.append(label)
            for name in dict.fromkeys((raw, label)):
                slots.setdefault(name, []).append(position)
        return cls(tuple(ids), {k: tuple(v) for k, v in slots.items()}, frozenset(outside))

    def positions(self, ranked_ids: Sequence[str]) -> list[int]:
        """The corpus entries a ranking names, in its order (the n-th mention of a repeated
        session's id is its n-th copy; assistant turns dropped).

        Raises: RankingError: an id not in the haystack, or named more often than it has copies."""
        used: dict[str, int] = {}
        found = []
        for name in ranked_ids:
            copies = self.slots.get(name)
            if copies is None:
                if name in self.outside:
                    continue
                raise RankingError(f"id {name!r} is not in the question's haystack")
            key = self.ids[copies[0]]
            nth = used.get(key, 0)
            if nth >= len(copies):
                raise RankingError(f"id {name!r} is ranked more often than it occurs")
            used[key] = nth + 1
            found.append(copies[nth])
        return found


@dataclass(frozen=True)
class Corpus:
    """One question's official corpora (turn and session level) and whether it is scored."""

    question_id: str
    turns: Index
    sessions: Index
    skipped: str | None = None

    @classmethod
    def build(cls, question_id: str, sessions: Sequence[SessionTurns]) -> Corpus:
        """``process_item_flat_index`` over the haystack, and the main loop's skip rule."""
        turn_entries: list[tuple[str, str]] = []
        assistant: list[str] = []
        session_entries: list[tuple[str, str]] = []
        for session in sessions:
            sid = session.session_id
            is_answer = ANSWER in sid
            user_flags = []
            for position, (role, has_answer) in enumerate(session.turns):
                raw = turn_id(sid, position)
                if role != "user":
                    assistant.append(raw)
                    continue
                user_flags.append(bool(has_answer))
                if is_answer and has_answer is None:
                    raise ValueError(
                        f"{question_id}: user turn {raw} of an answer session has no has_answer"
                    )
                turn_entries.append((raw, relabelled(raw) if is_answer and not has_answer else raw))
            session_label = relabelled(sid) if is_answer and not any(user_flags) else sid
            session_entries.append((sid, session_label))
        has_target = any(
            role == "user" and has_answer for s in sessions for role, has_answer in s.turns
        )
        skipped = (
            SKIP_ABSTENTION if "_abs" in question_id else (None if has_target else SKIP_NO_TARGET)
        )
        return cls(
            question_id,
            Index.of(turn_entries, assistant),
            Index.of(session_entries),
            skipped,
        )

    def index(self, granularity: Granularity) -> Index:
        return self.turns if granularity == "turn" else self.sessions


def dcg(relevances: Sequence[float], k: int) -> float:
    """eval_utils' DCG: rank 1 undiscounted, rank r >= 2 divided by log2(r), summed in the same
    order of float operations (numpy's), so the values are equal to the last bit."""
    top = np.asarray(relevances[:k], dtype=np.float64)
    if not top.size:
        return 0.0
    return float(top[0] + np.sum(top[1:] / np.log2(np.arange(2, top.size + 1))))


def evaluate(
    ranking: Sequence[int], gold: Iterable[str], corpus_ids: Sequence[str], k: int
) -> tuple[float, float, float]:
    """eval_utils' ``evaluate_retrieval``: (recall_any, recall_all, ndcg_any) at ``k``."""
    gold = list(gold)
    recalled = {corpus_ids[i] for i in ranking[:k]}
    recall_any = float(any(doc in recalled for doc in gold))
    recall_all = float(all(doc in recalled for doc in gold))
    relevance = [1.0 if doc in gold else 0.0 for doc in corpus_ids]
    ideal = dcg(sorted(relevance, reverse=True), k)
    actual = dcg([relevance[i] for i in ranking[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def evaluate_turn_to_session(
    ranking: Sequence[int], gold: Iterable[str], corpus_ids: Sequence[str], k: int
) -> tuple[float, float, float]:
    """eval_utils' ``evaluate_retrieval_turn2session``: session metrics from turn slots."""
    session_gold = {session_of(doc) for doc in gold}
    sessions = [session_of(doc) for doc in corpus_ids]
    effective_k = k
    while effective_k <= len(sessions) and len({sessions[i] for i in ranking[:effective_k]}) < k:
        effective_k += 1
    return evaluate(ranking, session_gold, sessions, effective_k)


def reciprocal_rank(ranked: Iterable[str], gold: frozenset[str] | set[str]) -> float:
    """1 / rank of the first gold id among ``ranked`` (ids counted at their first mention)."""
    for rank, doc in enumerate(dict.fromkeys(ranked), start=1):
        if doc in gold:
            return 1.0 / rank
    return 0.0


def metric_names() -> tuple[str, ...]:
    """Every metric a level reports, in column order."""
    names = [f"{name}@{k}" for k in CUTOFFS for name in ("recall_any", "recall_all", "ndcg_any")]
    return (*names, "mrr")


Evaluator = Callable[[Sequence[int], Iterable[str], Sequence[str], int], tuple[float, float, float]]


def _scores(
    evaluate_at: Evaluator,
    ranking: Sequence[int],
    gold: Iterable[str],
    ids: Sequence[str],
    rr: float,
) -> dict[str, float]:
    """Every metric of :func:`metric_names` for one level."""
    scores: dict[str, float] = {}
    for k in CUTOFFS:
        recall_any, recall_all, ndcg_any = evaluate_at(ranking, gold, ids, k)
        scores |= {
            f"recall_any@{k}": recall_any,
            f"recall_all@{k}": recall_all,
            f"ndcg_any@{k}": ndcg_any,
        }
    return scores | {"mrr": rr}


def score(
    corpus: Corpus, granularity: Granularity, ranked_ids: Sequence[str]
) -> dict[str, dict[str, float]]:
    """One question's metrics: ``{"turn": {...}, "session": {...}}`` for a turn ranking (session
    level derived as the official code does), ``{"session": {...}}`` for a session ranking; the
    caller skips :attr:`Corpus.skipped` questions.

    Raises: RankingError: the ranking names an id outside the haystack, or repeats one."""
    index = corpus.index(granularity)
    ranking = index.positions(ranked_ids)
    gold = index.gold
    ranked = [index.ids[i] for i in ranking]
    own = _scores(evaluate, ranking, gold, index.ids, reciprocal_rank(ranked, gold))
    if granularity == "session":
        return {"session": own}
    session_gold = {session_of(doc) for doc in gold}
    rr = reciprocal_rank((session_of(doc) for doc in ranked), session_gold)
    derived = _scores(evaluate_turn_to_session, ranking, gold, index.ids, rr)
    return {"turn": own, "session": derived}
