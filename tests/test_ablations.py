"""The ablation-effect table: discovery of variants, the shares of contexts whose turn set or
only whose order changed, and the committed table rebuilt from its committed records."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.settings import context_order, run_id, run_identity
from benchmarks.tables.ablations import (
    EXPLAIN_BELOW,
    ORDER_ONLY_NOTE,
    build_table,
    compose_run,
    load_spec,
    read_records,
    summarize,
    variants,
)

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
    assert not any(o.startswith("answer.order") for o in cast.overrides)  # CAST declares it
    assert context_order(compose_run(cast)) == "rank"  # the fused order reaches the reader
    assert cast.description.startswith("CAST")


def test_cast_records_keep_their_run_ids_without_the_order_override() -> None:
    """The committed CAST records ran with an explicit ``answer.order=rank``; its class now
    declares rank, so the same variants, composed without the override, are the same runs."""
    for variant in variants(load_spec(), ["cast"]):
        path = RESULTS / "ablations" / f"{variant.config}.jsonl.gz"
        if path.exists():
            header, _ = read_records(path)
            assert run_id(run_identity(compose_run(variant))) == header["run"], variant.config


def test_set_changes_are_told_apart_from_order_only_changes(tmp_path: Path) -> None:
    spec = {"overrides": [], "sample": "toy", "methods": {"cast": []}, "skip": {}}
    spec["explanations"] = {"cast_speaker_only": "Few questions name a mentioned person."}
    _write(tmp_path, "cast", {"q1": ["D1", "D2"], "q2": ["D3"], "q3": ["D4"], "q4": ["D6"]})
    # q1 reordered, q3 replaced: one of four each.
    replaced = {"q1": ["D2", "D1"], "q2": ["D3"], "q3": ["D5"], "q4": ["D6"]}
    _write(tmp_path, "cast_no_window", replaced)
    # q1 and q2 reordered only (q2 as a longer context of the same turns, D3 twice).
    reordered = {"q1": ["D2", "D1"], "q2": ["D3", "D3"], "q3": ["D4"], "q4": ["D6"]}
    _write(tmp_path, "cast_slot3", reordered)
    _write(tmp_path, "cast_speaker_only", {"q1": ["D1", "D2"], "q2": ["D3"], "q3": ["D4"]})
    summary = summarize(spec, tmp_path)
    rows = {row["config"]: row for row in summary["rows"]}
    assert summary["context_orders"] == {"cast": "rank"}
    assert (rows["cast"]["set_changed"], rows["cast"]["order_only"]) == (None, None)
    assert (rows["cast_no_window"]["set_changed"], rows["cast_no_window"]["order_only"]) == (
        0.25,
        0.25,
    )
    assert "note" not in rows["cast_no_window"]  # recall can show the replaced turn
    assert (rows["cast_slot3"]["set_changed"], rows["cast_slot3"]["order_only"]) == (0.0, 0.5)
    assert rows["cast_slot3"]["note"] == ORDER_ONLY_NOTE
    assert (rows["cast_speaker_only"]["set_changed"], rows["cast_speaker_only"]["order_only"]) == (
        0.0,
        0.0,
    )
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
        if row.get("set_changed") is not None:
            changed = row["set_changed"] + row["order_only"]
            if changed < EXPLAIN_BELOW:
                assert "UNEXPLAINED" not in row["note"], row["config"]
