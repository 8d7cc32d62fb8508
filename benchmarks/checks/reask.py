"""``python -m benchmarks.checks.reask``: how far re-asking the model moves a table's QA runs.

``make reproduce-table1 REASK=1`` also runs the QA grid with every request asked again into a
second runs folder; a run id leaves the cache mode out, so each recorded run has its re-asked
twin under the same id, and this command counts per row the answers and verdicts that changed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.render import Table
from benchmarks.runs.folders import ReportError, Run, in_repo, load_runs, parse_where
from benchmarks.runs.naming import row_key


@dataclass(frozen=True)
class Changes:
    """One row: the questions both runs logged, and how many changed answer or verdict."""

    method: str
    run: str
    questions: int
    answers: int
    verdicts: int


def verdicts(record: dict[str, Any]) -> dict[str, Any]:
    """A record's verdicts, one per judge protocol (its ``judge_acc*`` scores)."""
    return {name: value for name, value in record["scores"].items() if name.startswith("judge_acc")}


def compare(recorded: Run, reasked: Run) -> Changes:
    """Answers and verdicts of the questions both runs logged, question by question."""
    again = {record["question_id"]: record for record in reasked.records}
    pairs = [(r, again[r["question_id"]]) for r in recorded.records if r["question_id"] in again]
    return Changes(
        row_key(recorded.config, recorded.variant).method,
        recorded.directory.name,
        len(pairs),
        sum(old.get("prediction") != new.get("prediction") for old, new in pairs),
        sum(verdicts(old) != verdicts(new) for old, new in pairs),
    )


def compare_runs(
    recorded_dir: Path, reasked_dir: Path, dataset: str, subset: str, where: dict[str, Any]
) -> list[Changes]:
    """Every selected recorded run that answered against its re-asked twin; a run without one
    is an error."""
    recorded = [
        run
        for run in load_runs(recorded_dir, dataset, subset, where)
        if not row_key(run.config, run.variant).retrieval_only
    ]
    reasked = {run.directory.name: run for run in load_runs(reasked_dir, dataset, subset, where)}
    if missing := [run.directory.name for run in recorded if run.directory.name not in reasked]:
        raise ReportError(f"no re-asked run in {reasked_dir} for: {', '.join(missing)}")
    return [compare(run, reasked[run.directory.name]) for run in recorded]


def changes_table(
    rows: Sequence[Changes], recorded_dir: Path, reasked_dir: Path, table: str = "Table 1"
) -> Table:
    """The markdown the command writes and prints."""
    return Table(
        ["Method", "Run", "Questions", "Answers changed", "Verdicts changed"],
        [[r.method, r.run, str(r.questions), str(r.answers), str(r.verdicts)] for r in rows],
        title=f"{table}'s QA runs, re-asked vs recorded",
        caption=[
            f"Recorded: the runs in {recorded_dir} ({table}'s shipped replies); re-asked: their "
            f"twins in {reasked_dir}, every request asked of the model again. A verdict changed "
            "where any judge protocol's verdict differs."
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Compare, print the table and write it to ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checks.reask")
    parser.add_argument("--recorded", type=Path, required=True)
    parser.add_argument("--reasked", type=Path, required=True)
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument("--subset", default="smoke")
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--title", default="Table 1", help="the table whose runs these are")
    parser.add_argument("--out", type=Path, default=Path("results/table1_reask.md"))
    args = parser.parse_args(argv)
    try:
        rows = compare_runs(
            in_repo(args.recorded),
            in_repo(args.reasked),
            args.dataset,
            args.subset,
            parse_where(args.where),
        )
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    table = changes_table(rows, args.recorded, args.reasked, args.title)
    text = "\n".join(table.markdown_lines(1)) + "\n"
    in_repo(args.out).write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
