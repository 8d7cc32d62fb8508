"""``python -m benchmarks.checks.reproduced COMMITTED.csv REPRODUCED.csv``: did a table reproduce?

A report's CSV holds two kinds of columns: what the runs measured (scores with their intervals
and counts, p-values, the audited key's columns, context tokens, run ids) and what producing them
cost on this machine (seconds, memory, texts embedded, model calls and their tokens: a warm cache
makes fewer). The first kind must come out the same on any machine from the shipped replies
(docs/tables.md); this command compares it cell by cell, rows keyed by subset, method, backbone
and run id, and exits 1 naming each cell that differs and each row that only one table has.
``make check-table1`` runs it after a cold ``make reproduce-table1`` in a scratch folder.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Sequence
from pathlib import Path

#: Columns that say what a run cost here, not what it measured (left out of the comparison).
COST_COLUMNS = re.compile(
    r"latency_s|^construction_s$|^wall_s$|^workers$|^peak_rss_mb$|^texts_"
    r"|^construction_memories_loaded$|_calls$|_prompt_tokens$|_completion_tokens$"
)
#: What identifies a row of a report's CSV.
ROW_KEY = ("subset", "method", "backbone", "run")


def read_rows(path: Path) -> dict[tuple[str, ...], dict[str, str]]:
    """The CSV's rows (its ``#`` setting lines skipped) by :data:`ROW_KEY`."""
    with path.open(newline="", encoding="utf-8") as text:
        reader = csv.DictReader(line for line in text if not line.startswith("#"))
        rows = list(reader)
    missing = [key for key in ROW_KEY if key not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]!r}: not a report's CSV")
    return {tuple(row[key] for key in ROW_KEY): row for row in rows}


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("committed", type=Path, help="the committed table's CSV")
    parser.add_argument("reproduced", type=Path, help="the reproduced table's CSV")
    args = parser.parse_args(argv)
    found = differences(args.committed, args.reproduced)
    rows = len(read_rows(args.committed))
    if found:
        print(f"{args.reproduced} does not reproduce {args.committed}: {len(found)} differences")
        print("\n".join(found))
        return 1
    print(f"{args.reproduced} reproduces every measured cell of {args.committed} ({rows} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
