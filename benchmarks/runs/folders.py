"""Reading run folders: which runs pass the dataset, subset and ``--where`` filters, what each
finished one holds, which have not finished, and the message for a folder where none matches.
A run's records are its own rows only (:func:`own_records`); any other row is left out with a
warning naming the file, the line and why."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.data.paths import REPO_ROOT
from benchmarks.metrics.aggregate import dataset_name as named_dataset
from benchmarks.pipeline.harness import failed
from benchmarks.pipeline.packed import PLAIN, open_log, predictions_file
from benchmarks.pipeline.provenance import UNKNOWN, recorded_method_source
from benchmarks.pipeline.runlog import (
    QUESTIONS_FILE,
    latest_records,
    read_question_set,
    summarize_invocations,
)
from benchmarks.runs.restamps import read_restamps

_MISSING = object()


class ReportError(ValueError):
    """No table can be built from the runs found; the message says which folder and filters."""


@dataclass(frozen=True)
class Run:
    """One finished run directory, as read from its files."""

    directory: Path
    config: dict[str, Any]
    metrics: dict[str, Any]
    records: list[dict[str, Any]]
    #: Method settings that tell this run from others of the same method (ablations), or "".
    variant: str = ""
    #: The method fingerprint recorded
    #: (:func:`benchmarks.pipeline.provenance.recorded_method_source`).
    method_source: str | None = None
    #: A run not finished yet, read as far as it got (``--partial``): its questions logged so far.
    partial: bool = False
    #: Its re-stamps (:mod:`benchmarks.runs.restamps`).
    restamps: list[dict[str, Any]] = field(default_factory=list)


def lookup(config: dict[str, Any], dotted: str, default: Any = _MISSING) -> Any:
    """``config["a"]["b"]`` for ``"a.b"``, or ``default`` when a key is absent."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def dataset_name(config: dict[str, Any]) -> str:
    """The dataset of a run's config as ``metrics.json`` names it
    (:func:`benchmarks.metrics.aggregate.dataset_name`)."""
    dataset = config.get("dataset", {})
    return named_dataset(dataset.get("name", "?"), dataset.get("variant"))


def read_records(path: Path) -> list[dict[str, Any]]:
    """The lines of a JSONL file (plain or packed) in order: a run's records (retried ones too) or
    its invocation ledger."""
    with open_log(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def parse_where(clauses: Sequence[str]) -> dict[str, Any]:
    """``key=value`` filters on config.yaml; values are read as YAML (``2048``, ``null``)."""
    filters = {}
    for clause in clauses:
        key, sep, value = clause.partition("=")
        if not sep or not key:
            raise ReportError(f"--where expects KEY=VALUE, got {clause!r}")
        filters[key] = yaml.safe_load(value)
    return filters


def add_where_option(parser: argparse.ArgumentParser, example: str) -> None:
    """The ``--where KEY=VALUE`` option of every command that selects runs (:func:`parse_where`
    reads it), its help showing ``example``."""
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"keep runs whose config.yaml has this value, e.g. {example}",
    )


def matches(config: dict[str, Any], dataset: str, subset: str, where: dict[str, Any]) -> bool:
    """Whether a run's config passes the dataset, subset and ``--where`` filters."""
    dataset_ok = dataset in {config.get("dataset", {}).get("name"), dataset_name(config)}
    subset_ok = config.get("subset", {}).get("name") == subset
    return dataset_ok and subset_ok and all(lookup(config, k) == v for k, v in where.items())


def load_runs(
    runs_dir: Path,
    dataset: str,
    subset: str,
    where: dict[str, Any] | None = None,
    configs: dict[Path, dict[str, Any]] | None = None,
    *,
    partial: bool = False,
) -> list[Run]:
    """The finished runs under ``runs_dir`` that pass the filters, sorted by directory name. A run
    without ``metrics.json`` (written last) is skipped with a warning, unless ``partial``: then it
    is read as far as it got (:attr:`Run.partial`). ``configs``: ``run_configs(runs_dir)``, when the
    caller has it."""
    configs = run_configs(runs_dir) if configs is None else configs
    runs = []
    for directory, config in matching_runs(configs, dataset, subset, where):
        finished = is_finished(directory)
        if not finished and not (partial and predictions_file(directory).exists()):
            print(
                f"warning: skipping unfinished run {directory} (no metrics.json)", file=sys.stderr
            )
            continue
        metrics = json.loads((directory / "metrics.json").read_text()) if finished else {}
        ledger = directory / "invocations.jsonl"
        logged = read_records(ledger) if ledger.exists() else []
        if ledger.exists():  # summed anew: metrics.json holds the sums of the code that wrote it
            metrics["invocations"] = summarize_invocations(logged)
        records = own_records(directory)
        source = recorded_method_source(logged)
        runs.append(
            Run(
                directory,
                config,
                metrics,
                records,
                method_source=source,
                partial=not finished,
                restamps=read_restamps(directory),
            )
        )
    if not runs:
        found = configs.values()
        raise ReportError(no_match_message(runs_dir, dataset, subset, where or {}, found))
    return runs


@dataclass(frozen=True)
class OwnLine:
    """A question's own record and where its line lies in ``predictions.jsonl`` (byte offset and
    length), so that a reader can seek back to it."""

    offset: int
    length: int
    record: dict[str, Any]


def own_lines(directory: Path) -> dict[str, OwnLine]:
    """Each question's latest record in a run's ``predictions.jsonl`` by question id, leaving out,
    with one ``warning:`` line each, rows that are not the run's own (outside its
    ``questions.json``, or after the question's settled record); a last line without its newline is
    still being written and is not read."""
    path = predictions_file(directory)
    listed = read_question_set(directory)
    question_set = None if listed is None else set(listed)
    kept: dict[str, OwnLine] = {}
    settled_on: dict[str, int] = {}
    offset = 0
    with open_log(path) as handle:
        for line, raw in enumerate(handle, 1):
            start, offset = offset, offset + len(raw)
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            record = json.loads(raw)
            question_id = str(record.get("question_id"))
            why = None
            if question_set is not None and question_id not in question_set:
                why = (
                    f"question {question_id!r} is not in the run's question set ({QUESTIONS_FILE})"
                )
            elif question_id in settled_on:
                why = f"question {question_id!r} is settled on line {settled_on[question_id]}"
            if why is not None:
                print(f"warning: {path}:{line}: {why}; row left out of the table", file=sys.stderr)
                continue
            kept[question_id] = OwnLine(start, len(raw), record)
            if not failed(record):
                settled_on[question_id] = line
    return kept


def own_records(directory: Path) -> list[dict[str, Any]]:
    """The records of :func:`own_lines`, in the order their questions first appear."""
    return [own.record for own in own_lines(directory).values()]


def run_configs(runs_dir: Path) -> dict[Path, dict[str, Any]]:
    """Every run directory under ``runs_dir`` with its ``config.yaml``, by directory name."""
    return {
        path.parent: yaml.safe_load(path.read_text())
        for path in sorted(runs_dir.glob("*/config.yaml"))
    }


def matching_runs(
    configs: dict[Path, dict[str, Any]], dataset: str, subset: str, where: dict[str, Any] | None
) -> list[tuple[Path, dict[str, Any]]]:
    """The run directories of ``configs`` (finished or not) whose config passes the filters."""
    return [
        (directory, config)
        for directory, config in configs.items()
        if matches(config, dataset, subset, where or {})
    ]


def unfinished_runs(
    configs: dict[Path, dict[str, Any]], dataset: str, subset: str, where: dict[str, Any] | None
) -> list[tuple[Path, dict[str, Any], int]]:
    """The run directories of ``configs`` that pass the filters and have not finished, each with
    its config and the questions it has logged so far."""
    unfinished = []
    for directory, config in matching_runs(configs, dataset, subset, where):
        if is_finished(directory):
            continue
        log = directory / PLAIN  # an unfinished run is never packed
        logged = len(latest_records(read_records(log), "question_id")) if log.exists() else 0
        unfinished.append((directory, config, logged))
    return unfinished


def recorded_code_versions(runs: Sequence[Run]) -> tuple[Counter[str], int]:
    """How many of the runs recorded each code version their records came from (``metrics.json``
    ``code_versions``), and how many count as unknown (logged before runs recorded one)."""
    counts: Counter[str] = Counter()
    for run in runs:
        counts.update(run.metrics.get("code_versions") or [UNKNOWN])
    return counts, counts.pop(UNKNOWN, 0)


def recorded_data_digests(runs: Sequence[Run]) -> tuple[dict[str, Counter[str]], int]:
    """Per dataset file the runs read, how many of them recorded each of its digests (their
    invocations' ``data``: :mod:`benchmarks.data.digests`), and how many runs recorded none."""
    found: dict[str, Counter[str]] = {}
    unknown = 0
    for run in runs:
        recorded = run.metrics.get("invocations", {}).get("data") or {}
        unknown += not recorded
        for name, digest in recorded.items():
            found.setdefault(name, Counter())[digest] += 1
    return found, unknown


def is_finished(directory: Path) -> bool:
    """Whether a run has finished: the runner writes ``metrics.json`` last."""
    return (directory / "metrics.json").exists()


def no_match_message(
    runs_dir: Path,
    dataset: str,
    subset: str,
    where: dict[str, Any],
    configs: Iterable[dict[str, Any]],
) -> str:
    """Name the folder, the filters, and what the folder does hold."""
    found = sorted({f"{dataset_name(c)}/{c.get('subset', {}).get('name', '?')}" for c in configs})
    filters = f"dataset={dataset}, subset={subset}" + "".join(
        f", {key}={value!r}" for key, value in where.items()
    )
    if not runs_dir.is_dir():
        holds = "the folder does not exist"
    else:
        holds = f"it holds {', '.join(found)}" if found else "it holds no run (no */config.yaml)"
    return f"no finished run in {runs_dir} matches {filters}; {holds}"


def in_repo(path: Path) -> Path:
    """Relative paths are relative to the repository root, where the runner writes results."""
    return path if path.is_absolute() else REPO_ROOT / path
