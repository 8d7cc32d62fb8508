"""Every committed table built from committed runs (``results/ledger.yaml`` entries with a
``render`` command: Tables 1 and 2, the LongMemEval-S retrieval tables, the ablation and
segmentation tables) is what its render command makes of the run records committed beside it,
so every cell can be traced to the lines behind it on any clone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks.checks.ledger import LEDGER
from benchmarks.console import main
from benchmarks.data.paths import REPO_ROOT

#: The ledger's tables with a render command whose runs are here: committed, or built in this
#: checkout where the ledger says why they are not committed (the frontier, full LoCoMo).
RENDERED = {
    table: entry["render"]
    for table, entry in yaml.safe_load(LEDGER.read_text())["tables"].items()
    if "render" in entry and (REPO_ROOT / entry["runs"]).is_dir()
}
#: The files each render command writes that are compared (figures apart): by default the
#: markdown, csv and LaTeX of a report.
COMPARED = {
    "ablations": (".md", ".json"),
    "segmentation-table": (".md", ".csv"),
    "frontier": (".csv",),
}


def test_the_ledger_names_a_render_command_for_every_table_with_committed_runs() -> None:
    tables = yaml.safe_load(LEDGER.read_text())["tables"]
    unrendered = [t for t, e in tables.items() if "runs" in e and "render" not in e]
    assert unrendered == []


@pytest.mark.parametrize("table", sorted(RENDERED))
def test_committed_table_is_rebuilt_from_its_committed_runs(table: str, tmp_path: Path) -> None:
    argv = list(RENDERED[table])
    out = argv.index("--out") + 1
    committed = REPO_ROOT / argv[out]
    argv[out] = str(tmp_path / "table")
    assert main(argv) == 0
    for suffix in COMPARED.get(argv[0], (".md", ".csv", ".tex")):
        rebuilt = (tmp_path / "table").with_suffix(suffix).read_text()
        assert rebuilt == committed.with_suffix(suffix).read_text(), suffix
