"""``workers=N``: the same records as one process, in the same order; resumable; clear errors;
no worker outlives an interrupted run."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from fakes.methods import TROUBLE
from omegaconf import DictConfig
from run_helpers import (
    city_haystacks,
    compose_config,
    kill_when,
    read_records,
    retrieval_overrides,
    stable,
    start_cli,
)

from benchmarks.config.values import ConfigError
from benchmarks.pipeline.run import run
from benchmarks.pipeline.workers import WorkerError

CITIES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Accra")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Five one-question haystacks, each moving the user to another city."""
    monkeypatch.delenv("MEMBENCH_DATA", raising=False)
    return city_haystacks(tmp_path / "data", CITIES)


def overrides(data_dir: Path, root: Path, workers: int, *extra: str) -> list[str]:
    return retrieval_overrides(data_dir, root, f"workers={workers}", *extra)


def config(data_dir: Path, root: Path, workers: int, *extra: str) -> DictConfig:
    return compose_config(overrides(data_dir, root, workers, *extra))


MISBEHAVING = ("method=full_history", "method._target_=fakes.methods.Misbehaving")


def test_workers_log_what_one_process_logs_and_resume(data_dir: Path, tmp_path: Path) -> None:
    serial = run(config(data_dir, tmp_path / "serial", 1, "method=turn_rag_dense"))
    serial_dir = Path(serial["run_dir"])
    # The parallel run resumes a log that already holds the first question (its own cache is
    # empty, so the workers construct and embed everything else themselves).
    parallel_dir = tmp_path / "parallel" / "runs" / serial_dir.name
    parallel_dir.mkdir(parents=True)
    first_line = (serial_dir / "predictions.jsonl").read_text().splitlines(keepends=True)[0]
    (parallel_dir / "predictions.jsonl").write_text(first_line)

    parallel = run(config(data_dir, tmp_path / "parallel", 2, "method=turn_rag_dense"))

    assert parallel["run_dir"] == str(parallel_dir)  # workers are not part of a run's identity
    assert [stable(r) for r in read_records(parallel_dir)] == [
        stable(r) for r in read_records(serial_dir)
    ]
    assert parallel["longmemeval"] == serial["longmemeval"]
    invocation = parallel["invocation"]
    assert invocation["workers"] == 2
    assert invocation["questions"] == len(CITIES) - 1
    assert parallel["construction"]["built"] == len(CITIES) - 1
    # The workers' embedding work reached the parent's ledger: at least each haystack's own two
    # turns, the shared filler's two and the question (two workers may both encode a shared text).
    assert invocation["embedding"]["encoded"] >= 2 * (len(CITIES) - 1) + 3
    assert invocation["peak_rss_mb"] > serial["invocation"]["peak_rss_mb"]


def test_workers_refuse_a_run_that_calls_an_llm(data_dir: Path, tmp_path: Path) -> None:
    cfg = config(data_dir, tmp_path, 2, "answer=uniform")
    with pytest.raises(ConfigError, match="config key 'workers': expected 1 for a run that calls"):
        run(cfg)


@pytest.mark.parametrize(
    ("trouble", "message"), [("raise", "ValueError: cannot construct q4"), ("exit", "died")]
)
def test_a_worker_failure_names_the_conversation_and_keeps_the_log(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trouble: str, message: str
) -> None:
    monkeypatch.setenv(TROUBLE, f"{trouble}:q4")
    cfg = config(data_dir, tmp_path, 2, *MISBEHAVING)
    with pytest.raises(WorkerError, match="conversation q4") as failure:
        run(cfg)
    assert message in str(failure.value)
    (run_dir,) = (tmp_path / "runs").iterdir()
    logged = [record["question_id"] for record in read_records(run_dir)]
    assert logged == ["q1", "q2", "q3"]  # in order, up to the failure
    # Resuming with the trouble gone answers the rest only.
    monkeypatch.delenv(TROUBLE)
    resumed = run(config(data_dir, tmp_path, 2, *MISBEHAVING))
    assert resumed["invocation"]["questions"] == 2
    assert [record["question_id"] for record in read_records(run_dir)] == [
        f"q{n}" for n in range(1, len(CITIES) + 1)
    ]


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGKILL])
def test_no_worker_outlives_an_interrupted_run(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_number: int
) -> None:
    marker = f"MEMBENCH_TEST_RUN={uuid.uuid4()}"
    monkeypatch.setenv(*marker.split("="))
    monkeypatch.setenv(TROUBLE, "stall:q2")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # fakes.methods, for the CLI
    process = start_cli(overrides(data_dir, tmp_path, 2, *MISBEHAVING), tmp_path)
    # q1 is logged while q2's worker stalls; the parent and both workers (and multiprocessing's
    # resource tracker) are alive then.
    kill_when(
        process,
        tmp_path / "runs",
        lambda run_dir: (
            (run_dir / "predictions.jsonl").exists() and len(_processes_with(marker)) >= 3
        ),
        signal_number=signal_number,
    )
    deadline = time.monotonic() + 30
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []
    assert os.environ["MEMBENCH_TEST_RUN"]  # the marker really was in the run's environment
