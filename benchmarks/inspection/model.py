"""The inspector's data: runs' records, the questions they answered with their dataset turns and
LoCoMo's audited reading, and every pair of runs diffed, as plain JSON-ready data built from
result files and the dataset only. A context line is tied back to a turn when it is that turn's
text as the context renders it; other lines are ``derived`` (docs/inspector.md)."""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.locomo_audit import Erratum, load_errata
from benchmarks.data.paths import resolve_data_dir
from benchmarks.data.specs import named_spec, spec_of
from benchmarks.inspection import diff
from benchmarks.metrics.judge import judgings
from benchmarks.pipeline.packed import predictions_file
from benchmarks.runs.folders import Run, dataset_name, is_finished, lookup, own_records
from benchmarks.runs.naming import row_key
from memsys.compression.passages import render_turns
from memsys.types import Turn

#: A date header of :func:`benchmarks.answering.context.date_header`.
DATE_HEADER = re.compile(r"\[(undated|\d{1,2} [A-Za-z]+ \d{4}, \d{1,2}:\d{2} [ap]m)\]")
#: The summary scores of a run's row, as ``metrics.json`` names them.
SUMMARY_SCORES = ("f1_set", "f1_locomo", "bleu1", "judge_acc")


class InspectError(ValueError):
    """A folder that is not a run; the message names it."""


@dataclass(frozen=True)
class Dataset:
    """What the question view shows beside the records: each conversation's turns by id, and the
    audited key's errata; ``notes`` say what could not be read."""

    turns: dict[str, dict[str, Turn]]
    errata: dict[str, Erratum]
    notes: list[str]


def read_run(directory: Path, *, with_records: bool = True) -> Run:
    """One run folder as the report reads it; an unfinished one is read too, with a warning."""
    if not (directory / "config.yaml").is_file() or not predictions_file(directory).is_file():
        raise InspectError(f"{directory}: not a run folder (needs config.yaml, predictions.jsonl)")
    config = yaml.safe_load((directory / "config.yaml").read_text())
    metrics: dict[str, Any] = {}
    if is_finished(directory):
        metrics = json.loads((directory / "metrics.json").read_text())
    elif with_records:
        print(f"warning: {directory} has not finished (no metrics.json)", file=sys.stderr)
    return Run(directory, config, metrics, own_records(directory) if with_records else [])


def load_dataset(runs: Sequence[Run], data_dir: str | None) -> Dataset:
    """The turns of the runs' conversations and LoCoMo's errata, from ``data_dir`` (else
    ``MEMBENCH_DATA``); a dataset with a memory per question is not read, its contexts shown
    unmapped."""
    turns: dict[str, dict[str, Turn]] = {}
    notes: list[str] = []
    errata: dict[str, Erratum] = {}
    shared = {
        (dataset_name(r.config), lookup(r.config, "dataset.variant", None),
         lookup(r.config, "dataset.file", None))
        for r in runs if not spec_of(r.config).own_memory_per_question
    }  # fmt: skip
    for name, variant, file in sorted(shared, key=str):
        try:
            source = named_spec(name).source(variant, file, resolve_data_dir(data_dir))
            for conversation in source():
                turns[conversation.conversation_id] = {t.turn_id: t for t in conversation.turns}
        except (DataMissingError, DatasetError) as error:
            notes.append(f"turn texts not shown: {error}")
    others = sorted(
        {dataset_name(r.config) for r in runs if spec_of(r.config).own_memory_per_question}
    )
    if others:
        notes.append(f"turn texts are not read for {', '.join(others)} (a memory per question)")
    if any(spec_of(r.config).audited_key for r in runs):
        try:
            errata = load_errata(data_dir)
        except (DataMissingError, DatasetError) as error:
            notes.append(f"audited key not shown: {error}")
    return Dataset(turns, errata, notes)


def rendered(turn: Turn) -> str:
    """A turn as a reader sees it (:func:`memsys.compression.passages.render_turns`)."""
    return render_turns((turn,))


def context_lines(
    context: str,
    retrieved: Sequence[str],
    turns: Mapping[str, Turn],
    evidence: Iterable[str],
    audited: Iterable[str],
) -> list[dict[str, Any]]:
    """The context's lines, each with the turn it renders and its mark: ``header`` (a date),
    ``evidence`` (a gold evidence turn), ``audited`` (evidence under the audited key only),
    ``other`` (a turn outside the evidence) or ``derived`` (no turn's text).

    >>> t = {"D1:1": Turn("D1:1", "D1", 0, "Ann", "hi"), "D1:2": Turn("D1:2", "D1", 1, "Bo", "yo")}
    >>> [(x["turn"], x["mark"]) for x in context_lines(
    ...     "[undated]\\nAnn: hi\\nBo: yo\\nfact", ["D1:1", "D1:2"], t, ["D1:2"], [])]
    [(None, 'header'), ('D1:1', 'other'), ('D1:2', 'evidence'), (None, 'derived')]
    """
    by_text: dict[str, list[str]] = {}
    for turn_id, turn in turns.items():
        by_text.setdefault(rendered(turn), []).append(turn_id)
    shown = set(retrieved)
    gold, extra = set(evidence), set(audited)
    lines = []
    for text in context.splitlines():
        candidates = by_text.get(text, [])
        turn = next((t for t in candidates if t in shown), next(iter(candidates), None))
        if DATE_HEADER.fullmatch(text):
            mark = "header"
        elif turn is None:
            mark = "derived"
        elif turn in gold:
            mark = "evidence"
        elif turn in extra:
            mark = "audited"
        else:
            mark = "other"
        lines.append({"text": text, "turn": turn, "mark": mark})
    return lines


def verdict(score: float | None) -> bool | None:
    return None if score is None else score == 1.0


def judge_entries(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each judge protocol's verdict with what its entry logged (cost, attempts, error, and the
    reply where the record keeps one); with ``judge.repeats`` > 1, each repeat's."""
    scores = record.get("scores") or {}
    repeated = record.get("judge_repeats") or {}
    entries = []
    for rank, entry in enumerate(judgings(dict(record))):
        protocol = entry.get("protocol")
        if protocol in repeated:
            found = repeated[protocol][entry.get("repeat", 1) - 1]
        else:
            found = verdict(scores.get("judge_acc" if rank == 0 else f"judge_acc_{protocol}"))
        entries.append({**entry, "verdict": found})
    return entries


def result_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the question list shows of one run's record, and the flags its filters read: no more, as
    a served list carries it for every question of every run."""
    scores = record.get("scores") or {}
    recall = record.get("evidence_recall")
    judged = verdict(scores.get("judge_acc"))
    f1 = scores.get(diff.DEFAULT_METRIC)
    return {
        "prediction": record.get("prediction"),
        "scores": scores,
        "evidence_recall": recall,
        "flags": {
            "judged_correct": judged is True,
            "judged_wrong": judged is False,
            "f1_positive": f1 is not None and f1 > 0,
            "f1_zero": f1 == 0,
            "evidence_missed": recall is not None and recall < 1,
        },
    }


def run_result(
    record: Mapping[str, Any], turns: Mapping[str, Turn], erratum: Erratum | None
) -> dict[str, Any]:
    """What the question view shows of one run's record: :func:`result_summary`, the context
    line by line, the judges' entries, latencies and tokens."""
    answering = record.get("answering") or {}
    return {
        **result_summary(record),
        "failure": record.get("failure"),
        "answer_coverage": record.get("answer_coverage"),
        "context_tokens": record.get("context_tokens"),
        "retrieved": list(record.get("retrieved_turn_ids") or []),
        "lines": context_lines(
            record.get("context") or "",
            record.get("retrieved_turn_ids") or [],
            turns,
            record.get("evidence") or [],
            erratum.audited_evidence if erratum else [],
        ),
        "judges": judge_entries(record),
        "latency_s": {**(record.get("latency_s") or {}), "answer": answering.get("latency_s")},
        "tokens": {
            "prompt": answering.get("prompt_tokens"),
            "completion": answering.get("completion_tokens"),
        },
    }


def question_entry(
    record: Mapping[str, Any],
    dataset_label: str,
    turns: Mapping[str, Turn],
    erratum: Erratum | None,
) -> dict[str, Any]:
    """A question as the dataset states it, its evidence turns' texts, and the audited reading."""
    evidence = list(record.get("evidence") or [])
    audited_evidence = list(erratum.audited_evidence) if erratum else []
    return {
        "question_id": record["question_id"],
        "conversation_id": record.get("conversation_id"),
        "dataset": dataset_label,
        "category": record.get("category"),
        "question": record.get("question"),
        "answer": record.get("answer"),
        "adversarial_answer": record.get("adversarial_answer"),
        "evidence": evidence,
        "turns": {
            turn_id: rendered(turns[turn_id])
            for turn_id in dict.fromkeys([*evidence, *audited_evidence])
            if turn_id in turns
        },
        "audit": None
        if erratum is None
        else {
            "error_type": erratum.error_type,
            "answer": erratum.audited_answer,
            "evidence": audited_evidence,
        },
    }


def run_entry(run: Run) -> dict[str, Any]:
    """A run's row in the runs table: its name, setting and summary scores."""
    key = row_key(run.config)
    scores = run.metrics.get("scores") or {}
    return {
        "id": run.directory.name,
        "path": str(run.directory),
        "label": " · ".join(
            p for p in (key.method, key.backbone or "retrieval only", key.extraction) if p
        ),
        "method": key.method,
        "dataset": dataset_name(run.config),
        "subset": lookup(run.config, "subset.name", "?"),
        "finished": bool(run.metrics),
        "questions": len(run.records),
        "summary": {name: (scores.get(name) or {}).get("mean") for name in SUMMARY_SCORES}
        | {
            name: _mean(r.get(name) for r in run.records)
            for name in ("evidence_recall", "answer_coverage", "context_tokens")
        },
        "config": run.config,
    }


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def pair_diffs(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """:func:`benchmarks.inspection.diff.compare` of every two runs sharing questions, keyed
    ``"<a>|<b>"`` by run folder names in the runs' order."""
    sides = [
        diff.run_side(run.directory, run.config, run.records, diff.DEFAULT_METRIC) for run in runs
    ]
    pairs = {}
    for a, b in itertools.combinations(sides, 2):
        if a.outcomes.keys() & b.outcomes.keys():
            pairs[f"{a.path.name}|{b.path.name}"] = diff.as_data(diff.compare(a, b))
    return pairs


def build_model(runs: Sequence[Run], dataset: Dataset, title: str) -> dict[str, Any]:
    """Everything the page shows, as plain data."""
    questions: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, Any]] = {}
    for run in runs:
        label = dataset_name(run.config)
        mine = results.setdefault(run.directory.name, {})
        for record in run.records:
            question_id = str(record["question_id"])
            turns = dataset.turns.get(str(record.get("conversation_id")), {})
            erratum = dataset.errata.get(question_id) if spec_of(run.config).audited_key else None
            questions.setdefault(question_id, question_entry(record, label, turns, erratum))
            mine[question_id] = run_result(record, turns, erratum)
    return {
        "title": title,
        "metric": diff.DEFAULT_METRIC,
        "notes": dataset.notes,
        "runs": [run_entry(run) for run in runs],
        "questions": questions,
        "results": results,
        "diffs": pair_diffs(runs),
    }
