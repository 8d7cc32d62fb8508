"""The ablation-effect table: its rows, the shares of contexts whose turn set or only whose order
changed, and its runs: the committed run folder holds each row's run as the overlay composes it
today (the table rebuilt from them: tests/test_committed_tables.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.config.compose import compose_config
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.settings import run_id, run_identity
from benchmarks.runs.ablations import EXPERIMENT, load_spec, runs_by_config, variants
from benchmarks.runs.folders import ReportError, Run
from benchmarks.tables.ablations import EXPLAIN_BELOW, main, summarize
from benchmarks.tables.notes import note

RUNS = REPO_ROOT / "results" / "ablations_runs"
CAST = {"_target_": "memsys.methods.cast.CAST"}
#: CAST's run (tests/test_run.py pins its id).
RUN_OF_CAST = "01ec0844dff9"


def fake_run(name: str, contexts: dict[str, list[str]]) -> Run:
    records = [
        {"question_id": q, "retrieved_turn_ids": c, "context_tokens": 10 * len(c),
         "evidence_recall": float("D1" in c), "evidence_recall_all_retrieved": 1.0}
        for q, c in contexts.items()
    ]  # fmt: skip
    config = {"method": CAST, "answer": {"order": "method"}}
    return Run(Path(name), config, {"code_versions": ["abc1234"]}, records)


def test_variants_are_every_lite_config_of_each_method() -> None:
    names = [v.config for v in variants(load_spec(), ["cast"])]
    assert names[0] == "cast" and {"cast_no_window", "cast_speaker_only", "cast_slot3"} <= {*names}
    assert "cast_llm" not in names and all(n.startswith("cast") for n in names)
    assert variants(load_spec(), ["cast"])[0].description.startswith("CAST")


def test_the_sweep_leaves_out_the_skipped_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sweep", "--methods", "secom"]) == 0
    swept = capsys.readouterr().out.strip().split(",")
    assert swept[0] == "secom" and "secom_rate09" in swept and "secom_llmlingua2" not in swept


def test_set_changes_are_told_apart_from_order_only_changes() -> None:
    spec = {**load_spec(), "methods": ["cast"], "skip": {"cast_union": "no weights"}}
    spec["explanations"] = {"cast_speaker_only": "Few questions name a mentioned person."}
    runs = {
        "cast": fake_run("r0", {"q1": ["D1", "D2"], "q2": ["D3"], "q3": ["D4"], "q4": ["D6"]}),
        # q1 reordered, q3 replaced: one of four each
        "cast_no_window": fake_run(
            "r1", {"q1": ["D2", "D1"], "q2": ["D3"], "q3": ["D5"], "q4": ["D6"]}
        ),
        # q1 and q2 reordered only (q2 as a longer context of the same turns, D3 twice)
        "cast_slot3": fake_run(
            "r2", {"q1": ["D2", "D1"], "q2": ["D3", "D3"], "q3": ["D4"], "q4": ["D6"]}
        ),
        "cast_speaker_only": fake_run("r3", {"q1": ["D1", "D2"], "q2": ["D3"], "q3": ["D4"]}),
    }
    summary = summarize(spec, runs)
    rows = {row["config"]: row for row in summary["rows"]}
    assert summary["context_orders"] == {"cast": "rank"} and summary["code"] == "code abc1234"
    assert "set_changed" not in rows["cast"] and rows["cast"]["evidence_recall"] == 0.25
    assert (rows["cast_no_window"]["set_changed"], rows["cast_no_window"]["order_only"]) == (
        0.25,
        0.25,
    )
    assert "note" not in rows["cast_no_window"]  # recall can show the replaced turn
    assert (rows["cast_slot3"]["set_changed"], rows["cast_slot3"]["order_only"]) == (0.0, 0.5)
    assert rows["cast_slot3"]["note"] == note("ablations.order_only")
    assert rows["cast_speaker_only"]["set_changed"] == rows["cast_speaker_only"]["order_only"] == 0
    assert rows["cast_speaker_only"]["note"] == spec["explanations"]["cast_speaker_only"]
    assert rows["cast_semantic_only"]["status"] == "not run"
    assert rows["cast_union"] | {"status": "skipped", "note": "no weights"} == rows["cast_union"]
    del spec["explanations"]["cast_speaker_only"]
    rows = {row["config"]: row for row in summarize(spec, runs)["rows"]}
    assert rows["cast_speaker_only"]["note"].startswith("UNEXPLAINED")


def test_each_committed_run_is_its_row_as_the_overlay_composes_it_today() -> None:
    """Every run in the folder sits on the row of the config it ran, and is the run that
    ``memsys-bench run -m +experiment=ablations method=<row>`` makes today (same run id)."""
    runs = runs_by_config(RUNS)
    swept = {v.config for v in variants(load_spec())} - set(load_spec()["skip"])
    assert set(runs) == swept
    for config, run in runs.items():
        composed = compose_config([EXPERIMENT, f"method={config}"])
        assert run_id(run_identity(composed)) == run.directory.name, config


def test_every_row_is_run_or_skipped_and_small_changes_are_explained() -> None:
    table: dict[str, Any] = json.loads((REPO_ROOT / "results" / "ablations.json").read_text())
    for row in table["rows"]:
        assert row["status"] in ("run", "skipped"), f"{row['config']}: {row['status']}"
        if "set_changed" in row and row["set_changed"] + row["order_only"] < EXPLAIN_BELOW:
            assert "UNEXPLAINED" not in row["note"], row["config"]


def test_two_runs_of_one_config_are_refused(tmp_path: Path) -> None:
    for name in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        (tmp_path / name).mkdir()
        config = (RUNS / RUN_OF_CAST / "config.yaml").read_text()
        (tmp_path / name / "config.yaml").write_text(config)
        (tmp_path / name / "metrics.json").write_text("{}")
        (tmp_path / name / "predictions.jsonl").write_text("")
    with pytest.raises(ReportError, match="both ran cast; move one aside"):
        runs_by_config(tmp_path)
