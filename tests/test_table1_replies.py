"""Table 1's recorded replies: ``llm_cache_mode=recorded`` serves a reply only for a request that
matches a recorded one byte for byte, asks (and counts) any other, and the shipped file
reproduces the committed table's numbers."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.config.compose import compose_config
from benchmarks.config.values import ConfigError
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.settings import validate
from memsys.llm.accounting import Accounting
from memsys.llm.backbone import Backbone
from memsys.llm.cache import request_key
from memsys.llm.providers.scripted import ScriptedConfig
from memsys.llm.replay import (
    entry_json,
    load_recorded,
    open_response_cache,
    read_entries,
    write_replay_file,
)
from memsys.llm.types import Completion, LLMRequest, SamplingParams

SHIPPED = REPO_ROOT / "results" / "table1_replies.jsonl.gz"
TABLE = REPO_ROOT / "results" / "table1.csv"
QUESTION = ({"role": "user", "content": "When did Caroline go to the support group?"},)


def recorded_file(tmp_path: Path, model_id: str, text: str) -> Path:
    """A replay file of one reply to :data:`QUESTION`."""
    request = LLMRequest(QUESTION, SamplingParams(max_tokens=32))
    key = request_key(model_id, request)
    entry = json.loads(entry_json(key, model_id, request, Completion(text, 10, 3, "stop")))
    path = tmp_path / "replies.jsonl.gz"
    write_replay_file({key: entry}, path)
    return path


def test_recorded_mode_serves_exact_matches_and_asks_the_rest(tmp_path: Path) -> None:
    provider = ScriptedConfig().build()
    replies = recorded_file(tmp_path, provider.model_id, "7 May 2023 (recorded)")
    journal = tmp_path / "journal.jsonl"
    cache = open_response_cache(tmp_path / "cache", "recorded", journal, replies)
    accounting = Accounting()
    backbone = Backbone(provider, cache=cache, accounting=accounting)

    served = backbone.complete(QUESTION, SamplingParams(max_tokens=32))
    other = backbone.complete(QUESTION, SamplingParams(max_tokens=33))  # one sampling value off

    assert served.text == "7 May 2023 (recorded)" and served.cached
    assert other.text != served.text and not other.cached
    totals = accounting.totals()
    assert (totals["calls"], totals["cache_hits"]) == (2, 1)  # the run's count of asked requests
    assert not (tmp_path / "cache").exists()  # recorded mode writes no cache
    assert len(read_entries([journal])) == 2  # both, so a re-recording holds the fresh reply


def test_recorded_mode_needs_its_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="llm_replies"):
        open_response_cache(tmp_path, "recorded")
    with pytest.raises(FileNotFoundError, match="no file"):
        open_response_cache(tmp_path, "recorded", None, tmp_path / "absent.jsonl.gz")


def test_gzip_replay_file_is_byte_stable_and_checked(tmp_path: Path) -> None:
    path = recorded_file(tmp_path, "m", "reply")
    first = path.read_bytes()
    write_replay_file(read_entries([path]), path)
    assert path.read_bytes() == first  # no time stamp in the gzip header: a diff-free rewrite
    entry = json.loads(gzip.decompress(first))
    entry["completion"]["text"] = "edited"
    entry["request"]["params"]["max_tokens"] = 64  # the stored key no longer matches
    path.write_bytes(gzip.compress(json.dumps(entry).encode()))
    with pytest.raises(ValueError, match="does not match its request"):
        load_recorded(path)


def committed_row(run_id: str) -> dict[str, str]:
    """The committed Table 1 csv's row of a run."""
    lines = [line for line in TABLE.read_text(encoding="utf-8").splitlines() if line[:1] != "#"]
    rows = [row for row in csv.DictReader(lines) if row["run"] == run_id]
    assert len(rows) == 1, f"run {run_id} is not one row of {TABLE}"
    return rows[0]


@pytest.mark.skipif(
    not Path(os.environ.get("MEMBENCH_DATA", REPO_ROOT.parent / "shared" / "data"))
    .joinpath("locomo", "locomo10.json")
    .is_file(),
    reason="needs LoCoMo in the data folder (make data)",
)
def test_shipped_replies_reproduce_a_committed_row(tmp_path: Path) -> None:
    """One QA run of Table 1 from a cold cache on the shipped replies: no request asked, and its
    scores are the committed table's (the csv rounds to 4 decimals)."""
    results = tmp_path / "runs"
    command = [
        sys.executable,
        "-m",
        "benchmarks.pipeline.run",
        "+experiment=table1",
        "method=session_rag_bm25",
        f"results_dir={results}",
        f"cache_dir={tmp_path / 'cache'}",
        "llm_cache_mode=recorded",
        f"llm_replies={SHIPPED}",
        "progress=false",
    ]
    subprocess.run(command, cwd=REPO_ROOT, check=True, capture_output=True, timeout=300)
    (run_dir,) = [path for path in results.iterdir() if not path.name.startswith(".")]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    total = metrics["accounting"]["total"]
    assert total["calls"] > 0 and total["calls"] == total["cache_hits"]
    row = committed_row(run_dir.name)
    for name in ("f1_set", "bleu1", "judge_acc"):
        assert round(metrics["scores"][name]["mean"], 4) == float(row[f"overall_{name}_mean"])


def test_recorded_mode_without_its_file_is_a_config_error(tmp_path: Path) -> None:
    for extra, named in (([], "not set"), ([f"llm_replies={tmp_path / 'x.gz'}"], "no file")):
        cfg = compose_config(["method=turn_rag_bm25", "llm_cache_mode=recorded", *extra])
        with pytest.raises(ConfigError, match=f"'llm_replies'.*{named}"):
            validate(cfg)
