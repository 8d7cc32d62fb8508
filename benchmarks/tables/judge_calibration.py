"""The header lines that say how far a table's Judge columns can be trusted.

For every judge of a table (a model × a protocol, :mod:`benchmarks.metrics.judge`): what it
grades by, and its figures on the probe set (:mod:`benchmarks.metrics.judge_probes`): how many
known-right answers it rejected and how many known-wrong ones it accepted. A judge that accepts
most wrong answers, or rejects most right ones, does not measure accuracy, and the line says so;
so does a judge that is the reader grading its own answers. Read from the runs' files only
(``config.yaml``, ``judge_probes.json``), like every other number of a table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.specs import spec_of
from benchmarks.metrics.aggregate import OTHER_JUDGE_PREFIX
from benchmarks.metrics.judge import ABSTENTION_RULE, PROTOCOLS
from benchmarks.metrics.judge_probes import EXPECTED, probe_counts, read_probes
from benchmarks.tables.notes import note

#: A judge that accepts more than this share of known-wrong answers, or rejects more than this
#: share of known-right ones, grades nothing a table should report as accuracy.
UNTRUSTED_SHARE = 0.5


def own_protocol(config: Mapping[str, Any]) -> str:
    """The protocol of a run's ``judge_acc``: its dataset's own (for runs logged before the
    dataset config declared one, the spec's :attr:`~DatasetSpec.earlier_judge_protocol`)."""
    declared = (config.get("dataset") or {}).get("judge_protocol")
    return declared or spec_of(config).earlier_judge_protocol


def protocol_of(score: str, own: str) -> str:
    """The protocol behind a judge score name (``judge_acc`` or ``judge_acc_<protocol>``)."""
    return own if score == "judge_acc" else score.removeprefix(OTHER_JUDGE_PREFIX)


def judge_model(config: Mapping[str, Any]) -> str:
    """The model that grades a run's answers: the judge's own backbone, else the reader."""
    judge = (config.get("judge") or {}).get("backbone") or config.get("backbone") or {}
    return str(judge.get("name", "?"))


def grades_itself(config: Mapping[str, Any]) -> bool:
    """Whether the run's judge is its reader (``judge=same``, or the same model named twice)."""
    return judge_model(config) == str((config.get("backbone") or {}).get("name", "?"))


@dataclass(frozen=True)
class ProbeFigures:
    """One judge's verdicts on the probes: right answers accepted, wrong ones accepted."""

    right_accepted: int
    right: int
    wrong_accepted: int
    wrong: int
    per_kind: Mapping[str, Mapping[str, int]]

    @classmethod
    def of(cls, per_kind: Mapping[str, Mapping[str, int]]) -> ProbeFigures:
        right = [cell for kind, cell in per_kind.items() if EXPECTED[kind]]
        wrong = [cell for kind, cell in per_kind.items() if not EXPECTED[kind]]
        return cls(
            right_accepted=sum(cell["accepted"] for cell in right),
            right=sum(cell["graded"] for cell in right),
            wrong_accepted=sum(cell["accepted"] for cell in wrong),
            wrong=sum(cell["graded"] for cell in wrong),
            per_kind=per_kind,
        )

    def verdict(self) -> str:
        """Whether the judge's column can be read as accuracy."""
        if self.accepts_wrong:
            return note("judges.verdict.accepts_wrong")
        if self.rejects_right:
            return note("judges.verdict.rejects_right")
        return note("judges.verdict.discriminates")

    @property
    def accepts_wrong(self) -> bool:
        """Whether the judge accepted most known-wrong answers."""
        return bool(self.wrong) and self.wrong_accepted / self.wrong > UNTRUSTED_SHARE

    @property
    def rejects_right(self) -> bool:
        """Whether the judge rejected most known-right answers."""
        return bool(self.right) and 1 - self.right_accepted / self.right > UNTRUSTED_SHARE

    @property
    def discriminates(self) -> bool:
        """Whether the judge's verdicts can be read as accuracy: it neither accepts most wrong
        answers nor rejects most right ones."""
        return not (self.accepts_wrong or self.rejects_right)

    def describe(self) -> str:
        counts = {kind: self.per_kind.get(kind, {}) for kind in EXPECTED}

        def shown(kind: str) -> str:
            cell = counts[kind]
            failed = f", {cell['failed']} without verdict" if cell.get("failed") else ""
            return f"{cell.get('accepted', 0)}/{cell.get('graded', 0)}{failed}"

        return note(
            "judges.figures",
            **{kind: shown(kind) for kind in ("gold", "other_question", "distractor")},
            rejected_right=share(self.right - self.right_accepted, self.right),
            accepted_wrong=share(self.wrong_accepted, self.wrong),
            verdict=self.verdict(),
        )


def share(part: int, whole: int) -> str:
    """``part / whole`` as a whole percentage, or a dash."""
    return f"{part / whole:.0%}" if whole else "—"


def judged_runs(runs: Sequence[Any]) -> list[Any]:
    """The runs whose answers a judge graded."""
    return [run for run in runs if (run.config.get("judge") or {}).get("enabled")]


def judge_protocols(runs: Sequence[Any], scores: Sequence[str]) -> list[str]:
    """The protocols of the table's judge columns (``scores``: its score names)."""
    judged = judged_runs(runs)
    if not judged:
        return []
    own = own_protocol(judged[0].config)
    return [protocol_of(name, own) for name in scores if name.startswith("judge_acc")]


def probe_figures(
    runs: Sequence[Any], scores: Sequence[str]
) -> dict[str, dict[str, ProbeFigures | None]]:
    """Per judge model and protocol of the table's judge columns, its figures on the probes,
    pooled over the table's runs (``runs``: objects with ``config`` and ``directory``); None
    where no probe set was graded under that protocol."""
    pooled: dict[str, list[dict[str, Any]]] = {}
    for run in judged_runs(runs):
        pooled.setdefault(judge_model(run.config), []).extend(
            read_probes(Path(run.directory)) or []
        )
    protocols = judge_protocols(runs, scores)
    figures: dict[str, dict[str, ProbeFigures | None]] = {}
    for model, entries in pooled.items():
        counts = probe_counts(entries)
        figures[model] = {
            protocol: ProbeFigures.of(counts[protocol]) if protocol in counts else None
            for protocol in protocols
        }
    return figures


def hidden_judge_scores(
    config: Mapping[str, Any],
    scores: Sequence[str],
    figures: Mapping[str, Mapping[str, ProbeFigures | None]],
) -> frozenset[str]:
    """The judge scores of one run (``config``) a table must not show as accuracy: those whose
    judge model and protocol the probes show not to discriminate (``figures``:
    :func:`probe_figures`). A judge without probes is not hidden: nothing shows it fails."""
    if not (config.get("judge") or {}).get("enabled"):
        return frozenset()
    own = own_protocol(config)
    of_model = figures.get(judge_model(config), {})
    hidden = set()
    for name in scores:
        if not name.startswith("judge_acc"):
            continue
        found = of_model.get(protocol_of(name, own))
        if found is not None and not found.discriminates:
            hidden.add(name)
    return frozenset(hidden)


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
                note("judges.probes", model=model, protocol=protocol, figures=figures.describe())
            )
    return lines
