"""Which judge graded a run, and whether its verdicts can be read as accuracy.

A judge is a model × a protocol (:mod:`benchmarks.metrics.judge`). Its figures on the probe set
(:mod:`benchmarks.metrics.judge_probes`), pooled over the runs of a table, say how many
known-right answers it rejected and how many known-wrong ones it accepted: a judge that accepts
most wrong answers, or rejects most right ones, does not measure accuracy, and a table shows its
column as dashes. Read from the runs' files only (``config.yaml``, ``judge_probes.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.specs import spec_of
from benchmarks.metrics.aggregate import OTHER_JUDGE_PREFIX
from benchmarks.metrics.agreement import judge_repeats
from benchmarks.metrics.judge_probes import EXPECTED, probe_counts, read_probes

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
    """Per judge model and protocol of the table's judge columns, its probe figures pooled over
    ``runs``; None where no probe set was graded."""
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
    """The judge scores of one run a table must not show as accuracy: their judge fails to
    discriminate on its probes (none without probes)."""
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


def repeat_counts(run: Any) -> set[int]:
    """How many verdicts a run asked per answer under each of its protocols that repeat (none
    where it asked one)."""
    return {found["repeats"] for found in judge_repeats(run.records).values()}


def repeat_temperature(run: Any) -> float | None:
    """The temperature a run's repeated verdicts were sampled at (``metrics.json``), or None:
    the protocol's own."""
    return run.metrics.get("judge_agreement", {}).get("repeat_temperature")
