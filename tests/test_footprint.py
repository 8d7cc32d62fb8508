"""A memory's footprint (items, tokens and bytes stored; what its construction asked of the
services) in ``memories.jsonl`` and ``metrics.json``: measured once per conversation, the same
whether the memory was built now or loaded from the memory cache."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import compose_config, fixture_overrides

from benchmarks.pipeline.footprint import FOOTPRINT_FILE, summarize_footprints
from benchmarks.pipeline.run import run
from memsys.tokens import TokenCounter


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / FOOTPRINT_FILE).read_text().splitlines()]


def test_footprint_of_a_session_memory_built_then_loaded(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    overrides = ["method=session_rag_dense", "answer=none"]
    first = run(compose_config([*fixture_overrides(tmp_path / "a", cache), *overrides]))
    (line,) = _lines(Path(first["run_dir"]))
    # Two sessions stored, embedded once each at construction; no LLM, no parser.
    assert line["conversation_id"] == "tiny-1" and line["items"] == 2
    assert line["construction"] == {"llm_requests": 0, "texts_embedded": 2, "texts_parsed": 0}
    memory_file = next((cache / "memories" / "sessionrag").glob("*.json"))
    payload = json.loads(memory_file.read_text())["payload"]
    texts = [item["text"] for item in payload["items"]]
    assert line["tokens"] == sum(TokenCounter().count(text) for text in texts) > 20
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert line["bytes"] == len(canonical.encode())
    summary = first["footprint"]
    assert summary["conversations"] == summary["costed"] == 1
    assert summary["items"] == {"mean": 2.0, "max": 2}
    assert summary["texts_embedded"] == {"mean": 2.0, "max": 2}

    # Loaded from the memory cache by another run: the same footprint, its cost as recorded.
    again = run(compose_config([*fixture_overrides(tmp_path / "b", cache), *overrides]))
    assert again["construction"]["loaded"] == 1 and again["construction"]["built"] == 0
    assert _lines(Path(again["run_dir"])) == [line]
    # Resumed with nothing to do: still one line, the same summary.
    resumed = run(compose_config([*fixture_overrides(tmp_path / "b", cache), *overrides]))
    assert _lines(Path(resumed["run_dir"])) == [line]
    assert resumed["footprint"] == summary


def test_a_parsing_method_counts_the_texts_it_parsed(tmp_path: Path) -> None:
    summary = run(
        compose_config(
            [*fixture_overrides(tmp_path, tmp_path / "cache"), "method=fracom", "answer=none"]
        )
    )
    (line,) = _lines(Path(summary["run_dir"]))
    assert line["construction"]["llm_requests"] == 0
    assert line["construction"]["texts_parsed"] >= 8  # the 8 turns, at least
    assert line["items"] > 0 and line["tokens"] > line["items"]


def test_memories_cached_before_costs_were_recorded_are_counted_apart() -> None:
    summary = summarize_footprints(
        [
            {"items": 3, "tokens": 30, "bytes": 500, "construction": None},
            {
                "items": 5,
                "tokens": 70,
                "bytes": 900,
                "construction": {"llm_requests": 4, "texts_embedded": 9, "texts_parsed": 0},
            },
        ]
    )
    assert summary is not None
    assert (summary["conversations"], summary["costed"]) == (2, 1)
    assert summary["tokens"] == {"mean": 50.0, "max": 70}
    assert summary["llm_requests"] == {"mean": 4.0, "max": 4}
    assert summarize_footprints([]) is None


def test_the_retrieval_costs_table_shows_the_footprint(tmp_path: Path) -> None:
    from benchmarks.tables.report.cli import main

    results = tmp_path / "runs"
    summary = run(
        compose_config(
            [*fixture_overrides(results, tmp_path / "cache"), "method=turn_rag_bm25", "answer=none"]
        )
    )
    found = summary["footprint"]
    assert found["items"]["mean"] == 8  # the fixture's 8 turns
    out = tmp_path / "table"
    assert (
        main(["--runs", str(results), "--dataset", "locomo", "--subset", "full", "--out", str(out)])
        == 0
    )
    table = out.with_suffix(".md").read_text()
    header = next(line for line in table.splitlines() if "Memory: items · tok · KB" in line)
    row = next(line for line in table.splitlines() if "TurnRAG" in line and "·" in line)
    column = header.split("|").index(next(c for c in header.split("|") if "Memory" in c))
    kilobytes = round(found["bytes"]["mean"] / 1000)
    assert row.split("|")[column].strip() == f"8 · {found['tokens']['mean']:.0f} · {kilobytes}"
