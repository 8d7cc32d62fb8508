"""The segmentation runner and table on a tiny data directory: resume, limits, CLI, table."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from fakes.segment import write_segmentation_data
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from benchmarks.config.values import ConfigError
from benchmarks.data.paths import REPO_ROOT
from benchmarks.metrics.segmentation import main as score_cli
from benchmarks.papers.segmentation import published_segmentation
from benchmarks.pipeline.packed import main as pack_cli
from benchmarks.pipeline.runlog import RecordLog
from benchmarks.pipeline.segment import run
from benchmarks.runs.segmentation import collect
from benchmarks.tables.segmentation import main as table_cli
from benchmarks.tables.segmentation import method_cell

CONF = REPO_ROOT / "conf"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMBENCH_DATA", "VLLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_segmentation_data(tmp_path / "data")


def compose_config(tmp_path: Path, data: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="segment",
            overrides=[
                f"data_dir={data}",
                f"cache_dir={tmp_path / 'cache'}",
                f"results_dir={tmp_path / 'runs'}",
                "progress=false",
                *overrides,
            ],
        )


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_extends_and_skips_finished_dialogues(tmp_path: Path, data: Path) -> None:
    first = run(compose_config(tmp_path, data, "limit=2"))
    run_dir = Path(first["run_dir"])
    assert first["n"] == 2 and first["segmented_now"] == 2 and first["dialogues_in_split"] == 4
    assert [r["id"] for r in read_lines(run_dir / "labels.jsonl")] == ["call_id_0", "call_id_1"]
    assert first["pk"] == 0.0 and first["f1"] == 1.0  # TextTiling finds the one switch
    assert first["ci95"]["f1"] == [1.0, 1.0]

    with (run_dir / "labels.jsonl").open("a") as handle:  # a write cut short by kill -9
        handle.write('{"id": "call_id_2", "lab')
    second = run(compose_config(tmp_path, data))  # no limit: same run directory, extended
    assert second["run_dir"] == first["run_dir"]
    assert second["segmented_now"] == 2 and second["n"] == 4 and second["repaired_bytes"] > 0
    records = read_lines(run_dir / "labels.jsonl")
    assert [r["id"] for r in records] == [f"call_id_{k}" for k in range(4)]
    assert records[0]["labels"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert set(records[0]["cost"]) >= {"llm_calls", "seconds", "fallbacks", "texts_embedded"}

    third = run(compose_config(tmp_path, data, "limit=3", "seed=7"))
    assert third["segmented_now"] == 0 and third["n"] == 3
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 3 and metrics["limit"] == 3
    assert "limit" not in (run_dir / "config.yaml").read_text()

    # the scorer CLI reads the run's files as they are
    assert (
        score_cli(
            ["--ref", str(run_dir / "references.jsonl"), "--pred", str(run_dir / "labels.jsonl")]
        )
        == 2
    )  # labels cover 4, references 3
    run(compose_config(tmp_path, data))
    assert (
        score_cli(
            ["--ref", str(run_dir / "references.jsonl"), "--pred", str(run_dir / "labels.jsonl")]
        )
        == 0
    )


def test_other_configs_get_other_run_directories(tmp_path: Path, data: Path) -> None:
    a = run(compose_config(tmp_path, data, "dataset=tiage"))
    b = run(compose_config(tmp_path, data, "dataset=tiage", "segmenter.block_size=1"))
    c = run(compose_config(tmp_path, data, "dataset=tiage", "dataset.split=dev"))
    assert len({a["run_dir"], b["run_dir"], c["run_dir"]}) == 3
    assert a["dataset"] == "tiage" and a["n"] == 3 and c["split"] == "dev"
    identity = (Path(a["run_dir"]) / "config.yaml").read_text()
    assert "backbone" not in identity and "data_dir" not in identity


def test_llm_segmenter_through_an_openai_compatible_server(tmp_path: Path, data: Path) -> None:
    with FakeChatServer() as server:  # echoes the prompt back: never a usable segmentation
        summary = run(
            compose_config(
                tmp_path,
                data,
                "segmenter=secom",
                "backbone=openai_server",
                "backbone.provider.model=fake",
                f"backbone.provider.base_url={server.base_url}",
                "limit=2",
            )
        )
    # each dialogue asked twice (the retry rule), then fixed chunks
    assert summary["cost"]["llm_calls"] == 4 and summary["cost"]["fallbacks"] == {"segmentation": 2}
    assert summary["accounting"]["stages"]["segmentation"]["calls"] == 4
    assert "ok" not in summary["replies"]["segmentation"]
    records = read_lines(Path(summary["run_dir"]) / "labels.jsonl")
    assert records[0]["labels"] == [0, 0, 1, 0, 0, 1, 0, 0]
    assert records[0]["details"]["problem"]
    assert "backbone" in (Path(summary["run_dir"]) / "config.yaml").read_text()


def test_reflection_trains_on_the_requested_split_before_segmenting(
    tmp_path: Path, data: Path
) -> None:
    overrides = [
        "segmenter=secom_reflection",
        "segmenter.reflection.dialogues=2",
        "segmenter.reflection.hard_examples=1",
        "backbone=openai_server",
        "backbone.provider.model=fake",
        "limit=1",
    ]
    with FakeChatServer() as server:
        url = f"backbone.provider.base_url={server.base_url}"
        summary = run(compose_config(tmp_path, data, *overrides, url))
        again = run(compose_config(tmp_path, data, *overrides, url, "limit=2"))
    training = summary["training"]
    assert training["training_dialogues"] == 2 and training["cached"] is False
    assert training["reflection_cost"]["calls"] == 2  # an echo holds no rubric item: asked again
    # the zero-shot segmentations (echoes: each asked twice) of 2 dialogues, 1 reflection twice
    assert summary["accounting"]["stages"]["reflection"]["calls"] == 2 * 2 + 2
    assert summary["accounting"]["stages"]["segmentation"]["calls"] == 2
    assert again["training"]["cached"] is True  # the guidance store answered
    assert "reflection" not in again["accounting"]["stages"]
    assert (Path(summary["run_dir"]) / "training.json").exists()
    # echoes never parse: both training dialogues and the test dialogues are fixed chunks
    assert training["zero_shot_fallbacks"] == 2 and training["rubric_items"] == 0
    assert again["dialogues_with_fallback"] == 2

    out = tmp_path / "table"
    table_args = ["--runs", str(tmp_path / "runs"), "--out", str(out), "--data-dir", str(data)]
    assert table_cli(table_args) == 0
    markdown = out.with_suffix(".md").read_text()
    label = "SeCom segmentation + reflection (TIAGE train)"
    reflection = markdown.split("## Reflection (SeCom Appendix A.1)")[1].split("## Published")[0]
    assert f"| {label} — FALLBACK on 2/2 dialogues" in reflection
    assert "| DialSeg711 | 2 | 2 (2) | 1 (1) | 1 × 10 | no_rubric 1 | 0 |" in reflection
    assert "GPT-4-0125" in reflection and "(none)" in reflection


def write_run(
    runs: Path, name: str, backbone: str, fell_back: Sequence[bool], substitute: str | None
) -> None:
    """A finished SeCom run on the fake TIAGE test split, one record per flag, written by hand."""
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    config = {
        "dataset": {"name": "tiage", "split": "test"},
        "segmenter": {
            "_target_": "memsys.methods.secom.segmenter.SeComSegmenter",
            "extraction": "llm",
        },
        "backbone": {"name": backbone},
    }
    (run_dir / "config.yaml").write_text(json.dumps(config))
    (run_dir / "metrics.json").write_text("{}")
    records = []
    for dialogue_id, (length, flag) in enumerate(zip((5, 6, 7), fell_back, strict=False)):
        cost = {"llm_calls": 2 if flag else 1, "prompt_tokens": 10, "completion_tokens": 5}
        details = {"fallback": substitute} if flag and substitute else {}
        cost["fallbacks"] = {"segmentation": 1} if flag else {}
        labels = [0] * length
        records.append({"id": str(dialogue_id), "labels": labels, "cost": cost, "details": details})
    (run_dir / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_table_marks_rows_where_half_the_dialogues_fell_back(tmp_path: Path, data: Path) -> None:
    runs = tmp_path / "runs"
    chunks = "fixed chunks of 3 utterances"
    write_run(runs, "a", "mostly-fallback", [True, False, True], chunks)  # 2/3: marked
    write_run(runs, "b", "half-fallback", [False, True], chunks)  # 1/2: marked (at 50%)
    write_run(runs, "c", "rare-fallback", [False, True, False], chunks)  # 1/3: not marked
    write_run(runs, "d", "unnamed", [True, True, True], None)  # no substitute named
    cells = {c.key.backbone: c for c in collect(runs, data, seed=0)}
    assert method_cell(cells["mostly-fallback"]) == (
        "SeCom segmentation — FALLBACK on 2/3 dialogues: their labels are fixed chunks of 3 "
        "utterances, not SeCom segmentation's"
    )
    assert method_cell(cells["half-fallback"]).startswith("SeCom segmentation — FALLBACK on 1/2 ")
    assert method_cell(cells["rare-fallback"]) == "SeCom segmentation"
    assert "their labels are a non-LLM substitute" in method_cell(cells["unnamed"])

    out = tmp_path / "table"
    assert table_cli(["--runs", str(runs), "--out", str(out), "--data-dir", str(data)]) == 0
    markdown = out.with_suffix(".md").read_text()
    assert "| **SeCom segmentation — FALLBACK on 2/3 dialogues" in markdown
    assert "| SeCom segmentation | llm | rare-fallback | 3 *subset*" not in markdown  # n = split
    assert "| SeCom segmentation | llm | rare-fallback | 3 |" in markdown
    assert markdown.count("FALLBACK on") == 3
    rows = {r["backbone"]: r for r in csv.DictReader(out.with_suffix(".csv").open()) if r["n"]}
    assert rows["mostly-fallback"]["method"] == method_cell(cells["mostly-fallback"])
    assert rows["mostly-fallback"]["dialogues_with_fallback"] == "2"
    assert rows["rare-fallback"]["method"] == "SeCom segmentation"
    assert rows["rare-fallback"]["dialogues_with_fallback"] == "1"


def test_reflection_configs_compose_to_appendix_a1_or_the_stated_sample(
    tmp_path: Path, data: Path
) -> None:
    paper = compose_config(tmp_path, data, "segmenter=secom_reflection").segmenter.reflection
    assert paper.enabled and (paper.dataset, paper.split) == ("tiage", "train")
    assert (paper.dialogues, paper.hard_examples, paper.batch_size) == (None, 100, 10)
    assert paper.max_rubric_items == 10
    sample = compose_config(tmp_path, data, "segmenter=secom_reflection_sample")
    reflection = sample.segmenter.reflection
    assert (reflection.dialogues, reflection.hard_examples, reflection.batch_size) == (10, 10, 1)
    assert reflection.max_rubric_items == 10


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("dataset.name=locomo", "dataset.name"),
        ("dataset.split=train", "dataset.split"),
        ("limit=0", "limit"),
        ("segmenter.block_size=0", "segmenter"),
        ("llm_cache_mode=sometimes", "llm_cache_mode"),
    ],
)
def test_bad_values_name_their_key(tmp_path: Path, data: Path, override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        run(compose_config(tmp_path, data, override))


def test_cli_accepts_dataset_overrides_and_prints_metrics(tmp_path: Path, data: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline.segment",
            "dataset=tiage",
            f"data_dir={data}",
            f"cache_dir={tmp_path / 'cache'}",
            f"results_dir={tmp_path / 'runs'}",
            "progress=false",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["dataset"] == "tiage" and printed["n"] == 3
    assert set(printed["ci95"]) == {"pk", "wd", "f1", "f1_macro", "score"}


def test_label_log_refuses_duplicates(tmp_path: Path) -> None:
    log = RecordLog(tmp_path / "labels.jsonl", key="id")
    log.append([{"id": "a", "labels": [0]}])
    with pytest.raises(ValueError, match="already logged"):
        log.append([{"id": "a", "labels": [0]}])
    assert "a" in RecordLog(tmp_path / "labels.jsonl", key="id")


def test_table_keeps_measured_and_quoted_rows_apart(tmp_path: Path, data: Path) -> None:
    run(compose_config(tmp_path, data, "limit=2"))
    run(compose_config(tmp_path, data))  # the full run supersedes the subset
    run(compose_config(tmp_path, data, "dataset=tiage", "dataset.split=dev"))  # not a test split
    cells = collect(tmp_path / "runs", data, seed=0)
    label = "TextTiling (utterance-level, dev-tuned)"  # not Table 4's (SuperDialSeg's) TextTiling
    assert [(c.key.label, c.dataset, c.n) for c in cells] == [(label, "dialseg711", 4)]

    out = tmp_path / "table"
    assert (
        table_cli(["--runs", str(tmp_path / "runs"), "--out", str(out), "--data-dir", str(data)])
        == 0
    )
    markdown = out.with_suffix(".md").read_text()
    measured, quoted = markdown.split("## Published (quoted verbatim from ES-Mem, Table 4")
    assert f"| {label} | lite | — | 4 | 0.000 [0.000, 0.000]" in measured
    assert "↳ published" not in measured  # the harness's TextTiling is not the published one
    assert "0.470" not in measured and "| Unsupervised | TextTiling | 0.470 | 0.493 |" in quoted
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    assert rows[0]["source"] == "measured" and rows[0]["n"] == "4"
    quoted_rows = [r for r in rows if r["source"].startswith("quoted")]
    assert len(quoted_rows) == sum(len(row.scores) for row in published_segmentation())
    assert all(r["n"] == "" and r["pk_low"] == "" for r in quoted_rows)


def test_table_reports_a_missing_folder(tmp_path: Path, data: Path) -> None:
    assert table_cli(["--runs", str(tmp_path / "nothing"), "--out", str(tmp_path / "t")]) == 2


def test_a_packed_segmentation_run_renders_and_resumes_as_the_plain_one(
    tmp_path: Path, data: Path
) -> None:
    """Committed segmentation runs are packed (``labels.jsonl.gz``): the table reads them as the
    plain ones, and a resumed run unpacks them and segments nothing again."""
    run_dir = Path(run(compose_config(tmp_path, data))["run_dir"])
    argv = ["--runs", str(tmp_path / "runs"), "--data-dir", str(data)]
    assert table_cli([*argv, "--out", str(tmp_path / "plain")]) == 0
    labels = (run_dir / "labels.jsonl").read_bytes()

    assert pack_cli([str(run_dir)]) == 0
    assert not (run_dir / "labels.jsonl").exists() and (run_dir / "labels.jsonl.gz").exists()
    assert table_cli([*argv, "--out", str(tmp_path / "packed")]) == 0
    assert (tmp_path / "packed.md").read_text() == (tmp_path / "plain.md").read_text()

    again = run(compose_config(tmp_path, data))
    assert again["segmented_now"] == 0 and (run_dir / "labels.jsonl").read_bytes() == labels
