"""The plan put together: every point of the sweep measured in a working directory whose caches
are first copied from the shared ones, scaled to the whole subset and costed, one :class:`Row`
each, in a :class:`Plan`."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.plan.costs import (
    STAGES,
    Extent,
    LocalWork,
    Rates,
    StagePlan,
    cost,
    scale_factors,
)
from benchmarks.plan.grid import planned_config, sampled, sweep
from benchmarks.plan.measurement import Measurement, extent, measure

#: Caches that hold facts about texts, not replies: copied into the plan's throwaway directory.
WARM_CACHES = ("embeddings.sqlite", "parses.sqlite", "compressions.sqlite")


@dataclass
class Row:
    """One sweep point: its overrides, its stages' plan, and how it was measured."""

    point: dict[str, str]
    stages: dict[str, StagePlan]
    measurement: Measurement
    scale: dict[str, float]
    stand_ins: list[str]

    @property
    def local(self) -> LocalWork:
        """The sample's CPU-side work scaled to the whole subset: what the content caches absorb
        along the sample's growth curve, the rest by turns (memories dominate it)."""
        scale = self.scale
        return self.measurement.local.scaled(
            scale["construction"], scale["encoded"], scale["parsed"]
        )

    def total(self, name: str) -> float:
        return sum(getattr(stage, name) for stage in self.stages.values())


def plan_row(
    point: dict[str, str],
    measurement: Measurement,
    full: Extent,
    rates: Rates,
    stand_ins: list[str],
) -> Row:
    """A measured point scaled to ``full`` and costed."""
    scale = scale_factors(measurement.sample, full, measurement.growth)
    stages = {
        stage: cost(
            measurement.stages[stage].scaled(scale[stage]),
            stage,
            measurement.backbones[stage],
            rates,
        )
        for stage in STAGES
        if stage in measurement.stages
    }
    return Row(point, stages, measurement, scale, stand_ins)


@dataclass
class Plan:
    """Every row of a sweep, with what it was measured on and how long the plan took."""

    command: str
    rows: list[Row]
    full: Extent
    sample: Extent
    rates: Rates
    seconds: float = 0.0

    @property
    def scaled(self) -> bool:
        return self.sample != self.full


def make_plan(
    overrides: Sequence[str],
    *,
    rates: Rates,
    work_dir: Path,
    conversations: int | None = None,
    stand_ins: bool = True,
    warm_from: Path | None = None,
    log: Any = None,
) -> Plan:
    """Measure and cost every point of the sweep over ``overrides`` in ``work_dir``; caches
    copied from ``warm_from`` first (never written to)."""
    started = time.perf_counter()
    if warm_from is not None:
        warm_caches(warm_from, work_dir / "cache")
    rows, full, sample = [], Extent(), Extent()
    grid = sweep(overrides)
    for number, point in enumerate(grid.points, 1):
        cfg, used = planned_config(point, work_dir, stand_ins)
        run_cfg = sampled(cfg, conversations)
        measurement = measure(run_cfg)
        sample = measurement.sample
        full = sample if run_cfg is cfg else extent(cfg)  # the whole subset was measured
        rows.append(plan_row(grid.label(point), measurement, full, rates, used))
        if log is not None:
            print(
                f"[{number}/{len(grid.points)}] {' '.join(point)}: {measurement.seconds:.0f} s",
                file=log,
            )
    command = " ".join(["python -m benchmarks.plan", *overrides])
    return Plan(command, rows, full, sample, rates, time.perf_counter() - started)


def warm_caches(shared: Path, cache_dir: Path) -> None:
    """Copy snapshots of the shared caches of facts about texts (:data:`WARM_CACHES`) into the
    plan's cache directory, the shared files opened read only."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    if shared.resolve() == cache_dir.resolve():
        raise ValueError(f"the plan must not work in the shared cache {shared}")
    for name in WARM_CACHES:
        if not (shared / name).exists():
            continue
        source = sqlite3.connect(f"file:{shared / name}?mode=ro", uri=True)
        target = sqlite3.connect(cache_dir / name)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
