"""Each QA dataset's traits live in one table (benchmarks/data/specs.py): every dataset config
has a spec, the spec accepts the config's variant, and nothing outside the data layer branches
on a dataset's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from benchmarks.config.compose import compose_config
from benchmarks.config.values import ConfigError
from benchmarks.data.paths import REPO_ROOT
from benchmarks.data.specs import DATASET_SPECS, dataset_spec, named_spec, spec_of
from benchmarks.metrics.aggregate import dataset_name
from benchmarks.pipeline.settings import validate
from benchmarks.tables.report.header import dataset_description, subset_description

DATASET_CONFIGS = sorted((REPO_ROOT / "conf" / "dataset").glob("*.yaml"))


@pytest.mark.parametrize("path", DATASET_CONFIGS, ids=lambda path: path.stem)
def test_every_dataset_config_has_a_spec_that_takes_its_variant(path: Path) -> None:
    node = yaml.safe_load(path.read_text())
    spec = DATASET_SPECS[node["name"]]
    assert node.get("variant") in spec.variants
    assert ("file" in node) == spec.reads_file
    # The name metrics.json and the report's --dataset use leads back to the same spec.
    assert named_spec(dataset_name(node["name"], node.get("variant"))) is spec


def test_the_specs_traits_reach_the_header() -> None:
    lme = {"name": "longmemeval", "variant": "s"}
    assert dataset_description(lme) == (
        "longmemeval_s (LongMemEval-S, each question with its haystack of about 115k tokens)"
    )
    assert dataset_description({"name": "longmemeval", "variant": "x"}).endswith(
        "(unknown variant)"
    )
    assert dataset_description({"name": "locomo", "file": "locomo/locomo10.json"}) == (
        "locomo (locomo/locomo10.json)"
    )
    lme12 = {"name": "lme12", "conversations": None, "max_questions": 12}
    assert subset_description(lme12, spec_of({"dataset": lme})).startswith(
        "lme12 (12 questions, stratified by question type"
    )
    smoke = {"name": "smoke", "conversations": 1, "max_questions": 40}
    assert subset_description(smoke, dataset_spec("locomo")).startswith("smoke (offline smoke")
    sample = {"name": "two_sessions", "conversations": 1, "max_sessions": 2, "max_questions": 20}
    assert subset_description(sample, dataset_spec("locomo")) == (
        "two_sessions (offline sample: 1 conversation cut to the first 2 sessions, 20 of the "
        "questions whose evidence lies there — not the paper setting)"
    )


def test_an_unknown_dataset_reads_as_locomo_and_runs_reject_it() -> None:
    """A report over runs of a dataset this checkout does not know falls back to LoCoMo's
    traits; a run config naming it fails validation on ``dataset.name``."""
    assert dataset_spec("somewhere_else") is DATASET_SPECS["locomo"]
    assert named_spec("somewhere_else_x") is DATASET_SPECS["locomo"]
    config = compose_config(["method=zero_history", "dataset.name=somewhere_else"])
    with pytest.raises(ConfigError, match=r"dataset\.name"):
        validate(config)


#: A dataset's name compared with a literal (or tested for a prefix): what the specs replace.
NAME_BRANCH = re.compile(
    r"""dataset.*((==|!=)\s*["'](locomo|longmemeval)|startswith\(["'](locomo|longmemeval))"""
)


def test_nothing_outside_the_data_layer_branches_on_a_dataset_name() -> None:
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in sorted((REPO_ROOT / "benchmarks").rglob("*.py"))
        if "data" not in path.relative_to(REPO_ROOT / "benchmarks").parts[:1]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if NAME_BRANCH.search(line)
    ]
    assert found == [], f"declare the trait in benchmarks/data/specs.py instead: {found}"
