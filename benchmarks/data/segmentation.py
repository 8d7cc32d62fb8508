"""Dialogue topic-segmentation sets: DialSeg711, TIAGE and SuperDialSeg.

Every reader returns :class:`SegmentationDialogue` objects with SuperDialSeg's label convention:
``1`` = the utterance ends a topic segment, the last label forced to 0. The data folder holds
several copies of DialSeg711 and TIAGE in different formats; each has a reader here so a test can
show they agree, and :data:`PRIMARY_SOURCES` names the copy the benchmark uses (the original
authors' release where there is one).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.data.errors import DatasetError
from benchmarks.data.paths import data_file
from memsys.types import SegmentationDialogue

#: A topic id: a few ASCII digits, maybe negative (``str.isdigit`` also accepts "²", and int()
#: refuses it and numbers of thousands of digits).
_TOPIC_ID = re.compile(r"-?[0-9]{1,9}")
SPLIT_ALIASES = {
    "dev": "dev",
    "validation": "dev",
    "valid": "dev",
    "train": "train",
    "test": "test",
}


def labels_from_topic_ids(topic_ids: Sequence[Any]) -> tuple[int, ...]:
    """A boundary wherever the topic id changes between neighbours (ids may skip numbers).

    >>> labels_from_topic_ids([0, 0, 2, 2, 3])
    (0, 1, 0, 1, 0)
    """
    return tuple(int(a != b) for a, b in itertools.pairwise(topic_ids)) + (
        (0,) if topic_ids else ()
    )


def labels_from_segment_lengths(lengths: Sequence[int]) -> tuple[int, ...]:
    """Segment lengths ``[4, 6]`` -> a 1 on the last utterance of every segment but the last.

    >>> labels_from_segment_lengths([2, 3])
    (0, 1, 0, 0, 0)
    """
    labels: list[int] = []
    for length in lengths:
        labels.extend([0] * (length - 1) + [1])
    if labels:
        labels[-1] = 0
    return tuple(labels)


def read_topic_id_txt(path: Path) -> list[SegmentationDialogue]:
    """The ``call_id_<k>`` / ``"<topic_id> <utterance>"`` text format (TADAM, SuperDialSeg)."""
    dialogues: list[SegmentationDialogue] = []
    current: str | None = None
    utterances: list[str] = []
    topics: list[int] = []

    def close() -> None:
        if current is not None:
            if not utterances:
                raise DatasetError(path, current, "dialogue has no utterances")
            labels = labels_from_topic_ids(topics)
            dialogues.append(SegmentationDialogue(current, tuple(utterances), labels))

    with path.open(encoding="utf-8") as handle:
        try:
            for line_number, line in enumerate(handle, start=1):
                line = line.rstrip("\n")
                if line.startswith("call_id_"):
                    close()
                    current, utterances, topics = line, [], []
                    continue
                topic, _, utterance = line.partition(" ")
                if current is None or not _TOPIC_ID.fullmatch(topic):
                    raise DatasetError(
                        path, f"line {line_number}", f"expected '<topic_id> <utterance>': {line!r}"
                    )
                topics.append(int(topic))
                utterances.append(utterance)
        except UnicodeDecodeError as error:
            raise DatasetError(path, None, f"not valid UTF-8 ({error})") from error
    close()
    return dialogues


def read_dts_hub(path: Path, split: str | None = None) -> list[SegmentationDialogue]:
    """Dialogue-Topic-Segmenter JSON: ``{dial_id, utterances, segments: [lengths], set}``."""
    records = _load_json(path)
    if not isinstance(records, list):
        raise DatasetError(path, None, "expected a JSON list of dialogues")
    dialogues = []
    for index, record in enumerate(records):
        try:
            if split is not None and record["set"] != split:
                continue
            utterances = tuple(str(u) for u in record["utterances"])
            labels = labels_from_segment_lengths(record["segments"])
            dialogue_id = str(record["dial_id"])
        except (KeyError, TypeError) as error:
            raise DatasetError(path, f"#{index}", f"missing or malformed field {error}") from error
        if len(labels) != len(utterances):
            raise DatasetError(
                path, dialogue_id, "segment lengths do not sum to the utterance count"
            )
        dialogues.append(SegmentationDialogue(dialogue_id, utterances, labels))
    return dialogues


def read_tiage_official(path: Path) -> list[SegmentationDialogue]:
    """TIAGE's own ``anno_<split>.json``: label "1" means the utterance *starts* a new topic, "0"
    that it does not, "-1" marks a dialogue's first utterance (data/README.md); nothing else."""
    records = _load_json(path)
    if not isinstance(records, dict):
        raise DatasetError(path, None, "expected an object keyed by dialogue number")
    dialogues = []
    for dialogue_id, pairs in records.items():
        try:
            utterances = tuple(str(utterance) for utterance, _ in pairs)
            labels = [str(label) for _, label in pairs]
        except (TypeError, ValueError) as error:
            raise DatasetError(
                path, dialogue_id, f"expected [utterance, label] pairs ({error})"
            ) from error
        unknown = sorted(set(labels) - {"-1", "0", "1"})
        if unknown:
            raise DatasetError(path, dialogue_id, f"labels must be -1, 0 or 1, got {unknown[0]!r}")
        shifts = [label == "1" for label in labels]
        if not utterances:
            raise DatasetError(path, dialogue_id, "dialogue has no utterances")
        labels = tuple(int(starts_next) for starts_next in shifts[1:]) + (0,)
        dialogues.append(SegmentationDialogue(str(dialogue_id), utterances, labels))
    return dialogues


def read_superdialseg_json(path: Path, corpus: str) -> list[SegmentationDialogue]:
    """SuperDialSeg release JSON: turns with ``role`` and ``segmentation_label`` (1 = ends one)."""
    data = _load_json(path)
    try:
        records = data["dial_data"][corpus]
    except (KeyError, TypeError) as error:
        raise DatasetError(path, None, f"expected dial_data.{corpus}") from error
    if not isinstance(records, list):
        raise DatasetError(path, None, f"expected a list of dialogues at dial_data.{corpus}")
    dialogues = []
    for index, record in enumerate(records):
        try:
            turns = record["turns"]
            utterances = tuple(str(turn["utterance"]) for turn in turns)
            speakers = tuple(str(turn["role"]) for turn in turns)
            labels = tuple(int(turn["segmentation_label"]) for turn in turns[:-1]) + (0,)
            dialogue_id = str(record["dial_id"])
        except (KeyError, TypeError, ValueError) as error:
            raise DatasetError(path, f"#{index}", f"missing or malformed field {error}") from error
        if not utterances:
            raise DatasetError(path, dialogue_id, "dialogue has no turns")
        dialogues.append(SegmentationDialogue(dialogue_id, utterances, labels, speakers))
    return dialogues


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(path, None, f"not valid JSON ({error})") from error


Reader = Callable[[Path], list[SegmentationDialogue]]

#: (dataset, split) -> (file relative to the data dir, reader). The benchmark reads these copies.
PRIMARY_SOURCES: dict[tuple[str, str], tuple[str, Reader]] = {
    ("dialseg711", "test"): ("dialseg711/tadam/en_dataset_reference_2.txt", read_topic_id_txt),
    ("tiage", "train"): ("tiage/official/anno_train.json", read_tiage_official),
    ("tiage", "dev"): ("tiage/official/anno_dev.json", read_tiage_official),
    ("tiage", "test"): ("tiage/official/anno_test.json", read_tiage_official),
    ("superdialseg", "dev"): (
        "superdialseg/superseg/segmentation_file_validation.txt",
        read_topic_id_txt,
    ),
    ("superdialseg", "test"): (
        "superdialseg/superseg/segmentation_file_test.txt",
        read_topic_id_txt,
    ),
}
SEGMENTATION_DATASETS = ("dialseg711", "tiage", "superdialseg")


def load_segmentation(
    name: str, split: str = "test", data_dir: str | Path | None = None
) -> list[SegmentationDialogue]:
    """Load one split of one segmentation set (``split``: train, dev/validation, test)."""
    key = (name, SPLIT_ALIASES.get(split, split))
    if key not in PRIMARY_SOURCES:
        available = sorted(f"{d}/{s}" for d, s in PRIMARY_SOURCES)
        raise ValueError(f"no segmentation data for {name}/{split}; available: {available}")
    relative, reader = PRIMARY_SOURCES[key]
    return reader(data_file(relative, data_dir))
