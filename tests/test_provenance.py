"""Provenance: the code version and method fingerprint of each invocation, and what a table
says about them (the code versions, the rows whose method source changed since)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from report_helpers import NEW_METHOD, TURN_RAG, ZERO, config, markdown_section, scored, write_run

from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.provenance import (
    CODE_PATHS,
    UNKNOWN,
    code_version,
    code_versions,
    method_source,
    method_source_files,
    provenance,
    recorded_method_source,
)
from benchmarks.tables.report.build import build_report
from benchmarks.tables.report.cli import main


def test_the_code_version_is_the_checkout_described_by_git() -> None:
    """The commit, marked dirty only by uncommitted code or configs (not by rewritten tables).
    The version is read once per process; read it afresh, so that a commit landing while the
    suite runs does not set the two reads apart."""
    code_version.cache_clear()
    described = subprocess.run(
        ["git", "describe", "--always"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", *CODE_PATHS],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert code_version() == (f"{described}-dirty" if changed else described)


def test_a_run_lists_each_code_version_once_in_first_seen_order() -> None:
    invocations = [
        {"wall_s": 1.0},  # logged before versions were
        {"provenance": {"code": "abc1234"}},
        {"provenance": {"code": "def5678-dirty"}},
        {"provenance": {"code": "abc1234"}},
    ]
    assert code_versions(invocations) == [UNKNOWN, "abc1234", "def5678-dirty"]
    assert code_versions([]) == []


#: A source tree of one packaged method, one single-module method and the shared modules.
TREE = {
    "memsys/__init__.py": "",
    "memsys/base.py": "class MemorySystem: ...\n",
    "memsys/helper.py": "from memsys import types\n",
    "memsys/types.py": "X = 1\n",
    "memsys/unrelated.py": "Y = 2\n",
    "memsys/methods/__init__.py": "",
    "memsys/methods/flat.py": "from memsys.base import MemorySystem\n",
    "memsys/methods/mine/__init__.py": "from .method import Mine\n",
    "memsys/methods/mine/method.py": "def f():\n    from ...helper import types\n",
    "memsys/methods/mine/parts.py": "Z = 3\n",  # imported by nothing: hashed as the package's
}


def source_tree(root: Path) -> Path:
    for name, text in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def hashed(target: str, root: Path) -> list[str]:
    return [path.relative_to(root).as_posix() for path in method_source_files(target, root) or []]


def test_the_fingerprint_hashes_the_method_package_base_and_the_memsys_modules_it_imports(
    tmp_path: Path,
) -> None:
    root = source_tree(tmp_path)
    assert hashed("memsys.methods.mine.Mine", root) == [
        "memsys/__init__.py",  # the package helper.py imports from
        "memsys/base.py",
        "memsys/helper.py",
        "memsys/methods/mine/__init__.py",
        "memsys/methods/mine/method.py",
        "memsys/methods/mine/parts.py",
        "memsys/types.py",
    ]
    # A method class named by its own module hashes its whole package too.
    assert hashed("memsys.methods.mine.method.Mine", root) == hashed("memsys.methods.mine.M", root)
    # A single-module method: its module, not the other methods beside it.
    assert hashed("memsys.methods.flat.Flat", root) == ["memsys/base.py", "memsys/methods/flat.py"]
    assert method_source("elsewhere.Method", root) is None
    cast = hashed("memsys.methods.cast.CAST", REPO_ROOT)
    assert {"memsys/base.py", "memsys/methods/cast/method.py", "memsys/types.py"} <= set(cast)


def test_the_fingerprint_changes_with_a_hashed_file_and_only_then(tmp_path: Path) -> None:
    root = source_tree(tmp_path)
    target = "memsys.methods.mine.Mine"
    before = method_source(target, root)
    assert before is not None and len(before) == 12
    (root / "memsys/unrelated.py").write_text("Y = 3\n")
    (root / "memsys/methods/flat.py").write_text("# another method\n")
    assert method_source(target, root) == before
    for name in ("memsys/base.py", "memsys/types.py", "memsys/methods/mine/parts.py"):
        original = (root / name).read_text()
        (root / name).write_text(original + "# changed\n")
        assert method_source(target, root) != before, name
        (root / name).write_text(original)
        assert method_source(target, root) == before


def test_the_latest_invocation_says_which_source_a_run_was_produced_by() -> None:
    assert recorded_method_source([]) is None
    assert recorded_method_source([{"wall_s": 1.0}]) is None  # logged before fingerprints were
    logged = [{"provenance": {"method_source": "aaa"}}, {"provenance": {"method_source": "bbb"}}]
    assert recorded_method_source(logged) == "bbb"
    answered = [{"questions": 3, "provenance": {"method_source": "aaa"}}]
    answered.append({"questions": 0, "retried": 1, "provenance": {"method_source": "bbb"}})
    assert recorded_method_source(answered) == "bbb"  # asked a failed question again
    # A rerun with nothing left to do produced nothing: the records still come from aaa.
    answered[1]["retried"] = 0
    assert recorded_method_source(answered) == "aaa"
    answered[0]["provenance"] = {}  # the questions were answered before fingerprints were
    assert recorded_method_source(answered) is None
    assert provenance("memsys.methods.baselines.TurnRAG")["method_source"] == method_source(
        "memsys.methods.baselines.TurnRAG"
    )
    assert "method_source" not in provenance() and "method_source" not in provenance("x.Y")


def test_a_run_whose_method_source_changed_is_marked_stale_and_one_without_a_record_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = {TURN_RAG["_target_"]: "111111111111", ZERO["_target_"]: "222222222222"}
    asked: list[str] = []
    monkeypatch.setattr(
        "benchmarks.runs.rows.method_source",
        lambda target: asked.append(target) or now[target],
    )
    runs = tmp_path / "runs"
    recorded = {"stale": "000000000000", "current": "222222222222", "unknown": None}
    methods = {"stale": TURN_RAG, "current": ZERO, "unknown": NEW_METHOD}
    for name, digest in recorded.items():
        directory = write_run(runs, name, config(methods[name]), scored([1.0, 0.0]))
        costs = {"questions": 1, "wall_s": 1.0, "peak_rss_mb": 100, "construction_s": 0.0}
        ledger = [{**costs, "provenance": {"method_source": "999999999999"}}]
        ledger.append({**costs, "provenance": {}})  # the latest to answer: its record decides
        # then a rerun with nothing left to do, under the current source: it changes nothing
        current = now.get(methods[name]["_target_"], "333333333333")
        ledger.append({**costs, "questions": 0, "provenance": {"method_source": current}})
        if digest is not None:
            ledger[1]["provenance"]["method_source"] = digest
        (directory / "invocations.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ledger))
    out = tmp_path / "table"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    assert sorted(asked) == sorted(now)  # once per method target, and none for "unknown"
    markdown = out.with_suffix(".md").read_text()
    header, *rows = markdown_section(markdown, "Costs")
    runs_shown = sorted(dict(zip(header, row, strict=True))["Run"] for row in rows)
    assert runs_shown == ["current", "stale †", "unknown"]
    line = (
        "† stale: the method's source changed since this run was produced (run stale: recorded "
        "000000000000, now 111111111111)"
    )
    assert markdown.endswith(f". {line}\n")  # the last of the notes
    assert f". {line}\n" in out.with_suffix(".csv").read_text()
    assert r"stale \dag{}" in out.with_suffix(".tex").read_text()


def test_no_stale_line_without_a_stale_row(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "a", config(TURN_RAG), scored([1.0, 0.0]))  # no ledger: unknown
    assert build_report(runs).notes.text("stale") is None
