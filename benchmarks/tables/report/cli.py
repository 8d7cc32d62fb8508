"""``python -m benchmarks.tables.report``: collect run directories into Table 1 or 2 (md, csv, tex, png).

The command line: options, then build and write the report (``benchmarks/tables/report/__main__.py``
runs :func:`main`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.metrics.stats import INTERVAL_UNITS, MIN_CLUSTERS
from benchmarks.runs.folders import ReportError, add_where_option, in_repo, parse_where
from benchmarks.runs.selection import MAX_FAILURE_SHARE
from benchmarks.tables.report.build import PRIMARY_METRICS, build_report
from benchmarks.tables.report.main_job import build_main_job, write_main_job
from benchmarks.tables.report.render import write_report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tables.report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=Path("results/runs"))
    parser.add_argument(
        "--out", type=Path, help="default results/table1, results/table2 for LongMemEval"
    )
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument("--subset", default="smoke")
    parser.add_argument(
        "--retrieval-subset",
        help="Table 1 as the main job: the retrieval columns from the answer=none runs on this "
        "subset, the --subset runs as the QA pipeline check (benchmarks/tables/report/main_job.py)",
    )
    parser.add_argument("--metric", default="f1_set", choices=PRIMARY_METRICS)
    parser.add_argument("--title", help="default Table 1, Table 2 for LongMemEval")
    add_where_option(parser, "answer.context_budget=2048")
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
    parser.add_argument(
        "--partial",
        action="store_true",
        help="show unfinished runs as far as they got, each row marked with its questions done "
        "(a table rebuilt as a backlog over sittings)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Build and write the report; exit 2 with a clear message when no table can be built."""
    args = parse_args(argv)
    options = {
        "dataset": args.dataset,
        "metric": args.metric,
        "title": args.title,
        "max_failure_share": args.max_failure_share,
        "interval_unit": args.interval_unit,
    }
    runs, where = in_repo(args.runs), parse_where(args.where)
    try:
        if args.retrieval_subset:
            job = build_main_job(
                runs,
                subset=args.subset,
                retrieval_subset=args.retrieval_subset,
                where=where,
                **options,
            )
            out = args.out or Path(job.qa.dataset.table_path)
            paths = write_main_job(job, in_repo(out))
        else:
            report = build_report(
                runs, subset=args.subset, where=where, partial=args.partial, **options
            )
            out = args.out or Path(report.dataset.table_path)
            paths = write_report(report, in_repo(out))
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
