"""``python -m benchmarks.plan +experiment=paper_locomo``: what a sweep will cost, before it runs.

For every point of an experiment's sweep (Hydra's ``hydra.sweeper.params`` merged with the
command line's sweep overrides, as ``-m`` does), the plan runs the real construction, retrieval,
answering and judging code of the runner (:mod:`benchmarks.pipeline.harness`) against the scripted
backbone (:mod:`memsys.llm.providers.scripted`), which answers at once with replies the callers
can use. So the LLM calls per stage and their prompts are the ones a run makes, counted exactly;
completion tokens are bounded by each request's ``max_tokens`` and estimated as a share of it.
Tokens are priced per backbone name (:data:`PRICES`) and timed at an assumed throughput
(:data:`THROUGHPUTS`); both, and the shares, are options.

No model, GPU or key is needed. Nothing reaches the shared caches: the plan works in a throwaway
directory with the response cache off, its embedding, parse and compression caches copied from
the shared ones first (read only) so that texts embedded before are not embedded again.

A plan over a sample (``--conversations N``) scales each stage to the whole subset: construction
by the ratio of turns, the per-question stages by the ratio of questions; the output says so.
A memory that several rows share (same method settings and construction model) is built, and
billed, once: in the first row, as in a sweep that shares its memory cache.

The package, one job a module: ``grid`` makes the sweep's points and the config each is run
with, ``measurement`` runs one point against the scripted backbone and counts its calls and
tokens, ``costs`` holds the rates and turns counts into dollars and hours, ``build`` puts the
rows of a plan together, ``render`` writes the page and its JSON, ``cli`` is the command line.
"""

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

#: The names the tests import from ``benchmarks.plan`` (and docs/plan.md names: ``PRICES``,
#: ``THROUGHPUTS``, ``script_backbones``).
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
