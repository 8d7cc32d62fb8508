"""The report's figure: the primary metric and evidence recall per row, with their intervals."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from benchmarks.metrics.aggregate import Cell
from benchmarks.runs.rows import Row
from benchmarks.tables.report.build import Report

#: Resolution of every figure the tables write.
DPI = 120


def save_figure(figure: Figure, path: Path) -> None:
    """Write ``figure`` as the tables' figures are written: fixed resolution and no software
    metadata, so the same numbers give the same bytes (a diff means the figure changed)."""
    figure.savefig(path, dpi=DPI, metadata={"Software": None})


def bar_panel(axis: Any, rows: Sequence[Row], cells: Sequence[Cell | None], xlabel: str) -> None:
    """Horizontal bars of means with their CIs as error bars, first row on top."""
    present = [(row, found) for row, found in zip(rows, cells, strict=True) if found is not None]
    positions = np.arange(len(present))[::-1]
    means = [found.mean for _, found in present]
    errors = [
        [found.mean - found.low for _, found in present],
        [found.high - found.mean for _, found in present],
    ]
    axis.barh(positions, means, xerr=errors, capsize=3, color="#4c72b0")
    axis.set_yticks(positions, [row.key.label() for row, _ in present])
    axis.set_xlabel(xlabel)
    axis.set_xlim(0, 1)


def write_plot(report: Report, path: Path) -> None:
    """Primary metric overall per answered row and evidence recall per row, with 95% CIs, drawn on a
    bare ``Figure`` so no pyplot backend or global state is touched."""
    panels = []
    if report.answered:
        shown_metric = "judge_acc" if report.dataset.longmemeval_scores else report.metric
        cells = [row.scores["overall"][shown_metric] for row in report.answered]
        panels.append((report.answered, cells, f"{shown_metric}, overall (95% CI)"))
    if any(row.evidence_recall for row in report.rows):
        cells = [row.evidence_recall for row in report.rows]
        panels.append((report.rows, cells, "evidence recall (95% CI)"))
    count = max(len(panels), 1)
    figure = Figure(figsize=(6 * count, 1.5 + 0.35 * len(report.rows)))
    for axis, (rows, cells, xlabel) in zip(
        figure.subplots(1, count, squeeze=False)[0], panels, strict=False
    ):
        bar_panel(axis, rows, cells, xlabel)
    figure.suptitle(report.title)
    figure.tight_layout()
    save_figure(figure, path)
