"""A backbone that fails in the middle of a run: failure lines, counts, reruns and the breaker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from reliability_helpers import (
    CORRECT,
    JUDGE,
    QUESTIONS,
    by_question,
    server_backbone,
)
from run_helpers import (
    compose_config,
    fixture_overrides,
    read_records,
)

from benchmarks.data.paths import REPO_ROOT
from benchmarks.metrics.aggregate import format_summary
from benchmarks.pipeline.run import run
from benchmarks.pipeline.runlog import latest_records
from benchmarks.runs.folders import load_runs

pytestmark = pytest.mark.usefixtures("no_env_overrides")


def test_failing_backbone_gives_failure_lines_and_counts(
    tmp_path: Path, server: FakeChatServer
) -> None:
    """Answers that fail for good (HTTP 500, garbage bodies, timeouts) become failure lines;
    a judge verdict that stays unparseable after its one retry is a counted judge failure."""
    server.on(QUESTIONS["dog"], "500")
    server.on(QUESTIONS["bowl"], "malformed")
    server.on(QUESTIONS["activities"], "hang")
    server.on(QUESTIONS["beach"], "429", times=1)  # transient: retried, then answered
    server.on([QUESTIONS["beach"], JUDGE], reply="I would rather not say.")
    server.on([QUESTIONS["cat"], JUDGE], reply="CORRECT, I think", times=1)
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    summary = run(compose_config(overrides))

    run_dir = Path(summary["run_dir"])
    records = by_question(read_records(run_dir))
    assert len(records) == 6
    assert "HTTP 500" in records["dog"]["failure"]
    assert "malformed reply" in records["bowl"]["failure"]
    assert "timed out" in records["activities"]["failure"]
    for name in ("dog", "bowl", "activities"):
        assert records[name]["failure"].startswith("answer: ")
        assert records[name]["prediction"] is None and "judging" not in records[name]
    assert records["beach"]["failure"] is None and records["beach"]["prediction"]
    assert records["beach"]["judging"]["attempts"] == 2
    assert records["beach"]["judging"]["error"].startswith("unparseable verdict")
    assert records["beach"]["scores"]["judge_acc"] is None
    assert (records["cat"]["judging"]["attempts"], records["cat"]["judging"]["error"]) == (2, None)
    assert records["cat"]["scores"]["judge_acc"] == 1.0
    assert records["5k"]["judging"]["attempts"] == 1

    expected = {"answer": 3, "judge": 1}
    assert summary["failures"] == expected
    assert json.loads((run_dir / "metrics.json").read_text())["failures"] == expected
    assert summary["scores"]["judge_acc"]["n"] == 1  # 5k only: cat is adversarial, excluded
    parse = summary["judge_parse"]["mem0_label"]
    assert parse["unparseable"] + parse["invalid"] == 3  # beach twice, cat once
    answering = summary["accounting"]["stages"]["answering"]
    assert (answering["failed"], answering["retries"]) == (3, 4)
    assert "failures: answer 3, judge 1" in format_summary(summary)


def test_a_rerun_asks_the_failed_questions_again(tmp_path: Path, server: FakeChatServer) -> None:
    """Failed answers are not cached, so once the endpoint is back a rerun answers them; their new
    lines supersede the failure lines (same ids, same places), and every reader sees six."""
    server.on(QUESTIONS["dog"], "500")
    server.on(QUESTIONS["bowl"], "malformed")
    server.on([QUESTIONS["beach"], JUDGE], reply="I would rather not say.")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    first = run(compose_config(overrides))
    assert first["failures"] == {"answer": 2, "judge": 1}
    run_dir = Path(first["run_dir"])
    order = [r["question_id"] for r in read_records(run_dir)]

    server.clear()  # the endpoint is back; beach's unparseable verdicts stay in the cache
    server.on(JUDGE, reply=CORRECT)
    second = run(compose_config(overrides))
    assert second["failures"] == {"answer": 0, "judge": 0}
    assert second["invocation"]["retried"] == 3 and second["invocation"]["questions"] == 0
    answering = second["accounting"]["this_invocation"]["stages"]["answering"]
    assert (answering["calls"], answering["cache_hits"]) == (3, 1)  # beach's answer: cached
    assert "asked 3 failed question(s) again" in format_summary(second)
    lines = read_records(run_dir)
    assert len(lines) == 9  # 6 + 3 superseding lines, appended
    latest = by_question(list(latest_records(lines, "question_id").values()))
    assert latest["dog"]["prediction"] and latest["bowl"]["scores"]["judge_acc"] == 1.0
    # The two cached unparseable rungs are passed over; the third (resampled) one is asked.
    assert latest["beach"]["judging"] | {"latency_s": 0} == {
        **latest["beach"]["judging"],
        "attempts": 3,
        "asked": 1,
        "error": None,
        "latency_s": 0,
    }
    assert [
        r["question_id"] for r in load_runs(tmp_path / "runs", "locomo", "full")[0].records
    ] == order
    assert second["questions"] == 6 and second["invocations"]["questions"] == 6


def test_breaker_stops_the_cli_with_a_clear_message_and_a_rerun_resumes(
    tmp_path: Path, server: FakeChatServer
) -> None:
    for name in ("activities", "beach", "cat", "5k"):  # the endpoint "dies" after two questions
        server.on(QUESTIONS[name], "500")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        "batch_size=2",
        *server_backbone(server),
        "+backbone.retry.max_consecutive_failures=2",
    ]
    stopped = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline.run",
            *overrides,
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert stopped.returncode == 2, stopped.stderr
    message = stopped.stderr.strip().splitlines()[-1]
    assert message.startswith("error: stopping: 2 consecutive requests to")
    assert server.base_url in message and "HTTP 500" in message
    assert "Traceback" not in stopped.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert [r["question"] for r in read_records(run_dir)] == [
        QUESTIONS["dog"],
        QUESTIONS["bowl"],
    ]

    server.clear()  # the endpoint is back
    server.on(JUDGE, reply=CORRECT)
    resumed = run(compose_config(overrides))
    assert resumed["run_dir"] == str(run_dir)
    assert resumed["accounting"]["this_invocation"]["stages"]["answering"]["calls"] == 4
    assert resumed["failures"] == {"answer": 0, "judge": 0}
    assert len({r["question_id"] for r in read_records(run_dir)}) == 6


def test_an_unparseable_verdict_is_asked_anew_each_rerun_until_its_rungs_run_out(
    tmp_path: Path, server: FakeChatServer
) -> None:
    """A judge that never replies JSON for one question: each rerun sends new requests (rungs
    the cache has not seen, so not a free replay of the same failure) and says it asked again;
    once every rung is tried the failure is final and reruns leave it alone."""
    server.on([QUESTIONS["beach"], JUDGE], reply="I would rather not say.")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    seen: list[tuple[int, int, int, bool]] = []
    for _ in range(4):
        before = server.request_count
        summary = run(compose_config(overrides))
        beach = by_question(
            list(latest_records(read_records(Path(summary["run_dir"])), "question_id").values())
        )["beach"]["judging"]
        seen.append(
            (
                beach["attempts"],
                beach["asked"],
                server.request_count - before,
                summary["invocation"]["retried"],
            )
        )
        assert summary["failures"]["judge"] == 1
    # (rungs tried, sent by this run, requests the server saw, questions asked again)
    assert seen == [(2, 2, 13, 0), (4, 2, 2, 1), (6, 2, 2, 1), (6, 2, 0, 0)]
    assert beach["final"] is True
