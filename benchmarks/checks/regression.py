"""The CI regression: small subsets through every method and segmenter, compared with expectations.

    python -m benchmarks.checks.regression check      # replay the committed LLM replies, compare metrics
    python -m benchmarks.checks.regression refresh    # re-record replies and rewrite the expectations
    python -m benchmarks.checks.regression refresh --method last_sessions   # one method's cases

Cases, replay, expectations and new cases: docs/development.md, "CI regression". ``refresh``
also writes the cases' embeddings (``embeddings.npz``, not committed), which ``check`` seeds its
cache with, so a CPU that rounds differently cannot flip a near-tie in a dense ranking."""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import math
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from omegaconf import DictConfig

from benchmarks import registry
from benchmarks.config.compose import CONF, compose_config
from benchmarks.data.paths import REPO_ROOT
from memsys.embed import EmbeddingCache
from memsys.llm.cache import ResponseCache
from memsys.llm.errors import CacheMissError
from memsys.llm.replay import read_entries, seed_cache, write_replay_file

CASES_FILE = CONF / "regression.yaml"
REGRESSION_DIR = REPO_ROOT / "results" / "regression"
REPLAY_FILE = REGRESSION_DIR / "replay.jsonl"
EXPECTED_FILE = REGRESSION_DIR / "expected.json"
EMBEDDINGS_FILE = REGRESSION_DIR / "embeddings.npz"
RUNNER_CONFIGS = {"qa": "config", "segment": "segment"}
SEGMENTATION_SCORES = ("pk", "wd", "f1", "f1_macro", "score")


@dataclass(frozen=True)
class Case:
    """One run of one runner: ``group/key=value,...`` and its config overrides."""

    name: str
    runner: str
    overrides: tuple[str, ...]


def load_cases(path: Path = CASES_FILE) -> tuple[list[Case], float]:
    """Every case of every group (the product of its sweep lists) and the float tolerance."""
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    cases = []
    for group, body in spec["groups"].items():
        if body["runner"] not in RUNNER_CONFIGS:
            raise ValueError(f"{path}: group {group}: unknown runner {body['runner']!r}")
        keys = list(body["sweep"])
        for values in itertools.product(*(sweep_values(group, body, key) for key in keys)):
            choice = [f"{key}={value}" for key, value in zip(keys, values, strict=True)]
            name = f"{group}/{','.join(choice)}"
            cases.append(Case(name, body["runner"], (*body.get("overrides", ()), *choice)))
    return cases, float(spec["tolerance"])


def sweep_values(group: str, body: dict[str, Any], key: str) -> list[Any]:
    """A group's list for ``key``; ``method: registry`` is every method config whose registry
    block names the group (:mod:`benchmarks.registry`)."""
    values = body["sweep"][key]
    if key == "method" and values == "registry":
        return registry.members(group)
    return values


def method_of(case: Case) -> str | None:
    """The method config a case runs (its ``method=`` sweep choice), or None (a segmenter's)."""
    choices = dict(choice.split("=", 1) for choice in case.name.split("/", 1)[1].split(","))
    return choices.get("method")


def refresh_command(cases: Sequence[Case]) -> str:
    """The refresh that records exactly ``cases`` and touches no other."""
    named = " ".join(f"--case '{case.name}'" for case in cases)
    return f"memsys-bench regression refresh {named}"


def compose_case(case: Case, cache_dir: Path, results_dir: Path, mode: str, journal: Path | None):
    """The case's config with its caches and results redirected to ``cache_dir``/``results_dir``."""
    if case.runner == "segment":
        import benchmarks.pipeline.segment  # noqa: F401  (registers the segmentation datasets)
    overrides = [
        *case.overrides,
        f"cache_dir={cache_dir}",
        f"results_dir={results_dir}",
        f"llm_cache_mode={mode}",
        f"llm_cache_journal={journal if journal else 'null'}",
        "progress=false",
    ]
    return compose_config(overrides, config_name=RUNNER_CONFIGS[case.runner])


def run_case(case: Case, cfg: DictConfig) -> dict[str, Any]:
    """Run one case in process; its summary."""
    if case.runner == "segment":
        from benchmarks.pipeline.segment import run as run_segmentation

        return run_segmentation(cfg)
    from benchmarks.pipeline.run import run as run_qa

    return run_qa(cfg)


def fingerprint(runner: str, summary: dict[str, Any]) -> dict[str, Any]:
    """What the regression compares: scores, retrieval, failures and LLM call counts."""
    stages = summary["accounting"]["stages"]
    values: dict[str, Any] = {
        f"llm.{stage}.{field}": numbers[field]
        for stage, numbers in sorted(stages.items())
        for field in ("calls", "failed", "prompt_tokens", "completion_tokens")
    }
    if runner == "segment":
        values.update({name: summary[name] for name in SEGMENTATION_SCORES})
        values["fallbacks"] = summary["cost"]["fallbacks"]
        return values
    values["questions"] = summary["questions"]
    values["failures"] = summary["failures"]
    for name, cell in summary["scores"].items():  # the judge protocols' scores among them
        values[f"scores.{name}"] = cell["mean"]
    if "judge_probes" in summary:
        values["judge_probes"] = summary["judge_probes"]
    values["evidence_recall"] = summary["evidence_recall"]["mean"]
    values["context_tokens"] = summary["context_tokens"]["mean"]
    return values


def construction_cost(summary: dict[str, Any]) -> str:
    """Construction (or segmentation) cost of a case: LLM calls, tokens, seconds."""
    stages = summary["accounting"]["stages"]
    stage = stages.get("construction") or stages.get("segmentation") or {}
    seconds = summary.get("construction", {}).get("seconds", summary.get("wall_s", 0.0))
    return (
        f"construction {seconds:.1f} s, {stage.get('calls', 0)} LLM calls "
        f"({stage.get('cache_hits', 0)} cached), "
        f"{stage.get('prompt_tokens', 0)}+{stage.get('completion_tokens', 0)} tokens, "
        f"{stage.get('latency_s', 0.0):.1f} s of LLM time"
    )


def differences(expected: Any, actual: Any, tolerance: float, path: str = "") -> Iterator[str]:
    """Human-readable mismatches between two fingerprints."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            where = f"{path}.{key}" if path else key
            if key not in actual:
                yield f"{where}: expected {expected[key]!r}, missing"
            elif key not in expected:
                yield f"{where}: unexpected {actual[key]!r}"
            else:
                yield from differences(expected[key], actual[key], tolerance, where)
    elif isinstance(expected, float) and isinstance(actual, int | float):
        if not math.isclose(expected, actual, rel_tol=0.0, abs_tol=tolerance):
            yield f"{path}: expected {expected!r}, got {actual!r}"
    elif expected != actual:
        yield f"{path}: expected {expected!r}, got {actual!r}"


def run_cases(
    cases: Sequence[Case], cache_dir: Path, mode: str, journal: Path | None
) -> dict[str, dict[str, Any]]:
    """Fingerprints of every case, run one after the other with fresh results folders."""
    fingerprints = {}
    with tempfile.TemporaryDirectory(prefix="regression-runs-") as results:
        for number, case in enumerate(cases, start=1):
            started = time.perf_counter()
            cfg = compose_case(case, cache_dir, Path(results) / str(number), mode, journal)
            summary = run_case(case, cfg)
            fingerprints[case.name] = fingerprint(case.runner, summary)
            print(
                f"[{number}/{len(cases)}] {case.name} ({time.perf_counter() - started:.1f} s; "
                f"{construction_cost(summary)})"
            )
    return fingerprints


def export_embeddings(cache_file: Path, out: Path) -> int:
    """Every vector of an embedding cache file as ``keys`` and ``vectors`` arrays; the count (0,
    ``out`` untouched, without a cache table)."""
    with sqlite3.connect(cache_file) as connection:
        table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'embeddings'"
        found = connection.execute(table).fetchone() is not None
        rows = sorted(connection.execute("SELECT key, value FROM embeddings")) if found else []
    if not rows:
        return 0
    keys = np.array([key for key, _ in rows])
    vectors = np.stack([np.frombuffer(value, dtype=np.float32) for _, value in rows])
    with out.open("wb") as handle:
        np.savez_compressed(handle, keys=keys, vectors=vectors)
    return len(rows)


def seed_embeddings(cache_file: Path, source: Path) -> int:
    """Put the committed vectors into a fresh embedding cache; the count."""
    with np.load(source) as data:
        vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
    EmbeddingCache(cache_file).put_many(vectors)
    return len(vectors)


def check(cases: Sequence[Case], tolerance: float) -> int:
    """Replay and compare; 0 when every case matches, 1 otherwise. A case with no expectation
    recorded is new: named with the command that records it, not run, and a failure."""
    expected = json.loads(EXPECTED_FILE.read_text(encoding="utf-8"))
    new = [case for case in cases if case.name not in expected]
    cases = [case for case in cases if case.name in expected]
    for case in new:
        print(f"NEW {case.name}: no expectation recorded")
    if new:
        print(f"record them: {refresh_command(new)}; review and commit git diff results/regression")
    if not cases:
        print(f"0 cases run, {len(new)} new")
        return 1
    with tempfile.TemporaryDirectory(prefix="regression-cache-") as folder:
        cache_dir = Path(folder)
        seeded = seed_cache(ResponseCache(cache_dir / "llm_responses.sqlite"), REPLAY_FILE)
        vectors = (
            seed_embeddings(cache_dir / "embeddings.sqlite", EMBEDDINGS_FILE)
            if EMBEDDINGS_FILE.exists()
            else 0
        )
        print(f"replay cache: {seeded} recorded replies, {vectors} recorded embeddings")
        try:
            actual = run_cases(cases, cache_dir, "replay", None)
        except CacheMissError as error:
            print(f"FAILED: a request was not recorded (prompt or input changed): {error}")
            print("if the change is intended: make regression-refresh, then review the diff")
            return 1
    problems = [
        f"{case.name}: {line}"
        for case in cases
        for line in differences(expected[case.name], actual[case.name], tolerance)
    ]
    for line in problems:
        print(f"MISMATCH {line}")
    print(
        f"{len(cases)} cases, {len(problems)} mismatches (float tolerance {tolerance:g}), "
        f"{len(new)} new"
    )
    return 1 if problems or new else 0


def refresh(cases: Sequence[Case], source_cache: Path, *, partial: bool) -> None:
    """Re-record the replay file and the expectations from a copy of ``source_cache``; a ``partial``
    refresh adds to both files instead of rewriting them."""
    with tempfile.TemporaryDirectory(prefix="regression-cache-") as folder:
        cache_dir = Path(folder)
        if (source_cache / "llm_responses.sqlite").exists():
            shutil.copy2(source_cache / "llm_responses.sqlite", cache_dir / "llm_responses.sqlite")
        if partial and EMBEDDINGS_FILE.exists():
            seed_embeddings(cache_dir / "embeddings.sqlite", EMBEDDINGS_FILE)
        journal = cache_dir / "journal.jsonl"
        fingerprints = run_cases(cases, cache_dir, "readwrite", journal)
        entries = read_entries([journal]) if journal.exists() else {}
        REGRESSION_DIR.mkdir(parents=True, exist_ok=True)
        vectors = export_embeddings(cache_dir / "embeddings.sqlite", EMBEDDINGS_FILE)
    if partial and REPLAY_FILE.exists():
        entries = {**read_entries([REPLAY_FILE]), **entries}
        fingerprints = {**json.loads(EXPECTED_FILE.read_text(encoding="utf-8")), **fingerprints}
    write_replay_file(entries, REPLAY_FILE)
    EXPECTED_FILE.write_text(json.dumps(fingerprints, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(entries)} replies, {vectors} embeddings, {len(fingerprints)} expectations")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("check", "refresh"))
    parser.add_argument("--group", action="append", help="only these groups (repeatable)")
    parser.add_argument(
        "--case", action="append", help="only cases whose name matches this glob (repeatable)"
    )
    parser.add_argument(
        "--method", action="append", help="only the cases of this method config (repeatable)"
    )
    parser.add_argument(
        "--source-cache", type=Path, default=REPO_ROOT / ".cache", help="refresh: LLM cache to copy"
    )
    args = parser.parse_args(argv)
    cases, tolerance = load_cases()
    if args.group:
        cases = [case for case in cases if case.name.split("/")[0] in args.group]
    if args.case:
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) for p in args.case)]
    if args.method:
        cases = [case for case in cases if method_of(case) in args.method]
    if not cases:
        parser.error("no case matches --group/--case/--method")
    if args.command == "check":
        return check(cases, tolerance)
    refresh(cases, args.source_cache, partial=bool(args.group or args.case or args.method))
    return 0


if __name__ == "__main__":
    sys.exit(main())
