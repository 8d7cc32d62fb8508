"""``memsys-bench results rebuild``: exactly the stale or partial rows of a ledger's tables are
rerun (a stale-code row under its own config, a stale-config row under today's nearest config), a
run cut short resumes, and the table is re-rendered; status then passes."""

from __future__ import annotations

from pathlib import Path

import yaml
from run_helpers import FIXTURE, compose_config, fixture_overrides, pretend_produced_under

from benchmarks.checks import ledger, rebuild
from benchmarks.pipeline.run import run


def _table(tmp_path: Path, overrides: list[str]) -> tuple[Path, Path, Path]:
    """A committed table of one retrieval run: its runs folder, its ledger, its markdown."""
    results, cache = tmp_path / "results", tmp_path / "cache"
    runs = results / "runs"
    run(compose_config([*fixture_overrides(runs, cache), "answer=none", *overrides]))
    render = ["report", "--runs", str(runs), "--dataset", "locomo", "--subset", "full",
              "--where", "answer.template=null", "--out", str(results / "table")]  # fmt: skip
    entry = {"runs": "results/runs", "render": render, "overrides": [f"data_dir={FIXTURE}"]}
    path = results / "ledger.yaml"
    path.write_text(yaml.safe_dump({"tables": {"results/table.md": entry}}))
    rebuild.render(entry, tmp_path)
    return runs, path, results / "table.md"


def _rebuild(path: Path, cache: Path, *extra: str) -> int:
    return rebuild.main(["--ledger", str(path), "--cache-dir", str(cache), *extra])


def test_a_stale_code_row_is_rerun_under_its_own_config_and_the_table_rerendered(
    tmp_path: Path, capsys
) -> None:
    runs, path, table = _table(tmp_path, ["method=turn_rag_bm25"])
    (run_dir,) = runs.iterdir()
    assert _rebuild(path, tmp_path / "cache") == 0  # nothing stale: nothing run
    assert "to rebuild" not in capsys.readouterr().out
    pristine = (run_dir / "predictions.jsonl").read_text()
    pretend_produced_under(run_dir, "0ld50urce000")
    assert ledger.main(["--ledger", str(path)]) == 1

    assert _rebuild(path, tmp_path / "cache", "--dry-run") == 0
    out = capsys.readouterr().out
    assert f"{run_dir.name} stale-code: last built in" in out
    assert "0ld50urce000" in (run_dir / "invocations.jsonl").read_text()  # dry: untouched

    assert _rebuild(path, tmp_path / "cache") == 0
    assert ledger.main(["--ledger", str(path)]) == 0
    assert (run_dir / "predictions.jsonl").read_text().count("\n") == pristine.count("\n")
    assert not (tmp_path / "cache" / rebuild.SUPERSEDED / run_dir.name).exists()
    assert run_dir.name in table.read_text()


def test_a_stale_config_row_moves_to_todays_config_and_a_cut_run_resumes(
    tmp_path: Path, capsys
) -> None:
    runs, path, table = _table(tmp_path, ["method=turn_rag_bm25", "method.top_k=7"])
    (old,) = runs.iterdir()
    assert ledger.main(["--ledger", str(path)]) == 1
    assert "nearest config turn_rag_bm25: top_k: 7" in capsys.readouterr().out
    assert _rebuild(path, tmp_path / "cache") == 0
    (new,) = runs.iterdir()  # the old run removed once today's finished
    assert new.name != old.name and new.name in table.read_text()
    assert old.name not in table.read_text()
    assert ledger.main(["--ledger", str(path)]) == 0

    # A rebuild cut short leaves a partial run; the next one resumes it.
    (new / "metrics.json").unlink()
    records = (new / "predictions.jsonl").read_text().splitlines(keepends=True)
    (new / "predictions.jsonl").write_text("".join(records[:2]))
    assert ledger.main(["--ledger", str(path)]) == 1
    assert _rebuild(path, tmp_path / "cache") == 0
    assert len((new / "predictions.jsonl").read_text().splitlines()) == len(records)
    assert ledger.main(["--ledger", str(path)]) == 0
