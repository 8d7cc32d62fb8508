"""``executor=ray``: one run spread over a Ray cluster logs what one process logs, under the same
run id; a worker that dies mid-run loses nothing and writes nothing twice; without Ray, one line
naming the extra. The cluster tests run on a real Ray cluster on 127.0.0.1 (``make
test-cluster``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import ray_head
from fakes.methods import TROUBLE
from omegaconf import DictConfig
from run_helpers import (
    city_haystacks,
    compose_config,
    read_records,
    retrieval_overrides,
    stable,
)

from benchmarks.config.values import ConfigError
from benchmarks.pipeline.ray_pool import ExecutorUnavailableError, import_ray
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import run_identity, validate

CITIES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Lima")
#: The conversation whose worker dies once, mid-run (the marker file says it already did).
DIES_AT = "q3"
MISBEHAVING = ("method=full_history", "method._target_=fakes.methods.Misbehaving")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six one-question haystacks, each moving the user to another city."""
    return city_haystacks(tmp_path_factory.mktemp("data"), CITIES)


def config(data_dir: Path, root: Path, *extra: str) -> DictConfig:
    return compose_config(retrieval_overrides(data_dir, root, *extra))


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray imports
    with pytest.raises(ExecutorUnavailableError, match=r"pip install -e '\.\[distributed\]'"):
        import_ray()


def test_the_executor_is_not_part_of_a_run_s_identity(data_dir: Path, tmp_path: Path) -> None:
    local = config(data_dir, tmp_path, "method=turn_rag_bm25")
    spread = config(data_dir, tmp_path, "method=turn_rag_bm25", "executor=ray")
    assert run_identity(local) == run_identity(spread)
    settings = validate(spread)
    assert (settings.executor.name, settings.worker_count, settings.spread) == ("ray", 2, True)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("executor.workers=0", "executor.workers"),
        ("executor.cpus_per_worker=-1", "executor.cpus_per_worker"),
        ("executor.address=3", "executor.address"),
        ("answer=uniform", "executor"),  # a run that calls an LLM keeps to one process
    ],
)
def test_a_bad_executor_setting_names_its_key(
    data_dir: Path, tmp_path: Path, override: str, key: str
) -> None:
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        validate(config(data_dir, tmp_path, "executor=ray", override))


# --- on a real Ray cluster ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Ray cluster whose workers die once on conversation q3 when running the misbehaving
    method (the marker file records the death); its address and the marker."""
    marker = tmp_path_factory.mktemp("trouble") / "died"
    tests = str(Path(__file__).parent)  # the workers import the fake method from here
    env = {
        TROUBLE: f"exit-once:{DIES_AT}:{marker}",
        "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])),
    }
    with ray_head(tmp_path_factory.mktemp("ray"), env) as address:
        yield address, marker


def spread_over(address: str) -> tuple[str, ...]:
    """A run's overrides for 2 workers on the cluster, sharing the cache as several machines
    would (per-process shards)."""
    return (
        "executor=ray",
        f"executor.address={address}",
        "executor.workers=2",
        "cache_sharing=shards",
    )


@pytest.mark.slow
@pytest.mark.cluster
def test_a_run_spread_over_a_ray_cluster_equals_the_one_process_run(
    data_dir: Path, tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    serial = run(config(data_dir, tmp_path / "serial", "method=turn_rag_dense"))
    spread = run(
        config(data_dir, tmp_path / "spread", "method=turn_rag_dense", *spread_over(cluster[0]))
    )
    assert Path(spread["run_dir"]).name == Path(serial["run_dir"]).name  # the same run id
    assert [stable(r) for r in read_records(Path(spread["run_dir"]))] == [
        stable(r) for r in read_records(Path(serial["run_dir"]))
    ]
    assert spread["longmemeval"] == serial["longmemeval"]
    assert spread["scores"] == serial["scores"]
    invocation = spread["invocation"]
    assert (invocation["executor"], invocation["workers"]) == ("ray", 2)
    assert spread["construction"]["built"] == len(CITIES)  # by the workers, none here


@pytest.mark.slow
@pytest.mark.cluster
def test_a_worker_that_dies_mid_run_loses_nothing_and_duplicates_nothing(
    data_dir: Path, tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    address, marker = cluster
    serial = run(config(data_dir, tmp_path / "serial", *MISBEHAVING))  # no trouble in this process
    spread = run(config(data_dir, tmp_path / "spread", *MISBEHAVING, *spread_over(address)))
    assert marker.exists()  # a worker did die on q3, and its conversation was redone elsewhere
    records = read_records(Path(spread["run_dir"]))
    assert [r["question_id"] for r in records] == [f"q{n}" for n in range(1, len(CITIES) + 1)]
    assert [stable(r) for r in records] == [
        stable(r) for r in read_records(Path(serial["run_dir"]))
    ]
    assert spread["invocation"]["questions"] == len(CITIES)
