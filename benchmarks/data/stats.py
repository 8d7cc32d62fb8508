"""Counts per dataset: the quickest check that the data on disk is the data the tables assume."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
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
        stats[f"longmemeval_{variant}"] = {
            **qa_stats(iter_longmemeval(variant, data_dir)),
            "notes": longmemeval_notes(variant),
        }
    for name in ("dialseg711", "tiage", "superdialseg"):
        stats[name] = segmentation_stats(name, data_dir)
    return stats
