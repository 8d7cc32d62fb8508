"""``python -m benchmarks.published``: the papers' own numbers beside the paper grid's.

``results/published/<paper>.yaml`` quotes each paper's table cells; ``conf/experiment/
paper_{locomo,longmemeval}.yaml`` runs each method's paper configuration (the ``paper`` group's
options, :func:`benchmarks.registry.paper_grid`) and the baselines. This report sets every published cell the harness can measure next to the measured
number and marks each setting in which the two differ, so that a number measured on a subset,
with lite extraction or with other models is never read as the paper's setting. Measured numbers
are recomputed from the runs' files with :mod:`benchmarks.tables.report`'s readers (``load_runs``,
``score_cells``), as the tables are.

Readings taken where the brief leaves a choice:

* **Grid entries** are the ``paper`` sweep of the dataset's experiment config, each composed as
  its runs are. An entry's runs are the finished answered runs that ``load_runs`` selects
  (dataset, subset, ``--where``) whose method has the entry's display name
  (``report.method_name``); of several with one reader, the one with the entry's own settings
  (:data:`ENTRY_KEYS`) is taken, and two such are an error (narrow with ``--where``). A run with
  other settings (lite extraction, another budget) is shown, its differences marked.
* **Published cells** shown are those on the dataset (or one of its categories or question
  types), in a metric the harness computes (:data:`METRICS`), whose ``config`` is an entry's
  method config or its lite counterpart (CAST's file names ``cast`` for the rows the paper
  extracted with an LLM) and whose ``overrides`` the entry satisfies. A cell the paper prints
  again in a later table (CAST's Tables 4-7 repeat its Table 1 configuration) is shown once, from
  the first; the cells left out are counted per paper, with why.
* **Pairing**: a cell is set beside the run whose reader is the paper's model
  (:data:`benchmarks.papers.models.SAME_MODEL`), or the grid reader standing in for a model no grid backbone serves
  (:data:`STAND_IN`); without such a run its measured cell reads "not run".
* **Scale**: values as the paper prints them (percent; HingeMem's BLEU-1 as a fraction), the
  measured mean, its 95% bootstrap interval and n on the same scale; the intervals resample
  conversations by the tables' rule (``report.score_cells``), and the header says which unit.

The package, one job a module: ``grid`` composes the paper grid's entries and picks each
entry's run per reader, ``cells`` reads ``results/published/*.yaml`` and keeps the cells the grid
measures, ``compare`` names every setting in which a run differs from the paper's, ``build``
pairs each cell with its run as a :class:`PaperReport`, ``render`` writes it as markdown, ``cli``
is the command line. What the papers printed, as the tables quote it, is :mod:`benchmarks.papers`'
(the published segmentation rows, the papers' models).
"""

from benchmarks.published.build import Line, build_paper_report
from benchmarks.published.cli import main
from benchmarks.published.render import render_paper_markdown

#: The names the tests import from ``benchmarks.published``.
__all__ = ["Line", "build_paper_report", "main", "render_paper_markdown"]
