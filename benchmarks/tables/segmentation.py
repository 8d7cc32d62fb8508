"""``python -m benchmarks.tables.segmentation``: segmentation runs -> ``table_segmentation.{md,csv}``.

The table is built from result files only (STYLE.md): for every finished run under
``results/runs/segmentation`` on a test split, the predicted labels in ``labels.jsonl`` are
rescored against the dataset's references, with the same scorer and bootstrap as the runner.
Beside the measured rows, ES-Mem's Table 4 is quoted verbatim in its own section (and with
``source = quoted`` in the csv), its numbers read from ``results/published/es-mem.yaml``
(:mod:`benchmarks.papers.segmentation`); quoted numbers are never mixed into a measured row.

Readings taken:

* **Rows** are segmenter × extraction mode × backbone (LLM rows only) × reflection. When several
  finished runs fall on one row and dataset, the one with the most dialogues is used (a full run
  supersedes a subset run of the same segmenter); two candidates with equally many dialogues but
  different configs are an error naming the run directories, never a silent pick.
* **Subsets**: a row that covers fewer dialogues than the test set is marked ``subset`` with
  its ``n``; its numbers are not comparable with full-set rows.
* **Intervals**: 95% percentile bootstrap over dialogues, seed ``--seed`` (default 0).
* **Fallbacks**: a dialogue fell back when its record counts a fallback in some LLM stage
  (:func:`benchmarks.pipeline.segment.fell_back`). A row where that holds for at least
  :data:`FALLBACK_MARK_SHARE` of its dialogues has its method cell (md and csv) marked FALLBACK,
  with the count and the substitute the records name (SeCom: fixed chunks of 3 utterances): its
  numbers are mostly the substitute's, not the method's.
* **Reflection** rows (SeCom, Appendix A.1) are named with the split their rubric was learned
  on; a section after the measured tables gives each one's training sample, rounds and the
  rubric items learned (the run's ``training.json``), beside the paper's setting.
* **Published beside measured**: a measured row is paired with a quoted row when the quoted
  row's ``config`` (``segmenter=NAME``) is the segmenter config the run used, unchanged (the
  run's resolved ``segmenter`` node equals ``conf/segmenter/NAME.yaml``'s), the run covers the
  whole test set, and, for an LLM row, the run's backbone is the published row's
  (:data:`~benchmarks.papers.models.SAME_MODEL`).
  The pair is printed as a ``↳ published`` line under the measured row, each metric with
  Δ = measured − published (csv: ``*_published``, ``*_delta``). So the reproduced SuperDialSeg
  TextTiling meets Table 4's TextTiling; ES-Mem's row (Qwen2.5-3B) meets only an ``esmem`` run
  on qwen2.5-3b, SeCom's (backbone not stated) none; lite rows never.
* **Quoted Scores** whose printed value is not (2·F1 + (1 − Pk) + (1 − WD)) / 4 of the same
  row's printed parts within rounding are marked † with both values
  (:meth:`~benchmarks.papers.segmentation.QuotedRow.inconsistent_scores`).
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
from benchmarks.pipeline.segment import fell_back, summarize
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
SEGMENTER_NAMES = {
    "TextTilingSegmenter": "TextTiling (utterance-level, dev-tuned)",
    "SuperDialSegTextTilingSegmenter": "TextTiling (SuperDialSeg: NLTK w=10, k=6)",
    "EmbeddingSegmenter": "Embedding similarity",
    "ESMemSegmenter": "ES-Mem segmentation",
    "SeComSegmenter": "SeCom segmentation",
}


class TableError(ValueError):
    """The runs found cannot make one table; the message names the runs."""


@dataclass(frozen=True)
class RowKey:
    """Where a run lands in the table."""

    segmenter: str
    mode: str
    backbone: str

    @property
    def label(self) -> str:
        """The row's display name."""
        return self.segmenter


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
        """The method cell: the row's name, or that name marked FALLBACK with the count.

        The substitute is the one the records name, when they name exactly one.
        """
        if not self.marked:
            return self.key.label
        substitute = self.substitutes[0] if len(self.substitutes) == 1 else "a non-LLM substitute"
        return note(
            "segmentation.fallback_cell",
            label=self.key.label,
            fell=self.fallback_dialogues,
            n=self.n,
            substitute=substitute,
            segmenter=self.key.segmenter.split(" + ")[0],
        )


def reflection_config(config: dict[str, Any]) -> ReflectionConfig | None:
    """A run's reflection settings when reflection is on (``None`` otherwise)."""
    node = config.get("segmenter", {}).get("reflection") or {}
    if not node.get("enabled"):
        return None
    return ReflectionConfig(**{key: value for key, value in node.items() if key != "_target_"})


def row_key(config: dict[str, Any]) -> RowKey:
    """Segmenter display name (plus the split reflected on), extraction mode, and backbone for
    LLM rows."""
    segmenter = config.get("segmenter", {})
    cls = str(segmenter.get("_target_", "?")).rsplit(".", 1)[-1]
    name = SEGMENTER_NAMES.get(cls, cls)
    reflection = reflection_config(config)
    if reflection is not None:
        source = DATASETS.get(reflection.dataset, reflection.dataset)
        name += f" + reflection ({source} {reflection.split})"
    mode = str(segmenter.get("extraction", "lite"))
    backbone = str(config.get("backbone", {}).get("name", "?")) if mode == "llm" else ""
    return RowKey(name, mode, backbone)


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    """Records of a run's ``labels.jsonl`` by dialogue id."""
    return {str(record["id"]): record for record in read_records(path)}


def measure_run(directory: Path, config: dict[str, Any], data_dir: Path, seed: int) -> MeasuredCell:
    """Rescore one run's labels against the references, in the split's order."""
    dataset = config["dataset"]["name"]
    references = load_segmentation(dataset, config["dataset"]["split"], data_dir)
    records = read_labels(directory / "labels.jsonl")
    unknown = set(records) - {d.dialogue_id for d in references}
    if unknown:
        raise TableError(f"{directory}: ids not in {dataset}: {sorted(unknown)[:5]}")
    scored = [d for d in references if d.dialogue_id in records]
    if not scored:
        raise TableError(f"{directory}: no labelled dialogue")
    predictions = [records[d.dialogue_id]["labels"] for d in scored]
    costs = [records[d.dialogue_id]["cost"] for d in scored]
    per_dialogue = {
        key: sum(cost[key] for cost in costs) / len(costs)
        for key in ("llm_calls", "prompt_tokens", "completion_tokens")
    }
    per_dialogue["fallbacks"] = sum(sum(cost["fallbacks"].values()) for cost in costs)
    fallen = [records[d.dialogue_id] for d in scored if fell_back(records[d.dialogue_id])]
    training_path = directory / "training.json"
    return MeasuredCell(
        key=row_key(config),
        dataset=dataset,
        n=len(scored),
        n_split=len(references),
        scores=summarize(scored, predictions, seed),
        cost=per_dialogue,
        run_dir=directory,
        fallback_dialogues=len(fallen),
        substitutes=substitutes(fallen),
        reflection=reflection_config(config),
        training=json.loads(training_path.read_text()) if training_path.exists() else None,
        segmenter_node=dict(config.get("segmenter", {})),
    )


def substitutes(records: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The substitutes that fallen-back records name in their details (SeCom names its chunks)."""
    named = {str(r["details"]["fallback"]) for r in records if "fallback" in r.get("details", {})}
    return tuple(sorted(named))


def collect(runs_dir: Path, data_dir: Path, seed: int) -> list[MeasuredCell]:
    """One cell per row and dataset from the finished test-split runs under ``runs_dir``."""
    chosen: dict[tuple[RowKey, str], tuple[MeasuredCell, dict[str, Any]]] = {}
    for directory, config in run_configs(runs_dir).items():
        if config.get("dataset", {}).get("split") != "test":
            continue
        if not is_finished(directory):
            print(f"warning: skipping unfinished run {directory}", file=sys.stderr)
            continue
        cell = measure_run(directory, config, data_dir, seed)
        slot = (cell.key, cell.dataset)
        if slot in chosen:
            other, other_config = chosen[slot]
            if other.n == cell.n and other_config != config:
                raise TableError(
                    f"runs {other.run_dir} and {directory} both give row {cell.key.label!r} on "
                    f"{cell.dataset} with {cell.n} dialogues but differ in config; remove one"
                )
            if other.n >= cell.n:
                continue
        chosen[slot] = (cell, config)
    if not chosen:
        raise TableError(f"no finished test-split segmentation run under {runs_dir}")
    cells = [cell for cell, _ in chosen.values()]
    return sorted(cells, key=_display_order)


def _display_order(cell: MeasuredCell) -> tuple[int, bool, int, str]:
    """Table 4's dataset order; lite rows first; segmenters in :data:`SEGMENTER_NAMES` order."""
    names = list(SEGMENTER_NAMES.values())
    base = cell.key.segmenter.split(" + ")[0]
    rank = names.index(base) if base in names else len(names)
    return list(DATASETS).index(cell.dataset), cell.key.mode != "lite", rank, cell.key.label


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


def _signed(value: float) -> str:
    """``+0.012`` / ``−0.003`` (a true minus sign), ``±0.000`` for a difference that rounds to 0."""
    text = f"{abs(value):.3f}"
    return f"±{text}" if text == "0.000" else f"{'+' if value > 0 else '−'}{text}"


def _cell(scores: dict[str, Any], metric: str) -> str:
    low, high = scores["ci95"][metric]
    return f"{scores[metric]:.3f} [{low:.3f}, {high:.3f}]"


DEFAULT_TITLE = "Dialogue topic segmentation (test sets)"
#: The marker of a quoted Score that its own row's Pk, WD and F1 do not give.
INCONSISTENT_MARK = "†"


def footnotes(seed: int) -> Footnotes:
    """The notes after the tables, each under the key the headers mark."""
    facts = {"fallback": {"share": FALLBACK_MARK_SHARE}, "metrics": {"seed": seed}}
    keys = ("fallback", "mode", "metrics", "published")
    return Footnotes([(key, note(f"segmentation.{key}", **facts.get(key, {}))) for key in keys])


def render_markdown(
    cells: Sequence[MeasuredCell], seed: int, title: str, quoted: Sequence[QuotedRow]
) -> str:
    """Measured sections per dataset, reflection details, then the quoted Table 4 (``quoted``:
    :func:`benchmarks.papers.segmentation.published_segmentation`); the setting in one line
    under the title, the rest in numbered notes after the tables."""
    notes = footnotes(seed)
    blocks: list[Table | list[str]] = [["## Measured (this harness)"]]
    for dataset in DATASETS:
        rows = [c for c in cells if c.dataset == dataset]
        if rows:
            blocks.append(measured_table(dataset, rows, notes, quoted).markdown_lines(level=3))
    blocks += reflection_blocks(cells)
    if quoted:
        blocks.append(quoted_table(quoted))
    return Document(title, [note("segmentation.setting")], blocks, notes).to_markdown()


def measured_table(
    dataset: str,
    rows: Sequence[MeasuredCell],
    notes: Footnotes,
    quoted: Sequence[QuotedRow] = (),
) -> Table:
    """One dataset's measured rows (``notes``: the footnotes its headers mark), each paired one
    followed by its ``↳ published`` line (:func:`published_counterpart` among ``quoted``)."""
    mark = notes.mark
    header = [f"Segmenter{mark('fallback')}", f"Mode{mark('mode')}", "Backbone", "n"]
    header += [f"Pk ↓{mark('metrics')}", "WD ↓", "F1 ↑", "Score ↑"]
    header += ["LLM calls", "Tokens (in/out)", "Fell back"]
    body = []
    for c in rows:
        llm = c.key.mode == "llm"
        tokens = f"{c.cost['prompt_tokens']:.0f} / {c.cost['completion_tokens']:.0f}"
        body.append(
            [
                f"**{c.method}**" if c.marked else c.method,
                c.key.mode,
                c.key.backbone or "—",
                f"{c.n}" if c.n == c.n_split else f"{c.n} *subset*",
                *(_cell(c.scores, m) for m in TABLE_METRICS),
                f"{c.cost['llm_calls']:.1f}" if llm else "0",
                tokens if llm else "—",
                f"{c.fallback_dialogues}/{c.n}",
            ]
        )
        published = published_counterpart(c, quoted)
        if published is not None:
            body.append(published_line(c, published, mark("published")))
    title = f"{DATASETS[dataset]} (test, {rows[0].n_split} dialogues)"
    return Table(header, body, title=title)


def published_line(cell: MeasuredCell, row: QuotedRow, marker: str = "") -> list[str]:
    """The ``↳ published`` line under ``cell``: ``row``'s value of each metric, Δ beside it."""
    printed = row.scores[cell.dataset]
    metrics = [
        f"{printed[m]:.3f} (Δ {_signed(cell.scores[m] - printed[m])})" for m in TABLE_METRICS
    ]
    name = f"↳ published{marker}: {quoted_name(row.row)} ({row.source})"
    return [name, "quoted", "—", "—", *metrics, "—", "—", "—"]


def quoted_table(quoted: Sequence[QuotedRow]) -> Table:
    """The published rows, every dataset's four scores, "-" where the paper prints none."""
    header = ["Group", "Method"]
    header += [f"{name} {m}" for name in DATASETS.values() for m in SEGMENTATION_METRICS]
    body, inconsistent = [], []
    for row in quoted:
        values = [quoted_name(row.group), quoted_name(row.row)]
        recomputed = row.inconsistent_scores()
        for dataset in DATASETS:
            scores = row.scores.get(dataset)
            cells = [f"{scores[m]:.3f}" for m in TABLE_METRICS] if scores else ["-"] * 4
            if dataset in recomputed:
                cells[-1] += INCONSISTENT_MARK
                inconsistent.append(
                    note(
                        "segmentation.inconsistent",
                        mark=INCONSISTENT_MARK,
                        row=quoted_name(row.row),
                        dataset=DATASETS[dataset],
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


def quoted_name(printed: str) -> str:
    """A published group or row as the table names it: ``Unsupervised Methods`` →
    ``Unsupervised``, the paper's own ``ES-Mem (Ours)`` → ``ES-Mem``."""
    return printed.removesuffix(" Methods").removesuffix(" (Ours)")


def reflection_blocks(cells: Sequence[MeasuredCell]) -> list[Table | list[str]]:
    """What each reflection row learned, on what, beside the paper's setting: a table, then each
    row's rubric (none: no blocks)."""
    rows = [c for c in cells if c.reflection is not None]
    if not rows:
        return []
    header = ["Row", "Tested on", "n", "Training dialogues (fell back)"]
    header += ["Hard examples (fell back)", "Rounds × batch", "Reflections", "Rubric items learned"]
    body = []
    for c in rows:
        assert c.reflection is not None
        training = c.training or {}
        hard = training.get("hard_examples", {})
        body.append(
            [
                c.method,
                DATASETS[c.dataset],
                c.n,
                f"{training.get('training_dialogues', '?')} ({training.get('zero_shot_fallbacks', '?')})",
                f"{len(hard)} ({training.get('hard_example_fallbacks', '?')})",
                f"{training.get('rounds', '?')} × {c.reflection.batch_size}",
                _counts(training.get("reflections", {})),
                len(rubric_items(c)),
            ]
        )
    caption = [note("segmentation.reflection_caption")]
    blocks: list[Table | list[str]] = [
        Table(header, body, title="Reflection (SeCom Appendix A.1)", caption=caption)
    ]
    for c in rows:
        items = [f"{k}. {_shorten(item)}" for k, item in enumerate(rubric_items(c), 1)]
        heading = note("segmentation.rubric", row=c.key.label, dataset=DATASETS[c.dataset])
        blocks.append([heading, *(items or ["(none)"])])
    return blocks


def rubric_items(cell: MeasuredCell) -> list[str]:
    """The rubric a reflection run learned (its ``training.json``)."""
    return list(((cell.training or {}).get("guidance") or {}).get("rubric", []))


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {number}" for kind, number in sorted(counts.items())) or "—"


def _shorten(text: str, limit: int = 200) -> str:
    """One table-safe line of at most ``limit`` characters."""
    flat = " ".join(text.split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


CSV_FIELDS = (
    "source", "group", "method", "mode", "backbone", "dataset", "split", "n", "n_split",
    *(f"{m}{suffix}" for m in METRIC_NAMES for suffix in ("", "_low", "_high")),
    "llm_calls_per_dialogue", "prompt_tokens_per_dialogue", "completion_tokens_per_dialogue",
    "fallbacks", "dialogues_with_fallback", "reflection_training", "rubric_items", "run_dir",
    "published_row", *(f"{m}_{kind}" for m in TABLE_METRICS for kind in ("published", "delta")),
    "score_from_parts", "score_inconsistent",
)  # fmt: skip


def csv_rows(cells: Sequence[MeasuredCell], quoted: Sequence[QuotedRow]) -> list[dict[str, Any]]:
    """Measured rows (``source = measured``) followed by the quoted Table 4 rows."""
    rows = []
    for c in cells:
        row: dict[str, Any] = {
            "source": "measured",
            "group": "",
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
            "reflection_training": (
                f"{c.reflection.dataset}/{c.reflection.split}" if c.reflection else ""
            ),
            "rubric_items": len(rubric_items(c)) if c.reflection else "",
            "run_dir": shown_path(c.run_dir),
        }
        for metric in METRIC_NAMES:
            low, high = c.scores["ci95"][metric]
            row |= {
                metric: round(c.scores[metric], 6),
                f"{metric}_low": low,
                f"{metric}_high": high,
            }
        counterpart = published_counterpart(c, quoted)
        if counterpart is not None:
            printed = counterpart.scores[c.dataset]
            row["published_row"] = f"{counterpart.source}: {quoted_name(counterpart.row)}"
            for metric in TABLE_METRICS:
                row[f"{metric}_published"] = printed[metric]
                row[f"{metric}_delta"] = round(c.scores[metric] - printed[metric], 6)
        rows.append(row)
    for published in quoted:
        recomputed = published.inconsistent_scores()
        for dataset, scores in published.scores.items():
            rows.append(
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
            )
    return rows


def write_tables(
    cells: Sequence[MeasuredCell],
    out: Path,
    seed: int,
    title: str = DEFAULT_TITLE,
    quoted: Sequence[QuotedRow] | None = None,
) -> tuple[Path, Path]:
    """Write ``<out>.md`` and ``<out>.csv`` (its lines end in ``\\r\\n``, as :mod:`csv`'s
    default dialect writes them); return their paths. ``quoted`` defaults to
    :data:`QUOTED_PAPER`'s published rows."""
    quoted = published_segmentation(QUOTED_PAPER) if quoted is None else quoted
    out.parent.mkdir(parents=True, exist_ok=True)
    markdown, table = out.with_suffix(".md"), out.with_suffix(".csv")
    markdown.write_text(render_markdown(cells, seed, title, quoted), encoding="utf-8")
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
