"""The oracle ceiling hands the reader exactly the gold evidence (turns or whole sessions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_helpers import compose_config, fixture_overrides, read_records

from benchmarks.pipeline.run import run

pytestmark = pytest.mark.usefixtures("no_env_overrides")


@pytest.mark.parametrize("unit", ["turns", "sessions"])
def test_the_oracle_context_is_the_gold_evidence(tmp_path: Path, unit: str) -> None:
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=oracle_evidence",
        f"method.unit={unit}",
        "answer=none",
    ]
    summary = run(compose_config(overrides))
    records = read_records(Path(summary["run_dir"]))
    with_evidence = [r for r in records if r["evidence"]]
    assert with_evidence and all(r["evidence_recall"] == 1.0 for r in with_evidence)
    for record in with_evidence:
        shown = record["retrieved_turn_ids"]
        if unit == "turns":
            assert sorted(shown) == sorted(record["evidence"])
        else:  # every turn of each evidence session, and no other session
            sessions = {turn.split(":")[0] for turn in record["evidence"]}
            assert {turn.split(":")[0] for turn in shown} == sessions
            assert len(shown) > len(record["evidence"]) or len(sessions) == len(shown)
    assert all(r["retrieved_turn_ids"] == [] for r in records if not r["evidence"])
