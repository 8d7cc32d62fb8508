"""``python -m benchmarks.tables.report``: collect run directories into Table 1 or 2 (md, csv, tex, png).

Tables are built from result files only (STYLE.md): every mean is recomputed from the runs'
``predictions.jsonl`` by :mod:`benchmarks.runs`; ``metrics.json`` gives construction costs and
marks a finished run. This package lays the rows out and words them; the readings taken:
docs/tables.md, "Readings taken"."""
