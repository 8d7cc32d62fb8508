"""A full results disk and a damaged run log: one ``error:`` line naming the file and the remedy,
exit status 2, every record already written kept, the invocation's cost not lost, and a rerun
(once space is freed) that resumes without duplicating a question."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig
from run_helpers import compose_config, fixture_overrides, read_records

from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.runlog import DamagedLogError, RecordLog, ResultsWriteError

pytestmark = pytest.mark.usefixtures("no_env_overrides")

QUESTIONS = 6  # in the tiny fixture
#: Fast and LLM-free: BM25 over turns, retrieval only.
METHOD = ["method=turn_rag_bm25", "answer=none", "batch_size=1"]

_real_write = os.write


class FillingDisk:
    """The disk under ``root`` filling up as a file named like ``name`` grows (its temporary
    included): ``whole_writes`` writes to it go through, the next writes half its bytes (a
    short write, as a disk does with its last free blocks), and from then on every write under
    ``root`` fails with ENOSPC. Writes elsewhere are not touched."""

    def __init__(self, root: Path, name: str, whole_writes: int) -> None:
        self.root = str(root.resolve())
        self.name = name
        self.whole_writes = whole_writes
        self.full = False

    def write(self, fd: int, data: bytes) -> int:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if not path.startswith(self.root):
            return _real_write(fd, data)
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if self.name in Path(path).name:
            if self.whole_writes == 0:
                self.full = True
                return _real_write(fd, bytes(data[: len(data) // 2]))
            self.whole_writes -= 1
        return _real_write(fd, data)

    def install(self) -> None:
        """Route this process's ``os.write`` through the filling disk (a subprocess's way)."""
        os.write = self.write  # type: ignore[assignment]


#: ``python -c`` program: the runner's CLI on a ``FillingDisk(*argv[1:4])``.
CLI_ON_A_FILLING_DISK = """
import runpy
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from test_reliability_disk import FillingDisk
root, name, whole_writes = sys.argv.pop(1), sys.argv.pop(1), int(sys.argv.pop(1))
FillingDisk(Path(root), name, whole_writes).install()
runpy.run_module("benchmarks.pipeline.run", run_name="__main__", alter_sys=True)
"""


def run_cli(
    overrides: list[str], hydra_dir: Path, disk: tuple[Path, str, int] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.pipeline.run`` with ``overrides``; with ``disk`` (the arguments of a
    :class:`FillingDisk`), on that disk."""
    program = ["-m", "benchmarks.pipeline.run"]
    if disk is not None:
        program = ["-c", CLI_ON_A_FILLING_DISK, *map(str, disk)]
    return subprocess.run(
        [sys.executable, *program, *overrides, f"hydra.run.dir={hydra_dir}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def error_lines(stderr: str) -> list[str]:
    """The ``error:`` lines of a CLI's stderr (a clear error prints exactly one)."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def cost_lines(stderr: str) -> list[dict[str, Any]]:
    """The invocation cost lines printed on stderr (the JSON after the line's first brace)."""
    return [
        json.loads(line[line.index("{") :])
        for line in stderr.splitlines()
        if line.startswith("cost of this invocation")
    ]


def run(cfg: DictConfig) -> dict[str, Any]:
    """:func:`benchmarks.pipeline.run.run`, imported only here: the CLI's subprocess imports this module
    for :class:`FillingDisk` and then runs ``benchmarks.pipeline.run`` as ``__main__``."""
    from benchmarks.pipeline.run import run as run_config

    return run_config(cfg)


def only_run_dir(results: Path) -> Path:
    (run_dir,) = [path for path in results.iterdir() if path.is_dir()]
    return run_dir


def test_a_full_disk_mid_run_keeps_the_written_records_and_shows_the_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "runs"
    overrides = [*fixture_overrides(results, tmp_path / "cache"), *METHOD]
    monkeypatch.setattr(os, "write", FillingDisk(results, "predictions.jsonl", 2).write)

    with pytest.raises(ResultsWriteError) as raised:
        run(compose_config(overrides))
    message = str(raised.value)
    assert "predictions.jsonl" in message and "No space left on device" in message
    assert "free space and rerun" in message
    assert raised.value.path.name == "predictions.jsonl"
    run_dir = only_run_dir(results)
    # the half-written third record was cut off: two whole records, nothing else
    assert [r["question_id"] for r in read_records(run_dir)] == ["tiny-1:q0", "tiny-1:q1"]
    (cost,) = cost_lines(capsys.readouterr().err)  # invocations.jsonl had no room either
    assert cost["questions"] == 2 and cost["workers"] == 1
    assert not (run_dir / "invocations.jsonl").read_text()

    monkeypatch.undo()  # space freed
    resumed = run(compose_config(overrides))
    assert resumed["invocation"]["questions"] == QUESTIONS - 2
    ids = [r["question_id"] for r in read_records(run_dir)]
    assert len(ids) == len(set(ids)) == QUESTIONS


def test_cli_on_a_full_disk_says_which_file_and_what_to_do_in_one_line(tmp_path: Path) -> None:
    results = tmp_path / "runs"
    overrides = [*fixture_overrides(results, tmp_path / "cache"), *METHOD]

    full = run_cli(overrides, tmp_path / "hydra", disk=(results, "predictions.jsonl", 3))

    assert full.returncode == 2, full.stderr
    assert "Traceback" not in full.stderr and "During handling" not in full.stderr
    (error,) = error_lines(full.stderr)
    run_dir = only_run_dir(results)
    assert f"cannot write {run_dir / 'predictions.jsonl'}: No space left on device" in error
    assert "free space and rerun" in error
    (cost,) = cost_lines(full.stderr)
    assert cost["questions"] == 3
    written = (run_dir / "predictions.jsonl").read_text()
    assert len(written.splitlines()) == 3 and written.endswith("\n")

    rerun = run_cli(overrides, tmp_path / "hydra")
    assert rerun.returncode == 0, rerun.stderr
    assert (run_dir / "predictions.jsonl").read_text().startswith(written)  # kept as written
    ids = [r["question_id"] for r in read_records(run_dir)]
    assert len(ids) == len(set(ids)) == QUESTIONS
    (invocation,) = [json.loads(line) for line in (run_dir / "invocations.jsonl").open()]
    assert invocation["questions"] == QUESTIONS - 3


def test_a_full_disk_at_the_end_leaves_the_previous_metrics_whole(tmp_path: Path) -> None:
    results = tmp_path / "runs"
    overrides = [*fixture_overrides(results, tmp_path / "cache"), *METHOD]
    run(compose_config(overrides))
    run_dir = only_run_dir(results)
    metrics = (run_dir / "metrics.json").read_text()

    # nothing left to ask: the rerun's cost line fits, the new metrics.json does not
    full = run_cli(overrides, tmp_path / "hydra", disk=(results, "metrics.json", 0))

    assert full.returncode == 2, full.stderr
    assert "Traceback" not in full.stderr
    (error,) = error_lines(full.stderr)
    assert f"cannot write {run_dir / 'metrics.json'}: No space left on device" in error
    assert not cost_lines(full.stderr)  # it was logged
    assert len((run_dir / "invocations.jsonl").read_text().splitlines()) == 2
    assert (run_dir / "metrics.json").read_text() == metrics
    assert not [path for path in run_dir.iterdir() if path.name.endswith(".part")]


def test_cli_with_a_damaged_middle_line_names_it_and_the_remedy(tmp_path: Path) -> None:
    results = tmp_path / "runs"
    overrides = [*fixture_overrides(results, tmp_path / "cache"), *METHOD]
    run(compose_config(overrides))
    log_file = only_run_dir(results) / "predictions.jsonl"
    lines = log_file.read_text().splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + "\n"  # a damaged line, the file still whole
    log_file.write_text("".join(lines))

    damaged = run_cli(overrides, tmp_path / "hydra")

    assert damaged.returncode == 2, damaged.stderr
    assert "Traceback" not in damaged.stderr
    (error,) = error_lines(damaged.stderr)
    assert f"{log_file}:3: corrupt record" in error
    assert "delete that line to ask its question again" in error
    assert "delete the file to start the run over" in error
    assert log_file.read_text() == "".join(lines)  # left for the user to look at


@pytest.mark.parametrize(
    "line", [b"not json", b"[1, 2]", b'{"answer": "no question_id"}', b"\xff\xfe not utf-8"]
)
def test_a_line_that_is_no_record_is_damage_named_by_path_and_line(
    tmp_path: Path, line: bytes
) -> None:
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(b'{"question_id": "q1"}\n' + line + b'\n{"question_id": "q3"}\n')
    with pytest.raises(DamagedLogError, match=r"predictions\.jsonl:2: corrupt record"):
        RecordLog(path)


def test_a_damaged_invocation_line_says_what_deleting_it_costs(tmp_path: Path) -> None:
    path = tmp_path / "invocations.jsonl"
    path.write_text('{"started": "a"}\n{"sta\n')
    with pytest.raises(DamagedLogError, match="forgets that invocation's cost") as raised:
        RecordLog(path, key="started")
    assert raised.value.path == path and raised.value.line == 2
