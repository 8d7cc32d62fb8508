"""A memory's identity names every service its construction used, as the services record it
(:mod:`memsys.usage`): a method that uses one it did not declare fails the run, naming itself and
the service, before its memory is cached under an identity that leaves the service out."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from run_helpers import compose_config, fixture_overrides

from benchmarks.pipeline.run import run
from memsys.base import Services, UndeclaredServiceError
from memsys.nlp import NLP
from memsys.usage import EMBEDDER, LLM, PARSER, record, recording

RETRIEVAL_ONLY = ("answer=none",)


def overrides(tmp_path: Path, target: str, *extra: str) -> list[str]:
    return [
        *fixture_overrides(tmp_path / "results", tmp_path / "cache"),
        "method=full_history",
        f"method._target_=fakes.methods.{target}",
        *extra,
    ]


def memory_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "memories").rglob("*.json"))


def test_a_method_asking_the_llm_undeclared_fails_the_run(tmp_path: Path) -> None:
    cfg = compose_config(overrides(tmp_path, "AsksTheLLMUndeclared", "subset.max_questions=1"))
    with pytest.raises(UndeclaredServiceError) as raised:
        run(cfg)
    assert "fakes.methods.AsksTheLLMUndeclared used the llm" in str(raised.value)
    assert memory_files(tmp_path) == []  # nothing cached under the identity that lied


def test_a_method_parsing_undeclared_fails_the_run(tmp_path: Path) -> None:
    cfg = compose_config(overrides(tmp_path, "ParsesUndeclared", *RETRIEVAL_ONLY))
    with pytest.raises(UndeclaredServiceError, match=r"ParsesUndeclared used the parser"):
        run(cfg)
    assert memory_files(tmp_path) == []


def test_a_declared_parser_runs_and_joins_the_identity(tmp_path: Path) -> None:
    summary = run(compose_config(overrides(tmp_path, "ParsesDeclared", *RETRIEVAL_ONLY)))
    assert summary["construction"]["built"] == 1
    (stored,) = memory_files(tmp_path)
    assert stored.parent.name == "parsesdeclared"


def test_the_identity_names_each_declared_service(tmp_path: Path) -> None:
    """The parser joins the identity of the method that declares it (as the construction model
    joins an LLM method's); a method that declares only the embedder keeps the identity it had."""
    from fakes.embed import hashing_embedder
    from fakes.methods import ParsesDeclared, ParsesUndeclared

    services = Services(hashing_embedder(), None, nlp=NLP())  # type: ignore[arg-type]
    declared = ParsesDeclared(services).construction_identity()
    undeclared = ParsesUndeclared(services).construction_identity()
    assert declared["parser"] == services.nlp.identity
    assert set(undeclared) == {"method", "version", "config", "embedder"}
    assert ParsesDeclared(services).construction_services() == {EMBEDDER, PARSER}


def test_use_is_recorded_only_inside_a_recording_and_per_thread() -> None:
    record(LLM)  # outside: nowhere to go, no error
    seen_elsewhere: set[str] = set()

    def elsewhere() -> None:
        with recording() as used:
            record(EMBEDDER, 3)
        seen_elsewhere.update(used.services)

    with recording() as used:
        record(PARSER, 5)
        record(PARSER, 0)
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
        with recording() as inner:
            record(LLM)
            record(LLM, 4)
    assert used.services == {PARSER}
    assert dict(used.amounts) == {PARSER: 5}
    assert inner.services == {LLM}
    assert dict(inner.amounts) == {LLM: 5}
    assert seen_elsewhere == {EMBEDDER}
