"""Deterministic subsets: the same questions on every machine, stratified by category.

``smoke`` keeps the first ``conversations`` conversations and at most ``max_questions``
questions stratified by category: each category gets a share proportional to its size (largest
remainder, at least one per category while the cap allows), filled by a seeded shuffle within
the category; the chosen questions keep the dataset's order. ``full`` keeps everything.
``max_sessions`` cuts each conversation to its first sessions and keeps only the questions whose
evidence lies entirely in them (``regression``: a conversation small enough to record every LLM
call of every method).
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from benchmarks.data.specs import Conversations
from memsys.types import Conversation, Question

#: A sample (question ids kept, conversations holding them) per (data key, subset) drawn in this
#: process: the jobs of one sweep share their subset, and LongMemEval-S's first read (parsing
#: every haystack for its question's type) is its slowest part.
_SAMPLES: dict[Hashable, tuple[frozenset[str], frozenset[str]]] = {}


@dataclass(frozen=True)
class SubsetSpec:
    """How to cut a dataset: ``None`` means no limit."""

    name: str = "full"
    conversations: int | None = None
    max_questions: int | None = None
    max_sessions: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for field in ("conversations", "max_questions", "max_sessions"):
            value = getattr(self, field)
            if value is not None and value < 1:
                raise ValueError(f"subset.{field} must be a positive integer or null, got {value}")


def stratified_sample(questions: Sequence[Question], limit: int, seed: int) -> list[Question]:
    """At most ``limit`` questions, proportional per category, in their original order.

    >>> from memsys.types import Question
    >>> qs = [Question(f"q{i}", "c", "?", "a", "x" if i < 6 else "y") for i in range(8)]
    >>> [q.category for q in stratified_sample(qs, 4, seed=0)]
    ['x', 'x', 'x', 'y']
    """
    if len(questions) <= limit:
        return list(questions)
    by_category: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        by_category[question.category].append(question)
    quotas = _quotas({category: len(items) for category, items in by_category.items()}, limit)
    chosen: set[str] = set()
    for category, items in sorted(by_category.items()):
        shuffled = list(items)
        random.Random(f"{seed}:{category}").shuffle(shuffled)
        chosen.update(question.question_id for question in shuffled[: quotas[category]])
    return [question for question in questions if question.question_id in chosen]


def _quotas(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """Largest-remainder allocation of ``limit`` over categories, at least one each if possible."""
    total = sum(sizes.values())
    exact = {category: limit * size / total for category, size in sizes.items()}
    quotas = {category: min(size, max(1, int(exact[category]))) for category, size in sizes.items()}
    order = sorted(sizes, key=lambda c: (-(exact[c] - int(exact[c])), c))
    while sum(quotas.values()) > limit:
        largest = max(sorted(quotas), key=lambda c: quotas[c])
        quotas[largest] -= 1
    index = 0
    while sum(quotas.values()) < limit and index < 10 * len(order):
        category = order[index % len(order)]
        if quotas[category] < sizes[category]:
            quotas[category] += 1
        index += 1
    return quotas


def select(
    conversations: Conversations, spec: SubsetSpec, data_key: Hashable | None = None
) -> Iterator[Conversation]:
    """The conversations of a subset, lazily, with only the questions the cap keeps.

    ``conversations`` makes a fresh stream each call. With a question cap the stream is read
    twice: once for question ids and categories only (nothing else is kept, so LongMemEval-S
    stays bounded in memory), once for the conversations holding the sample, asked by id. A
    ``data_key`` naming the data's content (its files' digests) lets later calls in this process
    skip the first read.
    """
    if spec.max_questions is None:
        yield from _take(conversations(), spec)
        return
    memo = (data_key, spec)
    sample = _SAMPLES.get(memo) if data_key is not None else None
    if sample is None:
        sample = _sample(conversations, spec)
        if data_key is not None:
            _SAMPLES[memo] = sample
    keep, holders = sample
    for conversation in conversations(holders):  # a loader ignoring ``wanted``: kept is empty
        if spec.max_sessions is not None:
            conversation = first_sessions(conversation, spec.max_sessions)
        kept = tuple(q for q in conversation.questions if q.question_id in keep)
        if kept:
            yield dataclasses.replace(conversation, questions=kept)


def _sample(
    conversations: Conversations, spec: SubsetSpec
) -> tuple[frozenset[str], frozenset[str]]:
    """The question ids a capped subset keeps and the ids of the conversations holding them."""
    assert spec.max_questions is not None
    questions = [q for c in _take(conversations(), spec) for q in c.questions]
    chosen = stratified_sample(questions, spec.max_questions, spec.seed)
    return (
        frozenset(q.question_id for q in chosen),
        frozenset(q.conversation_id for q in chosen),
    )


def _take(items: Iterable[Conversation], spec: SubsetSpec) -> Iterator[Conversation]:
    for index, item in enumerate(items):
        if spec.conversations is not None and index >= spec.conversations:
            return
        yield item if spec.max_sessions is None else first_sessions(item, spec.max_sessions)


def first_sessions(conversation: Conversation, count: int) -> Conversation:
    """The first ``count`` sessions and the questions whose evidence they hold entirely.

    A question without evidence cannot be shown to be answerable from them and is dropped.
    """
    sessions = conversation.sessions[:count]
    kept_turns = {turn.turn_id for session in sessions for turn in session.turns}
    questions = tuple(
        q for q in conversation.questions if q.evidence and set(q.evidence) <= kept_turns
    )
    return dataclasses.replace(conversation, sessions=sessions, questions=questions)
