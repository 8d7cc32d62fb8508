"""``python -m benchmarks.tables.segmentation``: segmentation runs -> ``table_segmentation.{md,csv}``.

Built from result files only (STYLE.md): each finished test-split run's ``labels.jsonl`` is
rescored against the references with the runner's scorer and bootstrap, and ES-Mem's Table 4 is
quoted beside the measured rows, never mixed into one. The readings taken (which run a row
takes, subsets, fallbacks, reflection, which measured row meets a published one) are written for
readers in docs/tables.md ("Segmentation table: readings taken"), the words in ``notes.yaml``
(``segmentation``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from benchmarks.config.compose import compose_config
from benchmarks.data import load_segmentation
from benchmarks.data.errors import DataMissingError
from benchmarks.data.paths import REPO_ROOT, resolve_data_dir, shown_path
from benchmarks.metrics.segmentation import METRIC_NAMES
from benchmarks.papers.models import SAME_MODEL
from benchmarks.papers.segmentation import (
    SEGMENTATION_METRICS,
    PublishedSegmentationError,
    QuotedRow,
    published_segmentation,
    score_from_parts,
)
from benchmarks.pipeline.segment import fell_back, summarize, total_cost
from benchmarks.render import Document, Footnotes, Table
from benchmarks.runs.folders import is_finished, read_records, run_configs
from benchmarks.tables.notes import note
from memsys.methods.secom.reflection import ReflectionConfig

#: Table 4's dataset order and display names.
DATASETS = {"dialseg711": "DialSeg711", "superdialseg": "SuperDialSeg", "tiage": "TIAGE"}
TABLE_METRICS = tuple(SEGMENTATION_METRICS.values())
#: The published file whose segmentation rows the table quotes (``results/published/``).
QUOTED_PAPER = "esmem"
#: A row is marked FALLBACK when at least this share of its dialogues fell back.
FALLBACK_MARK_SHARE = 0.5
#: Display names, in the table's row order.
SEGMENTER_NAMES = {
    "TextTilingSegmenter": "TextTiling (utterance-level, dev-tuned)",
    "SuperDialSegTextTilingSegmenter": "TextTiling (SuperDialSeg: NLTK w=10, k=6)",
    "EmbeddingSegmenter": "Embedding similarity",
    "ESMemSegmenter": "ES-Mem segmentation",
    "SeComSegmenter": "SeCom segmentation",
}
DEFAULT_TITLE = "Dialogue topic segmentation (test sets)"
#: The marker of a quoted Score that its own row's Pk, WD and F1 do not give.
INCONSISTENT_MARK = "†"
DASH = "—"
TOKENS = ("prompt_tokens", "completion_tokens")
CSV_FIELDS = (
    "source", "group", "method", "mode", "backbone", "dataset", "split", "n", "n_split",
    *(f"{m}{suffix}" for m in METRIC_NAMES for suffix in ("", "_low", "_high")),
    "llm_calls_per_dialogue", "prompt_tokens_per_dialogue", "completion_tokens_per_dialogue",
    "fallbacks", "dialogues_with_fallback", "reflection_training", "rubric_items", "run_dir",
    "published_row", *(f"{m}_{kind}" for m in TABLE_METRICS for kind in ("published", "delta")),
    "score_from_parts", "score_inconsistent",
)  # fmt: skip


class TableError(ValueError):
    """The runs found cannot make one table; the message names the runs."""


@dataclass(frozen=True)
class RowKey:
    """Where a run lands in the table: segmenter display name (with the split reflected on),
    extraction mode, backbone (LLM rows only)."""

    label: str
    mode: str
    backbone: str


@dataclass(frozen=True)
class MeasuredCell:
    """One row × dataset: the scores recomputed from one run's labels."""

    key: RowKey
    dataset: str
    n: int
    n_split: int
    scores: dict[str, Any]
    cost: dict[str, float]
    run_dir: Path
    fallback_dialogues: int = 0
    substitutes: tuple[str, ...] = ()
    reflection: ReflectionConfig | None = None
    training: dict[str, Any] | None = None
    #: The run's resolved ``segmenter`` node (its ``config.yaml``), for pairing with a quoted row.
    segmenter_node: dict[str, Any] = field(default_factory=dict)

    @property
    def marked(self) -> bool:
        """Whether enough dialogues fell back that the row must say so."""
        return self.fallback_dialogues >= FALLBACK_MARK_SHARE * self.n

    @property
    def method(self) -> str:
        """The method cell: the row's name, marked FALLBACK with the count and the substitute
        the records name (when they name exactly one) where :attr:`marked`."""
        if not self.marked:
            return self.key.label
        one = self.substitutes[0] if len(self.substitutes) == 1 else None
        return note(
            "segmentation.fallback_cell",
            label=self.key.label,
            fell=self.fallback_dialogues,
            n=self.n,
            substitute=one or note("segmentation.substitute_unknown"),
            segmenter=self.key.label.split(" + ")[0],
        )

    @property
    def rubric(self) -> list[str]:
        """The rubric a reflection run learned (its ``training.json``)."""
        return list(((self.training or {}).get("guidance") or {}).get("rubric", []))


def reflection_config(config: dict[str, Any]) -> ReflectionConfig | None:
    """A run's reflection settings when reflection is on (``None`` otherwise)."""
    node = config.get("segmenter", {}).get("reflection") or {}
    if not node.get("enabled"):
        return None
    return ReflectionConfig(**{key: value for key, value in node.items() if key != "_target_"})


def row_key(config: dict[str, Any]) -> RowKey:
    """A run's row: its segmenter's display name (and the split reflected on), its extraction
    mode, and its backbone for an LLM row."""
    segmenter = config.get("segmenter", {})
    cls = str(segmenter.get("_target_", "?")).rsplit(".", 1)[-1]
    name = SEGMENTER_NAMES.get(cls, cls)
    if (reflection := reflection_config(config)) is not None:
        name += f" + reflection ({DATASETS.get(reflection.dataset, reflection.dataset)} "
        name += f"{reflection.split})"
    mode = str(segmenter.get("extraction", "lite"))
    backbone = str(config.get("backbone", {}).get("name", "?")) if mode == "llm" else ""
    return RowKey(name, mode, backbone)


def measure_run(directory: Path, config: dict[str, Any], data_dir: Path, seed: int) -> MeasuredCell:
    """Rescore one run's labels against the references, in the split's order."""
    dataset = config["dataset"]["name"]
    references = load_segmentation(dataset, config["dataset"]["split"], data_dir)
    records = {str(record["id"]): record for record in read_records(directory / "labels.jsonl")}
    if unknown := set(records) - {d.dialogue_id for d in references}:
        raise TableError(f"{directory}: ids not in {dataset}: {sorted(unknown)[:5]}")
    scored = [d for d in references if d.dialogue_id in records]
    if not scored:
        raise TableError(f"{directory}: no labelled dialogue")
    ordered = [records[d.dialogue_id] for d in scored]
    total = total_cost(ordered)
    fallen = [record for record in ordered if fell_back(record)]
    named = {str(r["details"]["fallback"]) for r in fallen if "fallback" in r.get("details", {})}
    training = directory / "training.json"
    return MeasuredCell(
        key=row_key(config),
        dataset=dataset,
        n=len(scored),
        n_split=len(references),
        scores=summarize(scored, [record["labels"] for record in ordered], seed),
        cost={key: total[key] / len(ordered) for key in ("llm_calls", *TOKENS)}
        | {"fallbacks": sum(total["fallbacks"].values())},
        run_dir=directory,
        fallback_dialogues=len(fallen),
        substitutes=tuple(sorted(named)),
        reflection=reflection_config(config),
        training=json.loads(training.read_text()) if training.exists() else None,
        segmenter_node=dict(config.get("segmenter", {})),
    )


def collect(runs_dir: Path, data_dir: Path, seed: int) -> list[MeasuredCell]:
    """One cell per row and dataset from the finished test-split runs under ``runs_dir``: the
    run with the most dialogues; two as large with different configs are an error."""
    chosen: dict[tuple[RowKey, str], tuple[MeasuredCell, dict[str, Any]]] = {}
    for directory, config in run_configs(runs_dir).items():
        if config.get("dataset", {}).get("split") != "test":
            continue
        if not is_finished(directory):
            print(f"warning: skipping unfinished run {directory}", file=sys.stderr)
            continue
        cell = measure_run(directory, config, data_dir, seed)
        if (slot := (cell.key, cell.dataset)) in chosen:
            other, other_config = chosen[slot]
            if other.n == cell.n and other_config != config:
                raise TableError(
                    f"runs {other.run_dir} and {directory} both give row {cell.key.label!r} "
                    f"on {cell.dataset} with {cell.n} dialogues but differ in config; remove one"
                )
            if other.n >= cell.n:
                continue
        chosen[slot] = (cell, config)
    if not chosen:
        raise TableError(f"no finished test-split segmentation run under {runs_dir}")
    names = list(SEGMENTER_NAMES.values())

    def order(cell: MeasuredCell) -> tuple[int, bool, int, str]:
        base = cell.key.label.split(" + ")[0]
        rank = names.index(base) if base in names else len(names)
        return list(DATASETS).index(cell.dataset), cell.key.mode != "lite", rank, cell.key.label

    return sorted((cell for cell, _ in chosen.values()), key=order)


@cache
def configured_segmenter(name: str) -> dict[str, Any]:
    """The resolved ``segmenter`` node that ``segmenter=NAME`` gives the segmentation runner."""
    node = OmegaConf.to_container(
        compose_config([f"segmenter={name}"], config_name="segment").segmenter, resolve=True
    )
    assert isinstance(node, dict)
    return node


def published_counterpart(cell: MeasuredCell, quoted: Sequence[QuotedRow]) -> QuotedRow | None:
    """The quoted row measuring what ``cell`` measures, on its dataset, or None: the row's config
    is the run's segmenter config unchanged, on the whole test set and, for an LLM row, on the
    row's backbone."""
    if cell.n != cell.n_split:  # a subset's mean is not the published full-set number
        return None
    for row in quoted:
        name = row.segmenter_config
        if name is None or cell.dataset not in row.scores:
            continue
        if cell.key.mode == "llm" and SAME_MODEL.get(row.backbone) != cell.key.backbone:
            continue
        if configured_segmenter(name) == cell.segmenter_node:
            return row
    return None


def quoted_name(printed: str) -> str:
    """A published group or row as the table names it: ``Unsupervised Methods`` →
    ``Unsupervised``, the paper's own ``ES-Mem (Ours)`` → ``ES-Mem``."""
    return printed.removesuffix(" Methods").removesuffix(" (Ours)")


def footnotes(seed: int) -> Footnotes:
    """The notes after the tables, each under the key the headers mark."""
    facts = {"share": FALLBACK_MARK_SHARE, "seed": seed}
    keys = ("fallback", "mode", "metrics", "published")
    return Footnotes([(key, note(f"segmentation.{key}", **facts)) for key in keys])


def measured_table(
    dataset: str, rows: Sequence[MeasuredCell], notes: Footnotes, quoted: Sequence[QuotedRow] = ()
) -> Table:
    """One dataset's measured rows (``notes``: the footnotes its headers mark), each paired one
    followed by its ``↳ published`` line (:func:`published_counterpart` among ``quoted``): the
    published value of each metric, Δ = measured − published beside it."""
    mark = notes.mark
    header = [f"Segmenter{mark('fallback')}", f"Mode{mark('mode')}", "Backbone", "n"]
    header += [f"Pk ↓{mark('metrics')}", "WD ↓", "F1 ↑", "Score ↑"]
    header += ["LLM calls", "Tokens (in/out)", "Fell back"]
    body = []
    for c in rows:
        llm = c.key.mode == "llm"
        body.append(
            [
                f"**{c.method}**" if c.marked else c.method,
                c.key.mode,
                c.key.backbone or DASH,
                f"{c.n}" if c.n == c.n_split else f"{c.n} *subset*",
                *(interval(c.scores, m) for m in TABLE_METRICS),
                f"{c.cost['llm_calls']:.1f}" if llm else "0",
                f"{c.cost['prompt_tokens']:.0f} / {c.cost['completion_tokens']:.0f}"
                if llm
                else DASH,
                f"{c.fallback_dialogues}/{c.n}",
            ]
        )
        if (row := published_counterpart(c, quoted)) is not None:
            printed = row.scores[c.dataset]
            name = note(
                "segmentation.published_line",
                mark=mark("published"),
                row=quoted_name(row.row),
                source=row.source,
            )
            deltas = [(printed[m], c.scores[m] - printed[m]) for m in TABLE_METRICS]
            cells = [f"{value:.3f} (Δ {signed(delta)})" for value, delta in deltas]
            body.append([name, "quoted", DASH, DASH, *cells, DASH, DASH, DASH])
    title = note("segmentation.dataset_title", dataset=DATASETS[dataset], n=rows[0].n_split)
    return Table(header, body, title=title)


def interval(scores: dict[str, Any], metric: str) -> str:
    """``0.457 [0.448, 0.466]``: a mean and its 95% interval."""
    low, high = scores["ci95"][metric]
    return f"{scores[metric]:.3f} [{low:.3f}, {high:.3f}]"


def signed(value: float) -> str:
    """``+0.012`` / ``−0.003`` (a true minus sign), ``±0.000`` for a difference that rounds to 0."""
    text = f"{abs(value):.3f}"
    return f"±{text}" if text == "0.000" else f"{'+' if value > 0 else '−'}{text}"


def quoted_table(quoted: Sequence[QuotedRow]) -> Table:
    """The published rows, every dataset's four scores, "-" where the paper prints none, a Score
    its own row's parts do not give marked :data:`INCONSISTENT_MARK` with a note."""
    header = ["Group", "Method"]
    header += [f"{name} {m}" for name in DATASETS.values() for m in SEGMENTATION_METRICS]
    body, inconsistent = [], []
    for row in quoted:
        values = [quoted_name(row.group), quoted_name(row.row)]
        recomputed = row.inconsistent_scores()
        for dataset, name in DATASETS.items():
            scores = row.scores.get(dataset)
            cells = [f"{scores[m]:.3f}" for m in TABLE_METRICS] if scores else ["-"] * 4
            if dataset in recomputed:
                cells[-1] += INCONSISTENT_MARK
                inconsistent.append(
                    note(
                        "segmentation.inconsistent",
                        mark=INCONSISTENT_MARK,
                        row=quoted_name(row.row),
                        dataset=name,
                        printed=scores["score"],
                        parts=recomputed[dataset],
                    )
                )
            values += cells
        body.append(values)
    sources = ", ".join(dict.fromkeys(f"{row.paper}, {row.table}" for row in quoted))
    return Table(
        header,
        body,
        title=note("segmentation.quoted_title", sources=sources),
        caption=[
            note("segmentation.quoted_caption"),
            note("segmentation.quoted_checked", mark=INCONSISTENT_MARK),
        ],
        notes=inconsistent,
    )


def reflection_blocks(cells: Sequence[MeasuredCell]) -> list[Table | list[str]]:
    """What each reflection row learned, on what, beside the paper's setting: a table, then each
    row's rubric, an item a table-safe line of at most 200 characters (none: no blocks)."""
    rows = [c for c in cells if c.reflection is not None]
    records = []
    for c in rows:
        assert c.reflection is not None
        got = (c.training or {}).get
        reflections = sorted(got("reflections", {}).items())
        records.append(
            {
                "Row": c.method,
                "Tested on": DATASETS[c.dataset],
                "n": c.n,
                "Training dialogues (fell back)": (
                    f"{got('training_dialogues', '?')} ({got('zero_shot_fallbacks', '?')})"
                ),
                "Hard examples (fell back)": (
                    f"{len(got('hard_examples', {}))} ({got('hard_example_fallbacks', '?')})"
                ),
                "Rounds × batch": f"{got('rounds', '?')} × {c.reflection.batch_size}",
                "Reflections": ", ".join(f"{kind} {count}" for kind, count in reflections) or DASH,
                "Rubric items learned": len(c.rubric),
            }
        )
    caption = [note("segmentation.reflection_caption")]
    title = note("segmentation.reflection_title")
    blocks: list[Table | list[str]] = [Table.from_records(records, title=title, caption=caption)]
    for c in rows:
        flat = [" ".join(item.split()).replace("|", "/") for item in c.rubric]
        items = [
            f"{k}. {text[:199] + '…' if len(text) > 200 else text}"
            for k, text in enumerate(flat, 1)
        ]
        heading = note("segmentation.rubric", row=c.key.label, dataset=DATASETS[c.dataset])
        blocks.append([heading, *(items or ["(none)"])])
    return blocks if rows else []


def csv_rows(cells: Sequence[MeasuredCell], quoted: Sequence[QuotedRow]) -> list[dict[str, Any]]:
    """Measured rows (``source = measured``) followed by the quoted Table 4 rows."""
    rows = []
    for c in cells:
        reflection = c.reflection
        row: dict[str, Any] = {
            "source": "measured",
            "method": c.method,
            "mode": c.key.mode,
            "backbone": c.key.backbone,
            "dataset": c.dataset,
            "split": "test",
            "n": c.n,
            "n_split": c.n_split,
            "llm_calls_per_dialogue": round(c.cost["llm_calls"], 3),
            "prompt_tokens_per_dialogue": round(c.cost["prompt_tokens"], 1),
            "completion_tokens_per_dialogue": round(c.cost["completion_tokens"], 1),
            "fallbacks": c.cost["fallbacks"],
            "dialogues_with_fallback": c.fallback_dialogues,
            "reflection_training": f"{reflection.dataset}/{reflection.split}" if reflection else "",
            "rubric_items": len(c.rubric) if reflection else "",
            "run_dir": shown_path(c.run_dir),
        }
        for metric in METRIC_NAMES:
            low, high = c.scores["ci95"][metric]
            row |= {
                metric: round(c.scores[metric], 6),
                f"{metric}_low": low,
                f"{metric}_high": high,
            }
        if (counterpart := published_counterpart(c, quoted)) is not None:
            printed = counterpart.scores[c.dataset]
            row["published_row"] = f"{counterpart.source}: {quoted_name(counterpart.row)}"
            for metric in TABLE_METRICS:
                row[f"{metric}_published"] = printed[metric]
                row[f"{metric}_delta"] = round(c.scores[metric] - printed[metric], 6)
        rows.append(row)
    for published in quoted:
        recomputed = published.inconsistent_scores()
        rows += [
            {
                "source": f"quoted: {published.source}",
                "group": quoted_name(published.group),
                "method": quoted_name(published.row),
                "dataset": dataset,
                "split": "test",
                **{metric: scores[metric] for metric in TABLE_METRICS},
                "score_from_parts": score_from_parts(scores),
                "score_inconsistent": dataset in recomputed,
            }
            for dataset, scores in published.scores.items()
        ]
    return rows


def write_tables(
    cells: Sequence[MeasuredCell],
    out: Path,
    seed: int,
    title: str = DEFAULT_TITLE,
    quoted: Sequence[QuotedRow] | None = None,
) -> tuple[Path, Path]:
    """Write ``<out>.md`` (measured sections per dataset, reflection details, the quoted Table 4,
    the notes) and ``<out>.csv`` (its lines end in ``\\r\\n``, as :mod:`csv`'s default dialect
    writes them); return their paths. ``quoted`` defaults to :data:`QUOTED_PAPER`'s rows."""
    quoted = published_segmentation(QUOTED_PAPER) if quoted is None else quoted
    notes = footnotes(seed)
    blocks: list[Table | Sequence[str]] = [[note("segmentation.measured_heading")]]
    for dataset in DATASETS:
        if rows := [c for c in cells if c.dataset == dataset]:
            blocks.append(measured_table(dataset, rows, notes, quoted).markdown_lines(level=3))
    blocks += reflection_blocks(cells)
    if quoted:
        blocks.append(quoted_table(quoted))
    document = Document(title, [note("segmentation.setting")], blocks, notes)
    out.parent.mkdir(parents=True, exist_ok=True)
    markdown, table = out.with_suffix(".md"), out.with_suffix(".csv")
    markdown.write_text(document.to_markdown(), encoding="utf-8")
    rows = Table.from_records(csv_rows(cells, quoted), CSV_FIELDS)
    table.write_text(rows.to_csv(line_end="\r\n"), encoding="utf-8", newline="")
    return markdown, table


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: collect the runs, write the md and csv, print the md."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tables.segmentation", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--runs", type=Path, default=REPO_ROOT / "results/runs/segmentation")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results/table_segmentation")
    parser.add_argument("--data-dir", default=None, help="datasets (default: $MEMBENCH_DATA)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--title", default=DEFAULT_TITLE, help="the markdown table's heading")
    args = parser.parse_args(argv)
    try:
        cells = collect(args.runs, resolve_data_dir(args.data_dir), args.seed)
        quoted = published_segmentation(QUOTED_PAPER)
    except (TableError, DataMissingError, PublishedSegmentationError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    markdown, _ = write_tables(cells, args.out, args.seed, args.title, quoted)
    print(markdown.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
