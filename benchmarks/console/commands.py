"""The subcommands of ``memsys-bench``: the one place they are listed.

Each names the module that does the work, imported only when its subcommand is chosen, so
``memsys-bench --help`` stays fast and a subcommand whose module is absent fails alone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand: ``target`` is ``module:function``, or for a Hydra app the module itself with
    ``config`` its primary config."""

    target: str
    help: str
    config: str | None = None
    prefix: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """Subcommands under one word (``memsys-bench score qa``)."""

    help: str
    commands: dict[str, Command]


COMMANDS: dict[str, Command | Group] = {
    "run": Command(
        "benchmarks.pipeline.run",
        "run a method on a QA dataset (Hydra: method=... subset=...; -m sweeps)",
        config="config",
    ),
    "segment": Command(
        "benchmarks.pipeline.segment",
        "run a segmenter on a segmentation set (Hydra: segmenter=... dataset=...)",
        config="segment",
    ),
    "plan": Command(
        "benchmarks.plan.cli:main",
        "what a sweep will cost before it runs (run's overrides; --conversations N)",
    ),
    "report": Command(
        "benchmarks.tables.report.cli:main", "Table 1 / 2 or a retrieval table from finished runs"
    ),
    "segmentation-table": Command(
        "benchmarks.tables.segmentation:main", "the segmentation table from finished segment runs"
    ),
    "frontier": Command(
        "benchmarks.tables.frontier:main",
        "evidence recall and answer coverage vs context tokens over budgets (PNG + CSV)",
    ),
    "published": Command(
        "benchmarks.published.cli:main", "the papers' published numbers beside the paper grid's"
    ),
    "ablations": Command(
        "benchmarks.tables.ablations:main",
        "the ablation table from its run folder: does each lite ablation change the context",
    ),
    "inspect": Command(
        "benchmarks.inspection.inspect:main",
        "one HTML page over runs: each question's context, scores, verdicts",
    ),
    "diff": Command(
        "benchmarks.inspection.diff:main", "what changed between two runs, question by question"
    ),
    "results": Group(
        "the committed results: whether each row is still what today's code gives",
        {
            "status": Command(
                "benchmarks.checks.ledger:main",
                "every committed table's rows: fresh, restamped, stale, partial (results/ledger.yaml)",
            ),
            "pack": Command(
                "benchmarks.pipeline.packed:main",
                "gzip finished runs' records to commit them (--unpack restores them)",
            ),
            "restamp": Command(
                "benchmarks.checks.restamp:main",
                "recompute a sample of a stale run's records; stamp it fresh when identical",
            ),
            "rebuild": Command(
                "benchmarks.checks.rebuild:main",
                "rerun every stale or partial row of the committed tables, then re-render them",
            ),
        },
    ),
    "score": Group(
        "score your own predictions (JSONL) with the harness's scorers",
        {
            "qa": Command(
                "benchmarks.metrics.qa:main",
                "F1 and BLEU-1 of a predictions file; --judge adds an LLM judge's accuracy",
            ),
            "judge": Command(
                "benchmarks.metrics.judge:main",
                "--show-prompt: the message a judge protocol sends for one answer",
            ),
            "ranking": Command(
                "benchmarks.metrics.ranking:main",
                "LongMemEval's official recall and nDCG of a rankings file",
            ),
            "segmentation": Command(
                "benchmarks.metrics.segmentation:main",
                "Pk, WindowDiff, F1 of predicted boundary labels against references",
            ),
        },
    ),
    "data": Group(
        "the datasets",
        {
            "fetch": Command(
                "benchmarks.data.fetch:main",
                "download what is missing, verify every file's sha256 (make data)",
            ),
            "stats": Command(
                "benchmarks.data.__main__:main", "every dataset's counts", prefix=("stats",)
            ),
        },
    ),
    "ask": Command(
        "benchmarks.pipeline.llm_ask:main",
        "one question to the configured backbone (Hydra: backbone=...)",
    ),
    "regression": Command(
        "benchmarks.checks.regression:main",
        "check | refresh: the CI regression against results/regression/",
    ),
}
