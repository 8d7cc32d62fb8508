"""``python -m benchmarks.tables.report``: collect run directories into Table 1 or 2 (md, csv, tex, png).

Tables are built from result files only (STYLE.md): every mean is recomputed from the runs'
``predictions.jsonl``, so each cell traces to the lines behind it; ``metrics.json`` is read only
for construction costs (the one cost that is not logged per question) and marks a finished run.

Readings taken where the brief leaves a choice:

* **Rows** are method × backbone × extraction mode × retrieval-only. Two selected runs that fall
  on the same row are an error naming the config keys where they differ (narrow with
  ``--where``), never a silent pick.
* **Conditions** the setting line states (dataset file, subset, seed, adversarial policy,
  context budget, embedder; for answered rows also template, answer length and judge) must agree
  between the selected runs; a table mixing them would not be one comparison, so that is an
  error too.
* **Layout** (for a reader, not a parser: the csv has every number of a row in its own
  column): one setting line under the title, every other fact as a numbered note after the
  tables, marked in the headers it explains; Overall puts what the reader was shown (evidence
  recall, answer coverage, context tokens) before how it answered; a Backbone or Extraction
  column only where rows differ in it; intervals as ``0.658 [0.45,0.87]``; costs and run ids
  in their own table; a method name longer than 32 characters shortened, the notes giving it
  whole.
* **Overall** means respect each run's ``adversarial`` option; per-category cells always
  include every category. Evidence recall and context tokens average over every question, as
  ``benchmarks.metrics.aggregate`` does, so the numbers match ``metrics.json``. Bootstrap seeds are the
  run's ``seed``, so the intervals match ``metrics.json`` as well. Answer coverage averages
  over the questions that have one (none for adversarial and abstention questions, nor for
  records logged before records kept the reader's context: a dash, never 0).
* **Judge columns** show a dash where the judge (model × protocol, its probes pooled over the
  table's runs) does not discriminate on its probes
  (:func:`benchmarks.tables.judge_calibration.hidden_judge_scores`): its verdicts are no
  measure of accuracy; the csv keeps them. A judge without probes is shown.
* **Intervals** resample conversations (a cluster bootstrap: the questions of one conversation
  share its memory), or questions with ``--interval-unit question``; a cell whose questions come
  from fewer than ``stats.MIN_CLUSTERS`` conversations resamples questions
  (``stats.resampling_unit``, the rule ``metrics.json`` follows), and the header's Statistics
  line names the unit used and the conversation count. On LongMemEval each question has its own
  haystack, so the clusters are single questions.
* **Failed questions** (no answer, or no verdict) carry no score and are left out of the mean,
  as in ``benchmarks.metrics.aggregate``; ``n`` counts the scored questions.
* **p-values**: each non-baseline answered row against the baseline row (a run whose method
  config declares ``role: baseline``: :func:`benchmarks.registry.role_of`) with the same backbone and the highest overall mean of the
  primary metric (``--metric``, an F1 scorer), paired by question over the questions both
  scored in the overall set, resampling their conversations as the intervals do. The cell is
  a plain number (``<0.001`` below), the baseline named once in the notes; baseline rows print
  "—".
* **LoCoMo's audited key** (:mod:`benchmarks.data.locomo_audit`, loaded once from the data
  folder): evidence recall, answer coverage and LoCoMo's F1 of every row under the published
  key and the audited one, side by side over the questions both keys score
  (:func:`benchmarks.metrics.audited.audited_scores`), and the published key's ceiling per
  category of the table's questions; the published key stays every other table's. Where the
  audit cannot be read, a note says so and its cells are dashes.
* **Costs**: answering and judging calls and tokens are summed from the per-question log (a
  judge call per attempt); construction costs come from ``metrics.json`` and cover only the
  memories that run built: a row whose memories were loaded from the memory cache is marked
  ``*`` (a lower bound). Answer latency averages the answers not served from the response cache.
* **Retrieval-only runs** (``answer=none``) get their own section in md and tex and rows with
  blank answer columns in csv; a report of retrieval-only runs alone is titled "Retrieval on
  <dataset>" unless ``--title`` says otherwise.
* **LongMemEval** (Table 2): instead of the per-category section, judge accuracy per question
  type in ES-Mem's Table 2 column order, overall, task-averaged (mean of the per-type means; a
  point value, as the benchmark defines it) and on the ``_abs`` questions, grouped by
  ``benchmarks.metrics.aggregate.longmemeval_scores`` as ``metrics.json`` is; a p-value on judge accuracy
  beside the one on the F1 scorer; and a retrieval section with LongMemEval's ranking metrics
  under its official definition (``recall_all`` and ``ndcg_any`` at 5 and 10, ``recall_any@1``
  and MRR) for sessions and turns, scored from each record's stored ranking over the questions
  the definition keeps (:mod:`benchmarks.metrics.longmemeval_official`).

The runs are read through :mod:`benchmarks.runs`, the floor below: :mod:`~benchmarks.runs.folders`
reads the run folders, :mod:`~benchmarks.runs.naming` names a run's row,
:mod:`~benchmarks.runs.conditions` checks what the runs share. The package, one job a module:
``rows`` recomputes the numbers, ``header`` fills the setting line and the notes (their words:
``benchmarks/tables/notes.yaml``), ``build`` puts them together as a :class:`Report`, ``tables``
lays out and formats its cells (one layout of :class:`~benchmarks.tables.report.tables.Column`
lists; ``main_job`` is Table 1's configuration of it), ``render`` and ``plot`` write the files,
``cli`` is the command line.
"""

from benchmarks.metrics.aggregate import Cell
from benchmarks.tables.report.build import Report, build_report
from benchmarks.tables.report.cli import main
from benchmarks.tables.report.header import (
    dataset_description,
    interval_description,
    subset_description,
)
from benchmarks.tables.report.render import render_markdown
from benchmarks.tables.report.rows import LONGMEMEVAL_TYPES, category_order, score_cells

#: The names other modules and the tests import from ``benchmarks.tables.report`` (``Cell`` as the
#: tables' interval type, from :mod:`benchmarks.metrics.aggregate`).
__all__ = [
    "LONGMEMEVAL_TYPES",
    "Cell",
    "Report",
    "build_report",
    "category_order",
    "dataset_description",
    "interval_description",
    "main",
    "render_markdown",
    "score_cells",
    "subset_description",
]
