"""Every number of a table's row, recomputed from a run's ``predictions.jsonl``: score cells with
their intervals, LongMemEval's aggregates and ranking metrics (against the questions' official
corpora), the scores under LoCoMo's audited key, costs and latencies, the p-values against the
backbone's best baseline, and whether the method's source changed since the run. Every aggregate
that ``metrics.json`` also stores is computed by :mod:`benchmarks.metrics.aggregate` (the one
aggregation); this module picks the run's records, seed and policy and adds what only a table
shows. The tables (:mod:`benchmarks.tables.report`) lay the rows out and word them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.config.values import ConfigError
from benchmarks.data.locomo_audit import Erratum
from benchmarks.metrics.aggregate import (
    Cell,
    LongMemEvalCells,
    all_evidence_share,
    answer_coverages,
    cells_by_scope,
    evidence_recalls,
    failure_counts,
    in_overall,
    interval_cell,
    longmemeval_cells,
    mean_or_none,
    score_names,
)
from benchmarks.metrics.agreement import judge_repeats
from benchmarks.metrics.audited import audited_scores
from benchmarks.metrics.judge import judgings
from benchmarks.metrics.longmemeval_official import Corpus
from benchmarks.metrics.ranking import stored_turn_ranking
from benchmarks.metrics.stats import paired_bootstrap_pvalue, resampling_unit
from benchmarks.pipeline.harness import lost_to_a_failed_request
from benchmarks.pipeline.provenance import method_source
from benchmarks.pipeline.settings import declared_context_order
from benchmarks.runs.folders import Run, lookup
from benchmarks.runs.naming import RowKey, row_key
from benchmarks.runs.restamps import carried_source
from memsys.llm.accounting import latency_percentiles
from memsys.types import LOCOMO_CATEGORIES

STAGES = ("construction", "answering", "judging")
COST_KEYS = ("calls", "prompt_tokens", "completion_tokens")
#: LongMemEval's question types in the column order of ES-Mem's Table 2, with its short labels.
LONGMEMEVAL_TYPES = {
    "temporal_reasoning": "Temporal",
    "multi_session": "Multi-session",
    "knowledge_update": "Knowledge-update",
    "single_session_user": "Single-user",
    "single_session_assistant": "Single-assistant",
    "single_session_preference": "Single-preference",
}
#: The ranking metrics a table shows at both levels: those LongMemEval's paper reports, then
#: recall_any@1 and MRR, which still separate methods where recall@10 is saturated.
LONGMEMEVAL_RANKING = (
    "recall_all@5",
    "ndcg_any@5",
    "recall_all@10",
    "ndcg_any@10",
    "recall_any@1",
    "mrr",
)


#: The scores shown under both LoCoMo keys (:func:`benchmarks.metrics.audited.audited_scores`).
AUDITED_SCORES = ("evidence_recall", "answer_coverage", "f1_locomo")


@dataclass(frozen=True)
class KeyComparison:
    """One score of a row under the published and the audited key, both over the questions both keys
    score."""

    published: float | None
    audited: float | None
    questions: int

    @property
    def delta(self) -> float | None:
        """Audited minus published, or None without questions."""
        if self.published is None or self.audited is None:
            return None
        return self.audited - self.published


@dataclass(frozen=True)
class Comparison:
    """A paired bootstrap test of a row against its backbone's best baseline, and the unit it
    resampled (as :class:`benchmarks.metrics.aggregate.Cell` says it)."""

    p_value: float
    baseline: str
    questions: int
    unit: str
    conversations: int


@dataclass
class Row:
    """One row of the table: a run's recomputed numbers."""

    key: RowKey
    run: Run
    scores: dict[str, dict[str, Cell | None]]
    evidence_recall: Cell | None
    #: Answer coverage overall (every question that has one) and per category.
    answer_coverage: dict[str, Cell | None]
    all_evidence_share: float | None
    context_tokens: float | None
    costs: dict[str, dict[str, int]]
    memories_loaded: bool
    #: The run's summed invocation costs, or ``{}`` when they do not cover every question.
    invocations: dict[str, Any]
    answer_latency_s: float | None
    retrieve_latency_s: float | None
    #: Percentiles of the answers the model gave (cache hits apart) and of every retrieval.
    answer_latency: dict[str, Any]
    retrieve_latency: dict[str, Any]
    longmemeval: LongMemEvalCells | None
    #: Questions whose answer or verdict failed (left out of the means, not scored as wrong).
    failed: int = 0
    #: Questions a failed request left out
    #: (:func:`benchmarks.pipeline.harness.lost_to_a_failed_request`).
    to_ask_again: int = 0
    #: Whether ``failed`` exceeds the report's allowed share: the row's numbers do not stand.
    invalid: bool = False
    comparisons: dict[str, Comparison] = field(default_factory=dict)
    #: ``(recorded, now)`` method fingerprints where they differ (the row is stale); else None.
    source_changed: tuple[str, str] | None = None
    #: The stamps that carry the run's fingerprint to today's (:mod:`benchmarks.runs.restamps`).
    restamped: list[dict[str, Any]] = field(default_factory=list)
    #: Judge scores not shown as accuracy (:func:`benchmarks.runs.judges.hidden_judge_scores`).
    hidden_judges: frozenset[str] = frozenset()
    #: Each of :data:`AUDITED_SCORES` under both LoCoMo keys; None where no audit applies.
    audited: dict[str, KeyComparison] | None = None


def run_seed(run: Run) -> int:
    """The seed of a run's bootstraps, as ``metrics.json``'s were drawn."""
    return int(run.config.get("seed", 0))


def score_cells(
    run: Run, categories: Sequence[str], unit: str = "conversation", names: Sequence[str] = ()
) -> dict[str, dict[str, Cell | None]]:
    """``{"overall" | "all_evidence" | category: {score: Cell}}`` for every score name in ``names``
    (default: the run's own), computed as ``metrics.json``'s are
    (:func:`benchmarks.metrics.aggregate.cells_by_scope`)."""
    return cells_by_scope(
        run.records,
        run.config.get("adversarial", "exclude"),
        categories,
        names or score_names(run.records),
        unit=unit,
        seed=run_seed(run),
        all_evidence=True,
    )


def coverage_cells(run: Run, categories: Sequence[str], unit: str) -> dict[str, Cell | None]:
    """Answer coverage overall (every question that has one) and per category, with intervals
    resampling ``unit`` as evidence recall's do."""
    seed = run_seed(run)
    groups = {"overall": run.records} | {
        category: [r for r in run.records if r["category"] == category] for category in categories
    }
    return {
        scope: interval_cell(answer_coverages(members), unit=unit, seed=seed)
        for scope, members in groups.items()
    }


def key_comparisons(run: Run, errata: Mapping[str, Erratum]) -> dict[str, KeyComparison]:
    """Evidence recall, answer coverage and LoCoMo's F1 under the published key and the audited key
    (``errata``), each over the questions both keys score."""
    adversarial = run.config.get("adversarial", "exclude")
    pairs: dict[str, list[tuple[float, float]]] = {name: [] for name in AUDITED_SCORES}
    for record in run.records:
        audited = audited_scores(record, errata)
        published = {
            "evidence_recall": record.get("evidence_recall"),
            "answer_coverage": record.get("answer_coverage"),
            "f1_locomo": (record.get("scores") or {}).get("f1_locomo")
            if in_overall(record, adversarial)
            else None,
        }
        for name in AUDITED_SCORES:
            if published[name] is not None and audited[name] is not None:
                pairs[name].append((published[name], audited[name]))
    return {
        name: KeyComparison(
            mean_or_none([p for p, _ in found]), mean_or_none([a for _, a in found]), len(found)
        )
        for name, found in pairs.items()
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


def build_row(
    run: Run,
    categories: Sequence[str],
    corpora: Mapping[str, Corpus] | None,
    max_failure_share: float,
    unit: str,
    names: Sequence[str],
    errata: Mapping[str, Erratum] | None = None,
) -> Row:
    """Every number of one row, recomputed from the run's files; LongMemEval's aggregates where
    ``corpora`` is given, the audited key's scores where ``errata`` is."""
    recalls = evidence_recalls(run.records)
    seed = run_seed(run)
    answers = [r["answering"] for r in run.records if r.get("answering")]
    answered = [a["latency_s"] for a in answers if not a.get("cached")]
    retrieved = [r["latency_s"]["retrieve"] for r in run.records if "latency_s" in r]
    counts = failure_counts(run.records)
    failed = counts["answer"] + counts["judge"]  # other protocols' failures blank their columns
    invocations = run.metrics.get("invocations", {})  # summed costs, if they cover every question
    return Row(
        key=row_key(run.config, run.variant),
        run=run,
        scores=score_cells(run, categories, unit, names),
        evidence_recall=interval_cell(recalls, unit=unit, seed=seed),
        answer_coverage=coverage_cells(run, categories, unit),
        all_evidence_share=all_evidence_share(recalls),
        context_tokens=mean_or_none([r["context_tokens"] for r in run.records]),
        costs=stage_costs(run),
        memories_loaded=run.metrics.get("construction", {}).get("loaded", 0) > 0,
        invocations=invocations if invocations.get("questions") == len(run.records) else {},
        answer_latency_s=mean_or_none(answered),
        retrieve_latency_s=mean_or_none(retrieved),
        answer_latency=latency_percentiles(answered),
        retrieve_latency=latency_percentiles(retrieved),
        longmemeval=longmemeval_cells(
            run.records, unit=unit, seed=seed, corpora=corpora, ranking=LONGMEMEVAL_RANKING
        )
        if corpora is not None
        else None,
        failed=failed,
        to_ask_again=sum(1 for record in run.records if lost_to_a_failed_request(record)),
        invalid=failed > max_failure_share * len(run.records),
        audited=None if errata is None else key_comparisons(run, errata),
    )


def mark_stale(rows: Sequence[Row], fingerprint: Callable[[str], str | None] | None = None) -> None:
    """Set each row's :attr:`Row.source_changed` where the fingerprint its run recorded differs from
    ``fingerprint`` of its ``method._target_`` now (computed once per target); a run that recorded
    none is left unmarked."""
    fingerprint = fingerprint or method_source
    now: dict[str, str | None] = {}
    for row in rows:
        target = lookup(row.run.config, "method._target_", None)
        if row.run.method_source is None or not target:
            continue
        if target not in now:
            now[target] = fingerprint(target)
        current = now[target]
        carried, stamps = carried_source(row.run.method_source, row.run.restamps)
        if current is not None and current != carried:
            row.source_changed = (row.run.method_source, current)
        elif stamps:
            row.restamped = stamps


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
    resampling ``unit`` as the intervals do."""
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
            seed=run_seed(row.run),
        )
        row.comparisons[metric] = Comparison(
            p_value, best.key.method, len(common), used, len(set(conversations))
        )


def baselines_faced(rows: Sequence[Row], tested: str) -> dict[str, str]:
    """Per backbone, the baseline its rows' p-values on ``tested`` were computed against (its
    best: :func:`add_p_values`)."""
    faced: dict[str, str] = {}
    for row in rows:
        found = row.comparisons.get(tested)
        if found is not None:
            faced.setdefault(row.key.backbone, found.baseline)
    return faced


def category_order(runs: Sequence[Run]) -> list[str]:
    """Categories seen in the runs: LoCoMo's in code order, LongMemEval's in Table 2 order, then
    any others sorted."""
    seen = {record["category"] for run in runs for record in run.records}
    known = [name for name in (*LOCOMO_CATEGORIES.values(), *LONGMEMEVAL_TYPES) if name in seen]
    return known + sorted(seen - set(known))


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


def budget_used(row: Row) -> float | None:
    """The row's mean context tokens over its context budget."""
    budget = row.run.config.get("answer", {}).get("context_budget")
    return None if row.context_tokens is None or not budget else row.context_tokens / budget


def questions_per_category(rows: Sequence[Row], categories: Sequence[str]) -> dict[str, int]:
    """Questions of each category in the rows' runs (the same in every run: one subset, one
    seed)."""
    return {
        category: max(sum(r["category"] == category for r in row.run.records) for row in rows)
        for category in categories
    }


def ranked(row: Row) -> bool:
    """Whether a LongMemEval row has any ranking metric (its records stored rankings)."""
    cells = row.longmemeval
    return cells is not None and any(
        cell is not None for level in cells.retrieval.values() for cell in level.values()
    )


def own_repeats(row: Row) -> dict[str, Any] | None:
    """The row's repeat agreement under its dataset's own protocol (the J column's), or None
    where it asked one verdict per answer."""
    own = next((r["judging"].get("protocol") for r in row.run.records if r.get("judging")), None)
    return judge_repeats(row.run.records).get(own) if own else None


def shallow_rankings(run: Run) -> int:
    """How many of the run's stored rankings are not full depth (a method that ranks no deeper
    than its items): a metric deeper than such a ranking is not computable."""
    stored = [r for r in run.records if stored_turn_ranking(r) is not None]
    return sum(not r["ranking"].get("complete") for r in stored)


def published_only(row: Row, name: str) -> float | None:
    """A row's published-key mean of an audited score, from its overall cells."""
    found = {
        "evidence_recall": row.evidence_recall,
        "answer_coverage": row.answer_coverage["overall"],
        "f1_locomo": row.scores["overall"].get("f1_locomo"),
    }[name]
    return None if found is None else found.mean


def context_orders(run: Run) -> tuple[str, str, str | None]:
    """The order a run's contexts reached the reader in, its method's ``_target_``, and the order
    that class declares (None where unreadable)."""
    used = str(lookup(run.config, "answer.order", "time"))
    target = str(lookup(run.config, "method._target_", ""))
    try:
        return used, target, declared_context_order(target)
    except ConfigError:
        return used, target, None
