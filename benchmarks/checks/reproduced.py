"""``python -m benchmarks.checks.reproduced COMMITTED.csv REPRODUCED.csv``: did a table reproduce?

What the runs measured must come out the same on any machine from the shipped replies (costs
need not): compared cell by cell, or record by record for a slice (``--runs``); exit 1 names
each difference. A record's LongMemEval ranking is compared by the official scores it decides
(:func:`benchmarks.metrics.ranking.record_scores`), not item by item: two items a hair apart
deep in a full-depth ranking may swap on another CPU, and no metric reads that order.
``make check-table1`` and ``make check-table2``: docs/tables.md.
"""

from __future__ import annotations

import argparse
import csv
import functools
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks.checks.restamp import differences as record_differences
from benchmarks.data.specs import spec_of
from benchmarks.metrics.judge_probes import read_probes
from benchmarks.metrics.longmemeval_official import Corpus
from benchmarks.metrics.ranking import load_corpora, record_scores
from benchmarks.runs.folders import in_repo, own_records

#: Columns that say what a run cost here, not what it measured (left out of the comparison).
COST_COLUMNS = re.compile(
    r"latency_s|^construction_s$|^wall_s$|^workers$|^peak_rss_mb$|^texts_"
    r"|^construction_memories_loaded$|_calls$|_prompt_tokens$|_completion_tokens$"
)
#: What identifies a row of a report's CSV: its columns of these (Table 1's has a subset column,
#: its two parts being two samples; a LongMemEval table has none), the run id last.
ROW_KEY = ("subset", "method", "backbone", "run")
#: The columns every report's CSV has.
REQUIRED = ("method", "backbone", "run")


def read_rows(path: Path) -> dict[tuple[str, ...], dict[str, str]]:
    """The CSV's rows (its ``#`` setting lines skipped) by :data:`ROW_KEY`."""
    with path.open(newline="", encoding="utf-8") as text:
        reader = csv.DictReader(line for line in text if not line.startswith("#"))
        rows = list(reader)
    columns = reader.fieldnames or []
    missing = [key for key in REQUIRED if key not in columns]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]!r}: not a report's CSV")
    key = [name for name in ROW_KEY if name in columns]
    return {tuple(row[name] for name in key): row for row in rows}


def differences(committed: Path, reproduced: Path) -> list[str]:
    """One line per measured cell that differs and per row only one of the tables has."""
    before, after = read_rows(committed), read_rows(reproduced)
    lines = [f"only in {committed}: {' · '.join(key)}" for key in before if key not in after]
    lines += [f"only in {reproduced}: {' · '.join(key)}" for key in after if key not in before]
    for key in before.keys() & after.keys():
        old, new = before[key], after[key]
        for column in old.keys() | new.keys():
            if COST_COLUMNS.search(column) or old.get(column) == new.get(column):
                continue
            lines.append(f"{' · '.join(key)}: {column} {old.get(column)!r} -> {new.get(column)!r}")
    return sorted(lines)


def setting(run_dir: Path) -> str:
    """A run's config but for its subset: what pairs a slice's run with the table's."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    return yaml.safe_dump({k: v for k, v in config.items() if k != "subset"}, sort_keys=True)


def slice_differences(
    committed: Path, reproduced: Path, committed_runs: Path, reproduced_runs: Path
) -> list[str]:
    """One line per record or probe of a reproduced slice that differs from the committed
    run's, per reproduced row without a committed twin and per committed row left unchecked."""
    before, after = read_rows(committed), read_rows(reproduced)
    twins = {setting(committed_runs / key[-1]): key for key in before}
    lines, checked = [], set()
    for key in sorted(after):
        twin = twins.get(setting(reproduced_runs / key[-1]))
        if twin is None:
            lines.append(f"no row of {committed} has the setting of {' · '.join(key)}")
            continue
        checked.add(twin)
        row = f"{' · '.join(key)} (committed run {twin[-1]})"
        for where, line in compared(committed_runs / twin[-1], reproduced_runs / key[-1]):
            lines.append(f"{row}: {where}: {line}")
    lines += [f"not reproduced: {' · '.join(key)}" for key in before if key not in checked]
    return lines


def logged_items(run: Path) -> dict[str, dict[str, Any]]:
    """A run's records and graded probes, by ``question <id>`` and ``probe <id>``."""
    items = {f"question {r['question_id']}": r for r in own_records(run)}
    return items | {f"probe {p['probe_id']}": p for p in read_probes(run) or []}


def ranking_corpora(run: Path, records: list[dict[str, Any]]) -> dict[str, Corpus]:
    """The official corpora of a LongMemEval run's questions that stored a ranking (none for
    another dataset's run)."""
    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    ranked = [r["question_id"] for r in records if isinstance(r.get("ranking"), dict)]
    if not spec_of(config).longmemeval_scores or not ranked:
        return {}
    return corpora_of(config["dataset"].get("variant") or "s", tuple(sorted(ranked)))


@functools.cache
def corpora_of(variant: str, question_ids: tuple[str, ...]) -> dict[str, Corpus]:
    """The corpora of these questions, read once per comparison process: a slice's 14 rows ask
    for the same six haystacks."""
    return load_corpora(variant, question_ids)


def measured(record: dict[str, Any], corpora: dict[str, Corpus]) -> dict[str, Any]:
    """A record as compared: its stored ranking replaced by the official scores it decides
    (with whether it is complete and how deep the method ranked)."""
    ranking, corpus = record.get("ranking"), corpora.get(record.get("question_id", ""))
    if not isinstance(ranking, dict) or corpus is None:
        return record
    scored = {
        "scores": record_scores(record, corpus),
        "complete": ranking.get("complete"),
        "method_turns": ranking.get("method_turns"),
    }
    return record | {"ranking": scored}


def compared(committed_run: Path, reproduced_run: Path) -> list[tuple[str, str]]:
    """``(question or probe id, difference)`` for every question the reproduced run logged and
    every probe it graded, against the committed run's of the same id (:func:`measured`)."""
    committed = logged_items(committed_run)
    logged = logged_items(reproduced_run)
    records = [item for where, item in logged.items() if where.startswith("question ")]
    corpora = ranking_corpora(reproduced_run, records)
    found: list[tuple[str, str]] = []
    for where, item in logged.items():
        if where not in committed:
            found.append((where, "not in the committed run"))
            continue
        before, now = measured(committed[where], corpora), measured(item, corpora)
        found += [(where, line) for line in record_differences(before, now)]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("committed", type=Path, help="the committed table's CSV")
    parser.add_argument("reproduced", type=Path, help="the reproduced table's CSV")
    parser.add_argument(
        "--runs",
        nargs=2,
        type=Path,
        metavar=("COMMITTED_RUNS", "REPRODUCED_RUNS"),
        help="a slice: compare the rows' records and probes in these run folders, not cells",
    )
    args = parser.parse_args(argv)
    rows = len(read_rows(args.committed))
    if args.runs:
        runs = [in_repo(path) for path in args.runs]
        found = slice_differences(args.committed, args.reproduced, *runs)
        checked = len(read_rows(args.reproduced))
        if found:
            print(f"{args.reproduced} does not reproduce its slice of {args.committed}: "
                  f"{len(found)} differences")  # fmt: skip
            print("\n".join(found))
            return 1
        print(f"{args.reproduced} reproduces its slice of {args.committed}: every record and "
              f"probe of its {checked} rows equal to the committed runs' ({rows} rows)")  # fmt: skip
        return 0
    found = differences(args.committed, args.reproduced)
    if found:
        print(f"{args.reproduced} does not reproduce {args.committed}: {len(found)} differences")
        print("\n".join(found))
        return 1
    print(f"{args.reproduced} reproduces every measured cell of {args.committed} ({rows} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
