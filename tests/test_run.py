"""The QA runner end to end on a hand-written fixture, with the real embedded backbone."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from run_helpers import (
    CONF,
    FIXTURE,
    cli_stderr,
    compose_config,
    fixture_overrides,
    kill_when,
    read_records,
    stable,
    start_cli,
)

from benchmarks.config.values import ConfigError
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.harness import instantiate_method
from benchmarks.pipeline.provenance import code_version, method_source_of_process
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import run_id, run_identity, validate


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMBENCH_DATA", raising=False)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_end_to_end_with_the_embedded_backbone(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_config([*fixture_overrides(tmp_path, shared_cache), "method=turn_rag_bm25"])
    summary = run(cfg)
    run_dir = Path(summary["run_dir"])
    records = read_records(run_dir)
    assert [r["question_id"] for r in records] == [f"tiny-1:q{i}" for i in range(6)]
    for record in records:
        assert record["failure"] is None
        assert isinstance(record["prediction"], str)
        assert set(record["scores"]) == {"f1_locomo", "f1_set", "bleu1", "judge_acc"}
        assert record["answering"]["prompt_tokens"] > 0
        assert record["context_tokens"] > 0
    dog = records[0]
    assert dog["evidence"] == ["D1:1"] and "D1:1" in dog["retrieved_turn_ids"]
    assert dog["evidence_recall"] == 1.0
    stages = summary["accounting"]["stages"]
    assert stages["answering"]["calls"] == 6
    assert stages["judging"]["calls"] >= 6
    assert (
        summary["scores"]["judge_acc"]["n"] + summary["failures"]["judge"] == 5
    )  # category 5 excluded
    assert json.loads((run_dir / "metrics.json").read_text())["questions"] == 6
    # Latency as percentiles per phase: retrieval over every question, one memory's
    # construction over the memories built, answering over the requests the model answered.
    retrieval = summary["retrieval_latency_s"]
    times = sorted(r["latency_s"]["retrieve"] for r in records)
    assert retrieval["n"] == 6 and retrieval["max"] == round(times[-1], 6)
    assert retrieval["p50"] <= retrieval["p95"] <= retrieval["p99"] <= retrieval["max"]
    built = summary["construction"]["seconds_per_memory"]
    assert built["n"] == summary["construction"]["built"]  # a memory from the shared cache: 0
    if built["n"]:
        assert built["p50"] == built["max"] == round(summary["construction"]["seconds"], 6)
    answered = stages["answering"]["provider_latency_s"]
    fresh = [r["answering"]["latency_s"] for r in records if not r["answering"]["cached"]]
    assert answered["n"] == len(fresh) and answered["max"] == pytest.approx(max(fresh), abs=1e-5)

    again = run(cfg)  # same config: resumes, nothing is asked twice
    assert again["run_dir"] == summary["run_dir"]
    assert again["accounting"]["this_invocation"]["total"]["calls"] == 0
    assert again["accounting"]["total"] == summary["accounting"]["total"]  # the run's whole cost
    assert read_records(run_dir) == records


def test_retrieval_only_calls_no_llm(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_config(
        [*fixture_overrides(tmp_path, shared_cache), "method=session_rag_dense", "answer=none"]
    )
    summary = run(cfg)
    assert summary["accounting"]["total"]["calls"] == 0
    records = read_records(Path(summary["run_dir"]))
    assert all(r["prediction"] is None and r["scores"] == {} for r in records)
    assert summary["evidence_recall"]["mean"] == 1.0  # both sessions fit the budget
    invocation = summary["invocation"]  # 2 sessions and 6 questions embedded (or cached)
    assert invocation["questions"] == 6 and invocation["embedding"]["requested"] >= 8
    assert invocation["wall_s"] > 0 and invocation["peak_rss_mb"] > 100
    # What produced it: this checkout's code version and the packages that shape the numbers.
    assert summary["code_versions"] == [code_version()]
    assert invocation["provenance"]["packages"]["numpy"] == np.__version__
    method = invocation["provenance"]["method_source"]  # the fingerprint of SessionRAG's source
    assert method == method_source_of_process("memsys.methods.baselines.SessionRAG")
    again = run(cfg)  # nothing left to do: one more invocation in the ledger, costs unchanged
    assert again["invocations"]["count"] == 2 and again["invocations"]["questions"] == 6
    assert again["invocations"]["peak_rss_mb"] >= invocation["peak_rss_mb"]
    assert again["invocations"]["embedding"]["encoded"] == invocation["embedding"]["encoded"]
    assert "backbone" not in (Path(summary["run_dir"]) / "config.yaml").read_text()


def test_a_lite_method_parses_each_text_once_per_machine(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    overrides = ["method=fracom", "answer=none"]
    first = run(compose_config([*fixture_overrides(tmp_path / "a", cache), *overrides]))
    parsing = first["invocation"]["parsing"]
    assert 0 < parsing["parsed"] <= parsing["requested"] and parsing["parse_seconds"] > 0
    shutil.rmtree(cache / "memories")  # memories gone: the next run constructs them again ...
    again = run(compose_config([*fixture_overrides(tmp_path / "b", cache), *overrides]))
    assert again["construction"]["built"] == first["construction"]["built"] > 0
    assert again["invocation"]["parsing"]["parsed"] == 0  # ... from the stored parses
    assert again["invocation"]["parsing"]["requested"] == parsing["requested"]
    records = [stable(r) for r in read_records(Path(first["run_dir"]))]
    assert [stable(r) for r in read_records(Path(again["run_dir"]))] == records
    assert again["caches"]["parses"] == {"corrupt_rows": 0, "moved_aside": None}


@pytest.mark.parametrize("method", sorted(p.stem for p in (CONF / "method").glob("*.yaml")))
def test_every_method_config_instantiates(method: str, shared_cache: Path) -> None:
    from memsys.base import MemorySystem, Services
    from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache

    cfg = compose_config([f"method={method}"])
    services = Services(embedder=Embedder(EmbedderConfig(), EmbeddingCache()), tokens=None)  # type: ignore[arg-type]
    system = instantiate_method(cfg.method, services)
    assert isinstance(system, MemorySystem)
    target = cfg.method._target_.rsplit(".", 1)[1]
    assert type(system).__name__ == target  # the class the config names, its options taken


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("answer.template=haiku", "answer.template"),
        ("subset.max_questions=0", "subset.max_questions"),
        ("batch_size=-3", "batch_size"),
        ("adversarial=maybe", "adversarial"),
        ("dataset.name=trivia", "dataset.name"),
    ],
)
def test_malformed_config_names_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"config key '{key}'"):
        validate(compose_config([override]))


def test_bad_method_option_names_the_method_key(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_config(
        [*fixture_overrides(tmp_path, shared_cache), "method.retriever=fuzzy", "answer=none"]
    )
    with pytest.raises(ConfigError, match=r"config key 'method'.*unknown retriever 'fuzzy'"):
        run(cfg)


def test_cli_reports_a_bad_key_and_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline.run",
            "answer.template=haiku",
            f"results_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2
    assert "config key 'answer.template'" in result.stderr


def two_answers_logged(run_dir: Path) -> bool:
    """The moment to interrupt a run: two questions logged, four still to come."""
    log_file = run_dir / "predictions.jsonl"
    return log_file.exists() and len(log_file.read_text().splitlines()) >= 2


def test_a_terminated_invocation_logs_its_cost_and_the_resumed_run_covers_every_question(
    tmp_path: Path,
) -> None:
    # a cache of its own: replies cached by other tests would let the run end before the signal
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        "batch_size=1",
    ]
    process = start_cli(overrides, tmp_path / "hydra")

    run_dir = kill_when(
        process, tmp_path / "runs", two_answers_logged, signal_number=signal.SIGTERM
    )
    assert process.returncode == 128 + signal.SIGTERM, cli_stderr(tmp_path / "hydra")
    (terminated,) = [json.loads(line) for line in (run_dir / "invocations.jsonl").open()]
    logged = len((run_dir / "predictions.jsonl").read_text().splitlines())
    assert 2 <= terminated["questions"] == logged < 6 and terminated["wall_s"] > 0
    resumed = run(compose_config(overrides))
    assert resumed["invocation"]["questions"] == 6 - logged
    assert resumed["invocations"]["count"] == 2 and resumed["invocations"]["questions"] == 6


def test_resume_after_kill_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    overrides = [
        *fixture_overrides(tmp_path / "killed", cache),
        "method=turn_rag_dense",
        "batch_size=1",
    ]
    process = start_cli(overrides, tmp_path / "hydra")

    log_file = kill_when(process, tmp_path / "killed", two_answers_logged) / "predictions.jsonl"
    killed_lines = len(log_file.read_text().splitlines())
    assert 2 <= killed_lines < 6
    with log_file.open("a") as handle:  # a write cut short by the kill
        handle.write('{"question_id": "tiny-1:q5", "categ')

    resumed = run(compose_config(overrides))
    answering = resumed["accounting"]["this_invocation"]["stages"]["answering"]
    assert answering["calls"] == 6 - killed_lines
    assert resumed["accounting"]["stages"]["answering"]["calls"] >= 6  # both invocations
    uninterrupted = run(
        compose_config(
            [*fixture_overrides(tmp_path / "whole", cache), "method=turn_rag_dense", "batch_size=1"]
        )
    )
    resumed_records = [stable(r) for r in read_records(Path(resumed["run_dir"]))]
    assert resumed_records == [stable(r) for r in read_records(Path(uninterrupted["run_dir"]))]
    assert len({r["question_id"] for r in resumed_records}) == 6


def test_the_progress_bar_says_what_is_built_and_what_the_llm_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = fixture_overrides(tmp_path / "runs", tmp_path / "cache")
    run(compose_config([*overrides, "method=turn_rag_bm25", "answer=none", "progress=true"]))
    shown = capsys.readouterr().err
    assert "retrieving: 6q" in shown  # no reader: the stage is retrieval
    assert "tiny-1 · memories 1 built, 0 loaded · LLM calls 0 (0 cached, 0 failed)" in shown


#: Methods whose classes declare no order of their own (time), one per kind: baselines, paper
#: methods, libraries, the oracle.
TIME_ORDERED = ("turn_rag_bm25", "full_history", "esmem", "secom", "fracom", "hingemem", "mem0")


@pytest.mark.parametrize("answer", ["none", "uniform"])
def test_each_method_runs_in_its_own_context_order_and_keeps_its_run_id(answer: str) -> None:
    """``answer.order=method`` (the default) resolves to the order the class declares: time for
    every method but CAST, whose run ids therefore do not move (time leaves the identity, as
    before the key existed); CAST resolves to rank and gets exactly the id an explicit
    ``answer.order=rank`` run had, so its committed rank-ordered runs keep theirs."""

    def resolved(method: str, *order: str) -> tuple[str, dict]:
        cfg = compose_config([f"method={method}", f"answer={answer}", *order])
        return validate(cfg).context_order, run_identity(cfg)

    for method in TIME_ORDERED:
        order, identity = resolved(method)
        assert order == "time" and "order" not in identity["answer"], method
        assert identity == resolved(method, "answer.order=time")[1], method
        assert run_id(identity) != run_id(resolved(method, "answer.order=rank")[1]), method
    order, identity = resolved("cast")
    assert order == "rank" and identity["answer"]["order"] == "rank"
    assert identity == resolved("cast", "answer.order=rank")[1]
    time_order, as_before = resolved("cast", "answer.order=time")
    assert time_order == "time" and "order" not in as_before["answer"]


def test_committed_run_ids_resolve_as_they_were_pinned() -> None:
    """TurnRAG retrieval-only as pinned in test_reliability_secrets (time order), and CAST's
    ablation run (rank order), committed in results/ablations_runs."""
    turn = compose_config(["method=turn_rag_bm25", "answer=none", "subset.max_questions=40"])
    assert run_id(run_identity(turn)) == "8ce7ad7853b1"
    ablation = compose_config(["+experiment=ablations", "method=cast"])
    assert run_id(run_identity(ablation)) == "01ec0844dff9"
    assert (REPO_ROOT / "results" / "ablations_runs" / "01ec0844dff9" / "config.yaml").is_file()


#: Overrides → run id, pinned (tests/fixtures/README.md).
PINNED_RUN_IDS: dict[str, str] = json.loads((FIXTURE.parent / "run_ids.json").read_text())
#: A few pinned configs the fast suite checks: a baseline, a paper method with its own builder
#: and another reader, a library, the oracle, another judge, LongMemEval, an experiment.
PINNED_FAST = (
    "method=turn_rag_bm25 answer=none",
    "method=esmem answer=uniform",
    "backbone=qwen2.5-3b construction=gpt-4o-mini method=esmem_llm",
    "method=mem0 answer=uniform",
    "method=oracle_evidence answer=locomo",
    "backbone=openai_server construction=llamacpp_server judge=llama3.2-3b method=fracom_llm",
    "dataset=longmemeval_s subset=lme12",
    "+experiment=paper_locomo paper=secom",
)


def pinned_ids_now(keys: Iterable[str]) -> dict[str, str]:
    return {key: run_id(run_identity(compose_config(key.split()))) for key in keys}


def test_pinned_run_ids_resolve_as_they_were_pinned() -> None:
    assert pinned_ids_now(PINNED_FAST) == {key: PINNED_RUN_IDS[key] for key in PINNED_FAST}


@pytest.mark.slow
def test_every_method_and_answer_config_keeps_its_run_id() -> None:
    """Every method config under every answer config, and the experiments and paper entries
    with other models and datasets: typed settings, derived grids and the registry's tables
    moved no run id (each ~0.4 s to compose and resolve, hence slow)."""
    methods = {path.stem for path in (CONF / "method").glob("*.yaml")}
    answers = {path.stem for path in (CONF / "answer").glob("*.yaml")}
    pinned = {f"method={m} answer={a}" for m in methods for a in answers}
    assert pinned <= set(PINNED_RUN_IDS), "a method or answer config without a pinned run id"
    assert pinned_ids_now(PINNED_RUN_IDS) == PINNED_RUN_IDS


def test_the_context_order_is_read_from_the_class_without_building_the_method(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memsys.methods.cast import CAST

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("resolving the order built the method")

    monkeypatch.setattr(CAST, "__init__", refuse)
    cfg = compose_config(["method=cast", "answer=none"])
    assert validate(cfg).context_order == "rank"
    assert run_identity(cfg)["answer"]["order"] == "rank"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["answer.order=alphabetic"], "answer.order"),
        (["method._target_=memsys.methods.nowhere.Gone"], "method._target_"),
        (["method._target_=memsys.base.Services"], "method._target_"),  # not a MemorySystem
    ],
)
def test_an_order_that_cannot_be_resolved_names_its_key(overrides: list[str], key: str) -> None:
    cfg = compose_config(["method=turn_rag_bm25", *overrides])
    with pytest.raises(ConfigError, match=rf"config key '{key}'"):
        validate(cfg)
    with pytest.raises(ConfigError, match=rf"config key '{key}'"):
        run_identity(cfg)


def test_a_method_class_declaring_an_unknown_order_is_refused_when_defined() -> None:
    from memsys.methods.baselines import FullHistory

    with pytest.raises(ValueError, match="context_order must be one of"):
        type("Shuffled", (FullHistory,), {"context_order": "shuffled"})
