"""The report built: every measurable published cell paired with its grid entry's run (the
paper's reader, or the grid reader standing in for it), its measured cell recomputed from the
run's files, what differs, and the header saying what is compared."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.paths import shown_path
from benchmarks.data.specs import named_spec
from benchmarks.metrics.aggregate import Cell
from benchmarks.papers.models import SAME_MODEL
from benchmarks.published.cells import PublishedCell, how_measured, published_cells, read_papers
from benchmarks.published.compare import differences
from benchmarks.published.grid import GRIDS, Entry, entry_runs, grid_entries
from benchmarks.registry import PUBLISHED_DIR
from benchmarks.runs.folders import ReportError, Run, load_runs, run_configs
from benchmarks.runs.rows import category_order, score_cells
from benchmarks.tables.report.header import interval_description, unfinished_runs_line

TITLES = {"locomo": "LoCoMo", "longmemeval_s": "LongMemEval-S"}

#: Models no grid backbone serves → the grid reader set beside their numbers (marked as other).
STAND_IN = {"gpt-4o": "gpt-4o-mini"}


@dataclass(frozen=True)
class Line:
    """A published cell beside its measured counterpart and what differs between them."""

    cell: PublishedCell
    run: Run | None
    measured: Cell | None
    differences: tuple[str, ...]


@dataclass
class PaperReport:
    """What the writer needs: header lines, the lines, the grid's runs, what was left out."""

    title: str
    header: list[str]
    lines: list[Line]
    runs: dict[Entry, dict[str, Run]]
    left_out: list[str]


def paired_run(cell: PublishedCell, runs: dict[str, Run]) -> Run | None:
    """The entry's run with the paper's reader, or with the grid reader standing in for it."""
    reader = SAME_MODEL.get(cell.backbone) or STAND_IN.get(cell.backbone)
    return runs.get(reader) if reader else None


def find_runs(
    runs_dir: Path,
    dataset: str,
    subset: str,
    where: dict[str, Any],
    configs: dict[Path, dict[str, Any]],
) -> tuple[list[Run], str | None]:
    """The finished runs the filters select, or none and why (the report still shows the
    published numbers); ``configs`` is ``run_configs(runs_dir)``."""
    try:
        return load_runs(runs_dir, dataset, subset, where, configs), None
    except ReportError as error:
        return [], f"No measured numbers: {error}"


def build_paper_report(
    runs_dir: Path,
    *,
    dataset: str = "locomo",
    subset: str = "full",
    where: dict[str, Any] | None = None,
    published_dir: Path = PUBLISHED_DIR,
) -> PaperReport:
    """Pair every measurable published cell with its grid run and what differs."""
    where = where or {}
    entries = grid_entries(dataset)
    configs = run_configs(runs_dir)  # one read serves the runs and the unfinished-runs note
    runs, missing = find_runs(runs_dir, dataset, subset, where, configs)
    grid_runs = {entry: entry_runs(entry, runs) for entry in entries}
    scores = {
        run.directory: score_cells(run, category_order([run]))
        for readers in grid_runs.values()
        for run in readers.values()
    }
    lines, left_out = [], []
    how = how_measured()
    for paper, document in read_papers(published_dir).items():
        cells, summary = published_cells(how[paper], document, dataset, entries)
        left_out.append(summary)
        for cell in cells:
            run = paired_run(cell, grid_runs[cell.entry])
            found = scores[run.directory].get(cell.scope, {}).get(cell.score) if run else None
            lines.append(Line(cell, run, found, differences(cell, run) if run else ()))
    notes = [missing, unfinished_runs_line(configs, dataset, subset, where)]
    measured = [line.measured for line in lines if line.measured is not None]
    intervals = interval_description(measured, "conversation", named_spec(dataset).memory_name)
    header = header_lines(dataset, subset, where, runs_dir, intervals)
    header += [note for note in notes if note]
    title = f"{TITLES[dataset]}: published numbers beside the paper grid"
    return PaperReport(title, header, lines, grid_runs, left_out)


def header_lines(
    dataset: str, subset: str, where: dict[str, Any], runs_dir: Path, intervals: str
) -> list[str]:
    """What the report compares, and how to read a line; ``intervals`` is
    :func:`benchmarks.tables.report.interval_description` of the measured cells."""
    filters = "".join(f", {key}={value!r}" for key, value in where.items())
    return [
        f"Published: every cell of results/published/*.yaml measured by the paper grid "
        f"(conf/experiment/{GRIDS[dataset]}.yaml), values as the paper prints them",
        f"Measured: recomputed from predictions.jsonl of the finished runs in "
        f"{shown_path(runs_dir)} (dataset {dataset}, subset {subset}{filters}): mean [95% "
        "bootstrap CI] (n questions), on the paper's scale (percent, or a fraction where the "
        "paper prints one)",
        f"Intervals: {intervals}, as in the tables",
        "Scores: F1 → f1_set (A-Mem/mem0 set F1; HingeMem's is LoCoMo's own, f1_locomo), "
        "BLEU-1 → bleu1, J and ACC → judge_acc",
        "Reader = the backbone that answers; Memory = the extraction mode and, for llm, the model "
        "that built the memory; Subset = the questions the run asked",
        "≠ lists every setting in which the measured number was obtained otherwise than the "
        "paper's; a number on a subset or with lite extraction is not the paper's setting",
    ]
