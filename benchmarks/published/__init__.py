"""``python -m benchmarks.published``: the papers' own numbers beside the paper grid's.

Every published cell the harness can measure is set next to the measured number, with each
setting in which the two differ marked, so a number measured on a subset or with other models is
never read as the paper's setting: docs/paper-setting.md, "The reports"."""

from benchmarks.published.build import Line, build_paper_report
from benchmarks.published.cli import main
from benchmarks.published.render import render_paper_markdown

#: The names the tests import from ``benchmarks.published``.
__all__ = ["Line", "build_paper_report", "main", "render_paper_markdown"]
