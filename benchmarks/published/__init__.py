"""``python -m benchmarks.published``: the papers' own numbers beside the paper grid's.

``results/published/<paper>.yaml`` quotes each paper's table cells; ``conf/experiment/
paper_{locomo,longmemeval}.yaml`` runs each method's paper configuration and the baselines. This
report sets every published cell the harness can measure next to the measured number and marks
each setting in which the two differ, so that a number measured on a subset, with lite
extraction or with other models is never read as the paper's setting. Which cells are shown,
how each is paired with a run and on which scale: docs/paper-setting.md, "The reports".

The package, one job a module: ``grid`` composes the paper grid's entries and picks each
entry's run per reader, ``cells`` reads ``results/published/*.yaml`` and keeps the cells the grid
measures, ``compare`` names every setting in which a run differs from the paper's, ``build``
pairs each cell with its run as a :class:`PaperReport`, ``render`` writes it as markdown, ``cli``
is the command line.
"""

from benchmarks.published.build import Line, build_paper_report
from benchmarks.published.cli import main
from benchmarks.published.render import render_paper_markdown

#: The names the tests import from ``benchmarks.published``.
__all__ = ["Line", "build_paper_report", "main", "render_paper_markdown"]
