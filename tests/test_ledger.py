"""``memsys-bench results status``: each run a committed table shows is fresh, restamped,
stale-code, stale-config, partial or missing; pending tables are listed, never failed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from fakes.segment import write_segmentation_data
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from run_helpers import CONF, compose_config, fixture_overrides

from benchmarks.checks.ledger import config_state, main
from benchmarks.pipeline.run import run
from benchmarks.pipeline.segment import run as segment
from benchmarks.runs.restamps import RESTAMPS_FILE


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished retrieval-only TurnRAG (bm25) run on the tiny fixture."""
    root = tmp_path_factory.mktemp("ledger")
    overrides = [*fixture_overrides(root / "runs", root / "cache"), "method=turn_rag_bm25",
                 "answer=none"]  # fmt: skip
    return Path(run(compose_config(overrides))["run_dir"])


def checkout(tmp_path: Path, produced: Path, pending: bool = False) -> tuple[Path, Path]:
    """A results folder holding a table that shows ``produced`` (and one it does not have),
    with its ledger; the copied run's folder."""
    runs = tmp_path / "results" / "runs"
    shutil.copytree(produced, runs / produced.name)
    table = f"| TurnRAG | 0.5 | {produced.name} |\n| CAST | 0.4 | 0123456789ab |\n"
    (tmp_path / "results" / "table.md").write_text(table)
    entry = {"pending": "waits on a rebuild"} if pending else {"runs": "results/runs"}
    ledger = {"tables": {"results/table.md": entry}}
    (tmp_path / "results" / "ledger.yaml").write_text(yaml.safe_dump(ledger))
    return tmp_path / "results" / "ledger.yaml", runs / produced.name


def test_each_run_a_table_shows_gets_its_state(
    tmp_path: Path, produced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, run_dir = checkout(tmp_path, produced)
    assert main(["--ledger", str(ledger), "--verbose"]) == 1  # the CAST run is missing
    out = capsys.readouterr().out
    assert f"{produced.name} fresh: turn_rag_bm25" in out
    assert "0123456789ab missing" in out and "2 runs: 1 fresh, 1 missing" in out

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["method"]["top_k"] = 7  # a setting no TurnRAG config has today
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    main(["--ledger", str(ledger)])
    assert "stale-config: nearest config turn_rag_bm25: top_k: 7 (today null)" in (
        capsys.readouterr().out
    )

    shutil.copy(produced / "config.yaml", run_dir / "config.yaml")
    ledger_lines = (run_dir / "invocations.jsonl").read_text().splitlines()
    old = [json.loads(line) for line in ledger_lines]
    for line in old:
        line["provenance"]["method_source"] = "0ld50urce000"
    (run_dir / "invocations.jsonl").write_text("".join(json.dumps(x) + "\n" for x in old))
    main(["--ledger", str(ledger)])
    assert f"{produced.name} stale-code: recorded 0ld50urce000" in capsys.readouterr().out

    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))  # top_k 7 and the old source
    main(["--ledger", str(ledger)])
    assert (  # rebuilt under today's config, which brings today's code: stale-config first
        f"{produced.name} stale-config: nearest config turn_rag_bm25: top_k: 7 (today null); "
        "and its code: recorded 0ld50urce000" in capsys.readouterr().out
    )
    shutil.copy(produced / "config.yaml", run_dir / "config.yaml")

    now = json.loads(ledger_lines[-1])["provenance"]["method_source"]
    stamp = {"recorded": "0ld50urce000", "now": now, "questions": 6, "conversations": 1}
    (run_dir / RESTAMPS_FILE).write_text(json.dumps(stamp) + "\n")
    main(["--ledger", str(ledger), "--verbose"])
    assert f"{produced.name} restamped" in capsys.readouterr().out

    (run_dir / "metrics.json").unlink()
    main(["--ledger", str(ledger)])
    assert f"{produced.name} partial" in capsys.readouterr().out


def test_a_pending_table_is_listed_with_its_reason_and_passes(
    tmp_path: Path, produced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, _ = checkout(tmp_path, produced, pending=True)
    assert main(["--ledger", str(ledger)]) == 0
    assert capsys.readouterr().out == "results/table.md: pending: waits on a rebuild\n"


def test_a_measured_page_is_listed_with_how_it_was_measured_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "results").mkdir()
    ledger = tmp_path / "results" / "ledger.yaml"
    entry = {"measured": "memsys-bench plan on 2026-11-29"}
    ledger.write_text(yaml.safe_dump({"tables": {"results/plan.md": entry}}))
    assert main(["--ledger", str(ledger)]) == 0
    assert capsys.readouterr().out == "results/plan.md: measured: memsys-bench plan on 2026-11-29\n"


def test_a_renamed_key_is_mapped_not_counted_as_a_change() -> None:
    settings = OmegaConf.to_container(compose_config(["method=hingemem"]).method, resolve=True)
    assert isinstance(settings, dict)
    rule = settings["retrieval"].pop("candidate_rule")
    old = {**settings, "retrieval": {**settings["retrieval"], "routing": rule}}
    assert config_state(old) == (True, "hingemem")
    old["retrieval"]["routing"] = "intersect"  # HingeMem's intersect variant, under its old key
    variant = "it is the variant hingemem_intersect_routing, not what its row's name stands for"
    assert config_state(old) == (False, variant)
    assert config_state(old, "ablations") == (True, "hingemem_intersect_routing")
    outside = "it is hingemem_intersect_routing, which the retrieval_lme grid does not run"
    assert config_state(old, "retrieval_lme") == (False, outside)


def test_a_segmentation_run_is_checked_against_its_segmenter_and_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A segmentation table's runs: fresh while the segmenter config and its source are today's;
    a setting no config has, or a recorded source that is not today's, is named; a resume with
    nothing to segment keeps the provenance of the code that segmented."""
    data = write_segmentation_data(tmp_path / "data")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="segment",
            overrides=[f"data_dir={data}", f"cache_dir={tmp_path / 'cache'}",
                       f"results_dir={tmp_path / 'results' / 'runs'}", "progress=false"],
        )  # fmt: skip
    run_dir = Path(segment(cfg)["run_dir"])
    source = json.loads((run_dir / "metrics.json").read_text())["provenance"]["method_source"]
    (tmp_path / "results" / "table.md").write_text(f"| TextTiling | 0.4 | {run_dir.name} |\n")
    ledger = tmp_path / "results" / "ledger.yaml"
    ledger.write_text(yaml.safe_dump({"tables": {"results/table.md": {"runs": "results/runs"}}}))
    assert main(["--ledger", str(ledger), "--verbose"]) == 0
    assert f"{run_dir.name} fresh: texttiling" in capsys.readouterr().out

    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["provenance"]["method_source"] = "0ld50urce000"
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    assert segment(cfg)["provenance"]["method_source"] == "0ld50urce000"  # nothing segmented
    assert main(["--ledger", str(ledger)]) == 1
    assert f"{run_dir.name} stale-code: recorded 0ld50urce000, now {source}" in (
        capsys.readouterr().out
    )

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["segmenter"]["block_size"] = 9
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    metrics["provenance"]["method_source"] = source
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    main(["--ledger", str(ledger)])
    assert "stale-config: nearest segmenter config texttiling: block_size: 9 (today 2)" in (
        capsys.readouterr().out
    )
