"""The segmentation table's published side: which measured rows meet a quoted row (published
value and Δ under them), and the quoted Scores their own parts do not give."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from fakes.segment import write_segmentation_data
from hydra import compose, initialize_config_dir

from benchmarks.data.paths import REPO_ROOT
from benchmarks.papers.segmentation import QuotedRow, published_segmentation
from benchmarks.pipeline.segment import run
from benchmarks.runs.segmentation import (
    MeasuredCell,
    RowKey,
    configured_segmenter,
    published_counterpart,
)
from benchmarks.tables.segmentation import csv_rows, footnotes, measured_table, quoted_table
from benchmarks.tables.segmentation import main as table_cli

CONF = REPO_ROOT / "conf"
NEW = "TextTiling (SuperDialSeg: NLTK w=10, k=6)"
OLD = "TextTiling (utterance-level, dev-tuned)"


@pytest.fixture(scope="module")
def quoted() -> list[QuotedRow]:
    return published_segmentation()


def cell(
    name: str, node: dict[str, Any], *, mode: str = "lite", backbone: str = ""
) -> MeasuredCell:
    scores: dict[str, Any] = {
        "pk": 0.480,
        "wd": 0.490,
        "f1": 0.250,
        "f1_macro": 0.5,
        "score": 0.3822,
    }
    scores["ci95"] = {metric: [0.0, 1.0] for metric in scores}
    return MeasuredCell(
        key=RowKey(name, mode, backbone),
        dataset="dialseg711",
        n=711,
        n_split=711,
        scores=scores,
        cost={"llm_calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0, "fallbacks": 0},
        run_dir=Path("results/runs/segmentation/x"),
        segmenter_node=node,
    )


def test_the_reproduced_texttiling_meets_table_4s_texttiling(quoted: list[QuotedRow]) -> None:
    reproduced = cell(NEW, configured_segmenter("texttiling_superdialseg"))
    found = published_counterpart(reproduced, quoted)
    assert found is not None and (found.row, found.config) == (
        "TextTiling",
        "segmenter=texttiling_superdialseg",
    )
    body = measured_table("dialseg711", [reproduced], footnotes(0), quoted).rows
    assert len(body) == 2
    line = body[1]
    assert line[0] == "↳ published⁴: TextTiling (ES-Mem Table 4)"
    # measured 0.480 / 0.490 / 0.250 / 0.3822 against printed 0.470 / 0.493 / 0.245 / 0.382
    assert line[4:8] == [
        "0.470 (Δ +0.010)",
        "0.493 (Δ −0.003)",
        "0.245 (Δ +0.005)",
        "0.382 (Δ ±0.000)",
    ]
    row = csv_rows([reproduced], quoted)[0]
    assert row["published_row"] == "ES-Mem Table 4: TextTiling"
    assert row["pk_published"] == 0.470 and row["pk_delta"] == pytest.approx(0.010)


def test_rows_whose_setting_differs_stay_unpaired(quoted: list[QuotedRow]) -> None:
    changed = {**configured_segmenter("texttiling_superdialseg"), "w": 20}
    esmem = configured_segmenter("esmem")
    unpaired = [
        cell(NEW, changed),  # another w: not SuperDialSeg's TextTiling
        cell(OLD, configured_segmenter("texttiling")),  # the harness's own TextTiling
        cell("ES-Mem segmentation", configured_segmenter("esmem_lite")),  # no LLM call
        cell("ES-Mem segmentation", esmem, mode="llm", backbone="smollm2-135m"),
        cell(
            "SeCom segmentation", configured_segmenter("secom"), mode="llm", backbone="qwen2.5-3b"
        ),
    ]
    for measured in unpaired:
        assert published_counterpart(measured, quoted) is None, measured.key
        assert len(measured_table("dialseg711", [measured], footnotes(0), quoted).rows) == 1
    on_qwen = cell("ES-Mem segmentation", esmem, mode="llm", backbone="qwen2.5-3b")
    found = published_counterpart(on_qwen, quoted)
    assert found is not None and found.row == "ES-Mem (Ours)"
    subset = dataclasses.replace(on_qwen, n=5)  # the first 5 dialogues: not the published mean
    assert published_counterpart(subset, quoted) is None


def test_a_printed_score_its_parts_do_not_give_is_marked(quoted: list[QuotedRow]) -> None:
    marked = {
        (row.row, dataset): value
        for row in quoted
        for dataset, value in row.inconsistent_scores().items()
    }
    assert marked == {("BERT", "superdialseg"): pytest.approx(0.75275)}
    table = quoted_table(quoted)
    cells = [value for row in table.rows for value in row]
    assert [value for value in cells if "†" in value] == ["0.745†"]
    assert table.notes == ["† BERT, SuperDialSeg: printed 0.745; its Pk, WD, F1 give 0.753."]
    rows = [r for r in csv_rows([], quoted) if r.get("score_inconsistent")]
    assert [(r["method"], r["dataset"], r["score_from_parts"]) for r in rows] == [
        ("BERT", "superdialseg", 0.75275)
    ]


def test_a_real_run_is_paired_through_its_config_file(tmp_path: Path) -> None:
    data = write_segmentation_data(tmp_path / "data")
    for segmenter in ("texttiling", "texttiling_superdialseg"):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(
                config_name="segment",
                overrides=[
                    f"segmenter={segmenter}",
                    f"data_dir={data}",
                    f"cache_dir={tmp_path / 'cache'}",
                    f"results_dir={tmp_path / 'runs'}",
                    "progress=false",
                ],
            )
        run(cfg)
    out = tmp_path / "table"
    args = ["--runs", str(tmp_path / "runs"), "--out", str(out), "--data-dir", str(data)]
    assert table_cli(args) == 0
    measured = out.with_suffix(".md").read_text().split("## Published")[0]
    assert f"| {OLD} | lite |" in measured and f"| {NEW} | lite |" in measured
    assert measured.count("↳ published") == 1
    lines = measured.splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith(f"| {NEW} "))) + 1].startswith(
        "| ↳ published⁴: TextTiling (ES-Mem Table 4) | quoted |"
    )
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    paired = [r for r in rows if r["published_row"]]
    assert [r["method"] for r in paired] == [NEW]
