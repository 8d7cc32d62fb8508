"""Mem0 and LangMem when things go wrong (memsys/methods/libraries/): a backbone that fails or
misses the replay cache stops the build with the harness's own error, replies the library cannot
use are counted, only trustcall's known repair failure is skipped, and a speaker's name LangGraph
would refuse as a namespace label still builds. Also what each adapter sets that the libraries
leave to their defaults: Mem0's prompt date, its clients' retries, the search bridge's lifetime,
and that each method's config file states every setting."""

from __future__ import annotations

import gc
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.libraries import (
    DAY_1,
    DAY_2,
    LIBRARIES,
    Failing,
    Garbage,
    LibraryModel,
    conversation,
    method_class,
    services,
)

from benchmarks.registry import stated_options
from memsys.embed import Embedder
from memsys.llm import ResponseCache
from memsys.llm.bridge import BackboneBridge
from memsys.llm.errors import CacheMissError, LLMError
from memsys.types import Question

CONF = Path(__file__).resolve().parents[1] / "conf" / "method"


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("failure", ["failing", "replay_miss"])
def test_a_failed_backbone_stops_the_build_with_the_harness_error(
    library: str, failure: str, embedder: Embedder, tmp_path: Path
) -> None:
    """Not the OpenAI client's error the library sees (Mem0 lets it out of ``Memory.add``):
    the run's CLI and the regression's replay check recognise only the harness's own."""
    import openai

    if failure == "failing":
        cache, provider, expected = ResponseCache.disabled(), Failing(), LLMError
    else:
        cache = ResponseCache(tmp_path / "empty.sqlite", "replay")
        provider, expected = LibraryModel(), CacheMissError
    method = method_class(library)(services(embedder, cache, provider))
    with pytest.raises(expected) as raised:
        method.construct(conversation())
    assert not isinstance(raised.value, openai.OpenAIError)


@pytest.mark.parametrize("library", LIBRARIES)
def test_replies_the_library_cannot_use_are_counted(library: str, embedder: Embedder) -> None:
    """Mem0 logs and drops a reply it cannot parse; LangMem takes it as a plain answer and
    stores nothing. Either way nothing is built and every such reply is counted."""
    provider = Garbage()
    method = method_class(library)(services(embedder, ResponseCache.disabled(), provider))
    memory = method.construct(conversation())
    assert memory.records == ()
    assert memory.stats["unparseable_replies"] == memory.stats["chat_requests"] == provider.calls
    assert provider.calls >= memory.stats["batches"] == 4


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_speaker_name_with_a_dot_builds_and_is_searched(library: str, embedder: Embedder) -> None:
    """LangGraph refuses a namespace label with a ``.``; the memory still keeps the name."""
    method = method_class(library)(services(embedder, ResponseCache.disabled(), LibraryModel()))
    memory = method.construct(conversation(first="Dr. Ann"))
    assert ("Dr. Ann", "I now live in Rome.") in {(r.perspective, r.text) for r in memory.records}
    if library == "langmem":
        assert memory.stats["library_errors"] == 1  # Bob's, as with a plain name
    loaded = method.load_memory(method.dump_memory(memory))
    question = Question("q", "tiny", "Where does Dr. Ann live now?", "Rome", "single_hop")
    assert (
        method.retrieve(loaded, question).items[0].text == "Dr. Ann's memory: I now live in Rome."
    )


class RaisingManager:
    """A store manager whose every call raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


REPAIR_ERROR = AttributeError("'ExtractionState' object has no attribute 'tool_call_id'")


@pytest.mark.parametrize(
    ("error", "repair_errors", "skipped"),
    [
        (REPAIR_ERROR, "skip", True),
        (REPAIR_ERROR, "raise", False),
        (AttributeError("'NoneType' object has no attribute 'content'"), "skip", False),
        (RuntimeError("an adapter bug"), "skip", False),
    ],
)
def test_langmem_skips_only_trustcalls_known_repair_failure(
    error: Exception,
    repair_errors: str,
    skipped: bool,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cls = method_class("langmem")
    langmem = sys.modules["langmem"]
    manager = RaisingManager(error)
    monkeypatch.setattr(langmem, "create_memory_store_manager", lambda *a, **k: manager)
    method = cls(
        services(embedder, ResponseCache.disabled(), LibraryModel()), repair_errors=repair_errors
    )
    if skipped:
        memory = method.construct(conversation())
        assert memory.stats["library_errors"] == memory.stats["batches"] == 4
    else:
        with pytest.raises(type(error), match=str(error)[:20]):
            method.construct(conversation())


@pytest.mark.parametrize("prompt_date", ["session", "library"])
def test_mem0_extraction_prompt_states_the_date_asked_for(
    prompt_date: str, embedder: Embedder
) -> None:
    """``session``: each batch's extraction prompt is the library's, dated with its session;
    ``library``: the library's prompt as it is (dated the day it was imported)."""
    provider = LibraryModel()
    method = method_class("mem0")(
        services(embedder, ResponseCache.disabled(), provider), prompt_date=prompt_date
    )
    from memsys.methods.libraries.mem0 import TODAY_LINE

    method.construct(conversation())
    prompts = sys.modules["mem0.configs.prompts"]
    systems = [
        request.messages[0]["content"]
        for request in provider.requests
        if "Personal Information Organizer" in request.messages[0]["content"]
    ]
    assert len(systems) == 4  # Ann's and Bob's batch of each session
    if prompt_date == "library":
        assert all(system == prompts.FACT_RETRIEVAL_PROMPT for system in systems)
        return
    undated = TODAY_LINE.sub("<date>", prompts.FACT_RETRIEVAL_PROMPT)
    for system, day in zip(systems, [DAY_1, DAY_1, DAY_2, DAY_2], strict=True):
        assert f"Today's date is {day:%Y-%m-%d}." in system
        assert TODAY_LINE.sub("<date>", system) == undated


def test_mem0_clients_leave_retries_and_timeouts_to_the_backbone(embedder: Embedder) -> None:
    """Mem0's OpenAI clients neither retry nor time out; the search bridge is stopped when the
    method goes."""
    from memsys.methods.libraries.mem0 import import_mem0

    method = method_class("mem0")(services(embedder, ResponseCache.disabled(), LibraryModel()))
    with BackboneBridge(None, embedder) as bridge:
        memory = method._memory(import_mem0(method._home()), bridge)
        for client in (memory.llm.client, memory.embedding_model.client):
            assert client.max_retries == 0 and client.timeout is None
        memory.db.close()
    loaded = method.load_memory(method.dump_memory(method.construct(conversation())))
    search_bridge = method._search_bridge
    assert search_bridge is not None and search_bridge._thread is not None
    del method, loaded
    gc.collect()
    assert search_bridge._thread is None


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_config_file_states_every_setting_with_the_classes_defaults(library: str) -> None:
    """Every setting of the adapter is named in conf/method/<library>.yaml, and the class's
    defaults are the file's (a method built in a test is the one a run builds)."""
    cls = method_class(library)
    parameters = inspect.signature(cls.__init__).parameters
    defaults = {
        name: p.default for name, p in parameters.items() if name not in ("self", "services")
    }
    stated = dict(stated_options(CONF / f"{library}.yaml"))  # its options: no registry block
    stated.pop("_target_")
    assert stated == defaults


@pytest.mark.parametrize(
    ("library", "setting"),
    [
        ("mem0", {"prompt_date": "today"}),
        ("mem0", {"perspectives": "both"}),
        ("langmem", {"repair_errors": "ignore"}),
        ("langmem", {"batch_size": 0}),
    ],
)
def test_a_setting_outside_its_choices_is_refused(
    library: str, setting: dict[str, Any], embedder: Embedder
) -> None:
    with pytest.raises(ValueError):
        method_class(library)(
            services(embedder, ResponseCache.disabled(), LibraryModel()), **setting
        )
