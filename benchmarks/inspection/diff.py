"""What changed between two runs, question by question: which turns entered or left the reader's
context, which evidence one found and the other missed, which verdicts flipped and how F1 moved,
counted per category, then the questions where the two differ most. An aggregate says that an
ablation or a config change moved a number; this says on which questions, and through what.

A side is a run folder (its own records: :func:`benchmarks.runs.folders.own_records`).

    python -m benchmarks.inspection.diff RUN_A RUN_B [--top N] [--metric f1_set]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.pipeline.packed import predictions_file
from benchmarks.render import Table
from benchmarks.runs.folders import own_records
from benchmarks.runs.naming import row_key
from benchmarks.tables.report.build import PRIMARY_METRICS

#: The F1 a diff compares unless told otherwise: the report's default.
DEFAULT_METRIC = PRIMARY_METRICS[0]
#: The per-category counts, in the order the table shows them, with their column headers.
COUNT_COLUMNS = {
    "questions": "Questions",
    "set_changed": "Set changed",
    "order_only": "Order only",
    "evidence_gained": "Evidence +",
    "evidence_lost": "Evidence −",
    "to_correct": "Verdict → correct",
    "to_wrong": "Verdict → wrong",
    "f1_up": "F1 up",
    "f1_down": "F1 down",
}


class DiffError(ValueError):
    """Two sides that cannot be compared; the message says which file and why."""


@dataclass(frozen=True)
class Outcome:
    """One question as one side saw it: the reader's context (turn ids in the order shown), the
    gold evidence where the records carry it, and its scores (None where the side has none)."""

    question_id: str
    category: str
    context: tuple[str, ...]
    evidence: tuple[str, ...] | None
    evidence_recall: float | None
    f1: float | None
    verdict: bool | None


@dataclass(frozen=True)
class Side:
    """A run folder, read as outcomes by question id."""

    path: Path
    label: str
    outcomes: dict[str, Outcome]


@dataclass(frozen=True)
class QuestionDiff:
    """How one question changed from side A to side B."""

    question_id: str
    category: str
    #: Turns in B's context and not in A's, and the reverse (each in its side's order).
    added: tuple[str, ...]
    removed: tuple[str, ...]
    #: Turns in both contexts.
    kept: int
    #: The same turns, shown in another order.
    reordered: bool
    #: Both contexts, A's and B's, in the order shown.
    contexts: tuple[tuple[str, ...], tuple[str, ...]]
    #: Gold evidence turns only B's context holds, and only A's (empty where evidence is unknown).
    evidence_found: tuple[str, ...]
    evidence_lost: tuple[str, ...]
    recall: tuple[float | None, float | None]
    f1: tuple[float | None, float | None]
    verdict: tuple[bool | None, bool | None]

    @property
    def recall_change(self) -> float:
        return _change(self.recall)

    @property
    def f1_change(self) -> float:
        return _change(self.f1)

    @property
    def flipped(self) -> bool:
        return None not in self.verdict and self.verdict[0] != self.verdict[1]

    @property
    def weight(self) -> float:
        """How much the question changed: a verdict flip counts 1, recall and F1 their absolute
        change, the context the share of its turns replaced."""
        either = len(self.added) + len(self.removed)
        moved = either / (either + self.kept) if either else 0.0
        return float(self.flipped) + abs(self.recall_change) + abs(self.f1_change) + moved

    @property
    def changed(self) -> bool:
        return self.weight > 0 or self.reordered


@dataclass(frozen=True)
class Comparison:
    """Two sides compared: the question diffs (every shared question), and the questions only
    one side holds."""

    a: Side
    b: Side
    metric: str
    diffs: list[QuestionDiff]
    only_a: int
    only_b: int

    def counts(self) -> dict[str, dict[str, int]]:
        """Per category (and ``all``), how many questions changed in each way."""
        table: dict[str, dict[str, int]] = {}
        for diff in self.diffs:
            for key in (diff.category, "all"):
                row = table.setdefault(key, dict.fromkeys(COUNT_COLUMNS, 0))
                for name, happened in _changes(diff).items():
                    row[name] += happened
        return dict(sorted(table.items(), key=lambda item: (item[0] == "all", item[0])))

    def ranked(self) -> list[QuestionDiff]:
        """The changed questions, most changed first (order-only changes last)."""
        changed = [diff for diff in self.diffs if diff.changed]
        return sorted(changed, key=lambda d: (-d.weight, not d.reordered, d.question_id))


def _change(pair: tuple[float | None, float | None]) -> float:
    """B's value minus A's, 0 where either is unknown."""
    before, after = pair
    return 0.0 if before is None or after is None else after - before


def _changes(diff: QuestionDiff) -> dict[str, bool]:
    return {
        "questions": True,
        "set_changed": bool(diff.added or diff.removed),
        "order_only": diff.reordered,
        "evidence_gained": diff.recall_change > 0,
        "evidence_lost": diff.recall_change < 0,
        "to_correct": diff.flipped and diff.verdict[1] is True,
        "to_wrong": diff.flipped and diff.verdict[1] is False,
        "f1_up": diff.f1_change > 0,
        "f1_down": diff.f1_change < 0,
    }


def outcome(record: Mapping[str, Any], metric: str) -> Outcome:
    """A run's record (``predictions.jsonl``) as an outcome."""
    scores = record.get("scores") or {}
    judged = scores.get("judge_acc")
    context = record.get("retrieved_turn_ids")
    if not isinstance(context, list):
        raise DiffError(f"question {record.get('question_id')!r}: no context turn ids recorded")
    evidence = record.get("evidence")
    return Outcome(
        question_id=str(record["question_id"]),
        category=str(record.get("category", "?")),
        context=tuple(context),
        evidence=None if evidence is None else tuple(evidence),
        evidence_recall=record.get("evidence_recall"),
        f1=scores.get(metric),
        verdict=None if judged is None else judged == 1.0,
    )


def read_side(path: Path, metric: str) -> Side:
    """A run folder as a side."""
    if not (path.is_dir() and predictions_file(path).is_file()):
        raise DiffError(f"{path}: not a run folder (no predictions.jsonl)")
    config = yaml.safe_load((path / "config.yaml").read_text())
    return run_side(path, config, own_records(path), metric)


def run_side(
    directory: Path, config: Mapping[str, Any], records: Iterable[Mapping[str, Any]], metric: str
) -> Side:
    """A run's records as a side, labelled with its folder and method."""
    label = f"{directory.name} ({row_key(dict(config)).method})"
    outcomes = (outcome(record, metric) for record in records)
    return Side(directory, label, {o.question_id: o for o in outcomes})


def diff_question(a: Outcome, b: Outcome) -> QuestionDiff:
    """How ``a`` became ``b``."""
    in_a, in_b = set(a.context), set(b.context)
    evidence = set(a.evidence or b.evidence or ())
    return QuestionDiff(
        question_id=a.question_id,
        category=a.category,
        added=tuple(t for t in b.context if t not in in_a),
        removed=tuple(t for t in a.context if t not in in_b),
        kept=len(in_a & in_b),
        reordered=in_a == in_b and a.context != b.context,
        contexts=(a.context, b.context),
        evidence_found=tuple(t for t in b.context if t in evidence and t not in in_a),
        evidence_lost=tuple(t for t in a.context if t in evidence and t not in in_b),
        recall=(a.evidence_recall, b.evidence_recall),
        f1=(a.f1, b.f1),
        verdict=(a.verdict, b.verdict),
    )


def compare(a: Side, b: Side, metric: str = DEFAULT_METRIC) -> Comparison:
    """Every question both sides hold, diffed; an error when they share none."""
    shared = [q for q in a.outcomes if q in b.outcomes]
    if not shared:
        raise DiffError(f"{a.path} and {b.path} share no question")
    return Comparison(
        a,
        b,
        metric,
        [diff_question(a.outcomes[q], b.outcomes[q]) for q in shared],
        only_a=len(a.outcomes) - len(shared),
        only_b=len(b.outcomes) - len(shared),
    )


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _verdict(value: bool | None) -> str:
    return {True: "correct", False: "wrong", None: "—"}[value]


def _listed(turns: Sequence[str], shown: int) -> str:
    more = f", … {len(turns) - shown} more" if len(turns) > shown else ""
    return ", ".join(turns[:shown]) + more


def _turns(sign: str, turns: Sequence[str], shown: int = 6) -> str:
    return f"{sign}{len(turns)} ({_listed(turns, shown)})"


def describe(diff: QuestionDiff) -> str:
    """One line: what changed in a question's context and outcome, A → B.

    >>> d = diff_question(
    ...     Outcome("q1", "multi-hop", ("D1:1", "D2:2"), ("D2:5",), 0.0, 0.1, False),
    ...     Outcome("q1", "multi-hop", ("D2:5", "D1:1"), ("D2:5",), 1.0, 0.5, True),
    ... )
    >>> describe(d)
    'q1 (multi-hop): context +1 (D2:5) −1 (D2:2); evidence found D2:5; evidence recall 0.00 → 1.00; F1 0.10 → 0.50; verdict wrong → correct'
    """
    parts = []
    if diff.added or diff.removed:
        changes = [_turns("+", diff.added)] if diff.added else []
        changes += [_turns("−", diff.removed)] if diff.removed else []
        parts.append("context " + " ".join(changes))
    elif diff.reordered:
        order = " → ".join(_listed(context, 4) for context in diff.contexts)
        parts.append(f"context: same {diff.kept} turns reordered ({order})")
    if diff.evidence_found:
        parts.append(f"evidence found {', '.join(diff.evidence_found)}")
    if diff.evidence_lost:
        parts.append(f"evidence lost {', '.join(diff.evidence_lost)}")
    if diff.recall_change:
        parts.append(f"evidence recall {_number(diff.recall[0])} → {_number(diff.recall[1])}")
    if diff.f1_change:
        parts.append(f"F1 {_number(diff.f1[0])} → {_number(diff.f1[1])}")
    if diff.flipped:
        parts.append(f"verdict {_verdict(diff.verdict[0])} → {_verdict(diff.verdict[1])}")
    return f"{diff.question_id} ({diff.category}): {'; '.join(parts)}"


def counts_table(counts: Mapping[str, Mapping[str, int]]) -> Table:
    """The per-category counts as a table (``all`` last)."""
    body = [[category, *row.values()] for category, row in counts.items()]
    return Table(["Category", *COUNT_COLUMNS.values()], body)


def report_lines(comparison: Comparison, top: int) -> list[str]:
    """The diff as the command prints it: the two sides, the counts, the top questions."""
    ranked = comparison.ranked()
    lines = [
        f"A: {comparison.a.path}  {comparison.a.label}",
        f"B: {comparison.b.path}  {comparison.b.label}",
        f"{len(comparison.diffs)} shared questions ({comparison.only_a} only in A, "
        f"{comparison.only_b} only in B); F1 is {comparison.metric}; changes read A → B",
        "",
        *counts_table(comparison.counts()).markdown_lines(),
        "",
        f"{len(ranked)} questions changed; the {min(top, len(ranked))} that changed most:",
        *(describe(diff) for diff in ranked[:top]),
    ]
    return lines


def as_data(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain data for the inspector: counts and the changed questions."""
    return {
        "a": comparison.a.label,
        "b": comparison.b.label,
        "metric": comparison.metric,
        "only_a": comparison.only_a,
        "only_b": comparison.only_b,
        "columns": COUNT_COLUMNS,
        "counts": comparison.counts(),
        "changed": [
            {"question_id": d.question_id, "category": d.category, "summary": describe(d)}
            for d in comparison.ranked()
        ],
    }


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.inspection.diff", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("run_a", type=Path, help="a run folder")
    parser.add_argument("run_b", type=Path, help="the same, read as the change from A")
    parser.add_argument("--top", type=int, default=15, help="questions listed (default 15)")
    parser.add_argument("--metric", default=DEFAULT_METRIC, choices=PRIMARY_METRICS)
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        comparison = compare(
            read_side(args.run_a, args.metric), read_side(args.run_b, args.metric), args.metric
        )
    except DiffError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(report_lines(comparison, args.top)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
