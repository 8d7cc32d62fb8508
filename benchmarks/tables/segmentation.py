"""``python -m benchmarks.tables.segmentation``: segmentation runs -> ``table_segmentation.{md,csv}``.

Built from result files only: each finished run's ``labels.jsonl`` is rescored with the runner's
scorer, and ES-Mem's Table 4 is quoted beside the measured rows, never mixed in. The readings:
docs/tables.md, "Segmentation table: readings taken"."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.data.errors import DataMissingError
from benchmarks.data.paths import REPO_ROOT, resolve_data_dir, shown_path
from benchmarks.metrics.segmentation import METRIC_NAMES
from benchmarks.papers.segmentation import (
    SEGMENTATION_METRICS,
    PublishedSegmentationError,
    QuotedRow,
    published_segmentation,
    score_from_parts,
)
from benchmarks.render import Document, Footnotes, Table
from benchmarks.runs.folders import ReportError
from benchmarks.runs.segmentation import (
    DATASETS,
    FALLBACK_MARK_SHARE,
    MeasuredCell,
    collect,
    published_counterpart,
)
from benchmarks.tables.notes import note

TABLE_METRICS = tuple(SEGMENTATION_METRICS.values())
#: The published file whose segmentation rows the table quotes (``results/published/``).
QUOTED_PAPER = "esmem"
DEFAULT_TITLE = "Dialogue topic segmentation (test sets)"
#: The marker of a quoted Score that its own row's Pk, WD and F1 do not give.
INCONSISTENT_MARK = "†"
DASH = "—"
CSV_FIELDS = (
    "source", "group", "method", "mode", "backbone", "dataset", "split", "n", "n_split",
    *(f"{m}{suffix}" for m in METRIC_NAMES for suffix in ("", "_low", "_high")),
    "llm_calls_per_dialogue", "prompt_tokens_per_dialogue", "completion_tokens_per_dialogue",
    "fallbacks", "dialogues_with_fallback", "reflection_training", "rubric_items", "run_dir",
    "published_row", *(f"{m}_{kind}" for m in TABLE_METRICS for kind in ("published", "delta")),
    "score_from_parts", "score_inconsistent",
)  # fmt: skip


def method_cell(cell: MeasuredCell) -> str:
    """The method cell: the row's name, marked FALLBACK with the count and the substitute the
    records name (when they name exactly one) where :attr:`MeasuredCell.marked`."""
    if not cell.marked:
        return cell.key.label
    one = cell.substitutes[0] if len(cell.substitutes) == 1 else None
    return note(
        "segmentation.fallback_cell",
        label=cell.key.label,
        fell=cell.fallback_dialogues,
        n=cell.n,
        substitute=one or note("segmentation.substitute_unknown"),
        segmenter=cell.key.label.split(" + ")[0],
    )


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
    """One dataset's measured rows, each paired one followed by its ``↳ published`` line (Δ =
    measured − published)."""
    mark = notes.mark
    header = [f"Segmenter{mark('fallback')}", f"Mode{mark('mode')}", "Backbone", "n"]
    header += [f"Pk ↓{mark('metrics')}", "WD ↓", "F1 ↑", "Score ↑"]
    header += ["LLM calls", "Tokens (in/out)", "Fell back", "Run"]
    body = []
    for c in rows:
        llm = c.key.mode == "llm"
        body.append(
            [
                f"**{method_cell(c)}**" if c.marked else method_cell(c),
                c.key.mode,
                c.key.backbone or DASH,
                f"{c.n}" if c.n == c.n_split else f"{c.n} *subset*",
                *(interval(c.scores, m) for m in TABLE_METRICS),
                f"{c.cost['llm_calls']:.1f}" if llm else "0",
                f"{c.cost['prompt_tokens']:.0f} / {c.cost['completion_tokens']:.0f}"
                if llm
                else DASH,
                f"{c.fallback_dialogues}/{c.n}",
                c.run_dir.name,
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
            body.append([name, "quoted", DASH, DASH, *cells, DASH, DASH, DASH, DASH])
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
                "Row": method_cell(c),
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
            "method": method_cell(c),
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
    cells: Sequence[MeasuredCell], out: Path, seed: int, title: str, quoted: Sequence[QuotedRow]
) -> tuple[Path, Path]:
    """Write ``<out>.md`` and ``<out>.csv`` (lines ending in ``\r\n``, :mod:`csv`'s default); return
    their paths."""
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
    except (ReportError, DataMissingError, PublishedSegmentationError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    markdown, _ = write_tables(cells, args.out, args.seed, args.title, quoted)
    print(markdown.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
