"""``python -m benchmarks.tables.report``: collect run directories into Table 1 or 2 (md, csv, tex, png).

Tables are built from result files only (STYLE.md): every mean is recomputed from the runs'
``predictions.jsonl``, so each cell traces to the lines behind it; ``metrics.json`` is read only
for construction costs (the one cost that is not logged per question) and marks a finished run.
The readings taken where the brief leaves a choice (rows, conditions, intervals, p-values, the
audited key, costs) are written for readers in ``docs/tables.md`` ("Readings taken").

The runs and every number of a row come from :mod:`benchmarks.runs`, the floor below:
:mod:`~benchmarks.runs.selection` picks and checks a table's runs, :mod:`~benchmarks.runs.rows`
recomputes each row's numbers. The package lays them out and words them, one job a module:
``header`` fills the setting line and the notes (their words: ``benchmarks/tables/notes.yaml``),
``build`` puts them together as a :class:`Report`, ``tables`` lays out and formats its cells (one
layout of :class:`~benchmarks.tables.report.tables.Column` lists; ``main_job`` is Table 1's
configuration of it), ``render`` and ``plot`` write the files, ``cli`` is the command line.
"""
