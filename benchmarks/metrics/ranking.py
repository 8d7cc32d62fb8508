"""LongMemEval's retrieval metrics for any method: rankings of sessions and turns from its items.

A method returns items best first; each item covers turns. The turn ranking lists each covered
turn at its first appearance; the session ranking lists each turn's session likewise. Against
``answer_session_ids`` (sessions) and ``has_answer`` turns (turns), ``recall_any@k``,
``recall_all@k`` and ``ndcg_any@k`` follow the official definitions. Abstention (``_abs``)
questions are skipped, as in the official evaluation; so is the turn level of a question with
no ``has_answer`` turn (its recall would be undefined).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.metrics.retrieval import ndcg_any_at_k, recall_all_at_k, recall_any_at_k
from memsys.types import Question, Retrieval

CUTOFFS: tuple[int, ...] = (5, 10, 30)
METRICS = {"recall_any": recall_any_at_k, "recall_all": recall_all_at_k, "ndcg_any": ndcg_any_at_k}


def rankings(retrieval: Retrieval, session_of: Mapping[str, str]) -> dict[str, list[str]]:
    """Turn and session ids in rank order, each once."""
    turns = list(retrieval.turn_ids)
    sessions = list(
        dict.fromkeys(session_of[turn_id] for turn_id in turns if turn_id in session_of)
    )
    return {"turn": turns, "session": sessions}


def ranking_metrics(
    question: Question, retrieval: Retrieval, session_of: Mapping[str, str]
) -> dict[str, Any] | None:
    """``{"session": {"recall_any@5": ..., ...}, "turn": {...}}``; None for ``_abs`` questions.

    >>> from memsys.types import MemoryItem
    >>> q = Question("q", "q", "?", "a", "multi_session", evidence=("s2:0",), evidence_sessions=("s2",))
    >>> r = Retrieval((MemoryItem("x", ("s1:0",)), MemoryItem("y", ("s2:0", "s2:1"))))
    >>> ranking_metrics(q, r, {"s1:0": "s1", "s2:0": "s2", "s2:1": "s2"})["session"]["recall_all@5"]
    1.0
    """
    if question.is_abstention:
        return None
    ranked = rankings(retrieval, session_of)
    gold = {"session": set(question.evidence_sessions), "turn": set(question.evidence)}
    return {
        level: {
            f"{name}@{k}": metric(ranked[level], gold[level], k=k)
            for k in CUTOFFS
            for name, metric in METRICS.items()
        }
        if gold[level]
        else None
        for level in ("session", "turn")
    }
