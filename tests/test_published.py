"""Every ``results/published/*.yaml`` (a paper's own numbers, quoted as data) keeps one schema.

A ``paper:`` block (``title``, ``authors``, ``file``; the registry checks its ``id``,
``position`` and ``measured``) and a ``results:`` list whose entries each
name their ``table``, ``row``, ``column``, a numeric ``value`` and a ``setting`` (``backbone``,
``judge``, ``metric``, ``dataset``; optional ``notes``, ``category``, ``question_type``,
``group``), no cell twice. The segmentation cells (read by the segmentation table through
:mod:`benchmarks.papers.segmentation`) are checked against the paper's text as well: every
printed number quoted, each with its row's section as ``group``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.data.paths import REPO_ROOT
from benchmarks.data.segmentation import SEGMENTATION_DATASETS
from benchmarks.papers.segmentation import is_segmentation, published_segmentation
from benchmarks.registry import published_header

PUBLISHED = REPO_ROOT / "results" / "published"
PAPER_KEYS = ("title", "authors", "file")
ENTRY_KEYS = ("table", "row", "column", "value", "setting")
SETTING_KEYS = ("backbone", "judge", "metric", "dataset")
FILES = sorted(PUBLISHED.glob("*.yaml"))


def problems(document: Any) -> list[str]:
    """What is wrong with one published-results document (empty when nothing is).

    >>> problems({"paper": {"title": "T", "authors": "A", "file": "papers/t.txt"}, "results": [
    ...     {"table": "Table 1", "row": "Ours", "column": "CC / B-4", "value": 0.4,
    ...      "setting": {"backbone": "b", "judge": "none", "metric": "BLEU-4", "dataset": "CC"}}]})
    []
    >>> problems({"paper": {"title": "T"}, "results": [{"table": "Table 1", "value": "0.4"}]})
    ['paper: missing authors', 'paper: missing file', 'results[0]: missing row',
     'results[0]: missing column', 'results[0]: missing setting', 'results[0]: value is not a number']
    """
    if not isinstance(document, dict):
        return ["not a mapping"]
    found = []
    paper = document.get("paper")
    if not isinstance(paper, dict):
        found.append("no paper: block")
    else:
        found += [f"paper: missing {key}" for key in PAPER_KEYS if not _text(paper.get(key))]
    results = document.get("results")
    if not isinstance(results, list) or not results:
        return [*found, "no results: list"]
    cells: set[tuple[Any, ...]] = set()
    for index, entry in enumerate(results):
        where = f"results[{index}]"
        if not isinstance(entry, dict):
            found.append(f"{where}: not a mapping")
            continue
        found += [f"{where}: missing {key}" for key in ENTRY_KEYS[:3] if not _text(entry.get(key))]
        if "setting" not in entry:
            found.append(f"{where}: missing setting")
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            found.append(f"{where}: value is not a number")
        setting = entry.get("setting")
        if setting is None:
            continue
        if not isinstance(setting, dict):
            found.append(f"{where}: setting is not a mapping")
            continue
        found += [
            f"{where}: setting misses {key}" for key in SETTING_KEYS if not _text(setting.get(key))
        ]
        if "config" in setting:
            found.append(f"{where}: config belongs beside the setting, not in it")
        if "notes" in setting and not isinstance(setting["notes"], str):
            found.append(f"{where}: notes is not text")
        cell = tuple(entry.get(key) for key in ENTRY_KEYS[:3])
        cell += tuple(setting.get(key) for key in SETTING_KEYS)
        if cell in cells:
            found.append(f"{where}: the same cell again {cell}")
        cells.add(cell)
    return found


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def test_there_are_published_results() -> None:
    assert [path.stem for path in FILES] == ["cast", "es-mem", "fracom", "hingemem", "secom"]


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_published_results_follow_the_schema(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert problems(document) == []
    # the registry reads the header alone (benchmarks.registry.published_header): the same node
    assert published_header(path) == document["paper"]


#: DESIGN.md's folder in this environment: each file's ``paper.file`` (``papers/es-mem.txt``) lies
#: under it.
SHARED = Path("/work/shared")
#: The files quoting segmentation scores (a cheap look at their text; the test reads the cells).
SEGMENTATION_FILES = [
    path
    for path in FILES
    if any(f"dataset: {name}" in path.read_text(encoding="utf-8") for name in SEGMENTATION_DATASETS)
]


def printed_table(text: str, table: str) -> list[list[str]]:
    """The cells of ``table`` in a paper's text: the tab-separated lines just above its caption
    (``Table 4: ...``), the header lines first."""
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith(f"{table}:"))
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    start = end
    while start > 0 and "\t" in lines[start - 1]:
        start -= 1
    return [line.split("\t") for line in lines[start:end]]


def segmentation_problems(results: list[dict[str, Any]], text: str) -> list[str]:
    """Where the segmentation cells differ from the paper's table: a value or a section (a
    table's first header line names the datasets, its second the metrics, a line with no number
    opens a section), or a printed number not quoted."""
    found = []
    for table in dict.fromkeys(result["table"] for result in results):
        datasets, metrics, *body = printed_table(text, table)
        columns, dataset = {}, ""
        for index, (name, metric) in enumerate(zip(datasets, metrics, strict=True)):
            dataset = name or dataset
            if index and metric:
                columns[f"{dataset} / {metric.rstrip('↓↑')}"] = index
        printed, group = {}, ""
        for cells in body:
            if not any(cells[1:]):
                group = cells[0]
                continue
            for column, index in columns.items():
                if cells[index] != "-":
                    printed[(cells[0], column)] = (group, float(cells[index]))
        quoted = {
            (r["row"], r["column"]): (r["setting"].get("group"), r["value"])
            for r in results
            if r["table"] == table
        }
        found += [
            f"{table}, {cell}: quoted {quoted.get(cell)}, printed {printed.get(cell)}"
            for cell in sorted(set(printed) | set(quoted))
            if quoted.get(cell) != printed.get(cell)
        ]
    return found


@pytest.mark.parametrize("path", SEGMENTATION_FILES, ids=[path.stem for path in SEGMENTATION_FILES])
def test_segmentation_cells_are_the_papers_text(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    paper = SHARED / document["paper"]["file"]
    if not paper.exists():
        pytest.skip(f"the paper's text {paper} is not available here")
    results = [result for result in document["results"] if is_segmentation(result)]
    assert results and segmentation_problems(results, paper.read_text(encoding="utf-8")) == []


def test_segmentation_rows_gather_every_segmentation_cell() -> None:
    rows = published_segmentation("esmem", PUBLISHED)
    assert [(row.group, row.row) for row in rows][:2] == [
        ("Unsupervised Methods", "BayesSeg"),
        ("Unsupervised Methods", "TextTiling"),
    ]
    assert sum(len(row.scores) * 4 for row in rows) == 108  # Table 4 less the 3 × 4 "-" cells
    assert "dialseg711" not in next(row for row in rows if row.row == "BERT").scores
