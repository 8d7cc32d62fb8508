"""A run's metrics from its per-question log: means with bootstrap CIs, per category.

Built from the JSONL records only (never from a run's in-memory state), so a table can always be
traced to the lines behind it. Questions whose answer or verdict failed carry no score for that
metric; they are left out of its mean and counted in ``failures``, never scored as 0 or 1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.metrics.stats import bootstrap_ci
from benchmarks.settings import RunSettings

SCORE_NAMES = ("f1_locomo", "f1_set", "bleu1", "judge_acc")


def _cell(values: Sequence[float], seed: int) -> dict[str, Any]:
    if not values:
        return {"mean": None, "ci95": None, "n": 0}
    interval = bootstrap_ci(values, seed=seed)
    return {"mean": interval.mean, "ci95": [interval.low, interval.high], "n": len(values)}


def failure_counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Questions whose answer failed, and answered ones whose verdict failed: left out of the
    means they would have fed, never scored as wrong."""
    return {
        "answer": sum(1 for r in records if (r.get("failure") or "").startswith("answer")),
        "judge": sum(1 for r in records if (r.get("judging") or {}).get("error")),
    }


def summarize_run(records: Sequence[dict[str, Any]], settings: RunSettings) -> dict[str, Any]:
    """Overall and per-category means of every score, evidence recall and context size."""
    in_overall = [
        r
        for r in records
        if not (settings.adversarial == "exclude" and r["category"] == "adversarial")
    ]
    summary: dict[str, Any] = {
        "dataset": settings.dataset
        if settings.variant is None
        else f"{settings.dataset}_{settings.variant}",
        "subset": settings.subset.name,
        "template": settings.template,
        "adversarial": settings.adversarial,
        "questions": len(records),
        "failures": failure_counts(records),
        "scores": {},
        "per_category": {},
    }
    for name in SCORE_NAMES:
        values = [r["scores"][name] for r in in_overall if r["scores"].get(name) is not None]
        if values or any(name in r["scores"] for r in records):
            summary["scores"][name] = _cell(values, settings.seed)
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_category[record["category"]].append(record)
    for category, members in sorted(by_category.items()):
        summary["per_category"][category] = {
            name: _cell(
                [r["scores"][name] for r in members if r["scores"].get(name) is not None],
                settings.seed,
            )
            for name in summary["scores"]
        }
        summary["per_category"][category]["questions"] = len(members)
    recalls = [r["evidence_recall"] for r in records if r["evidence_recall"] is not None]
    summary["evidence_recall"] = {
        **_cell(recalls, settings.seed),
        "all_retrieved_share": float(np.mean([value == 1.0 for value in recalls]))
        if recalls
        else None,
        "skipped_no_evidence": len(records) - len(recalls),
    }
    if settings.dataset == "longmemeval":
        summary["longmemeval"] = longmemeval_summary(records, settings.seed)
    tokens = [r["context_tokens"] for r in records]
    summary["context_tokens"] = {
        "mean": float(np.mean(tokens)) if tokens else None,
        "median": float(np.median(tokens)) if tokens else None,
    }
    return summary


@dataclass(frozen=True)
class LongMemEvalScores:
    """A LongMemEval run's per-question numbers, grouped the way the benchmark aggregates them.

    The one grouping behind both ``metrics.json`` and the report's Table 2, so the two cannot
    disagree on which questions a number covers: judged questions only (a failed verdict is left
    out), ``_abs`` questions both in their type and on their own, and the ranking metrics of the
    questions that have them (``_abs`` questions, and turn level without ``has_answer`` turns,
    have none).
    """

    per_type: dict[str, list[float]]
    overall: list[float]
    abstention: list[float]
    retrieval: dict[str, dict[str, list[float]]]

    @property
    def task_averaged(self) -> float | None:
        """Mean of the per-type means: every question type weighs the same, whatever its size."""
        type_means = [float(np.mean(values)) for values in self.per_type.values()]
        return float(np.mean(type_means)) if type_means else None


def longmemeval_scores(records: Sequence[dict[str, Any]]) -> LongMemEvalScores:
    """Judge verdicts per question type, overall and on abstention questions, and each ranking
    metric per level, in record order (the order the bootstrap sees them)."""
    judged = [r for r in records if r["scores"].get("judge_acc") is not None]
    per_type: dict[str, list[float]] = defaultdict(list)
    for record in judged:
        per_type[record["category"]].append(record["scores"]["judge_acc"])
    retrieval: dict[str, dict[str, list[float]]] = {}
    for level in ("session", "turn"):
        rows = [
            r["ranking"][level] for r in records if r.get("ranking") and r["ranking"].get(level)
        ]
        retrieval[level] = {name: [row[name] for row in rows] for name in (rows[0] if rows else {})}
    return LongMemEvalScores(
        per_type=dict(sorted(per_type.items())),
        overall=[r["scores"]["judge_acc"] for r in judged],
        abstention=[r["scores"]["judge_acc"] for r in judged if r["is_abstention"]],
        retrieval=retrieval,
    )


def longmemeval_summary(records: Sequence[dict[str, Any]], seed: int) -> dict[str, Any]:
    """LongMemEval's own aggregates: per-type, task-averaged, overall and abstention accuracy,
    and the session/turn retrieval metrics averaged over the questions that have them."""
    scores = longmemeval_scores(records)
    return {
        "accuracy_per_type": {
            category: _cell(values, seed) for category, values in scores.per_type.items()
        },
        "task_averaged_accuracy": scores.task_averaged,
        "overall_accuracy": _cell(scores.overall, seed),
        "abstention_accuracy": _cell(scores.abstention, seed),
        "retrieval": {
            level: {name: _cell(values, seed) for name, values in metrics.items()}
            for level, metrics in scores.retrieval.items()
        },
    }


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
