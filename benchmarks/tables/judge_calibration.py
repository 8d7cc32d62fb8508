"""The judge lines of a table's notes: the protocols its judge columns use, and per judge (a
model × a protocol) its figures on the probe set and whether its column can be read as accuracy
(:mod:`benchmarks.runs.judges` decides; this module words it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.metrics.judge import ABSTENTION_RULE, PROTOCOLS
from benchmarks.metrics.judge_probes import EXPECTED
from benchmarks.runs.judges import (
    ProbeFigures,
    grades_itself,
    judge_model,
    judge_protocols,
    judged_runs,
    own_protocol,
    probe_figures,
)
from benchmarks.tables.notes import note


def verdict(figures: ProbeFigures) -> str:
    """Whether the judge's column can be read as accuracy."""
    if figures.accepts_wrong:
        return note("judges.verdict.accepts_wrong")
    if figures.rejects_right:
        return note("judges.verdict.rejects_right")
    return note("judges.verdict.discriminates")


def describe(figures: ProbeFigures) -> str:
    """The judge's probe figures in words, with its :func:`verdict`."""
    counts = {kind: figures.per_kind.get(kind, {}) for kind in EXPECTED}

    def shown(kind: str) -> str:
        cell = counts[kind]
        failed = f", {cell['failed']} without verdict" if cell.get("failed") else ""
        return f"{cell.get('accepted', 0)}/{cell.get('graded', 0)}{failed}"

    return note(
        "judges.figures",
        **{kind: shown(kind) for kind in ("gold", "other_question", "distractor")},
        rejected_right=share(figures.right - figures.right_accepted, figures.right),
        accepted_wrong=share(figures.wrong_accepted, figures.wrong),
        verdict=verdict(figures),
    )


def share(part: int, whole: int) -> str:
    """``part / whole`` as a whole percentage, or a dash."""
    return f"{part / whole:.0%}" if whole else "—"


def calibration_lines(runs: Sequence[Any], scores: Sequence[str]) -> list[str]:
    """The judge lines of a table's notes: the protocols its judge columns use, and per judge
    model and protocol, its probe figures pooled over the table's runs (``runs``: objects with
    ``config`` and ``directory``; ``scores``: the table's score names)."""
    judged = judged_runs(runs)
    if not judged:
        return []
    own = own_protocol(judged[0].config)
    protocols = judge_protocols(runs, scores)
    graded = "; ".join(
        f"{protocol} ({'J' if protocol == own else f'J {protocol}'}: "
        f"{PROTOCOLS[protocol].description})"
        for protocol in protocols
    )
    lines = [note("judges.protocols", protocols=graded, abstention=ABSTENTION_RULE)]
    for model, by_protocol in probe_figures(runs, scores).items():
        readers = sorted({str(run.config["backbone"].get("name")) for run in judged
                          if judge_model(run.config) == model and grades_itself(run.config)})  # fmt: skip
        if readers:
            lines.append(note("judges.grades_itself", model=model, readers=", ".join(readers)))
        for protocol, figures in by_protocol.items():
            if figures is None:
                lines.append(note("judges.no_probes", model=model, protocol=protocol))
                continue
            lines.append(
                note("judges.probes", model=model, protocol=protocol, figures=describe(figures))
            )
    return lines
