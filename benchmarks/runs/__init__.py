"""Run folders as data: which runs a folder holds and what each finished one holds
(:mod:`~benchmarks.runs.folders`), how a run's row is named (:mod:`~benchmarks.runs.naming`), what
the runs being compared must share (:mod:`~benchmarks.runs.conditions`), which runs make a table
(:mod:`~benchmarks.runs.selection`) and every number of its rows (:mod:`~benchmarks.runs.rows`),
which judge graded a run (:mod:`~benchmarks.runs.judges`), and the segmentation and ablation runs
(:mod:`~benchmarks.runs.segmentation`, :mod:`~benchmarks.runs.ablations`). The tables, the
checks, the inspector and the published-numbers comparison all read runs through it; the tables
only lay out and word what it computes."""
