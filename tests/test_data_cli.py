from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from fakes.dialogues import build_conversation

from benchmarks.data import paths
from benchmarks.data.stats import ContentDedupe


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, cwd=paths.REPO_ROOT, env=env
    )


def test_stats_json_reports_every_dataset(data_dir: Path) -> None:
    result = _run("benchmarks.data", "stats", "--json", "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert set(stats) == {
        "locomo",
        "longmemeval_oracle",
        "longmemeval_s",
        "dialseg711",
        "tiage",
        "superdialseg",
    }
    locomo = stats["locomo"]
    assert (locomo["conversations"], locomo["sessions"], locomo["turns"], locomo["questions"]) == (
        10,
        272,
        5882,
        1986,
    )
    assert locomo["categories"] == {
        "adversarial": 446,
        "multi_hop": 282,
        "open_domain": 96,
        "single_hop": 841,
        "temporal": 321,
    }
    assert stats["longmemeval_oracle"]["questions"] == 500
    s = stats["longmemeval_s"]
    assert s["questions"] == 499 and s["abstention"] == 30
    assert s["categories"]["temporal_reasoning"] == 132
    assert any("gpt4_7a0daae1" in note for note in s["notes"])
    content = s["content"]  # haystacks share sessions: the content caches do 77% of the work
    assert (content["sessions"], content["unique_sessions"]) == (23806, 18437)
    assert (content["turns"], content["unique_turns"]) == (246189, 189264)
    assert stats["dialseg711"]["test"]["dialogues"] == 711
    assert stats["dialseg711"]["test"]["utterances"] == 19350
    assert {k: v["dialogues"] for k, v in stats["tiage"].items()} == {
        "train": 300,
        "dev": 100,
        "test": 100,
    }
    assert {k: v["dialogues"] for k, v in stats["superdialseg"].items()} == {
        "dev": 1322,
        "test": 1322,
    }


def test_stats_without_data_says_where_it_looked(tmp_path: Path) -> None:
    env = {"MEMBENCH_DATA": str(tmp_path / "nowhere"), "PATH": "/usr/bin:/bin"}
    result = _run("benchmarks.data", "stats", env=env)
    assert result.returncode == 2
    assert str(tmp_path / "nowhere" / "locomo" / "locomo10.json") in result.stderr
    assert "make data" in result.stderr


def test_content_dedupe_counts_each_distinct_session_and_turn_once() -> None:
    first, second = datetime(2023, 5, 1), datetime(2023, 6, 1)
    shared = [("A", "hi"), ("B", "yo")]
    haystacks = [
        build_conversation(
            [(first, shared), (first, [("A", "x")])], ("A", "B"), conversation_id="q1"
        ),
        # the shared session on another date is the same content; "A: hi" alone is a new session
        build_conversation(
            [(second, shared), (first, [("A", "hi")])], ("A", "B"), conversation_id="q2"
        ),
    ]
    dedupe = ContentDedupe()
    assert [c.conversation_id for c in dedupe.observe(haystacks)] == ["q1", "q2"]
    assert dedupe.summary() == {
        "sessions": 4,
        "unique_sessions": 3,
        "sessions_unique_share": 0.75,
        "turns": 6,
        "unique_turns": 3,
        "turns_unique_share": 0.5,
    }
