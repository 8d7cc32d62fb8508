"""``python -m benchmarks.tables.frontier``: the efficiency frontier of retrieval (png and csv).

How much of the evidence, and of the gold answer's words, a method hands the reader for the
tokens it spends: evidence recall and answer coverage against the mean context size, one line
per method through its runs at each context budget (``conf/experiment/frontier.yaml``). A line
further up and to the left buys more with fewer tokens.

Readings taken:

* **Points** are the retrieval-only runs (``answer=none``) of one dataset and subset, one report
  per context budget built by :func:`benchmarks.tables.report.build_report` from the run files,
  so a point's numbers are its table row's: the same means, the same 95% bootstrap intervals
  (drawn as error bars), the same checks that the runs share their setting and hold one run per
  method.
* **x** is the mean context tokens the reader would have been shown (harness tokens,
  :class:`memsys.tokens.TokenCounter`), measured, not the budget: a method that fills less
  than its budget sits left of it. The axis is logarithmic, as the budgets double.
* **Answer coverage** averages over the questions that have one (not adversarial or
  abstention questions); a run logged before records kept the context has none, and its point
  is left out of that panel only.
* **Lines** are named by the registry's display names (:func:`benchmarks.tables.report.
  method_name`); a method run at one budget only is a lone point.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from benchmarks.render import Table
from benchmarks.runs.conditions import conditions, differing_keys
from benchmarks.runs.folders import (
    ReportError,
    in_repo,
    lookup,
    matching_runs,
    parse_where,
    run_configs,
)
from benchmarks.tables.notes import note
from benchmarks.tables.report import (
    Cell,
    build_report,
    dataset_description,
    interval_description,
    subset_description,
)
from benchmarks.tables.report.build import Report
from benchmarks.tables.report.header import code_versions
from benchmarks.tables.report.plot import save_figure

BUDGET = "answer.context_budget"
#: One marker per line, cycled (with ten colours, every line differs in one or the other).
MARKERS = "osD^v<>pPXh*"
#: The panels: a point's score, and how the axis names it.
PANELS = (
    ("evidence_recall", "evidence recall (95% CI)"),
    ("answer_coverage", "answer coverage (95% CI)"),
)


@dataclass(frozen=True)
class Point:
    """One run: a method at one context budget, its mean context size and its two scores."""

    method: str
    budget: int
    context_tokens: float
    evidence_recall: Cell | None
    answer_coverage: Cell | None
    questions: int
    run_id: str


@dataclass(frozen=True)
class Frontier:
    """The points of one dataset and subset, and the words that describe them."""

    points: list[Point]
    title: str
    caption: list[str]


def budgets_of(runs_dir: Path, dataset: str, subset: str, where: dict[str, Any]) -> list[int]:
    """The context budgets of the runs that pass the filters (finished or not), in order."""
    configs = run_configs(runs_dir)
    return sorted(
        {lookup(config, BUDGET) for _, config in matching_runs(configs, dataset, subset, where)}
    )


def points_of(report: Report) -> list[Point]:
    """A per-budget report's retrieval-only rows as points."""
    return [
        Point(
            method=row.key.method,
            budget=budget_of(report),
            context_tokens=row.context_tokens or 0.0,
            evidence_recall=row.evidence_recall,
            answer_coverage=row.answer_coverage["overall"],
            questions=len(row.run.records),
            run_id=row.run.directory.name,
        )
        for row in report.retrieval_only
    ]


def check_one_setting(reports: Sequence[Report]) -> None:
    """Each report's runs share their setting (:func:`build_report` checks it); the reports
    must share it too, but for the budget: one figure compares one setting."""
    settings = [
        (report, {k: v for k, v in conditions(report.rows[0].run.config).items() if k != BUDGET})
        for report in reports
    ]
    (first, shared), *others = settings
    for report, setting in others:
        if setting != shared:
            path = differing_keys(shared, setting)[0]
            raise ReportError(
                f"the runs at budget {budget_of(first)} and at budget {budget_of(report)} "
                f"disagree on {path} (narrow with --where {path}=...)"
            )


def budget_of(report: Report) -> int:
    """The context budget of a per-budget report."""
    return int(lookup(report.rows[0].run.config, BUDGET))


def build_frontier(
    runs_dir: Path, *, dataset: str, subset: str, where: dict[str, Any] | None = None
) -> Frontier:
    """One report per budget of the retrieval-only runs that pass the filters, as points."""
    where = {"answer.template": None, **(where or {})}
    budgets = budgets_of(runs_dir, dataset, subset, where)
    if not budgets:
        raise ReportError(f"no retrieval-only run in {runs_dir} for {dataset}/{subset}")
    reports = [
        build_report(runs_dir, dataset=dataset, subset=subset, where={**where, BUDGET: budget})
        for budget in budgets
    ]
    check_one_setting(reports)
    points = [point for report in reports for point in points_of(report)]
    runs = [row.run for report in reports for row in report.rows]
    first = runs[0].config
    questions = max(point.questions for point in points)
    described = dataset_description(first["dataset"])
    sample = subset_description(first["subset"], reports[0].dataset)
    cells = [
        cell for point in points for cell in (point.evidence_recall, point.answer_coverage) if cell
    ]
    caption = [
        note(
            "frontier.data",
            described=described,
            sample=sample,
            questions=questions,
            budgets=", ".join(map(str, budgets)),
            embedder=lookup(first, "embedder.model", "?"),
            code=code_versions(runs),
        ),
        note("frontier.tokens"),
        note(
            "frontier.statistics",
            intervals=interval_description(cells, "conversation", reports[0].dataset.memory_name),
        ),
    ]
    title = note(
        "frontier.title",
        dataset=first["dataset"].get("name"),
        subset=first["subset"].get("name"),
        questions=questions,
    )
    return Frontier(points, title, caption)


def by_method(points: Sequence[Point]) -> dict[str, list[Point]]:
    """Each method's points by budget, the methods in order of their first appearance."""
    lines: dict[str, list[Point]] = defaultdict(list)
    for point in points:
        lines[point.method].append(point)
    return {method: sorted(line, key=lambda p: p.budget) for method, line in lines.items()}


def frontier_table(frontier: Frontier) -> Table:
    """The points, one row each (empty contexts too): method, budget, mean tokens, and each
    panel's score with its interval."""
    header = ["method", "context_budget", "context_tokens_mean"]
    header += [f"{score}{part}" for score, _ in PANELS for part in ("", "_low", "_high")]
    rows = []
    for line in by_method(frontier.points).values():
        for point in line:
            cells: list[Any] = [point.method, point.budget, round(point.context_tokens, 1)]
            for score, _ in PANELS:
                found: Cell | None = getattr(point, score)
                bounds = (found.mean, found.low, found.high) if found else (None,) * 3
                cells += [None if bound is None else round(bound, 4) for bound in bounds]
            rows.append([*cells, point.questions, point.run_id])
    return Table(
        [*header, "questions", "run_id"], rows, title=frontier.title, caption=frontier.caption
    )


def write_plot(frontier: Frontier, path: Path) -> None:
    """Two panels, evidence recall and answer coverage against mean context tokens, one line
    per method with its 95% intervals as error bars, one legend under both. A point with an
    empty context (no memory unit fits the budget) has no place on a log axis: it is left out
    of the figure, which names it, and kept in the csv."""
    lines = by_method(frontier.points)
    budgets = sorted({point.budget for point in frontier.points})
    drawn = [point.context_tokens for point in frontier.points if point.context_tokens > 0]
    ticks = [
        2**power
        for power in range(int(math.log2(min(drawn, default=budgets[0]))), budgets[-1].bit_length())
    ]
    figure = Figure(figsize=(13, 7.5), layout="constrained")
    axes = figure.subplots(1, len(PANELS), sharex=True)
    for axis, (score, label) in zip(axes, PANELS, strict=True):
        for index, (method, line) in enumerate(lines.items()):
            shown = [
                (p, found) for p in line if (found := getattr(p, score)) and p.context_tokens > 0
            ]
            axis.errorbar(
                [p.context_tokens for p, _ in shown],
                [found.mean for _, found in shown],
                yerr=[
                    [found.mean - found.low for _, found in shown],
                    [found.high - found.mean for _, found in shown],
                ],
                label=method,
                color=f"C{index % 10}",
                linestyle="-" if index < 10 else "--",
                marker=MARKERS[index % len(MARKERS)],
                markersize=5,
                capsize=2,
                linewidth=1.3,
            )
        axis.set_xscale("log", base=2)
        axis.set_xlim(ticks[0] / 1.4, ticks[-1] * 1.4)
        axis.set_xticks(ticks, [str(tick) for tick in ticks])
        axis.minorticks_off()
        axis.set_xlabel("context tokens, mean per question (harness tokens)")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=3, fontsize="small")
    empty = [f"{p.method} at {p.budget}" for p in frontier.points if p.context_tokens == 0]
    note = f"\nEmpty context, not drawn: {'; '.join(empty)}" if empty else ""
    figure.suptitle(
        f"{frontier.title}\nretrieval only, context budgets {', '.join(map(str, budgets))}{note}"
    )
    save_figure(figure, path)


def write_frontier(frontier: Frontier, out: Path) -> list[Path]:
    """``out``.png and ``out``.csv; the paths written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    png, csv = out.with_suffix(".png"), out.with_suffix(".csv")
    write_plot(frontier, png)
    csv.write_text(frontier_table(frontier).to_csv(), encoding="utf-8")
    return [png, csv]


def main(argv: Sequence[str] | None = None) -> int:
    """Build and write the frontier; exit 2 with a clear message when there is nothing to plot."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tables.frontier", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=Path("results/runs"))
    parser.add_argument("--out", type=Path, help="default results/frontier_<dataset>")
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument(
        "--subset", required=True, help="the sweep's (conf/experiment/frontier.yaml)"
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep runs whose config.yaml has this value, e.g. embedder.model=...",
    )
    args = parser.parse_args(argv)
    try:
        frontier = build_frontier(
            in_repo(args.runs),
            dataset=args.dataset,
            subset=args.subset,
            where=parse_where(args.where),
        )
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = args.out or Path(f"results/frontier_{args.dataset}")
    for path in write_frontier(frontier, in_repo(out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
