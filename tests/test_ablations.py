"""The ablation-effect table: discovery of variants, the share of contexts changed, and the
committed table rebuilt from its committed records."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from benchmarks.ablations import (
    EXPLAIN_BELOW,
    build_table,
    load_spec,
    summarize,
    variants,
)
from benchmarks.data.paths import REPO_ROOT

RESULTS = REPO_ROOT / "results"


def _write(folder: Path, config: str, contexts: dict[str, list[str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{config}.jsonl.gz", "wt") as out:
        out.write(json.dumps({"config": config, "run": "abc", "overrides": []}) + "\n")
        for qid, context in contexts.items():
            row = {"question_id": qid, "category": "single_hop", "context": context}
            row |= {"context_tokens": 10 * len(context), "evidence_recall": float("D1" in context)}
            out.write(json.dumps(row) + "\n")


def test_variants_are_every_lite_config_of_each_method() -> None:
    names = {v.config for v in variants(load_spec(), ["cast"])}
    assert {"cast", "cast_no_window", "cast_speaker_only", "cast_slot3"} <= names
    assert "cast_llm" not in names and all(n.startswith("cast") for n in names)
    cast = next(v for v in variants(load_spec(), ["cast"]) if v.config == "cast")
    assert "answer.order=rank" in cast.overrides  # the fused order reaches the reader
    assert cast.description.startswith("CAST")


def test_share_of_changed_contexts_counts_order_too(tmp_path: Path) -> None:
    spec = {"overrides": [], "sample": "toy", "methods": {"cast": []}, "skip": {}}
    spec["explanations"] = {"cast_speaker_only": "Few questions name a mentioned person."}
    _write(tmp_path, "cast", {"q1": ["D1", "D2"], "q2": ["D3"], "q3": ["D4"]})
    _write(tmp_path, "cast_no_window", {"q1": ["D2", "D1"], "q2": ["D3"], "q3": ["D5"]})
    _write(tmp_path, "cast_speaker_only", {"q1": ["D1", "D2"], "q2": ["D3"], "q3": ["D4"]})
    rows = {row["config"]: row for row in summarize(spec, tmp_path)["rows"]}
    assert rows["cast"]["contexts_changed"] is None  # the reference
    assert rows["cast_no_window"]["contexts_changed"] == round(2 / 3, 4)  # reordered, replaced
    assert rows["cast_speaker_only"]["contexts_changed"] == 0.0
    assert rows["cast_speaker_only"]["note"] == spec["explanations"]["cast_speaker_only"]
    assert rows["cast_semantic_only"]["status"] == "not run"
    del spec["explanations"]["cast_speaker_only"]
    rows = {row["config"]: row for row in summarize(spec, tmp_path)["rows"]}
    assert rows["cast_speaker_only"]["note"].startswith("UNEXPLAINED")


def test_committed_table_is_rebuilt_from_its_records(tmp_path: Path) -> None:
    summary = build_table(load_spec(), RESULTS / "ablations", tmp_path / "ablations")
    for suffix in (".md", ".json"):
        rebuilt = (tmp_path / "ablations").with_suffix(suffix).read_text()
        assert rebuilt == (RESULTS / "ablations").with_suffix(suffix).read_text(), suffix
    for row in summary["rows"]:
        assert row["status"] in ("run", "skipped"), f"{row['config']}: {row['status']}"
        changed = row.get("contexts_changed")
        if changed is not None and changed < EXPLAIN_BELOW:
            assert not row["note"].startswith("UNEXPLAINED"), row["config"]
