"""``python -m benchmarks.plan +experiment=paper_locomo``: what a sweep will cost, before it runs.

Each point of the sweep runs the runner's real code against the scripted backbone, so the calls
and prompts are the ones a run makes; tokens are priced per backbone (:data:`PRICES`) and timed
at an assumed throughput (:data:`THROUGHPUTS`). How it counts, samples and scales:
docs/plan.md."""

from benchmarks.plan.build import make_plan, warm_caches
from benchmarks.plan.cli import arguments, main, parse_rates
from benchmarks.plan.costs import (
    PRICES,
    THROUGHPUTS,
    Extent,
    Price,
    Rates,
    StageCount,
    Throughput,
    cost,
    scale_factors,
)
from benchmarks.plan.grid import script_backbones, sweep

#: The names the tests and docs/plan.md import from ``benchmarks.plan``.
__all__ = [
    "PRICES",
    "THROUGHPUTS",
    "Extent",
    "Price",
    "Rates",
    "StageCount",
    "Throughput",
    "arguments",
    "cost",
    "main",
    "make_plan",
    "parse_rates",
    "scale_factors",
    "script_backbones",
    "sweep",
    "warm_caches",
]
