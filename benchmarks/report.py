"""``python -m benchmarks.report``: collect run directories into Table 1 or 2 (md, csv, tex, png).

Tables are built from result files only (STYLE.md): every mean is recomputed from the runs'
``predictions.jsonl``, so each cell traces to the lines behind it; ``metrics.json`` is read only
for construction costs (the one cost that is not logged per question) and marks a finished run.

Readings taken where the brief leaves a choice:

* **Rows** are method × backbone × extraction mode × retrieval-only. Two selected runs that fall
  on the same row are an error naming the config keys where they differ (narrow with
  ``--where``), never a silent pick.
* **Conditions** the header states (dataset file, subset, seed, adversarial policy, context
  budget, embedder; for answered rows also template, answer length and judge) must agree
  between the selected runs; a table mixing them would not be one comparison, so that is an
  error too.
* **Overall** means respect each run's ``adversarial`` option; per-category cells always
  include every category. Evidence recall and context tokens average over every question, as
  ``benchmarks.summary`` does, so the numbers match ``metrics.json``. Bootstrap seeds are the
  run's ``seed``, so the intervals match ``metrics.json`` as well.
* **Intervals** resample conversations (a cluster bootstrap: the questions of one conversation
  share its memory), or questions with ``--interval-unit question``; a cell whose questions come
  from fewer than ``stats.MIN_CLUSTERS`` conversations resamples questions
  (``stats.resampling_unit``, the rule ``metrics.json`` follows), and the header's Statistics
  line names the unit used and the conversation count. On LongMemEval each question has its own
  haystack, so the clusters are single questions.
* **Failed questions** (no answer, or no verdict) carry no score and are left out of the mean,
  as in ``benchmarks.summary``; ``n`` counts the scored questions.
* **p-values**: each non-baseline answered row against the baseline row (a class from
  ``memsys.methods.baselines``) with the same backbone and the highest overall mean of the
  primary metric (``--metric``, an F1 scorer), paired by question over the questions both
  scored in the overall set, resampling their conversations as the intervals do. Baseline rows
  print "—".
* **Costs**: answering and judging calls and tokens are summed from the per-question log (a
  judge call per attempt); construction costs come from ``metrics.json`` and cover only the
  memories that run built: a row whose memories were loaded from the memory cache is marked
  ``*`` (a lower bound). Answer latency averages the answers not served from the response cache.
* **Retrieval-only runs** (``answer=none``) get their own section in md and tex and rows with
  blank answer columns in csv.
* **LongMemEval** (Table 2): instead of the per-category section, judge accuracy per question
  type in ES-Mem's Table 2 column order, overall, task-averaged (mean of the per-type means; a
  point value, as the benchmark defines it) and on the ``_abs`` questions, grouped by
  ``benchmarks.summary.longmemeval_scores`` as ``metrics.json`` is; a p-value on judge accuracy
  beside the one on the F1 scorer; and a retrieval section with the ranking metrics LongMemEval's
  own ``print_retrieval_metrics.py`` prints (``recall_all`` and ``ndcg_any`` at 5 and 10) for
  sessions and turns, over the questions that have them.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.figure import Figure

from benchmarks.data.paths import REPO_ROOT, shown_path
from benchmarks.judge_calibration import calibration_lines
from benchmarks.metrics.judge import judgings
from benchmarks.metrics.stats import (
    INTERVAL_UNITS,
    MIN_CLUSTERS,
    paired_bootstrap_pvalue,
    resampling_unit,
)
from benchmarks.provenance import UNKNOWN
from benchmarks.runlog import latest_records, summarize_invocations
from benchmarks.summary import (
    OTHER_JUDGE_PREFIX,
    Cell,
    Scores,
    failure_counts,
    interval_cell,
    longmemeval_scores,
    score_names,
    score_of,
)
from memsys.types import LOCOMO_CATEGORIES

BASELINE_MODULE = "memsys.methods.baselines"
#: Methods whose papers spell them in a way a class name cannot (as ``SEGMENTER_NAMES`` in
#: ``benchmarks.segmentation_table``), and the ceiling row; every other method is shown by its
#: class name.
METHOD_NAMES = {"ESMem": "ES-Mem", "OracleEvidence": "Oracle (gold evidence)"}
PRIMARY_METRICS = ("f1_set", "f1_locomo")
STAGES = ("construction", "answering", "judging")
COST_KEYS = ("calls", "prompt_tokens", "completion_tokens")
#: A run with a larger share of failed questions (answers or verdicts) is marked INVALID.
MAX_FAILURE_SHARE = 0.02
SCORER_DEFINITIONS = {
    "f1_set": "f1_set, the A-Mem/mem0 set F1 (lowercase, .,!? to spaces, F1 over token sets)",
    "f1_locomo": "f1_locomo, LoCoMo's own F1 (normalized, Porter-stemmed token multisets, "
    "per-category rules)",
}
BLEU_DEFINITION = "bleu1, sentence BLEU-1 (weights (1,0,0,0), smoothing method 1)"
#: LongMemEval's question types in the column order of ES-Mem's Table 2, with its short labels.
LONGMEMEVAL_TYPES = {
    "temporal_reasoning": "Temporal",
    "multi_session": "Multi-session",
    "knowledge_update": "Knowledge-update",
    "single_session_user": "Single-user",
    "single_session_assistant": "Single-assistant",
    "single_session_preference": "Single-preference",
}
LONGMEMEVAL_VARIANTS = {
    "s": "LongMemEval-S, each question with its haystack of about 115k tokens",
    "oracle": "LongMemEval oracle, each question with its evidence sessions only",
}
#: The ranking metrics LongMemEval's own print_retrieval_metrics.py reports, at both levels.
LONGMEMEVAL_RANKING = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10")
RANKING_LEVELS = ("session", "turn")
ADVERSARIAL_POLICY = {
    "exclude": "adversarial questions excluded from overall means (mem0); shown per category",
    "include": "adversarial questions included in overall means (A-Mem)",
}
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


@dataclass(frozen=True)
class RowKey:
    """What distinguishes one table row from another."""

    retrieval_only: bool
    backbone: str
    baseline: bool
    method: str
    extraction: str

    def label(self) -> str:
        """Short row label for the plot."""
        parts = [self.method, self.backbone or "retrieval only", self.extraction]
        return " · ".join(part for part in parts if part)


@dataclass(frozen=True)
class Comparison:
    """A paired bootstrap test of a row against its backbone's best baseline, and the unit it
    resampled (as :class:`benchmarks.summary.Cell` says it)."""

    p_value: float
    baseline: str
    questions: int
    unit: str
    conversations: int


@dataclass(frozen=True)
class LongMemEvalCells:
    """A row's Table 2 numbers: LongMemEval's aggregates, and ranking metrics per level."""

    per_type: dict[str, Cell | None]
    overall: Cell | None
    task_averaged: float | None
    abstention: Cell | None
    retrieval: dict[str, dict[str, Cell | None]]


@dataclass
class Row:
    """One row of the table: a run's recomputed numbers."""

    key: RowKey
    run: Run
    scores: dict[str, dict[str, Cell | None]]
    evidence_recall: Cell | None
    all_evidence_share: float | None
    context_tokens: float | None
    costs: dict[str, dict[str, int]]
    memories_loaded: bool
    #: The run's summed invocation costs (``metrics.json`` ``invocations``), or ``{}`` when they
    #: do not cover every question (runs from before the ledger, SIGKILLed invocations).
    invocations: dict[str, Any]
    answer_latency_s: float | None
    retrieve_latency_s: float | None
    longmemeval: LongMemEvalCells | None
    #: Questions whose answer or verdict failed (left out of the means, not scored as wrong).
    failed: int = 0
    #: Whether ``failed`` exceeds the report's allowed share: the row's numbers do not stand.
    invalid: bool = False
    comparisons: dict[str, Comparison] = field(default_factory=dict)


@dataclass
class Report:
    """Everything the writers need: header lines, column order and rows."""

    title: str
    header: list[str]
    metric: str
    categories: list[str]
    rows: list[Row]
    longmemeval: bool
    #: Every score name the runs carry: the F1s, BLEU-1, ``judge_acc`` and the other judge
    #: protocols' ``judge_acc_<protocol>`` (:func:`benchmarks.summary.score_names`).
    scores: tuple[str, ...]

    @property
    def answered(self) -> list[Row]:
        """Rows of runs that answered (and maybe judged) the questions."""
        return [row for row in self.rows if not row.key.retrieval_only]

    @property
    def retrieval_only(self) -> list[Row]:
        """Rows of ``answer=none`` runs: retrieval and cost columns only."""
        return [row for row in self.rows if row.key.retrieval_only]


# ---------------------------------------------------------------------------------------------
# Reading and selecting runs


def lookup(config: dict[str, Any], dotted: str, default: Any = _MISSING) -> Any:
    """``config["a"]["b"]`` for ``"a.b"``, or ``default`` when a key is absent."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def dataset_name(config: dict[str, Any]) -> str:
    """The dataset as ``metrics.json`` names it: ``locomo`` or ``longmemeval_<variant>``."""
    dataset = config.get("dataset", {})
    variant = dataset.get("variant")
    return dataset.get("name", "?") if variant is None else f"{dataset['name']}_{variant}"


def read_records(path: Path) -> list[dict[str, Any]]:
    """The lines of a JSONL file in order: a run's per-question records (a retried question's
    lines too: :func:`benchmarks.runlog.latest_records` keeps its last), or its invocation
    ledger."""
    with path.open(encoding="utf-8") as handle:
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
) -> list[Run]:
    """The finished runs under ``runs_dir`` that pass the filters, sorted by directory name.

    A matching run without ``metrics.json`` has not finished (the runner writes it last); it is
    skipped with a warning rather than compared on a partial question set. Costs are summed from
    the run's invocation ledger where it has one. ``configs`` is ``run_configs(runs_dir)`` when
    the caller has read it already.
    """
    configs = run_configs(runs_dir) if configs is None else configs
    runs = []
    for directory, config in matching_runs(configs, dataset, subset, where):
        if not is_finished(directory):
            print(
                f"warning: skipping unfinished run {directory} (no metrics.json)", file=sys.stderr
            )
            continue
        metrics = json.loads((directory / "metrics.json").read_text())
        ledger = directory / "invocations.jsonl"
        if ledger.exists():  # summed anew: metrics.json holds the sums of the code that wrote it
            metrics["invocations"] = summarize_invocations(read_records(ledger))
        predictions = read_records(directory / "predictions.jsonl")
        records = list(latest_records(predictions, "question_id").values())
        runs.append(Run(directory, config, metrics, records))
    if not runs:
        found = configs.values()
        raise ReportError(no_match_message(runs_dir, dataset, subset, where or {}, found))
    return runs


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


def is_finished(directory: Path) -> bool:
    """Whether a run has finished: the runner writes ``metrics.json`` last."""
    return (directory / "metrics.json").exists()


def unfinished_runs_line(
    configs: dict[Path, dict[str, Any]], dataset: str, subset: str, where: dict[str, Any] | None
) -> str | None:
    """Name the matching runs left out because they have not finished, with how far they got,
    so a table built over several sittings says what it is still waiting for."""
    unfinished = []
    for directory, config in matching_runs(configs, dataset, subset, where):
        if is_finished(directory):
            continue
        log = directory / "predictions.jsonl"
        logged = len(latest_records(read_records(log), "question_id")) if log.exists() else 0
        key = row_key(config)
        label = f"{key.method}, {key.extraction}" if key.extraction else key.method
        unfinished.append(f"{label} ({logged} questions logged, run {directory.name})")
    if not unfinished:
        return None
    return f"Not in the table, unfinished (a rerun resumes them): {'; '.join(unfinished)}"


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


# ---------------------------------------------------------------------------------------------
# Rows and the conditions they share


def method_name(method: dict[str, Any]) -> str:
    """Display name: the class of ``_target_`` (as its paper spells it), plus the retriever and,
    for methods that compress (SeCom), the compressor, e.g. ``TurnRAG (dense)``,
    ``SeCom (dense, no compression)``, ``ES-Mem``."""
    class_name = str(method.get("_target_", "?")).rsplit(".", 1)[-1]
    name = METHOD_NAMES.get(class_name, class_name)
    details = [str(method["retriever"])] if method.get("retriever") else []
    if "compression" in method:
        compressor = method["compression"]
        details.append("no compression" if compressor == "none" else f"{compressor} compression")
    return f"{name} ({', '.join(details)})" if details else name


def row_key(config: dict[str, Any], variant: str = "") -> RowKey:
    """A run's row: method (and variant), backbone, extraction mode, whether it answered."""
    method = config.get("method", {})
    retrieval_only = config.get("answer", {}).get("template") is None
    return RowKey(
        retrieval_only=retrieval_only,
        backbone="" if retrieval_only else str(config.get("backbone", {}).get("name", "?")),
        baseline=str(method.get("_target_", "")).rsplit(".", 1)[0] == BASELINE_MODULE,
        method=f"{method_name(method)} [{variant}]" if variant else method_name(method),
        extraction=extraction_description(config),
    )


def extraction_description(config: dict[str, Any]) -> str:
    """The extraction mode, and for ``llm`` the model that built the memory: ``llm
    (gpt-4o-mini)``, so a row says which model constructed and which (Backbone) answered."""
    extraction = str(config.get("method", {}).get("extraction") or "")
    builder = construction_model(config) if extraction == "llm" else None
    return f"llm ({builder})" if builder else extraction


def construction_model(config: dict[str, Any]) -> str | None:
    """The name of the model that builds llm-mode memories: the construction backbone's, else
    (``construction=same``) the reader's; None when the config names neither."""
    builder = (config.get("construction") or {}).get("backbone") or config.get("backbone") or {}
    return builder.get("name")


def judge_description(judge: dict[str, Any] | None) -> str:
    """The judge model as the header states it."""
    judge = judge or {}
    if not judge.get("enabled"):
        return "none (judge disabled)"
    backbone = judge.get("backbone")
    return "same as answering backbone" if backbone is None else str(backbone.get("name", "?"))


def data_keys(dataset: dict[str, Any]) -> dict[str, Any]:
    """What names a dataset's questions: everything but the judge protocol, which only answered
    runs carry."""
    return {key: value for key, value in dataset.items() if key != "judge_protocol"}


def conditions(config: dict[str, Any]) -> dict[str, Any]:
    """The settings every row of one table must share, keyed by config path."""
    keys = ("subset", "seed", "adversarial", "answer.context_budget", "embedder.model")
    shared = {"dataset": data_keys(config.get("dataset") or {})}
    shared |= {key: lookup(config, key, None) for key in keys}
    if config.get("answer", {}).get("template") is not None:
        shared["dataset.judge_protocol"] = lookup(config, "dataset.judge_protocol", None)
        shared["answer.template"] = config["answer"]["template"]
        shared["answer.max_tokens"] = config["answer"].get("max_tokens")
        shared["judge"] = config.get("judge")
    return shared


def shared_conditions(runs: Sequence[Run]) -> dict[str, Any]:
    """The conditions of all runs, or an error naming the first config path where they differ."""
    shared: dict[str, tuple[Any, Run]] = {}
    for run in runs:
        for key, value in conditions(run.config).items():
            earlier = shared.setdefault(key, (value, run))[1]
            if shared[key][0] != value:
                path = (differing_keys(shared[key][0], value, f"{key}.") or [key])[0]
                raise ReportError(
                    f"runs disagree on {path}: {shown(earlier, path)} in {earlier.directory.name}, "
                    f"{shown(run, path)} in {run.directory.name}; one table compares one setting "
                    f"(narrow with --where {path}=...)"
                )
    return {key: value for key, (value, _) in shared.items()}


def shown(run: Run, path: str) -> str:
    """A config value for an error message."""
    value = lookup(run.config, path)
    return "absent" if value is _MISSING else repr(value)


def differing_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted config paths where two configs differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            path
            for key in sorted(set(a) | set(b))
            for path in differing_keys(a.get(key), b.get(key), f"{prefix}{key}.")
        ]
    return [] if a == b else [prefix.rstrip(".")]


def with_variants(runs: Sequence[Run]) -> list[Run]:
    """Runs of one method that differ only in method settings (a paper's ablations) get their
    differing settings as a variant label, so each keeps its own row; other clashes are left to
    :func:`check_one_run_per_row`."""
    groups: dict[RowKey, list[Run]] = defaultdict(list)
    for run in runs:
        groups[row_key(run.config)].append(run)
    labelled = []
    for group in groups.values():
        keys = sorted(
            {key for a in group for b in group for key in differing_keys(a.config, b.config)}
        )
        if len(group) == 1 or not all(key.startswith("method.") for key in keys):
            labelled += group
            continue
        for run in group:
            settings = (f"{key.rsplit('.', 1)[-1]}={lookup(run.config, key, '—')}" for key in keys)
            labelled.append(dataclasses.replace(run, variant=", ".join(settings)))
    return labelled


def check_one_run_per_row(runs: Sequence[Run]) -> None:
    """Two runs on one row would have to be picked between silently; refuse instead."""
    seen: dict[RowKey, Run] = {}
    for run in runs:
        key = row_key(run.config, run.variant)
        if key in seen:
            first = seen[key]
            keys = ", ".join(differing_keys(first.config, run.config)) or "nothing"
            raise ReportError(
                f"runs {first.directory.name} and {run.directory.name} both give the row "
                f"{key.label()}; their configs differ in {keys} (narrow with --where KEY=VALUE)"
            )
        seen[key] = run


# ---------------------------------------------------------------------------------------------
# Numbers, recomputed from predictions.jsonl


def in_overall(record: dict[str, Any], adversarial: str) -> bool:
    """Whether a question enters the overall means under the run's adversarial policy."""
    return not (adversarial == "exclude" and record["category"] == "adversarial")


def score_cells(
    run: Run, categories: Sequence[str], unit: str = "conversation", names: Sequence[str] = ()
) -> dict[str, dict[str, Cell | None]]:
    """``{"overall" | "all_evidence" | category: {score: Cell}}`` for every score name in
    ``names`` (default: the run's own), the intervals resampling ``unit``.

    ``all_evidence``: the overall questions whose evidence all reached the reader, so that a
    reading failure (evidence shown, answer wrong) is told apart from a retrieval failure.
    """
    seed = int(run.config.get("seed", 0))
    overall = [r for r in run.records if in_overall(r, run.config.get("adversarial", "exclude"))]
    shown = [r for r in overall if r.get("evidence_recall") == 1.0]
    groups = {"overall": overall, "all_evidence": shown} | {
        category: [r for r in run.records if r["category"] == category] for category in categories
    }
    return {
        scope: {
            name: interval_cell(Scores.of(members, score_of(name)), unit=unit, seed=seed)
            for name in names or score_names(run.records)
        }
        for scope, members in groups.items()
    }


def stage_costs(run: Run) -> dict[str, dict[str, int]]:
    """Calls and tokens per stage: answering and judging summed from the log (a call per
    attempt), construction from ``metrics.json`` (the only stage not logged per question)."""
    stages = run.metrics.get("accounting", {}).get("stages", {})
    construction = stages.get("construction", {})
    costs = {"construction": {key: int(construction.get(key, 0)) for key in COST_KEYS}}
    logged_by_stage = {
        "answering": [r["answering"] for r in run.records if r.get("answering")],
        "judging": [entry for r in run.records for entry in judgings(r)],
    }
    for stage, logged in logged_by_stage.items():
        costs[stage] = {
            "calls": sum(int(entry.get("attempts", 1)) for entry in logged),
            "prompt_tokens": sum(int(entry.get("prompt_tokens", 0)) for entry in logged),
            "completion_tokens": sum(int(entry.get("completion_tokens", 0)) for entry in logged),
        }
    return costs


def mean_or_none(values: Sequence[float]) -> float | None:
    """Mean of a possibly empty sequence."""
    return float(np.mean(values)) if values else None


def longmemeval_cells(run: Run, unit: str) -> LongMemEvalCells:
    """A row's Table 2 numbers, from the same grouping of the records as ``metrics.json``."""
    seed = int(run.config.get("seed", 0))
    scores = longmemeval_scores(run.records)
    none = Scores([], [])
    return LongMemEvalCells(
        per_type={
            category: interval_cell(found, unit=unit, seed=seed)
            for category, found in scores.per_type.items()
        },
        overall=interval_cell(scores.overall, unit=unit, seed=seed),
        task_averaged=scores.task_averaged,
        abstention=interval_cell(scores.abstention, unit=unit, seed=seed),
        retrieval={
            level: {
                name: interval_cell(scores.retrieval[level].get(name, none), unit=unit, seed=seed)
                for name in LONGMEMEVAL_RANKING
            }
            for level in RANKING_LEVELS
        },
    )


def complete_invocations(run: Run) -> dict[str, Any]:
    """The run's summed invocation costs when they account for every logged question, else {}."""
    invocations = run.metrics.get("invocations", {})
    return invocations if invocations.get("questions") == len(run.records) else {}


def build_row(
    run: Run,
    categories: Sequence[str],
    longmemeval: bool,
    max_failure_share: float,
    unit: str,
    names: Sequence[str],
) -> Row:
    """Every number of one row, recomputed from the run's files: the scores ``names``, the
    intervals resampling ``unit``."""
    recalls = Scores.of(run.records, lambda r: r.get("evidence_recall"))
    seed = int(run.config.get("seed", 0))
    answers = [r["answering"] for r in run.records if r.get("answering")]
    counts = failure_counts(run.records)
    failed = counts["answer"] + counts["judge"]  # other protocols' failures blank their columns
    return Row(
        key=row_key(run.config, run.variant),
        run=run,
        scores=score_cells(run, categories, unit, names),
        evidence_recall=interval_cell(recalls, unit=unit, seed=seed),
        all_evidence_share=mean_or_none([float(value == 1.0) for value in recalls.values]),
        context_tokens=mean_or_none([r["context_tokens"] for r in run.records]),
        costs=stage_costs(run),
        memories_loaded=run.metrics.get("construction", {}).get("loaded", 0) > 0,
        invocations=complete_invocations(run),
        answer_latency_s=mean_or_none([a["latency_s"] for a in answers if not a.get("cached")]),
        retrieve_latency_s=mean_or_none(
            [r["latency_s"]["retrieve"] for r in run.records if "latency_s" in r]
        ),
        longmemeval=longmemeval_cells(run, unit) if longmemeval else None,
        failed=failed,
        invalid=failed > max_failure_share * len(run.records),
    )


def row_order(row: Row) -> tuple[Any, ...]:
    """Answered rows first, grouped by backbone, baselines before methods, then by name."""
    key = row.key
    return (key.retrieval_only, key.backbone, not key.baseline, key.method, key.extraction)


def per_question(row: Row, metric: str) -> dict[str, float]:
    """The primary metric per question id, over the overall set of questions."""
    adversarial = row.run.config.get("adversarial", "exclude")
    return {
        r["question_id"]: r["scores"][metric]
        for r in row.run.records
        if in_overall(r, adversarial) and (r.get("scores") or {}).get(metric) is not None
    }


def overall_mean(row: Row, metric: str) -> float:
    """Overall mean of ``metric``; a row without one is never the best baseline."""
    found = row.scores["overall"][metric]
    return -np.inf if found is None else found.mean


def add_p_values(rows: Sequence[Row], metric: str, unit: str = "conversation") -> None:
    """Paired bootstrap p-value of each non-baseline row against its backbone's best baseline,
    paired by question and resampling ``unit`` (conversations: the questions' shared memories),
    as the intervals do."""
    answered = [row for row in rows if not row.key.retrieval_only]
    for row in answered:
        if row.key.baseline:
            continue
        baselines = [b for b in answered if b.key.baseline and b.key.backbone == row.key.backbone]
        if not baselines:
            continue
        best = max(baselines, key=lambda b: overall_mean(b, metric))
        mine, theirs = per_question(row, metric), per_question(best, metric)
        common = sorted(set(mine) & set(theirs))
        if not common:
            continue
        conversation = {r["question_id"]: r["conversation_id"] for r in row.run.records}
        conversations = [conversation[q] for q in common]
        used = resampling_unit(conversations, unit)
        p_value = paired_bootstrap_pvalue(
            [mine[q] for q in common],
            [theirs[q] for q in common],
            clusters=conversations if used == "conversation" else None,
            seed=int(row.run.config.get("seed", 0)),
        )
        row.comparisons[metric] = Comparison(
            p_value, best.key.method, len(common), used, len(set(conversations))
        )


def category_order(runs: Sequence[Run]) -> list[str]:
    """Categories seen in the runs: LoCoMo's in code order, LongMemEval's in Table 2 order, then
    any others sorted."""
    seen = {record["category"] for run in runs for record in run.records}
    known = [name for name in (*LOCOMO_CATEGORIES.values(), *LONGMEMEVAL_TYPES) if name in seen]
    return known + sorted(seen - set(known))


# ---------------------------------------------------------------------------------------------
# Header


def is_longmemeval(shared: dict[str, Any]) -> bool:
    """Whether the table is LongMemEval's (Table 2) rather than LoCoMo's."""
    return shared["dataset"].get("name") == "longmemeval"


def subset_description(subset: dict[str, Any], longmemeval: bool) -> str:
    """The subset in words; a cut-down subset says plainly that it is not the paper setting."""
    name = subset.get("name")
    conversations, questions = subset.get("conversations"), subset.get("max_questions")
    if longmemeval:
        if conversations is None and questions is None:
            return f"{name} (every question)"
        first = f" of the first {conversations}" if conversations else ""
        return (
            f"{name} ({questions or 'all'} questions{first}, stratified by question type, "
            "deterministic — offline setting, not the paper's)"
        )
    if name == "smoke":
        plural = "" if conversations == 1 else "s"
        return (
            f"smoke (offline smoke subset: {conversations} conversation{plural}, "
            f"{questions} questions — not the paper setting)"
        )
    return (
        f"{name} ({conversations or 'all'} conversations, {questions or 'all'} questions per run)"
    )


def dataset_description(dataset: dict[str, Any]) -> str:
    """Dataset name and file, or LongMemEval's variant in words."""
    if dataset.get("name") == "longmemeval":
        variant = dataset.get("variant")
        return f"longmemeval_{variant} ({LONGMEMEVAL_VARIANTS.get(variant, 'unknown variant')})"
    where = dataset.get("file") or dataset.get("variant")
    return f"{dataset.get('name')} ({where})" if where else str(dataset.get("name"))


def header_lines(shared: dict[str, Any], metric: str, runs_dir: Path, statistics: str) -> list[str]:
    """What a reader needs to know to compare the table with another one; ``statistics`` is
    :func:`statistics_line`."""
    longmemeval = is_longmemeval(shared)
    answered = "answer.template" in shared
    lines = [
        f"Dataset: {dataset_description(shared['dataset'])}",
        f"Subset: {subset_description(shared['subset'], longmemeval)}; seed {shared['seed']}",
        f"F1 scorer: {SCORER_DEFINITIONS[metric]}; BLEU-1: {BLEU_DEFINITION}",
        "Models: Backbone = the reader (answers); Extraction = lite (no LLM) or llm (the model "
        "that built the memory)" + ("; the judge below" if answered else ""),
    ]
    if answered:
        lines += [
            f"Judge model: {judge_description(shared['judge'])}"
            + (" (the judges' lines below)" if (shared["judge"] or {}).get("enabled") else ""),
            f"Answer prompt: template {shared['answer.template']}, context budget "
            f"{shared['answer.context_budget']} tokens, at most {shared['answer.max_tokens']} "
            "answer tokens",
        ]
    else:
        lines.append(
            f"Retrieval only (no answer prompt), context budget "
            f"{shared['answer.context_budget']} tokens"
        )
    evidence = "LongMemEval's has_answer turns" if longmemeval else "the dataset's evidence turns"
    lines.append(
        f"Evidence recall: share of a question's evidence ({evidence}) in the context handed to "
        "the reader; All evidence: share of questions with all of it there"
    )
    if longmemeval:
        if answered:
            lines.append(
                "LongMemEval accuracy: judge_acc per question type (n = questions of the type, "
                "_abs questions included), overall over every judged question, task-averaged = "
                "mean of the per-type means (a point value), abstention = the _abs questions alone"
            )
        lines.append(
            "LongMemEval retrieval: recall_all@k (all evidence in the top k) and ndcg_any@k over "
            "the method's ranked items, for sessions (answer_session_ids) and turns (has_answer), "
            "as LongMemEval's print_retrieval_metrics.py reports them; _abs questions, and the "
            "turn level of questions without has_answer turns, are skipped (n = questions scored)"
        )
    else:
        lines.append(
            f"Adversarial: {ADVERSARIAL_POLICY.get(shared['adversarial'], shared['adversarial'])}"
        )
    return [
        *lines,
        f"Embedder: {shared['embedder.model']}",
        statistics,
        f"Source: predictions.jsonl of each run in {shown_path(runs_dir)}; construction costs from "
        "metrics.json (* = memories loaded from cache, cost of this run only); answer latency "
        "over answers not served from the response cache; construction (s), texts embedded / "
        "asked (what the embedding model encoded, of the texts the run asked for: the rest came "
        "from the content-keyed cache), texts parsed / asked (the same for the lite extractors' "
        "spaCy parses; — for runs begun before parses were counted), wall time and peak resident "
        "memory are summed (peak: "
        "maximum; with worker processes, the parent's plus each worker's) over the run's "
        "invocations, and shown only where those cover every question",
    ]


def table_cells(rows: Sequence[Row]) -> list[Cell]:
    """Every interval of the table's rows (answered and retrieval-only, LongMemEval's too)."""
    cells: list[Cell | None] = []
    for row in rows:
        cells += [found for scope in row.scores.values() for found in scope.values()]
        cells.append(row.evidence_recall)
        if row.longmemeval is not None:
            lme = row.longmemeval
            cells += [*lme.per_type.values(), lme.overall, lme.abstention]
            cells += [found for level in lme.retrieval.values() for found in level.values()]
    return [found for found in cells if found is not None]


def interval_description(cells: Sequence[Cell], unit: str, longmemeval: bool) -> str:
    """The intervals in words: the unit their bootstrap resampled, how many conversations the
    questions come from, and, where questions were resampled on LoCoMo, why and that the
    intervals then understate uncertainty (questions of one conversation share its memory)."""
    resampled = "1000 resamples"
    if not cells:
        return f"95% bootstrap CIs resampling {unit}s ({resampled}; no cell has one)"
    conversations = max(found.conversations for found in cells)
    plural = "" if conversations == 1 else "s"
    if all(found.conversations == found.n for found in cells):
        own = "haystack" if longmemeval else "conversation"
        return (
            f"95% percentile bootstrap CIs resampling questions ({resampled}; each question has "
            f"its own {own}, so the questions are the clusters)"
        )
    understated = (
        "questions of one conversation share its memory, so these intervals understate uncertainty"
    )
    if unit == "question":
        return (
            f"95% percentile bootstrap CIs resampling questions, as asked (--interval-unit "
            f"question; {resampled}; {conversations} conversation{plural}): {understated}"
        )
    clustered = [found for found in cells if found.unit == "conversation"]
    if not clustered:
        return (
            f"95% percentile bootstrap CIs resampling questions ({resampled}) because the subset "
            f"has {conversations} conversation{plural}, fewer than the {MIN_CLUSTERS} a cluster "
            f"bootstrap needs: {understated}"
        )
    text = (
        f"95% cluster bootstrap CIs resampling the {conversations} conversations ({resampled}; "
        "questions of one conversation share its memory: a cell draws the conversations its "
        "questions come from and averages over their questions)"
    )
    fallen = len(cells) - len(clustered)
    if fallen:
        text += (
            f"; {fallen} cell(s) whose questions come from fewer than {MIN_CLUSTERS} "
            "conversations resample questions instead and understate uncertainty"
        )
    return text


def statistics_line(shared: dict[str, Any], metric: str, rows: Sequence[Row], unit: str) -> str:
    """The header's Statistics line: the intervals' unit and the p-values' test."""
    longmemeval = is_longmemeval(shared)
    both = longmemeval and "answer.template" in shared
    tested = f"{metric} (Overall) and on judge_acc (LongMemEval accuracy)" if both else metric
    units = {c.unit for row in rows for c in row.comparisons.values()}
    resampling = f"resampling {units.pop()}s" if len(units) == 1 else "resampling as the CIs do"
    return (
        f"Statistics: means over questions with "
        f"{interval_description(table_cells(rows), unit, longmemeval)}; p = two-sided paired "
        f"bootstrap on {tested} vs the best baseline of the same backbone, paired by question, "
        f"{resampling}"
    )


def in_repo(path: Path) -> Path:
    """Relative paths are relative to the repository root, where the runner writes results."""
    return path if path.is_absolute() else REPO_ROOT / path


def build_report(
    runs_dir: Path,
    *,
    dataset: str = "locomo",
    subset: str = "smoke",
    metric: str = "f1_set",
    title: str | None = None,
    where: dict[str, Any] | None = None,
    max_failure_share: float = MAX_FAILURE_SHARE,
    interval_unit: str = "conversation",
) -> Report:
    """Select, check and recompute: the whole table, ready to write; its intervals and p-values
    resample ``interval_unit`` (conversations, or questions)."""
    if metric not in PRIMARY_METRICS:
        raise ReportError(f"--metric must be one of {list(PRIMARY_METRICS)}, got {metric!r}")
    if interval_unit not in INTERVAL_UNITS:
        raise ReportError(f"interval unit must be one of {list(INTERVAL_UNITS)}")
    # One read of the run configs serves both the table and the note on what it leaves out.
    configs = run_configs(runs_dir)
    runs = with_variants(load_runs(runs_dir, dataset, subset, where, configs))
    shared = shared_conditions(runs)
    check_one_run_per_row(runs)
    categories = category_order(runs)
    longmemeval = is_longmemeval(shared)
    names = score_names(record for run in runs for record in run.records)
    rows = sorted(
        (
            build_row(run, categories, longmemeval, max_failure_share, interval_unit, names)
            for run in runs
        ),
        key=row_order,
    )
    for tested in (metric, "judge_acc") if longmemeval else (metric,):
        add_p_values(rows, tested, interval_unit)
    notes = [
        code_line(runs),
        *calibration_lines(runs, names),
        unfinished_runs_line(configs, dataset, subset, where),
        invalid_rows_line(rows, max_failure_share),
    ]
    return Report(
        title or default_title(longmemeval),
        header_lines(shared, metric, runs_dir, statistics_line(shared, metric, rows, interval_unit))
        + [note for note in notes if note],
        metric,
        categories,
        rows,
        longmemeval,
        names,
    )


def code_line(runs: Sequence[Run]) -> str:
    """The code versions the rows' records came from (``metrics.json`` ``code_versions``)."""
    counts: dict[str, int] = {}
    for run in runs:
        for version in run.metrics.get("code_versions") or [UNKNOWN]:
            counts[version] = counts.get(version, 0) + 1
    unknown = counts.pop(UNKNOWN, 0)
    parts = [f"{version} ({plural(count, 'run')})" for version, count in counts.items()]
    if unknown:
        parts.append(f"not recorded for {plural(unknown, 'run')} (logged before runs recorded it)")
    return f"Code version: {'; '.join(parts)}; package versions in each run's invocations.jsonl"


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def invalid_rows_line(rows: Sequence[Row], max_failure_share: float) -> str | None:
    """The header note that some rows do not stand, and why (None when all do)."""
    invalid = [row for row in rows if row.invalid]
    if not invalid:
        return None
    return (
        f"INVALID rows: {len(invalid)} run(s) with more than {max_failure_share:.0%} of their "
        "questions failed (answer or verdict; rerun the config to ask them again): their means "
        "leave the failures out and do not stand for the method"
    )


def default_title(longmemeval: bool) -> str:
    """The paper table a report reproduces: Table 2 is LongMemEval-S, Table 1 LoCoMo."""
    return "Table 2" if longmemeval else "Table 1"


# ---------------------------------------------------------------------------------------------
# Formatting


def fmt_cell(found: Cell | None) -> str:
    """``0.412 [0.35, 0.47]``, or a blank dash."""
    return "—" if found is None else f"{found.mean:.3f} [{found.low:.2f}, {found.high:.2f}]"


def fmt_number(value: float | None, digits: int = 3) -> str:
    """A rounded number or a dash."""
    return "—" if value is None else f"{value:.{digits}f}"


def fmt_tokens(count: int) -> str:
    """Token counts in thousands above 10,000, so cells stay narrow."""
    return f"{count / 1000:.1f}k" if count >= 10_000 else str(count)


def fmt_p(row: Row, metric: str) -> str:
    """The p-value cell: a dash for baselines, else the p-value and the baseline it faced."""
    if row.key.baseline:
        return "—"
    found = row.comparisons.get(metric)
    if found is None:
        return "no baseline"
    return f"{found.p_value:.4f} (vs {found.baseline})"


def fmt_costs(row: Row, what: str) -> str:
    """``construction / answering / judging`` calls or tokens."""
    values = [
        fmt_tokens(c["prompt_tokens"] + c["completion_tokens"])
        if what == "tokens"
        else str(c[what])
        for c in (row.costs[stage] for stage in STAGES)
    ]
    values[0] = starred(values[0], row)
    return " / ".join(values)


def starred(text: str, row: Row) -> str:
    """A cost of this run only: ``*`` where its memories came from the cache (built earlier)."""
    return text + "*" if row.memories_loaded and text != "—" else text


def fmt_work(counts: dict[str, Any] | None, done: str) -> str:
    """``<done> / requested`` texts over the run's invocations, ``done`` being the count of texts
    the model processed (``encoded``, ``parsed``); "—" where not all are known."""
    if not counts:
        return "—"
    return f"{counts[done]:,} / {counts['requested']:,}"


def fmt_wall(invocations: dict[str, Any]) -> str:
    """Wall seconds over the run's invocations, with the most worker processes any of them used
    (a run's wall time is comparable with another's only at the same count)."""
    wall = fmt_number(invocations.get("wall_s"), 0)
    workers = invocations.get("workers", 1)
    return f"{wall} ({workers} workers)" if workers > 1 and wall != "—" else wall


def scope_label(scope: str) -> str:
    """``single_hop`` → ``Single-hop``."""
    return scope.replace("_", "-").capitalize()


def row_start(row: Row) -> list[str]:
    """The identifying cells of a row (retrieval-only rows have no backbone); an invalid row says
    so in its first cell, with its count of failed questions."""
    method = row.key.method
    if row.invalid:
        method += f" INVALID ({row.failed} of {len(row.run.records)} failed)"
    return [method, row.key.backbone or "—", row.key.extraction or "—"]


def judge_scores(report: Report) -> list[str]:
    """The table's judge columns: ``judge_acc`` (the dataset's protocol), then the others."""
    return [name for name in report.scores if name.startswith("judge_acc")]


def judge_label(score: str) -> str:
    """``Judge`` for the dataset's own protocol, ``Judge <protocol>`` for the others."""
    return "Judge" if score == "judge_acc" else f"Judge {score.removeprefix(OTHER_JUDGE_PREFIX)}"


def overall_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Answered rows: overall scores, significance, retrieval and costs."""
    header = [
        "Method",
        "Backbone",
        "Extraction",
        f"F1 ({report.metric})",
        "BLEU-1",
        *(judge_label(name) for name in judge_scores(report)),
        "p vs best baseline",
        "Evidence recall",
        "All evidence",
        "F1 / Judge, all evidence shown",
        "Context tokens",
        "LLM calls (constr. / answer / judge)",
        "LLM tokens (constr. / answer / judge)",
        "Answer latency (s)",
        "Run",
    ]
    body = []
    for row in report.answered:
        overall = row.scores["overall"]
        body.append(
            [
                *row_start(row),
                *(
                    fmt_cell(overall[name])
                    for name in (report.metric, "bleu1", *judge_scores(report))
                ),
                fmt_p(row, report.metric),
                fmt_cell(row.evidence_recall),
                fmt_number(row.all_evidence_share),
                " / ".join(
                    fmt_number(getattr(row.scores["all_evidence"][name], "mean", None))
                    for name in (report.metric, "judge_acc")
                ),
                fmt_number(row.context_tokens, 1),
                fmt_costs(row, "calls"),
                fmt_costs(row, "tokens"),
                fmt_number(row.answer_latency_s),
                row.run.directory.name,
            ]
        )
    return header, body


def category_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Answered rows: each category × (F1, BLEU-1, judge)."""
    metrics = ((report.metric, "F1"), ("bleu1", "BLEU-1"), ("judge_acc", "Judge"))
    header = ["Method", "Backbone", "Extraction"] + [
        f"{scope_label(category)} {label}" for category in report.categories for _, label in metrics
    ]
    body = [
        [
            *row_start(row),
            *(
                fmt_cell(row.scores[category][name])
                for category in report.categories
                for name, _ in metrics
            ),
        ]
        for row in report.answered
    ]
    return header, body


def retrieval_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Retrieval-only rows: what the reader would have been shown, and what it cost."""
    header = [
        "Method",
        "Extraction",
        "Evidence recall",
        "All evidence",
        "Context tokens",
        "Construction LLM calls",
        "Construction (s)",
        "Texts embedded / asked",
        "Texts parsed / asked",
        "Retrieve latency (s)",
        "Wall (s)",
        "Peak RSS (MB)",
        "Run",
    ]
    body = [
        [
            row.key.method,
            row.key.extraction or "—",
            fmt_cell(row.evidence_recall),
            fmt_number(row.all_evidence_share),
            fmt_number(row.context_tokens, 1),
            starred(str(row.costs["construction"]["calls"]), row),
            starred(fmt_number(row.invocations.get("construction_s"), 0), row),
            starred(fmt_work(row.invocations.get("embedding"), "encoded"), row),
            starred(fmt_work(row.invocations.get("parsing"), "parsed"), row),
            fmt_number(row.retrieve_latency_s),
            starred(fmt_wall(row.invocations), row),
            fmt_number(row.invocations.get("peak_rss_mb"), 0),
            row.run.directory.name,
        ]
        for row in report.retrieval_only
    ]
    return header, body


def questions_per_category(report: Report) -> dict[str, int]:
    """Questions of each category in the runs (the same in every run: one subset, one seed)."""
    return {
        category: max(
            sum(r["category"] == category for r in row.run.records) for row in report.rows
        )
        for category in report.categories
    }


def longmemeval_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Answered rows: LongMemEval's Table 2, judge accuracy per question type and overall."""
    counts = questions_per_category(report)
    header = [
        "Method",
        "Backbone",
        "Extraction",
        *(
            f"{LONGMEMEVAL_TYPES.get(category, scope_label(category))} (n={counts[category]})"
            for category in report.categories
        ),
        f"Overall (N={sum(counts.values())})",
        "Task-averaged",
        "Abstention",
        "p vs best baseline (judge)",
        "Run",
    ]
    body = []
    for row in report.answered:
        cells = row.longmemeval
        assert cells is not None  # built for every row of a LongMemEval report
        body.append(
            [
                *row_start(row),
                *(fmt_cell(cells.per_type.get(category)) for category in report.categories),
                fmt_cell(cells.overall),
                fmt_number(cells.task_averaged),
                fmt_cell(cells.abstention),
                fmt_p(row, "judge_acc"),
                row.run.directory.name,
            ]
        )
    return header, body


def longmemeval_retrieval_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Every row: LongMemEval's session- and turn-level ranking metrics."""
    header = ["Method", "Backbone", "Extraction"]
    for level in RANKING_LEVELS:
        header += [f"{level.capitalize()} {name}" for name in LONGMEMEVAL_RANKING]
        header.append(f"{level.capitalize()} n")
    header.append("Run")
    body = []
    for row in report.rows:
        assert row.longmemeval is not None  # built for every row of a LongMemEval report
        cells = row_start(row)
        for level in RANKING_LEVELS:
            found = row.longmemeval.retrieval[level]
            first = found[LONGMEMEVAL_RANKING[0]]
            cells += [fmt_cell(found[name]) for name in LONGMEMEVAL_RANKING]
            cells.append(str(first.n) if first else "0")
        body.append([*cells, row.run.directory.name])
    return header, body


def sections(report: Report) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables of md and tex, in order, leaving out empty ones. LongMemEval's accuracy table
    takes the place of the per-category one (its F1 and BLEU-1 per type stay in the csv)."""
    found = []
    if report.answered:
        found.append(("Overall", overall_table(report)))
        if report.longmemeval:
            found.append(
                ("LongMemEval accuracy (judge) per question type", longmemeval_table(report))
            )
        else:
            found.append(("Per category", category_table(report)))
    if report.longmemeval:
        found.append(("LongMemEval retrieval", longmemeval_retrieval_table(report)))
    if report.retrieval_only:
        found.append(("Retrieval only (answer=none)", retrieval_table(report)))
    return found


# ---------------------------------------------------------------------------------------------
# Writers


def render_markdown(report: Report) -> str:
    """A readable table per section under the header."""
    lines = [f"# {report.title}", "", *(f"- {line}" for line in report.header)]
    for name, (header, body) in sections(report):
        lines += ["", f"## {name}", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


def tex_escape(text: str) -> str:
    """Escape LaTeX's special characters in a cell."""
    for char, escaped in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%")):
        text = text.replace(char, escaped)
    for char in "_#$":
        text = text.replace(char, "\\" + char)
    return text.replace("—", "--")


def render_tex(report: Report) -> str:
    """Booktabs tabulars, one table float per section; the header as comments and caption."""
    lines = [
        f"% {report.title}",
        *(f"% {line}" for line in report.header),
        r"% needs \usepackage{booktabs,graphicx}",
    ]
    for name, (header, body) in sections(report):
        lines += [
            "",
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{tex_escape(report.title)}: {tex_escape(name)}}}",
            r"\resizebox{\linewidth}{!}{%",
            rf"\begin{{tabular}}{{lll{'r' * (len(header) - 3)}}}",
            r"\toprule",
            " & ".join(tex_escape(cell) for cell in header) + r" \\",
            r"\midrule",
            *(" & ".join(tex_escape(cell) for cell in cells) + r" \\" for cells in body),
            r"\bottomrule",
            r"\end{tabular}}",
            r"\end{table}",
        ]
    return "\n".join(lines) + "\n"


def cell_columns(prefix: str, found: Cell | None) -> dict[str, Any]:
    """``prefix_mean``, ``_low``, ``_high``, ``_n`` rounded to 4 decimals (blank if absent)."""
    if found is None:
        return {f"{prefix}_{part}": "" for part in ("mean", "low", "high", "n")}
    return {
        f"{prefix}_mean": round(found.mean, 4),
        f"{prefix}_low": round(found.low, 4),
        f"{prefix}_high": round(found.high, 4),
        f"{prefix}_n": found.n,
    }


def rounded(value: float | None, digits: int = 4) -> Any:
    """Round for csv; blank when absent."""
    return "" if value is None else round(value, digits)


def comparison_columns(prefix: str, found: Comparison | None) -> dict[str, Any]:
    """``prefix`` + ``p_value``, ``_baseline``, ``_questions`` (blank without a comparison)."""
    return {
        f"{prefix}p_value": "" if found is None else round(found.p_value, 4),
        f"{prefix}p_value_baseline": "" if found is None else found.baseline,
        f"{prefix}p_value_questions": "" if found is None else found.questions,
    }


def longmemeval_columns(row: Row) -> dict[str, Any]:
    """Table 2's numbers that the per-category columns lack: task-averaged and abstention
    accuracy, the judge p-value, and the ranking metrics (per-type and overall accuracy are the
    ``*_judge_acc_*`` columns)."""
    assert row.longmemeval is not None  # built for every row of a LongMemEval report
    record = {
        "task_averaged_judge_acc": rounded(row.longmemeval.task_averaged),
        **cell_columns("abstention_judge_acc", row.longmemeval.abstention),
        **comparison_columns("judge_acc_", row.comparisons.get("judge_acc")),
    }
    for level, cells in row.longmemeval.retrieval.items():
        for name, found in cells.items():
            record |= cell_columns(f"{level}_{name}", found)
    return record


def csv_record(row: Row, report: Report) -> dict[str, Any]:
    """One csv line: every number of a row in its own column."""
    record: dict[str, Any] = {
        "method": row.key.method,
        "backbone": row.key.backbone,
        "extraction": row.key.extraction,
        "retrieval_only": row.key.retrieval_only,
        "baseline": row.key.baseline,
        "run": row.run.directory.name,
        "questions": len(row.run.records),
        "failures": row.failed,
        "invalid": row.invalid,
    }
    for scope in ("overall", "all_evidence", *report.categories):
        for name in report.scores:
            record |= cell_columns(f"{scope}_{name}", row.scores[scope][name])
    record |= comparison_columns("", row.comparisons.get(report.metric))
    if report.longmemeval:
        record |= longmemeval_columns(row)
    record |= {
        **cell_columns("evidence_recall", row.evidence_recall),
        "evidence_all_share": rounded(row.all_evidence_share),
        "context_tokens_mean": rounded(row.context_tokens, 1),
        "construction_memories_loaded": row.memories_loaded,
        "construction_s": row.invocations.get("construction_s"),
        "texts_embedded": row.invocations.get("embedding", {}).get("encoded"),
        "texts_embedding_asked": row.invocations.get("embedding", {}).get("requested"),
        "texts_parsed": row.invocations.get("parsing", {}).get("parsed"),
        "texts_parsing_asked": row.invocations.get("parsing", {}).get("requested"),
        "wall_s": row.invocations.get("wall_s"),
        "workers": row.invocations.get("workers"),
        "peak_rss_mb": row.invocations.get("peak_rss_mb"),
    }
    for stage in STAGES:
        record |= {f"{stage}_{key}": value for key, value in row.costs[stage].items()}
    record["answer_latency_s_mean"] = rounded(row.answer_latency_s)
    record["retrieve_latency_s_mean"] = rounded(row.retrieve_latency_s)
    return record


def write_csv(report: Report, path: Path) -> None:
    """Header as leading ``#`` lines (read with ``pandas.read_csv(path, comment="#")``)."""
    records = [csv_record(row, report) for row in report.rows]
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.writelines(f"# {line}\n" for line in [report.title, *report.header])
        writer = csv.DictWriter(handle, fieldnames=list(records[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)


def bar_panel(axis: Any, rows: Sequence[Row], cells: Sequence[Cell | None], xlabel: str) -> None:
    """Horizontal bars of means with their CIs as error bars, first row on top."""
    present = [(row, found) for row, found in zip(rows, cells, strict=True) if found is not None]
    positions = np.arange(len(present))[::-1]
    means = [found.mean for _, found in present]
    errors = [
        [found.mean - found.low for _, found in present],
        [found.high - found.mean for _, found in present],
    ]
    axis.barh(positions, means, xerr=errors, capsize=3, color="#4c72b0")
    axis.set_yticks(positions, [row.key.label() for row, _ in present])
    axis.set_xlabel(xlabel)
    axis.set_xlim(0, 1)


def write_plot(report: Report, path: Path) -> None:
    """Primary metric overall per answered row (judge accuracy on LongMemEval, the metric of its
    Table 2), and evidence recall per row, with 95% CIs.

    Drawn on a bare ``Figure`` (Agg canvas), so no pyplot backend or global state is touched.
    """
    panels = []
    if report.answered:
        shown_metric = "judge_acc" if report.longmemeval else report.metric
        cells = [row.scores["overall"][shown_metric] for row in report.answered]
        panels.append((report.answered, cells, f"{shown_metric}, overall (95% CI)"))
    if any(row.evidence_recall for row in report.rows):
        cells = [row.evidence_recall for row in report.rows]
        panels.append((report.rows, cells, "evidence recall (95% CI)"))
    count = max(len(panels), 1)
    figure = Figure(figsize=(6 * count, 1.5 + 0.35 * len(report.rows)))
    for axis, (rows, cells, xlabel) in zip(
        figure.subplots(1, count, squeeze=False)[0], panels, strict=False
    ):
        bar_panel(axis, rows, cells, xlabel)
    figure.suptitle(report.title)
    figure.tight_layout()
    figure.savefig(path, dpi=120, metadata={"Software": None})


def write_report(report: Report, out: Path) -> list[Path]:
    """``out`` + ``.md``, ``.csv``, ``.tex``, ``.png``; returns the paths written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.parent / f"{out.name}{suffix}" for suffix in (".md", ".csv", ".tex", ".png")]
    paths[0].write_text(render_markdown(report), encoding="utf-8")
    write_csv(report, paths[1])
    paths[2].write_text(render_tex(report), encoding="utf-8")
    write_plot(report, paths[3])
    return paths


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=Path("results/runs"))
    parser.add_argument(
        "--out", type=Path, help="default results/table1, results/table2 for LongMemEval"
    )
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument("--subset", default="smoke")
    parser.add_argument("--metric", default="f1_set", choices=PRIMARY_METRICS)
    parser.add_argument("--title", help="default Table 1, Table 2 for LongMemEval")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep runs whose config.yaml has this value, e.g. answer.context_budget=2048",
    )
    parser.add_argument(
        "--max-failure-share",
        type=float,
        default=MAX_FAILURE_SHARE,
        help="mark a run INVALID when more of its questions failed (default %(default)s)",
    )
    parser.add_argument(
        "--interval-unit",
        choices=INTERVAL_UNITS,
        default="conversation",
        help="what the bootstrap resamples: whole conversations (cluster bootstrap; questions "
        f"where a cell has fewer than {MIN_CLUSTERS}) or single questions (default %(default)s)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Build and write the report; exit 2 with a clear message when no table can be built."""
    args = parse_args(argv)
    try:
        report = build_report(
            in_repo(args.runs),
            dataset=args.dataset,
            subset=args.subset,
            metric=args.metric,
            title=args.title,
            where=parse_where(args.where),
            max_failure_share=args.max_failure_share,
            interval_unit=args.interval_unit,
        )
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = args.out or Path("results/table2" if report.longmemeval else "results/table1")
    for path in write_report(report, in_repo(out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
