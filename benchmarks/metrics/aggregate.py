"""A run's metrics from its per-question log: means with bootstrap CIs, per category.

Built from the JSONL records only, the one aggregation behind ``metrics.json`` and the report's
tables. Failed answers or verdicts are left out of a mean and counted in ``failures``, never
scored as 0 or 1; intervals: :func:`benchmarks.metrics.stats.resampling_unit`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from benchmarks.data.specs import dataset_spec
from benchmarks.metrics.judge import PROTOCOLS
from benchmarks.metrics.longmemeval_official import GRANULARITIES, Corpus, metric_names
from benchmarks.metrics.ranking import record_scores
from benchmarks.metrics.stats import MIN_CLUSTERS, bootstrap_ci, resampling_unit
from memsys.llm.accounting import latency_percentiles

SCORE_NAMES = ("f1_locomo", "f1_set", "bleu1", "judge_acc")
#: The levels LongMemEval scores a record's stored ``ranking`` at.
RANKING_LEVELS = GRANULARITIES
#: The score of an answer under a judge protocol other than the dataset's own (``judge_acc``).
OTHER_JUDGE_PREFIX = "judge_acc_"


def score_names(records: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """:data:`SCORE_NAMES`, then the other judge protocols' scores the records carry, in the
    order of :data:`benchmarks.metrics.judge.PROTOCOLS`."""
    found = {name for r in records for name in (r.get("scores") or {})}
    others = [f"{OTHER_JUDGE_PREFIX}{protocol}" for protocol in PROTOCOLS]
    return SCORE_NAMES + tuple(name for name in others if name in found)


@dataclass(frozen=True)
class Scores:
    """Some questions' scores in record order, each beside its question's conversation (the
    memory it was answered from: the cluster a conversation bootstrap resamples)."""

    values: list[float]
    conversations: list[str]

    @classmethod
    def of(
        cls, records: Iterable[dict[str, Any]], value: Callable[[dict[str, Any]], float | None]
    ) -> Scores:
        """``value`` of each record that has one (not None), with the record's conversation."""
        pairs = [(value(record), record["conversation_id"]) for record in records]
        kept = [(score, conversation) for score, conversation in pairs if score is not None]
        return cls([score for score, _ in kept], [conversation for _, conversation in kept])


def score_of(name: str) -> Callable[[dict[str, Any]], float | None]:
    """A record's score ``name``, None where it has none (not scored, or failed)."""
    return lambda record: (record.get("scores") or {}).get(name)


@dataclass(frozen=True)
class Cell:
    """A mean over questions with its 95% bootstrap interval, and what the bootstrap resampled:
    ``unit`` ("conversation" or "question") and the distinct conversations of the n questions."""

    mean: float
    low: float
    high: float
    n: int
    unit: str
    conversations: int

    def as_json(self) -> dict[str, Any]:
        """The cell as ``metrics.json`` stores it."""
        return {
            "mean": self.mean,
            "ci95": [self.low, self.high],
            "n": self.n,
            "unit": self.unit,
            "conversations": self.conversations,
        }


def interval_cell(scores: Scores, *, unit: str, seed: int) -> Cell | None:
    """Mean and 95% bootstrap interval resampling ``unit`` (:func:`resampling_unit`), or ``None``
    when no question carries the score."""
    if not scores.values:
        return None
    used = resampling_unit(scores.conversations, unit)
    clusters = scores.conversations if used == "conversation" else None
    interval = bootstrap_ci(scores.values, clusters=clusters, seed=seed)
    return Cell(
        mean=interval.mean,
        low=interval.low,
        high=interval.high,
        n=len(scores.values),
        unit=used,
        conversations=len(set(scores.conversations)),
    )


def cell_json(found: Cell | None) -> dict[str, Any]:
    """An :func:`interval_cell` as ``metrics.json`` stores it (no mean without questions)."""
    if found is None:
        return {"mean": None, "ci95": None, "n": 0, "unit": None, "conversations": 0}
    return found.as_json()


def mean_or_none(values: Sequence[float]) -> float | None:
    """Mean of a possibly empty sequence."""
    return float(np.mean(values)) if values else None


def dataset_name(name: str, variant: str | None) -> str:
    """The dataset as ``metrics.json`` names it: ``locomo`` or ``longmemeval_<variant>``."""
    return name if variant is None else f"{name}_{variant}"


def in_overall(record: dict[str, Any], adversarial: str) -> bool:
    """Whether a question enters the overall means under the run's adversarial policy."""
    return not (adversarial == "exclude" and record["category"] == "adversarial")


def cells_by_scope(
    records: Sequence[dict[str, Any]],
    adversarial: str,
    categories: Sequence[str],
    names: Sequence[str],
    *,
    unit: str,
    seed: int,
    all_evidence: bool = False,
) -> dict[str, dict[str, Cell | None]]:
    """``{"overall" | "all_evidence" | category: {score: Cell}}`` for every score in ``names``:
    overall under the ``adversarial`` policy, each category over all its questions; ``all_evidence``
    (asked for) tells a reading failure apart from a retrieval one."""
    overall = [r for r in records if in_overall(r, adversarial)]
    groups = {"overall": overall}
    if all_evidence:
        groups["all_evidence"] = [r for r in overall if r.get("evidence_recall") == 1.0]
    groups |= {
        category: [r for r in records if r["category"] == category] for category in categories
    }
    return {
        scope: {
            name: interval_cell(Scores.of(members, score_of(name)), unit=unit, seed=seed)
            for name in names
        }
        for scope, members in groups.items()
    }


def evidence_recalls(records: Iterable[dict[str, Any]]) -> Scores:
    """Each question's evidence recall, where it has evidence to recall."""
    return Scores.of(records, lambda r: r.get("evidence_recall"))


def answer_coverages(records: Iterable[dict[str, Any]]) -> Scores:
    """Each question's answer coverage (:mod:`benchmarks.metrics.coverage`), where it has one."""
    return Scores.of(records, lambda r: r.get("answer_coverage"))


def all_evidence_share(recalls: Scores) -> float | None:
    """The share of questions with all their evidence in the reader's context."""
    return mean_or_none([float(value == 1.0) for value in recalls.values])


def failure_counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Failed answers, failed verdicts under the dataset's own protocol and (where graded) under
    others: left out of their means, never scored as wrong."""
    counts = {
        "answer": sum(1 for r in records if (r.get("failure") or "").startswith("answer")),
        "judge": sum(1 for r in records if (r.get("judging") or {}).get("error")),
    }
    if any(r.get("other_judgings") for r in records):
        counts["other_judges"] = sum(
            1
            for r in records
            if any(entry.get("error") for entry in (r.get("other_judgings") or {}).values())
        )
    return counts


class SubsetFacts(Protocol):
    @property
    def name(self) -> str: ...


class RunFacts(Protocol):
    """What the summary of a run names and seeds from: the run's settings
    (:class:`benchmarks.pipeline.settings.RunSettings` has them all)."""

    @property
    def dataset(self) -> str: ...
    @property
    def variant(self) -> str | None: ...
    @property
    def subset(self) -> SubsetFacts: ...
    @property
    def template(self) -> str | None: ...
    @property
    def adversarial(self) -> str: ...
    @property
    def seed(self) -> int: ...


def summarize_run(
    records: Sequence[dict[str, Any]],
    settings: RunFacts,
    *,
    unit: str = "conversation",
    corpora: Mapping[str, Corpus] | None = None,
) -> dict[str, Any]:
    """Overall and per-category means of every score, evidence recall and context size, with
    intervals resampling ``unit``; on LongMemEval, the stored rankings scored against
    ``corpora``."""
    categories = sorted({record["category"] for record in records})
    cells = cells_by_scope(
        records,
        settings.adversarial,
        categories,
        score_names(records),
        unit=unit,
        seed=settings.seed,
    )
    # A score no question carries is left out; one carried but never scored has an empty cell.
    names = [
        name
        for name, found in cells["overall"].items()
        if found is not None or any(name in (r.get("scores") or {}) for r in records)
    ]
    recalls = evidence_recalls(records)
    tokens = [r["context_tokens"] for r in records]
    summary: dict[str, Any] = {
        "dataset": dataset_name(settings.dataset, settings.variant),
        "subset": settings.subset.name,
        "template": settings.template,
        "adversarial": settings.adversarial,
        "questions": len(records),
        "failures": failure_counts(records),
        "interval": interval_summary(records, unit),
        "scores": {name: cell_json(cells["overall"][name]) for name in names},
        "per_category": {
            category: {name: cell_json(cells[category][name]) for name in names}
            | {"questions": sum(1 for r in records if r["category"] == category)}
            for category in categories
        },
        "evidence_recall": {
            **cell_json(interval_cell(recalls, unit=unit, seed=settings.seed)),
            "all_retrieved_share": all_evidence_share(recalls),
            "skipped_no_evidence": len(records) - len(recalls.values),
        },
    }
    if dataset_spec(settings.dataset).longmemeval_scores:
        summary["longmemeval"] = longmemeval_summary(
            records, settings.seed, unit=unit, corpora=corpora or {}
        )
    summary["context_tokens"] = {
        "mean": mean_or_none(tokens),
        "median": float(np.median(tokens)) if tokens else None,
    }
    summary["retrieval_latency_s"] = latency_percentiles(
        [r["latency_s"]["retrieve"] for r in records if "latency_s" in r]
    )
    return summary


@dataclass(frozen=True)
class LongMemEvalScores:
    """A LongMemEval run's per-question numbers, grouped the way the benchmark aggregates them: the
    one grouping behind both ``metrics.json`` and Table 2, so the two cannot disagree on which
    questions a number covers. Each score keeps its question's conversation, for the bootstrap."""

    per_type: dict[str, Scores]
    overall: Scores
    abstention: Scores
    retrieval: dict[str, dict[str, Scores]]
    #: Questions the ranking metrics score (their stored ranking decides some metric or none).
    ranked: int = 0

    @property
    def task_averaged(self) -> float | None:
        """Mean of the per-type means: every question type weighs the same, whatever its size."""
        type_means = [float(np.mean(scores.values)) for scores in self.per_type.values()]
        return float(np.mean(type_means)) if type_means else None


def longmemeval_scores(
    records: Sequence[dict[str, Any]], corpora: Mapping[str, Corpus]
) -> LongMemEvalScores:
    """Judge verdicts per question type, overall and on abstention questions, and each ranking
    metric per level, in record order; a metric a stored ranking does not decide (too shallow:
    :func:`~benchmarks.metrics.ranking.record_scores`) is left out of its level."""
    judged = [r for r in records if r["scores"].get("judge_acc") is not None]
    verdict = score_of("judge_acc")
    categories = sorted({record["category"] for record in judged})
    ranked = [
        (record, found)
        for record in records
        if record["question_id"] in corpora
        and (found := record_scores(record, corpora[record["question_id"]]))
    ]
    retrieval = {
        level: {
            name: Scores(
                [levels[level][name] for _, levels in ranked],
                [record["conversation_id"] for record, _ in ranked],
            )
            for name in metric_names()
            if all(name in levels[level] for _, levels in ranked)
        }
        for level in RANKING_LEVELS
    }
    return LongMemEvalScores(
        per_type={
            category: Scores.of((r for r in judged if r["category"] == category), verdict)
            for category in categories
        },
        overall=Scores.of(judged, verdict),
        abstention=Scores.of((r for r in judged if r["is_abstention"]), verdict),
        retrieval=retrieval,
        ranked=len(ranked),
    )


@dataclass(frozen=True)
class LongMemEvalCells:
    """LongMemEval's aggregates with their intervals, and ranking metrics per level: what
    ``metrics.json`` stores (:func:`longmemeval_summary`) and a Table 2 row shows."""

    per_type: dict[str, Cell | None]
    overall: Cell | None
    task_averaged: float | None
    abstention: Cell | None
    retrieval: dict[str, dict[str, Cell | None]]
    ranked: int = 0


def longmemeval_cells(
    records: Sequence[dict[str, Any]],
    *,
    unit: str,
    seed: int,
    corpora: Mapping[str, Corpus],
    ranking: Sequence[str] = (),
) -> LongMemEvalCells:
    """:func:`longmemeval_scores` with intervals resampling ``unit``; the ranking metrics
    ``ranking`` at every level (a metric no question has: no cell), or every one."""
    scores = longmemeval_scores(records, corpora)
    none = Scores([], [])

    def cell(found: Scores) -> Cell | None:
        return interval_cell(found, unit=unit, seed=seed)

    return LongMemEvalCells(
        per_type={category: cell(found) for category, found in scores.per_type.items()},
        overall=cell(scores.overall),
        task_averaged=scores.task_averaged,
        abstention=cell(scores.abstention),
        retrieval={
            level: {name: cell(metrics.get(name, none)) for name in ranking or metrics}
            for level, metrics in scores.retrieval.items()
        },
        ranked=scores.ranked,
    )


def longmemeval_summary(
    records: Sequence[dict[str, Any]],
    seed: int,
    *,
    unit: str = "conversation",
    corpora: Mapping[str, Corpus],
) -> dict[str, Any]:
    """LongMemEval's own aggregates: per-type, task-averaged, overall and abstention accuracy,
    and the session/turn retrieval metrics (official definition) over the questions it scores."""
    cells = longmemeval_cells(records, unit=unit, seed=seed, corpora=corpora)
    return {
        "accuracy_per_type": {
            category: cell_json(found) for category, found in cells.per_type.items()
        },
        "task_averaged_accuracy": cells.task_averaged,
        "overall_accuracy": cell_json(cells.overall),
        "abstention_accuracy": cell_json(cells.abstention),
        "retrieval": {
            level: {name: cell_json(found) for name, found in metrics.items()}
            for level, metrics in cells.retrieval.items()
        },
        "retrieval_definition": "official",
    }


def interval_summary(records: Sequence[dict[str, Any]], unit: str) -> dict[str, Any]:
    """What the run's intervals resample: the unit its questions allow (a cell over fewer
    conversations says its own) and how many conversations they come from."""
    conversations = [record["conversation_id"] for record in records]
    return {
        "unit": resampling_unit(conversations, unit),
        "requested": unit,
        "conversations": len(set(conversations)),
        "questions": len(records),
    }


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def resampling_case(*, own: bool, requested: str, clustered: bool) -> str:
    """Why intervals resample what they do, one rule worded by :func:`interval_line` and the
    report's header: ``"own"``, ``"asked"``, ``"too_few"`` or ``"clustered"`` (docs/scoring.md)."""
    if own:
        return "own"
    if requested == "question":
        return "asked"
    return "clustered" if clustered else "too_few"


def understated(intervals: str) -> str:
    """Why intervals that resample questions of shared conversations are too narrow."""
    return f"questions of one conversation share its memory, so {intervals} understate uncertainty"


def interval_line(interval: dict[str, Any]) -> str:
    """The intervals' unit in words, for the printed summary."""
    conversations = interval["conversations"]
    case = resampling_case(
        own=conversations == interval["questions"],  # LongMemEval: a haystack per question
        requested=interval["requested"],
        clustered=interval["unit"] == "conversation",
    )
    if case == "own":
        return "  95% CIs resample questions (each question has its own conversation)"
    if case == "clustered":
        return f"  95% CIs resample the run's {conversations} conversations (cluster bootstrap)"
    reason = (
        "as asked"
        if case == "asked"
        else f"{plural(conversations, 'conversation')}, fewer than {MIN_CLUSTERS}"
    )
    return f"  95% CIs resample questions ({reason}): {understated('they')}"


def format_summary(summary: dict[str, Any]) -> str:
    """The one-screen summary printed at the end of a run."""
    failures = ", ".join(f"{stage} {count}" for stage, count in summary["failures"].items())
    retried = summary.get("invocation", {}).get("retried", 0)
    lines = [
        f"run {summary['run_dir']}",
        f"dataset {summary['dataset']} ({summary['subset']}), template {summary['template']}, "
        f"{summary['questions']} questions, failures: {failures}"
        + (f" (this invocation asked {retried} failed question(s) again)" if retried else ""),
    ]
    state = summary.get("completeness", {"complete": True})
    if not state["complete"]:
        lines.append(
            f"  INCOMPLETE: {state['failed_questions']} question(s) and {state['failed_probes']} "
            "judge probe(s) failed; the same command asks them again"
        )
    lines.append(interval_line(summary["interval"]))
    for name, cell in summary["scores"].items():
        if cell["mean"] is not None:
            low, high = cell["ci95"]
            lines.append(f"  {name:<10} {cell['mean']:.4f}  [{low:.4f}, {high:.4f}]  n={cell['n']}")
    recall = summary["evidence_recall"]
    if recall["mean"] is not None:
        lines.append(
            f"  evidence recall {recall['mean']:.4f} (all evidence shown: {recall['all_retrieved_share']:.3f}), "
            f"context tokens mean {summary['context_tokens']['mean']:.1f}"
        )
    total = summary["accounting"]["total"]
    now = summary["accounting"].get("this_invocation", {}).get("total", total)
    lines.append(
        f"  LLM calls {total['calls']} (cache hits {total['cache_hits']}, failed {total['failed']}), "
        f"tokens {total['prompt_tokens']}+{total['completion_tokens']}; this invocation {now['calls']}"
    )
    construction = summary["construction"]
    rebuilt = construction.get("corrupt_memories_rebuilt", 0)
    lines.append(
        f"  memories built {construction['built']}, loaded {construction['loaded']} "
        f"({construction['seconds']:.2f} s)"
        + (f", {rebuilt} corrupt file(s) rebuilt" if rebuilt else "")
    )
    repaired = [
        f"{name} {cache['corrupt_rows']} corrupt row(s) dropped"
        + (
            f", damaged file moved to {cache['moved_aside']} "
            f"({cache.get('salvaged_rows', 0)} readable row(s) kept)"
            if cache["moved_aside"]
            else ""
        )
        for name, cache in summary.get("caches", {}).items()
        if cache["corrupt_rows"] or cache["moved_aside"]
    ]
    if repaired:
        lines.append(f"  caches repaired: {'; '.join(repaired)}")
    return "\n".join(lines)
