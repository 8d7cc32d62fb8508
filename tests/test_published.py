"""Every ``results/published/*.yaml`` (a paper's own numbers, quoted as data) keeps one schema.

A ``paper:`` block (``title``, ``authors``, ``file``) and a ``results:`` list whose entries each
name their ``table``, ``row``, ``column``, a numeric ``value`` and a ``setting`` (``backbone``,
``judge``, ``metric``, ``dataset``; optional ``notes``), no cell twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.data.paths import REPO_ROOT

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
    assert FILES, f"no published results in {PUBLISHED}"


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_published_results_follow_the_schema(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert problems(document) == []
