"""The papers' published segmentation numbers: the cells of ``results/published/<paper>.yaml``
(a :func:`benchmarks.registry.papers` paper's file, the schema every published cell keeps) on the
segmentation datasets (ES-Mem's Table 4), gathered into the rows a segmentation table quotes
beside its measured ones (``python -m benchmarks.tables.segmentation``). Only the one paper's
file is read: parsing all five takes seconds.

Readings taken:

* **A row** is one ``row`` of one paper's ``table`` as printed (``ES-Mem (Ours)``), in the order
  the file first names it, with its ``setting.group`` (the table section the paper prints it
  under, such as ``Unsupervised Methods``); its datasets in the order the file names them.
* **A row's dataset** holds all four scores or is not quoted (the paper prints "-": ES-Mem has
  no supervised results on DialSeg711); a dataset with some but not all four is an error, as is
  a row whose cells name different groups.
"""

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

    @property
    def source(self) -> str:
        """``ES-Mem Table 4``: where the numbers are quoted from."""
        return f"{self.paper} {self.table}"


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
        found = cells.setdefault(key, {"groups": set(), "scores": {}})
        found["groups"].add(setting.get("group"))
        metric = SEGMENTATION_METRICS[setting["metric"]]
        found["scores"].setdefault(setting["dataset"], {})[metric] = float(result["value"])
    rows = []
    for (table, row), found in cells.items():
        where = f"results/published/{papers()[paper].published.name}, {table}, row {row!r}"
        if len(found["groups"]) != 1 or None in found["groups"]:
            raise PublishedSegmentationError(f"{where}: one setting.group expected, got {found}")
        for dataset, scores in found["scores"].items():
            if set(scores) != set(SEGMENTATION_METRICS.values()):
                raise PublishedSegmentationError(f"{where}: {dataset} has only {sorted(scores)}")
        (group,) = found["groups"]
        rows.append(QuotedRow(papers()[paper].name, table, group, row, found["scores"]))
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
