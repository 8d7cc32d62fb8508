"""The served inspector's index: one compact cell per question of every run, and where each
question's record lies in each run's log, so a question page reads just its records from disk.
Built one run at a time, never holding the runs' records together; only a run folder's own
files, inside it, are read (docs/inspector.md)."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.specs import spec_of
from benchmarks.inspection import diff
from benchmarks.inspection.model import (
    Dataset,
    InspectError,
    load_dataset,
    question_entry,
    read_run,
    result_summary,
    run_entry,
    run_result,
)
from benchmarks.pipeline.packed import PACKED, PLAIN, open_log, predictions_file
from benchmarks.runs.folders import Run, dataset_name, own_lines

#: The files of a run folder the inspector reads.
RUN_FILES = ("config.yaml", "metrics.json", PLAIN, PACKED, "questions.json")


def check_inside(directory: Path) -> None:
    """Refuse a run folder whose files link out of it."""
    root = directory.resolve()
    for name in RUN_FILES:
        path = directory / name
        if path.exists() and not path.resolve().is_relative_to(root):
            raise InspectError(f"{path}: a link out of its run folder; not read")


@dataclass(frozen=True)
class Span:
    """Where a record lies in its run's ``predictions.jsonl``."""

    offset: int
    length: int


@dataclass
class RunIndex:
    """One run: its list-view entry and cells, its records' spans and its diff outcomes."""

    run: Run  # with no records: they stay on disk
    entry: dict[str, Any]
    cells: dict[str, dict[str, Any]]
    spans: dict[str, Span]
    side: diff.Side
    size: int  # of predictions.jsonl when indexed


def index_run(directory: Path, dataset: Dataset, questions: dict[str, dict[str, Any]]) -> RunIndex:
    """Index one run folder, adding its questions to ``questions`` (the first run to answer a
    question gives its entry)."""
    check_inside(directory)
    log = predictions_file(directory)
    size = log.stat().st_size if log.exists() else 0
    run = read_run(directory, with_records=False)
    lines = own_lines(directory)
    records = [own.record for own in lines.values()]
    label = dataset_name(run.config)
    audited = spec_of(run.config).audited_key
    for record in records:
        question_id = str(record["question_id"])
        if question_id not in questions:
            turns = dataset.turns.get(str(record.get("conversation_id")), {})
            erratum = dataset.errata.get(question_id) if audited else None
            questions[question_id] = question_entry(record, label, turns, erratum)
    return RunIndex(
        run=run,
        entry=run_entry(Run(directory, run.config, run.metrics, records)),
        cells={str(r["question_id"]): result_summary(r) for r in records},
        spans={key: Span(own.offset, own.length) for key, own in lines.items()},
        side=diff.run_side(directory, run.config, records, diff.DEFAULT_METRIC),
        size=size,
    )


class Index:
    """Every run handed to the server, indexed (see the module docstring)."""

    def __init__(self, directories: Sequence[Path], data_dir: str | None, title: str) -> None:
        if not directories:
            raise InspectError("no run folder given (RUN_DIR arguments or --table)")
        self.title = title
        for directory in directories:
            check_inside(directory)
        self.dataset = load_dataset(
            [read_run(d, with_records=False) for d in directories], data_dir
        )
        self.questions: dict[str, dict[str, Any]] = {}
        self.runs = {d.name: index_run(d, self.dataset, self.questions) for d in directories}
        self._lock = threading.Lock()
        self._listing: tuple[bytes, bytes] | None = None  # JSON and gzip, until a run grows
        self.listing_bytes()  # at start, not on the first page's clock

    def runs_dirs(self) -> list[Path]:
        """The run folders served, in the order given."""
        return [indexed.run.directory for indexed in self.runs.values()]

    def refresh(self) -> None:
        """Index again the runs whose log has grown since (a run still being written)."""
        with self._lock:
            for name, indexed in list(self.runs.items()):
                log = predictions_file(indexed.run.directory)
                if log.exists() and log.stat().st_size != indexed.size:
                    self.runs[name] = index_run(indexed.run.directory, self.dataset, self.questions)
                    self._listing = None

    def heading(self) -> dict[str, Any]:
        """What every view needs: the title, the notes, the F1 shown, and the runs."""
        return {
            "title": self.title,
            "metric": diff.DEFAULT_METRIC,
            "notes": self.dataset.notes,
            "runs": [indexed.entry for indexed in self.runs.values()],
        }

    def listing(self) -> dict[str, Any]:
        """The question list's data: :meth:`heading`, the questions, and each run's compact
        cells."""
        return {
            **self.heading(),
            "questions": self.questions,
            "results": {name: indexed.cells for name, indexed in self.runs.items()},
        }

    def listing_bytes(self) -> tuple[bytes, bytes]:
        """:meth:`listing` as JSON and gzipped, encoded once until a run grows (a full table's
        list is megabytes: the browser waits for every byte of it)."""
        self.refresh()
        with self._lock:
            if self._listing is None:
                body = json.dumps(self.listing(), ensure_ascii=False).encode("utf-8")
                self._listing = body, gzip.compress(body, compresslevel=6)
            return self._listing

    def question(self, question_id: str) -> dict[str, Any] | None:
        """One question's entry and every run's full result for it, read from disk; None for a
        question no run answered."""
        entry = self.questions.get(question_id)
        if entry is None:
            return None
        results = {}
        for name, indexed in self.runs.items():
            span = indexed.spans.get(question_id)
            if span is None:
                continue
            record = read_record(predictions_file(indexed.run.directory), span)
            turns = self.dataset.turns.get(str(record.get("conversation_id")), {})
            audited = spec_of(indexed.run.config).audited_key
            erratum = self.dataset.errata.get(question_id) if audited else None
            results[name] = run_result(record, turns, erratum)
        return {"question": entry, "results": results}

    def diff(self, a: str, b: str) -> dict[str, Any] | None:
        """The diff of runs ``a`` and ``b`` (None when either is unknown or they share no
        question)."""
        if a not in self.runs or b not in self.runs or a == b:
            return None
        side_a, side_b = self.runs[a].side, self.runs[b].side
        if not side_a.outcomes.keys() & side_b.outcomes.keys():
            return None
        return diff.as_data(diff.compare(side_a, side_b))


def read_record(log: Path, span: Span) -> dict[str, Any]:
    """The record at ``span`` of ``log`` (plain or packed: offsets count its plain bytes)."""
    with open_log(log) as handle:
        handle.seek(span.offset)
        return json.loads(handle.read(span.length))
