"""The response cache: hits, keys, modes, several writer processes, and no secrets on disk."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from fakes.llm import ScriptedProvider, ask, make_backbone

from memsys.llm import (
    Accounting,
    Backbone,
    BackboneSettings,
    CacheMissError,
    Completion,
    LLMRequest,
    LLMRequestError,
    ProviderError,
    ResponseCache,
    RetryPolicy,
    SamplingParams,
)
from memsys.llm.cache import request_key
from memsys.llm.providers.openai_compat import OpenAICompatConfig

PLANTED_KEY = "sk-planted-TEST-3f9c1e7a5b2d4c6e8f0a"


def test_hit_returns_identical_reply_without_calling_the_provider(tmp_path: Path) -> None:
    provider = ScriptedProvider()
    backbone = make_backbone(provider, cache=ResponseCache(tmp_path / "cache.sqlite"))
    first = backbone.complete(ask("What did Caroline research?"))
    second = backbone.complete(ask("What did Caroline research?"))
    assert provider.calls == 1
    assert second.cached and not first.cached
    assert (second.text, second.prompt_tokens, second.completion_tokens) == (
        first.text,
        first.prompt_tokens,
        first.completion_tokens,
    )
    assert second.finish_reason == first.finish_reason


def test_key_covers_model_messages_and_every_sampling_parameter() -> None:
    base = LLMRequest(ask("q"))
    keys = {
        request_key("model-a", base),
        request_key("model-b", base),
        request_key("model-a", LLMRequest(ask("q2"))),
        request_key("model-a", LLMRequest(ask("q"), SamplingParams(temperature=0.7))),
        request_key("model-a", LLMRequest(ask("q"), SamplingParams(max_tokens=9))),
        request_key("model-a", LLMRequest(ask("q"), SamplingParams(seed=1))),
        request_key("model-a", LLMRequest(ask("q"), SamplingParams(stop=("\n",)))),
        request_key("model-a", LLMRequest(ask("q"), SamplingParams(json_schema={"type": "x"}))),
    }
    assert len(keys) == 8
    same = LLMRequest([{"content": "q", "role": "user"}])
    assert request_key("model-a", same) == request_key("model-a", base)


def test_replay_mode_fails_on_a_miss_naming_the_request(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    make_backbone(ScriptedProvider(), cache=ResponseCache(path)).complete(ask("recorded"))
    provider = ScriptedProvider()
    replay = make_backbone(provider, cache=ResponseCache(path, "replay"))
    assert replay.complete(ask("recorded")).cached
    with pytest.raises(CacheMissError, match=r"replay mode.*fake:echo.*'never recorded'"):
        replay.complete(ask("never recorded"))
    assert provider.calls == 0


def test_off_mode_neither_reads_nor_writes() -> None:
    provider = ScriptedProvider()
    backbone = make_backbone(provider, cache=ResponseCache(None, "off"))
    backbone.complete(ask("q"))
    assert not backbone.complete(ask("q")).cached
    assert provider.calls == 2


def test_failed_requests_are_not_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backbone = make_backbone(ScriptedProvider([ProviderError("bad")]), cache=cache)
    with pytest.raises(LLMRequestError):
        backbone.complete(ask("q"))
    assert len(cache) == 0


def _write_entries(cache: ResponseCache | str, worker: int) -> None:
    cache = ResponseCache(cache) if isinstance(cache, str) else cache
    for index in range(150):
        shared = index < 30  # every worker also writes the same 30 requests
        name = f"shared-{index}" if shared else f"w{worker}-{index}"
        cache.put("model", LLMRequest(ask(name)), Completion(f"reply {name}", 1, 1))


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_concurrent_writer_processes_lose_nothing(tmp_path: Path, start_method: str) -> None:
    """fork: children inherit a cache the parent already opened; spawn: each opens its own."""
    path = str(tmp_path / "cache.sqlite")
    parent_cache = ResponseCache(path)
    parent_cache.put("model", LLMRequest(ask("parent")), Completion("reply parent", 1, 1))
    context = multiprocessing.get_context(start_method)
    target = parent_cache if start_method == "fork" else path
    workers = [context.Process(target=_write_entries, args=(target, n)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    cache = ResponseCache(path, "replay")
    assert len(cache) == 1 + 30 + 4 * 120
    for worker_index in range(4):
        for index in range(30, 150):
            name = f"w{worker_index}-{index}"
            assert cache.get("model", LLMRequest(ask(name))).text == f"reply {name}"


def test_no_api_key_in_cache_files_or_accounting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSYS_TEST_API_KEY", PLANTED_KEY)
    cache_path = tmp_path / "cache" / "responses.sqlite"
    with FakeChatServer() as server:
        config = OpenAICompatConfig(
            model="fake", base_url=server.base_url, api_key_env="MEMSYS_TEST_API_KEY"
        )
        backbone = Backbone(
            config.build(),
            cache=ResponseCache(cache_path),
            accounting=Accounting(),
            settings=BackboneSettings(retry=RetryPolicy(max_attempts=1)),
        )
        backbone.complete(ask("remember this"))
        backbone.complete(ask("remember this"))
        server.script("400")
        with pytest.raises(LLMRequestError) as failure:
            backbone.complete(ask("and this fails"))
    assert server.authorization_headers[0] == f"Bearer {PLANTED_KEY}", "the key was used"
    accounting_file = tmp_path / "accounting.json"
    accounting_file.write_text(json.dumps(backbone.accounting.to_jsonable()))
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.name.startswith("responses.sqlite") for path in written)
    for path in written:
        content = path.read_bytes()
        assert PLANTED_KEY.encode() not in content, path
        assert b"Bearer" not in content, path
    assert PLANTED_KEY not in str(failure.value)
    assert PLANTED_KEY not in repr(backbone.provider.__dict__.get("config"))


def test_a_shared_prefix_hint_is_part_of_the_key_only_when_given() -> None:
    plain = LLMRequest(ask("Grade this. Question: q"))
    hinted = LLMRequest(plain.messages, shared_prefix=11)
    assert request_key("m", plain) == request_key("m", LLMRequest(plain.messages, shared_prefix=0))
    assert request_key("m", hinted) != request_key("m", plain)
