"""A run in wrong hands (issue 48): rows that are not its own, unwritable folders, unknown keys,
a refused option, Ctrl-C, a multirun with a failing job. In process unless marked slow (the CLI).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from run_helpers import compose_config, fixture_overrides, read_records

from benchmarks.config.values import ConfigError
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.cli import run_or_exit
from benchmarks.pipeline.run import run
from benchmarks.pipeline.runlog import QUESTIONS_FILE, ForeignRowsError, ResultsWriteError
from benchmarks.runs.folders import load_runs
from memsys.kvstore import CacheError, SQLiteKV

pytestmark = pytest.mark.usefixtures("no_env_overrides")

#: A run that calls no LLM and builds its memory in milliseconds.
RETRIEVAL_ONLY = ["method=turn_rag_bm25", "answer=none"]
QUESTION_IDS = [f"tiny-1:q{number}" for number in range(6)]


def retrieval_run(tmp_path: Path, *extra: str) -> Path:
    overrides = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), *RETRIEVAL_ONLY]
    return Path(run(compose_config([*overrides, *extra]))["run_dir"])


# -- only the run's own rows -----------------------------------------------------------------


def merge_foreign_rows(run_dir: Path) -> None:
    """What merging two run folders does: a row of another run's question, and a second
    settled row for a question this run has logged."""
    log = run_dir / "predictions.jsonl"
    lines = log.read_text().splitlines()
    foreign = json.loads(lines[0]) | {"question_id": "conv-99:q1", "evidence_recall": 0.0}
    with log.open("a") as handle:
        handle.write(json.dumps(foreign) + "\n" + lines[1] + "\n")


def test_a_run_refuses_foreign_and_duplicate_rows_before_any_new_work(tmp_path: Path) -> None:
    run_dir = retrieval_run(tmp_path)
    assert json.loads((run_dir / QUESTIONS_FILE).read_text()) == QUESTION_IDS
    merge_foreign_rows(run_dir)
    before = {
        name: (run_dir / name).read_bytes() for name in ("predictions.jsonl", "invocations.jsonl")
    }
    with pytest.raises(ForeignRowsError) as refused:
        retrieval_run(tmp_path)
    lines = str(refused.value).splitlines()
    assert lines[0].endswith(
        "predictions.jsonl:7: question_id 'conv-99:q1' is not in this run's question set "
        "(locomo, subset full)"
    )
    assert lines[1].endswith("predictions.jsonl:8: question_id 'tiny-1:q1' is settled on line 2")
    assert "delete those lines" in lines[2]
    after = {name: (run_dir / name).read_bytes() for name in before}
    assert after == before, "nothing logged, not even an invocation"


def test_the_report_leaves_foreign_and_duplicate_rows_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = retrieval_run(tmp_path)
    merge_foreign_rows(run_dir)
    (loaded,) = load_runs(tmp_path / "runs", "locomo", "full")
    assert [record["question_id"] for record in loaded.records] == QUESTION_IDS
    assert all(record["evidence_recall"] == 1.0 for record in loaded.records)
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if line.startswith("warning: ")]
    assert [line.split(": ", 2)[2:] for line in warnings] == [
        ["question 'conv-99:q1' is not in the run's question set (questions.json); row left "
         "out of the table"],
        ["question 'tiny-1:q1' is settled on line 2; row left out of the table"],
    ]  # fmt: skip
    assert warnings[0].startswith(f"warning: {run_dir}/predictions.jsonl:7")


# -- errors before a run directory exists; one line for a folder that cannot be written -----------


def test_a_refused_method_option_leaves_no_run_directory(tmp_path: Path) -> None:
    for option in ("method.top_k=-1", "method.top_k=abc"):  # the method's check; a type
        with pytest.raises(ConfigError, match="method"):
            retrieval_run(tmp_path, option)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_an_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config key 'batchsize': unknown key.*'batch_size'"):
        retrieval_run(tmp_path, "+batchsize=4")


def test_a_results_folder_that_cannot_be_made_is_one_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ResultsWriteError, match=r"cannot write .*a-file/runs/[0-9a-f]{12}"):
        retrieval_run(tmp_path, f"results_dir={blocker / 'runs'}")


def test_a_cache_that_cannot_be_opened_or_written_is_one_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(CacheError, match=r"cache file .*a-file/kv.sqlite: .*set cache_dir="):
        SQLiteKV(blocker / "kv.sqlite").put("key", b"value")
    store = SQLiteKV(tmp_path / "kv.sqlite")
    store.put("key", b"value")

    def failing_disk(connection: sqlite3.Connection) -> None:  # as SQLite reports a full tmpfs
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(CacheError, match=r"kv.sqlite: disk I/O error; check that .* has room"):
        store._run(failing_disk)


def test_a_clear_error_is_one_line_with_credentials_masked(
    capfd: pytest.CaptureFixture[str],
) -> None:
    def failing(cfg: object) -> None:
        raise CacheError(Path("/cache/x.sqlite"), OSError("at http://user:pw@host/v1"))

    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(SystemExit) as exited:
            run_or_exit(failing, compose_config([]))  # type: ignore[arg-type]
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert exited.value.code == 2
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith("error: cache file /cache/x.sqlite: at http://***@host/v1; check")


# -- the command line: Ctrl-C, a multirun with a failing job, nothing in the current folder ----


def cli(args: list[str], cwd: Path, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.pipeline.run", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.slow
def test_a_multirun_goes_on_past_a_failed_job_and_lists_it(tmp_path: Path) -> None:
    """Run from another folder: Hydra's files land under the results folder, nothing in the
    current one; the failing job is listed at the end, the exit status is 2."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    overrides = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), *RETRIEVAL_ONLY]
    process = cli(["-m", *overrides, "method.top_k=-1,3"], work)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 2, err
    assert "evidence recall" in out, "the job after the failed one ran"
    assert "error: 1 job(s) of this sweep failed" in err
    assert "error:   #0 " in err and "method.top_k=-1: config key 'method'" in err
    assert list(work.iterdir()) == [], "nothing written in the current folder"
    runs = [path for path in (tmp_path / "runs").iterdir() if path.name != ".hydra"]
    assert len(runs) == 1 and read_records(runs[0])
    assert list((tmp_path / "runs" / ".hydra" / "multirun").rglob("multirun.yaml"))


@pytest.mark.slow
def test_an_unwritable_results_folder_is_one_error_line_from_the_cli(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    overrides = [*fixture_overrides(blocker / "runs", tmp_path / "cache"), *RETRIEVAL_ONLY]
    process = cli(overrides, tmp_path)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: cannot write {blocker}/runs/.hydra/")


@pytest.mark.slow
def test_ctrl_c_prints_how_to_resume_not_a_traceback(tmp_path: Path) -> None:
    with FakeChatServer(hang_s=60.0) as server:
        server.script("hang")
        overrides = [
            *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
            "method=turn_rag_bm25",
            "backbone=openai_server",
            "backbone.provider.model=fake",
            f"backbone.provider.base_url={server.base_url.replace('//', '//user:pw@')}",
            "backbone.provider.api_key_env=null",
        ]
        process = cli(overrides, tmp_path)
        while server.request_count == 0:
            assert process.poll() is None, process.communicate()[1]
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert "run the same command again to resume: " in line
    assert line.endswith("(with the credentials masked here)")
    assert "base_url=http://***@127.0.0.1" in line and "pw" not in line
