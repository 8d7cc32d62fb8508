"""Run folders as data: which runs a folder holds and what each finished one holds
(:mod:`~benchmarks.runs.folders`), how a run's row is named (:mod:`~benchmarks.runs.naming`), and
what the runs being compared must share (:mod:`~benchmarks.runs.conditions`). The tables, the
checks, the inspector and the published-numbers comparison all read runs through it."""
