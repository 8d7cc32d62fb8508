"""Table 1 as the offline main job (``--retrieval-subset``): the retrieval rows of the QA grid's
methods on their own subset first, under both keys, then the QA pipeline check and the costs of
each, with one list of notes whose markers point at the right texts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from report_helpers import (
    MARKERS,
    NEW_METHOD,
    TURN_RAG,
    ZERO,
    config,
    markdown_section,
    read_table,
    scored,
    write_run,
)

from benchmarks.tables.report.cli import main

THREE = {"name": "three", "conversations": 3, "max_questions": None}


def note_of(markdown: str, header_cell: str) -> str:
    """The text of the note a header cell's marker points at."""
    marker = header_cell.lstrip("".join(c for c in header_cell if c not in MARKERS))
    number = int(marker.translate(str.maketrans(MARKERS, "0123456789")))
    notes = markdown.split("## Notes\n\n", 1)[1].splitlines()
    return next(line for line in notes if line.startswith(f"{number}. ")).split(". ", 1)[1]


def test_retrieval_columns_lead_and_the_qa_grid_follows_as_a_pipeline_check(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "qa_turn", config(TURN_RAG), scored([0.0, 1.0]))
    write_run(runs, "qa_zero", config(ZERO), scored([0.0, 0.0]))
    retrieval = config(TURN_RAG, template=None, subset=THREE)
    write_run(runs, "ret_turn", retrieval, scored([None] * 6))  # type: ignore[list-item]
    other = config(NEW_METHOD, template=None, subset=THREE)  # not in the QA grid: left out
    write_run(runs, "ret_other", other, scored([None] * 6))  # type: ignore[list-item]
    metrics = json.loads((runs / "qa_turn" / "metrics.json").read_text())
    metrics["accounting"]["total"] = {"calls": 82, "cache_hits": 80}
    (runs / "qa_turn" / "metrics.json").write_text(json.dumps(metrics))
    out = tmp_path / "table1"

    assert main(["--runs", str(runs), "--retrieval-subset", "three", "--out", str(out)]) == 0

    markdown = out.with_suffix(".md").read_text()
    titles = re.findall(r"^## (.+)$", markdown, flags=re.MULTILINE)
    assert titles == [
        "Overall: retrieval (6 questions, no LLM)",
        "QA pipeline check (2 questions, reader tiny-llm)",
        "Costs: retrieval columns",
        "Costs: QA pipeline check",
        "Notes",
    ]
    header, *rows = markdown_section(markdown, titles[0])
    assert header[:5] == ["Method", "Ev. recall pub", "aud", "Δ", "Ans. cov. pub"]
    assert [row[0] for row in rows] == ["TurnRAG (dense)"]
    qa_header, *qa_rows = markdown_section(markdown, titles[1])
    assert qa_header == ["Method", "F1", "BLEU-1", "J", "p"]  # a judge without probes is shown
    assert len(qa_rows) == 2
    costs = dict(zip(*markdown_section(markdown, titles[3])[:2], strict=True))
    assert costs["Asked"] == "2 / 82"
    raw = markdown.split(f"## {titles[1]}\n\n", 1)[1].split("\n\n")[1].splitlines()[0]
    f1_cell = raw.strip("| ").split(" | ")[1]
    assert note_of(markdown, f1_cell).startswith("F1: f1_set")
    raw = markdown.split(f"## {titles[0]}\n\n", 1)[1].split("\n\n")[1].splitlines()[0]
    evidence_cell = raw.strip("| ").split(" | ")[1]
    assert note_of(markdown, evidence_cell).startswith("Ev. recall: evidence recall")
    assert "No retrieval run on the retrieval subset: ZeroHistory" in markdown
    assert markdown.count("QA pipeline check: Statistics:") == 1  # differs from the retrieval's
    table = read_table(out)
    assert sorted(table["subset"]) == ["smoke", "smoke", "three"]
