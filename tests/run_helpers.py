"""Helpers shared by the runner's tests: config composition on the tiny fixture, run outputs,
and a CLI run that can be killed at a chosen moment.

Imported as a plain module: pytest puts ``tests/`` on ``sys.path`` (no ``tests/__init__.py``).
"""

from __future__ import annotations

import io
import json
import lzma
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from benchmarks.config.compose import CONF, compose_config  # noqa: F401 (re-exported for the tests)
from benchmarks.data.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "tiny"
#: Record fields that legitimately differ between two runs of one config.
VOLATILE = {"latency_s", "cached", "asked"}  # "asked": requests sent now, not cached


def fixture_overrides(results: Path, cache: Path) -> list[str]:
    """Overrides that point a run at the tiny two-session fixture and at test folders.

    Answers are judged under the dataset's protocol only, without the probe set: the other
    protocols and the probes multiply the judge's calls, and have their own tests
    (``test_judge_calibration.py``).
    """
    return [
        f"data_dir={FIXTURE}",
        "dataset.file=locomo/tiny_conversation.json",
        "subset=full",
        f"results_dir={results}",
        f"cache_dir={cache}",
        "progress=false",
        "judge.protocols=[]",
        "judge.probes=false",
    ]


def compose_with_hydra(overrides: list[str]) -> DictConfig:
    """The composed config with its ``hydra`` node (the sweeper's parameters, the launcher)."""
    return compose_config(overrides, with_hydra=True)


def sweep_values(value: str) -> list[str]:
    """The values of one comma-separated sweep parameter."""
    return [part.strip() for part in value.split(",")]


def stable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without timings and cache flags (and counts of requests not served from the
    cache), which legitimately differ between runs."""
    return {
        key: stable(value) if isinstance(value, dict) else value
        for key, value in record.items()
        if key not in VOLATILE
    }


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of a run's ``predictions.jsonl``, in file order."""
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def read_ledger(run_dir: Path) -> list[dict[str, Any]]:
    """The call records of a run's LLM call ledger: complete lines (a line being written is
    skipped), without the ``sent`` lines booked before each request goes out."""
    path = run_dir / "llm_calls.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().split("\n")[:-1]]
    return [line for line in lines if "sent" not in line]


def start_cli(overrides: list[str], hydra_dir: Path) -> subprocess.Popen[bytes]:
    """``python -m benchmarks.pipeline.run`` in a subprocess, its output discarded but for stderr (in
    :func:`cli_stderr`: a crash's stacks), Hydra's own files (resolved config, log) in
    ``hydra_dir`` rather than the repository's ``outputs/``."""
    hydra_dir.mkdir(parents=True, exist_ok=True)
    with (hydra_dir / "stderr.log").open("wb") as stderr:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.pipeline.run",
                *overrides,
                f"hydra.run.dir={hydra_dir}",
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def cli_stderr(hydra_dir: Path) -> str:
    """The end of what a :func:`start_cli` run wrote to stderr: an assertion's message."""
    return (hydra_dir / "stderr.log").read_text(errors="replace")[-4000:]


def kill_when(
    process: subprocess.Popen[bytes],
    results: Path,
    ready: Callable[[Path], bool],
    timeout_s: float = 240.0,
    signal_number: int = signal.SIGKILL,
) -> Path:
    """Send ``signal_number`` (SIGKILL) to ``process`` as soon as ``ready(run_dir)`` holds;
    return the run directory once the process has ended.

    Fails (AssertionError) when the process ends first or the moment never comes, so a test
    cannot pass without having killed the run where it meant to.
    """
    deadline = time.monotonic() + timeout_s
    run_dir: Path | None = None
    try:
        while time.monotonic() < deadline and process.poll() is None:
            run_dirs = [path for path in results.glob("*") if path.is_dir()]
            if run_dirs and ready(run_dirs[0]):
                run_dir = run_dirs[0]
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run finished before it could be killed"
        assert run_dir is not None, f"the moment to kill never came within {timeout_s}s"
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal_number)
        process.wait()
    return run_dir


def longmemeval_item(question_id: str, question: str, answer_session: list[dict]) -> dict:
    """One LongMemEval instance: a filler session, then ``answer_session`` (its evidence)."""
    filler = [
        {"role": "user", "content": "Any tips for baking sourdough bread?"},
        {"role": "assistant", "content": "Use a mature starter."},
    ]
    return {
        "question_id": question_id,
        "question_type": "single-session-user",
        "question": question,
        "answer": "Lisbon",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00"],
        "haystack_session_ids": ["filler_1", "answer_1"],
        "haystack_sessions": [filler, answer_session],
        "answer_session_ids": ["answer_1"],
    }


def write_longmemeval_oracle(data_dir: Path, items: dict[str, dict]) -> Path:
    """``items`` (file name: instance) as the oracle variant's archive under ``data_dir``, which
    a run then reads with ``data_dir=<data_dir> dataset=longmemeval_oracle``."""
    return write_longmemeval(data_dir, items, "longmemeval_oracle_lme_jsons.tar.xz")


def city_haystacks(data_dir: Path, cities: Sequence[str]) -> Path:
    """A LongMemEval oracle archive of one-question haystacks ``q1``, ``q2``, ..., each moving the
    user to the next of ``cities``; the data folder."""
    items = {
        f"{n}_q{n}.json": longmemeval_item(
            f"q{n}",
            "Which city did I move to?",
            [
                {"role": "user", "content": f"I moved to {city} for work.", "has_answer": True},
                {"role": "assistant", "content": f"Enjoy {city}!", "has_answer": False},
            ],
        )
        for n, city in enumerate(cities, start=1)
    }
    return write_longmemeval_oracle(data_dir, items)


def write_longmemeval_s(data_dir: Path, items: dict[str, dict]) -> Path:
    """``items`` as LongMemEval-S under ``data_dir``, beside a stand-in for the reconstructed
    item the loader merges in (``7e00a6cb``, the first item again under that id)."""
    first = dict(next(iter(items.values())), question_id="7e00a6cb")
    write_longmemeval(data_dir, items, "longmemeval_s_cleaned_lme_jsons.tar.xz")
    (data_dir / "longmemeval" / "62_7e00a6cb.reconstructed.json.xz").write_bytes(
        lzma.compress(json.dumps(first).encode())
    )
    return data_dir


def write_longmemeval(data_dir: Path, items: dict[str, dict], archive: str) -> Path:
    """``items`` (file name: instance) as the archive ``longmemeval/<archive>`` of ``data_dir``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, item in items.items():
            data = json.dumps(item).encode()
            info = tarfile.TarInfo(f"lme_jsons/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (data_dir / "longmemeval").mkdir(parents=True, exist_ok=True)
    (data_dir / "longmemeval" / archive).write_bytes(buffer.getvalue())
    return data_dir


def retrieval_overrides(data_dir: Path, root: Path, *extra: str) -> list[str]:
    """A retrieval-only run over the LongMemEval oracle archive in ``data_dir`` (for instance
    :func:`city_haystacks`), its results and cache under ``root``, then ``extra``."""
    return [
        f"data_dir={data_dir}",
        "dataset=longmemeval_oracle",
        "subset=full",
        "answer=none",
        f"results_dir={root / 'runs'}",
        f"cache_dir={root / 'cache'}",
        "progress=false",
        *extra,
    ]


def pretend_produced_under(run_dir: Path, fingerprint: str) -> None:
    """Rewrite the run's recorded method fingerprint, as if an older source had produced it."""
    ledger = run_dir / "invocations.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    for line in lines:
        line["provenance"]["method_source"] = fingerprint
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
