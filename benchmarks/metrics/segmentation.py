"""Dialogue topic-segmentation scores as SuperDialSeg computes them, vectorized over dialogues.

All dialogues are flattened into one array and scored by a few numpy operations, equal to nltk's
``pk`` / ``windowdiff`` and sklearn's F1 (tests pin both to 1e-12). Conventions (METRICS.md): one
label per utterance, 1 ends a segment, the last label forced to 0, the window
``k = max(2, round(n / (reference_boundaries + 1) / 2))``. A dialogue shorter than its window
(only n = 1, where nltk raises) is compared as a whole, which is nltk's result for ``k = n``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.metrics.jsonl import InputError, read_jsonl, require

METRIC_NAMES = ("pk", "wd", "f1", "f1_macro", "score")


def window_size(n_utterances: int, n_reference_boundaries: int) -> int:
    """SuperDialSeg's Pk / WindowDiff window: half the mean reference segment length, >= 2.

    Args:
        n_utterances: dialogue length n.
        n_reference_boundaries: 1-labels in the reference after forcing the last label to 0.

    Returns:
        ``max(2, round(n / (boundaries + 1) / 2))``.

    >>> window_size(12, 2), window_size(10, 0), window_size(3, 1)
    (2, 5, 2)
    """
    return max(2, round(n_utterances / (n_reference_boundaries + 1) / 2))


@dataclass(frozen=True)
class SegmentationScores:
    """Per-dialogue scores (arrays aligned with the input order) and the window used for each."""

    pk: np.ndarray
    wd: np.ndarray
    f1: np.ndarray
    f1_macro: np.ndarray
    score: np.ndarray
    window: np.ndarray

    def means(self) -> dict[str, float | int]:
        """Every metric averaged over dialogues, plus ``n``, the number of dialogues."""
        result: dict[str, float | int] = {
            name: float(getattr(self, name).mean()) for name in METRIC_NAMES
        }
        result["n"] = len(self.pk)
        return result


def _flatten(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> tuple[np.ndarray, ...]:
    """Concatenated reference and prediction labels (last of each forced to 0), lengths, offsets."""
    lengths = np.empty(len(pairs), dtype=np.int64)
    for index, (reference, prediction) in enumerate(pairs):
        if len(reference) != len(prediction):
            raise ValueError(
                f"dialogue {index}: {len(reference)} reference labels "
                f"but {len(prediction)} predicted labels"
            )
        if len(reference) == 0:
            raise ValueError(f"dialogue {index}: no labels")
        lengths[index] = len(reference)
    total = int(lengths.sum())
    reference = np.fromiter(chain.from_iterable(r for r, _ in pairs), np.int64, count=total)
    prediction = np.fromiter(chain.from_iterable(p for _, p in pairs), np.int64, count=total)
    for name, labels in (("reference", reference), ("predicted", prediction)):
        if np.any((labels != 0) & (labels != 1)):
            raise ValueError(f"{name} labels must be 0 or 1")
    offsets = np.cumsum(lengths) - lengths
    reference[offsets + lengths - 1] = 0
    prediction[offsets + lengths - 1] = 0
    return reference, prediction, lengths, offsets


def _window_errors(
    reference: np.ndarray,
    prediction: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    window: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Pk and WindowDiff per dialogue, nltk's sliding windows ``labels[i:i + k]`` for all dialogues
    in one pass."""
    n_windows = lengths - window + 1
    dialogue = np.repeat(np.arange(len(lengths)), n_windows)
    first_window = np.cumsum(n_windows) - n_windows
    start = np.arange(int(n_windows.sum())) - first_window[dialogue] + offsets[dialogue]
    end = start + window[dialogue]
    reference_cumsum = np.concatenate(([0], np.cumsum(reference)))
    prediction_cumsum = np.concatenate(([0], np.cumsum(prediction)))
    reference_count = reference_cumsum[end] - reference_cumsum[start]
    prediction_count = prediction_cumsum[end] - prediction_cumsum[start]
    pk_errors = (reference_count > 0) != (prediction_count > 0)
    wd_errors = reference_count != prediction_count
    n_dialogues = len(lengths)
    pk = np.bincount(dialogue, weights=pk_errors, minlength=n_dialogues) / n_windows
    wd = np.bincount(dialogue, weights=wd_errors, minlength=n_dialogues) / n_windows
    return pk, wd


def _f1(true_positives: np.ndarray, n_true: np.ndarray, n_predicted: np.ndarray) -> np.ndarray:
    """sklearn's F1 = 2·TP / (true + predicted), 0 where the class is absent on both sides."""
    denominator = n_true + n_predicted
    return np.divide(
        2.0 * true_positives,
        denominator,
        out=np.zeros(len(denominator)),
        where=denominator > 0,
    )


def score_segmentation(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
) -> SegmentationScores:
    """Score predicted boundary labels against references, one dialogue per pair.

    Args:
        pairs: ``(reference_labels, predicted_labels)`` per dialogue, equal lengths >= 1,
            values 0/1 (1 = the utterance ends a segment). The last label of each is treated
            as 0 whatever it holds.

    Returns:
        Per-dialogue Pk, WindowDiff, binary F1 of the boundary class, macro F1 over both
        classes (zero_division = 0), ``score = (2·F1 + (1 − Pk) + (1 − WD)) / 4`` and the window;
        :meth:`SegmentationScores.means` averages them over dialogues.

    >>> scores = score_segmentation([([0, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0]), ([0], [1])])
    >>> scores.pk.tolist(), scores.wd.tolist(), scores.f1.tolist()
    ([0.4, 0.0], [0.4, 0.0], [0.0, 0.0])
    >>> scores.means()
    {'pk': 0.2, 'wd': 0.2, 'f1': 0.0, 'f1_macro': 0.45, 'score': 0.4, 'n': 2}
    """
    if not pairs:
        raise ValueError("no dialogues to score")
    reference, prediction, lengths, offsets = _flatten(pairs)
    reference_boundaries = np.add.reduceat(reference, offsets)
    predicted_boundaries = np.add.reduceat(prediction, offsets)
    # np.rint rounds halves to even like Python's round; the float divisions are the same.
    window = np.maximum(2, np.rint(lengths / (reference_boundaries + 1) / 2).astype(np.int64))
    pk, wd = _window_errors(reference, prediction, lengths, offsets, np.minimum(window, lengths))

    dialogue = np.repeat(np.arange(len(lengths)), lengths)
    n_dialogues = len(lengths)
    hits = np.bincount(dialogue, weights=reference & prediction, minlength=n_dialogues)
    both_zero = (1 - reference) & (1 - prediction)
    zero_hits = np.bincount(dialogue, weights=both_zero, minlength=n_dialogues)
    f1 = _f1(hits, reference_boundaries, predicted_boundaries)
    f1_zero = _f1(zero_hits, lengths - reference_boundaries, lengths - predicted_boundaries)
    return SegmentationScores(
        pk=pk,
        wd=wd,
        f1=f1,
        f1_macro=(f1_zero + f1) / 2,
        score=(2 * f1 + (1 - pk) + (1 - wd)) / 4,
        window=window,
    )


def _read_labels(path: Path) -> dict[str, tuple[int, tuple[int, ...]]]:
    """``{id: (line, labels)}`` from a ``{"id", "labels"}`` JSONL file, checked line by line."""
    dialogues: dict[str, tuple[int, tuple[int, ...]]] = {}
    for line, record in read_jsonl(path):
        dialogue_id = str(require(record, "id", path, line))
        labels = require(record, "labels", path, line)
        if (
            not isinstance(labels, list)
            or not labels
            or any(isinstance(v, bool) or v not in (0, 1) for v in labels)
        ):
            raise InputError(path, line, f"id {dialogue_id!r}: labels must be a non-empty 0/1 list")
        if dialogue_id in dialogues:
            raise InputError(
                path, line, f"id {dialogue_id!r} repeats line {dialogues[dialogue_id][0]}"
            )
        dialogues[dialogue_id] = (line, tuple(labels))
    return dialogues


def read_label_pairs(
    reference_path: Path | str, prediction_path: Path | str
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Match reference and predicted labels by id, in reference-file order.

    Args:
        reference_path: JSONL, ``{"id": ..., "labels": [0, 1, ...]}`` per dialogue.
        prediction_path: the same format; must cover exactly the reference ids.

    Returns:
        ``(reference_labels, predicted_labels)`` pairs for :func:`score_segmentation`.

    Raises:
        InputError: a malformed line, a repeated id, an id on one side only, or a length
            mismatch; the message names the file, line and id.
    """
    reference_path, prediction_path = Path(reference_path), Path(prediction_path)
    references = _read_labels(reference_path)
    predictions = _read_labels(prediction_path)
    for dialogue_id, (line, _) in predictions.items():
        if dialogue_id not in references:
            raise InputError(
                prediction_path, line, f"id {dialogue_id!r} is not in {reference_path}"
            )
    pairs = []
    for dialogue_id, (line, reference) in references.items():
        if dialogue_id not in predictions:
            raise InputError(
                prediction_path, None, f"no line for id {dialogue_id!r} ({reference_path}:{line})"
            )
        predicted_line, prediction = predictions[dialogue_id]
        if len(prediction) != len(reference):
            raise InputError(
                prediction_path,
                predicted_line,
                f"id {dialogue_id!r} has {len(prediction)} labels but "
                f"{reference_path}:{line} has {len(reference)}",
            )
        pairs.append((reference, prediction))
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print one JSON object with mean Pk, WindowDiff, F1, macro F1, score and n."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.metrics.segmentation", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--ref", required=True, type=Path, help="reference labels JSONL")
    parser.add_argument("--pred", required=True, type=Path, help="predicted labels JSONL")
    args = parser.parse_args(argv)
    try:
        pairs = read_label_pairs(args.ref, args.pred)
        if not pairs:
            raise InputError(args.ref, None, "no dialogues")
    except (InputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report: dict[str, Any] = score_segmentation(pairs).means()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
