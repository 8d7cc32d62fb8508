"""Which runs make a table, checked and recomputed: the runs of a folder that pass the dataset,
subset and ``--where`` filters, checked to share their conditions, one row each
(:mod:`benchmarks.runs.rows`), with what their scores are read against (LongMemEval's official
corpora, LoCoMo's audited key); and for the efficiency frontier, one such table per context
budget, the budgets' runs sharing everything else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.locomo_audit import Erratum, load_errata, published_key_ceiling
from benchmarks.data.specs import DatasetSpec, spec_of
from benchmarks.metrics.aggregate import score_names
from benchmarks.metrics.longmemeval_official import Corpus
from benchmarks.metrics.ranking import load_corpora
from benchmarks.runs.conditions import (
    check_one_run_per_row,
    conditions,
    differing_keys,
    shared_conditions,
    with_variants,
)
from benchmarks.runs.folders import (
    ReportError,
    Run,
    load_runs,
    lookup,
    matching_runs,
    run_configs,
)
from benchmarks.runs.judges import hidden_judge_scores, probe_figures
from benchmarks.runs.rows import (
    Row,
    add_p_values,
    build_row,
    category_order,
    mark_stale,
    row_order,
)

#: A run with a larger share of failed questions (answers or verdicts) is marked INVALID.
MAX_FAILURE_SHARE = 0.02
BUDGET = "answer.context_budget"


@dataclass(frozen=True)
class Audit:
    """LoCoMo's audited key as a report uses it: the errata (None when missing, ``missing`` saying
    so) and per category how many questions keep their published answer, of how many."""

    errata: dict[str, Erratum] | None
    missing: str | None
    ceiling: dict[str, tuple[int, int]]

    def ambiguous(self, runs: Sequence[Run]) -> set[str]:
        """The runs' questions whose erratum leaves no audited answer (``AMBIGUOUS``)."""
        errata = self.errata or {}
        return {
            r["question_id"]
            for run in runs
            for r in run.records
            if (found := errata.get(r["question_id"])) is not None and found.audited_answer is None
        }


def longmemeval_corpora(runs: Sequence[Run], shared: dict[str, Any]) -> dict[str, Corpus]:
    """The official retrieval corpora of every question the runs logged, read from the dataset
    (``MEMBENCH_DATA``): the stored rankings are scored against them."""
    try:
        return load_corpora(
            shared.get("dataset", {}).get("variant") or "s",
            {record["question_id"] for run in runs for record in run.records},
        )
    except (DatasetError, DataMissingError) as error:
        raise ReportError(f"cannot score the stored rankings: {error}") from error


def load_audit(spec: DatasetSpec, runs: Sequence[Run]) -> Audit | None:
    """The audited key of the runs' dataset (from the data folder ``MEMBENCH_DATA`` names),
    loaded once per report; None for a dataset without an audit."""
    if not spec.audited_key:
        return None
    try:
        errata = load_errata()
    except (DataMissingError, DatasetError) as error:
        return Audit(None, str(error), {})
    questions = {(r["question_id"], r["category"]) for run in runs for r in run.records}
    return Audit(errata, None, published_key_ceiling(sorted(questions), errata))


@dataclass(frozen=True)
class TableRows:
    """A table's runs, read and checked, and their rows recomputed (:func:`table_rows`)."""

    #: Every run folder's config, finished or not, read once for the table and its notes.
    configs: dict[Path, dict[str, Any]]
    runs: list[Run]
    #: What every run shares (:func:`benchmarks.runs.conditions.shared_conditions`).
    shared: dict[str, Any]
    spec: DatasetSpec
    categories: list[str]
    #: Every score name the runs carry (:func:`benchmarks.metrics.aggregate.score_names`).
    names: tuple[str, ...]
    audit: Audit | None
    rows: list[Row]


def table_rows(
    runs_dir: Path,
    *,
    dataset: str,
    subset: str,
    where: dict[str, Any] | None,
    metric: str = "f1_set",
    max_failure_share: float = MAX_FAILURE_SHARE,
    interval_unit: str = "conversation",
    partial: bool = False,
) -> TableRows:
    """Select, check and recompute: the runs under ``runs_dir`` that pass the filters, checked to
    share their conditions, one row each in table order, with p-values on ``metric`` and intervals
    resampling ``interval_unit``."""
    configs = run_configs(runs_dir)
    runs = with_variants(load_runs(runs_dir, dataset, subset, where, configs, partial=partial))
    shared = shared_conditions(runs)
    check_one_run_per_row(runs)
    categories = category_order(runs)
    spec = spec_of(shared)
    names = score_names(record for run in runs for record in run.records)
    corpora = longmemeval_corpora(runs, shared) if spec.longmemeval_scores else None
    audit = load_audit(spec, runs)
    errata = None if audit is None else audit.errata
    figures = probe_figures(runs, names)
    rows = sorted(
        (
            build_row(run, categories, corpora, max_failure_share, interval_unit, names, errata)
            for run in runs
        ),
        key=row_order,
    )
    for row in rows:
        row.hidden_judges = hidden_judge_scores(row.run.config, names, figures)
    for tested in (metric, "judge_acc") if spec.longmemeval_scores else (metric,):
        add_p_values(rows, tested, interval_unit)
    mark_stale(rows)
    return TableRows(configs, runs, shared, spec, categories, names, audit, rows)


def rows_by_budget(
    runs_dir: Path, *, dataset: str, subset: str, where: dict[str, Any] | None = None
) -> dict[int, TableRows]:
    """The retrieval-only runs that pass the filters, one table's rows per context budget, in budget
    order (sharing their setting but for the budget)."""
    where = {"answer.template": None, **(where or {})}
    configs = matching_runs(run_configs(runs_dir), dataset, subset, where)
    budgets = sorted({int(lookup(config, BUDGET)) for _, config in configs})
    if not budgets:
        raise ReportError(f"no retrieval-only run in {runs_dir} for {dataset}/{subset}")
    tables = {
        budget: table_rows(
            runs_dir, dataset=dataset, subset=subset, where={**where, BUDGET: budget}
        )
        for budget in budgets
    }
    setting = {
        budget: {k: v for k, v in conditions(found.rows[0].run.config).items() if k != BUDGET}
        for budget, found in tables.items()
    }
    for budget in budgets:
        if setting[budget] != setting[budgets[0]]:
            path = differing_keys(setting[budgets[0]], setting[budget])[0]
            raise ReportError(
                f"the runs at budget {budgets[0]} and at budget {budget} "
                f"disagree on {path} (narrow with --where {path}=...)"
            )
    return tables
