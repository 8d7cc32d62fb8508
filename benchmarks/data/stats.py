"""Counts per dataset: the quickest check that the data on disk is the data the tables assume."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.data.locomo import LOCOMO_FILE, read_locomo
from benchmarks.data.longmemeval import iter_longmemeval, longmemeval_notes
from benchmarks.data.paths import data_file
from benchmarks.data.segmentation import PRIMARY_SOURCES, load_segmentation
from memsys.types import Conversation


def qa_stats(conversations: Iterable[Conversation]) -> dict[str, Any]:
    """Conversation, session, turn and question counts with questions per category."""
    counts: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    for conversation in conversations:
        counts["conversations"] += 1
        counts["sessions"] += len(conversation.sessions)
        counts["turns"] += sum(len(session.turns) for session in conversation.sessions)
        for question in conversation.questions:
            counts["questions"] += 1
            counts["evidence_turns"] += len(question.evidence)
            counts["abstention"] += question.is_abstention
            categories[question.category] += 1
    return {**counts, "categories": dict(sorted(categories.items()))}


class ContentDedupe:
    """How much of the sessions' and turns' content recurs across conversations: a cache keyed by
    content does each distinct text once, ``*_unique_share`` is the work left. :meth:`observe`
    counts a stream as it passes, so the archive is read once."""

    def __init__(self) -> None:
        self.sessions: set[bytes] = set()
        self.turns: set[bytes] = set()
        self.counts: Counter[str] = Counter()

    def observe(self, conversations: Iterable[Conversation]) -> Iterator[Conversation]:
        for conversation in conversations:
            for session in conversation.sessions:
                lines = [f"{turn.speaker}: {turn.text}" for turn in session.turns]
                self.counts["sessions"] += 1
                self.counts["turns"] += len(lines)
                self.sessions.add(hashlib.sha256("\n".join(lines).encode()).digest())
                self.turns.update(hashlib.sha256(line.encode()).digest() for line in lines)
            yield conversation

    def summary(self) -> dict[str, Any]:
        sessions, turns = self.counts["sessions"], self.counts["turns"]
        return {
            "sessions": sessions,
            "unique_sessions": len(self.sessions),
            "sessions_unique_share": round(len(self.sessions) / max(sessions, 1), 4),
            "turns": turns,
            "unique_turns": len(self.turns),
            "turns_unique_share": round(len(self.turns) / max(turns, 1), 4),
        }


def segmentation_stats(name: str, data_dir: str | Path | None) -> dict[str, Any]:
    """Dialogue, utterance and boundary counts for every split the data folder has."""
    splits = {}
    for dataset, split in PRIMARY_SOURCES:
        if dataset != name:
            continue
        dialogues = load_segmentation(name, split, data_dir)
        utterances = sum(len(d.utterances) for d in dialogues)
        boundaries = sum(sum(d.boundary_labels) for d in dialogues)
        splits[split] = {
            "dialogues": len(dialogues),
            "utterances": utterances,
            "boundaries": boundaries,
            "segments_per_dialogue": round((boundaries + len(dialogues)) / len(dialogues), 2),
        }
    return splits


def all_stats(data_dir: str | Path | None = None) -> dict[str, Any]:
    """Every dataset's counts, keyed as ``python -m benchmarks.data stats --json`` prints them."""
    locomo, locomo_notes = read_locomo(data_file(LOCOMO_FILE, data_dir))
    stats: dict[str, Any] = {"locomo": {**qa_stats(locomo), "notes": locomo_notes}}
    for variant in ("oracle", "s"):
        content = ContentDedupe()
        stats[f"longmemeval_{variant}"] = {
            **qa_stats(content.observe(iter_longmemeval(variant, data_dir))),
            "content": content.summary(),
            "notes": longmemeval_notes(variant),
        }
    for name in ("dialseg711", "tiage", "superdialseg"):
        stats[name] = segmentation_stats(name, data_dir)
    return stats
