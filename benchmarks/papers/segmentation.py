"""The papers' published segmentation numbers (ES-Mem's Table 4, from
``results/published/<paper>.yaml``), gathered into the rows a segmentation table quotes beside
its measured ones; only the one paper's file is read (parsing all five takes seconds).

A row's dataset holds all four scores or is not quoted; Score is printed, not recomputed, and
:meth:`QuotedRow.inconsistent_scores` names where it disagrees with its own parts (readings:
docs/tables.md, "Segmentation: two TextTilings, and the published rows")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.data.segmentation import SEGMENTATION_DATASETS
from benchmarks.registry import PUBLISHED_DIR, papers, published_files

#: Published segmentation metric names → the harness's (:mod:`benchmarks.metrics.segmentation`),
#: in the order tables print them.
SEGMENTATION_METRICS = {"Pk": "pk", "WD": "wd", "F1": "f1", "Score": "score"}
#: Largest gap between a printed Score and the one its printed Pk, WD and F1 give that rounding
#: to three decimals explains (each part ±0.0005 moves Score by at most 0.0005, the printed
#: Score ±0.0005), with a margin.
SCORE_TOLERANCE = 0.0015


class PublishedSegmentationError(ValueError):
    """A published file's segmentation cells do not make whole rows; the message says where."""


@dataclass(frozen=True)
class QuotedRow:
    """One published segmentation row: its scores per dataset, each in [0, 1] as printed."""

    paper: str
    table: str
    group: str
    row: str
    #: dataset → harness metric (:data:`SEGMENTATION_METRICS`' values) → value.
    scores: dict[str, dict[str, float]]
    #: The harness config standing for the row (``segmenter=NAME``), or None.
    config: str | None = None
    #: The row's ``setting.backbone`` as printed (``Qwen2.5-3B``, ``none (unsupervised; ...)``).
    backbone: str = ""

    @property
    def source(self) -> str:
        """``ES-Mem Table 4``: where the numbers are quoted from."""
        return f"{self.paper} {self.table}"

    @property
    def segmenter_config(self) -> str | None:
        """The ``conf/segmenter`` name the row's config picks (``texttiling_superdialseg``)."""
        group, _, name = (self.config or "").partition("=")
        return name if group == "segmenter" and name else None

    def inconsistent_scores(self) -> dict[str, float]:
        """Dataset → the Score the row's own Pk, WD and F1 give, where the printed Score differs
        from it by more than :data:`SCORE_TOLERANCE`.

        >>> QuotedRow("P", "T", "G", "BERT", {"x": {"pk": .214, "wd": .225, "f1": .725,
        ...     "score": .745}}).inconsistent_scores()
        {'x': 0.75275}
        """
        return {
            dataset: recomputed
            for dataset, scores in self.scores.items()
            if abs((recomputed := score_from_parts(scores)) - scores["score"]) > SCORE_TOLERANCE
        }


def score_from_parts(scores: dict[str, float]) -> float:
    """SuperDialSeg's Score, (2·F1 + (1 − Pk) + (1 − WD)) / 4, of printed parts (5 decimals).

    >>> score_from_parts({"pk": 0.470, "wd": 0.493, "f1": 0.245})
    0.38175
    """
    return round((2 * scores["f1"] + (1 - scores["pk"]) + (1 - scores["wd"])) / 4, 5)


def is_segmentation(result: dict[str, Any]) -> bool:
    """Whether a published cell is a segmentation score on a segmentation dataset."""
    setting = result["setting"]
    return setting.get("dataset") in SEGMENTATION_DATASETS and setting.get("metric") in (
        SEGMENTATION_METRICS
    )


def quoted_rows(paper: str, document: dict[str, Any]) -> list[QuotedRow]:
    """The segmentation rows of ``paper``'s published file (``paper``: its id, ``esmem``)."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for result in filter(is_segmentation, document["results"]):
        setting = result["setting"]
        key = (result["table"], result["row"])
        found = cells.setdefault(
            key, {"groups": set(), "scores": {}, "configs": set(), "backbones": set()}
        )
        found["groups"].add(setting.get("group"))
        found["configs"].add(result.get("config"))
        found["backbones"].add(str(setting.get("backbone", "")))
        metric = SEGMENTATION_METRICS[setting["metric"]]
        found["scores"].setdefault(setting["dataset"], {})[metric] = float(result["value"])
    rows = []
    for (table, row), found in cells.items():
        where = f"results/published/{papers()[paper].published.name}, {table}, row {row!r}"
        if len(found["groups"]) != 1 or None in found["groups"]:
            raise PublishedSegmentationError(f"{where}: one setting.group expected, got {found}")
        for name, key in (("config", "configs"), ("setting.backbone", "backbones")):
            if len(found[key]) != 1:
                raise PublishedSegmentationError(f"{where}: one {name} expected, got {found[key]}")
        for dataset, scores in found["scores"].items():
            if set(scores) != set(SEGMENTATION_METRICS.values()):
                raise PublishedSegmentationError(f"{where}: {dataset} has only {sorted(scores)}")
        (group,), (config,), (backbone,) = found["groups"], found["configs"], found["backbones"]
        rows.append(
            QuotedRow(papers()[paper].name, table, group, row, found["scores"], config, backbone)
        )
    return rows


def read_paper(paper: str, directory: Path = PUBLISHED_DIR) -> dict[str, Any]:
    """``paper``'s published file in ``directory``, the one whose header names its id."""
    found = published_files(directory).get(paper)
    if found is None:
        raise PublishedSegmentationError(f"no published file of paper {paper!r} in {directory}")
    return yaml.safe_load(found[0].read_text(encoding="utf-8"))


def published_segmentation(
    paper: str = "esmem", directory: Path = PUBLISHED_DIR
) -> list[QuotedRow]:
    """The published segmentation rows of ``paper`` (a :func:`benchmarks.registry.papers` id)."""
    return quoted_rows(paper, read_paper(paper, directory))
