"""Why a method won or lost a question: one self-contained HTML page over run folders, with a
filterable question list, each question's gold answer and evidence beside every run's context
(evidence highlighted, other turns dimmed), scores, verdicts and costs, and the diff of any two
runs (:mod:`benchmarks.tables.diff`). Built from result files and the dataset only.

    python -m benchmarks.tables.inspect RUN_DIR [RUN_DIR ...] --out FILE.html
    python -m benchmarks.tables.inspect --table results/table1.csv --out results/table1_inspect.html
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.tables.inspector.model import InspectError, build_model, load_dataset, read_run
from benchmarks.tables.inspector.page import render_page
from benchmarks.tables.report.runs import in_repo


def table_runs(table: Path, runs_dir: Path) -> list[Path]:
    """The run folders of a report's csv (its ``run`` column; ``#`` lines are its header)."""
    with table.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    if not rows or "run" not in rows[0]:
        raise InspectError(f"{table}: no run column (not a report csv)")
    return [runs_dir / row["run"] for row in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tables.inspect", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("runs", nargs="*", type=Path, help="run folders (results/runs/<id>)")
    parser.add_argument("--table", type=Path, help="also the runs of a report csv's run column")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("results/runs"), help="where --table's runs are"
    )
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--title", default="memsys-bench inspector")
    parser.add_argument("--data-dir", help="the datasets' folder (default: $MEMBENCH_DATA)")
    args = parser.parse_args(argv)
    try:
        directories = list(args.runs)
        if args.table:
            directories += table_runs(in_repo(args.table), in_repo(args.runs_dir))
        if not directories:
            raise InspectError("no run folder given (RUN_DIR arguments or --table)")
        runs = [read_run(directory) for directory in dict.fromkeys(directories)]
    except (InspectError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    model = build_model(runs, load_dataset(runs, args.data_dir), args.title)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render_page(model), encoding="utf-8")
    size = args.out.stat().st_size
    print(
        f"wrote {args.out} ({len(runs)} runs, {len(model['questions'])} questions, {size:,} bytes)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
