"""A misbehaving OpenAI-compatible server on 127.0.0.1 (issue 48): one deadline per attempt,
capped replies, no key in anything written, bad bytes and bad counts counted as failures.

The hostile actions are :class:`~fakes.chat_server.FakeChatServer`'s (``trickle``,
``endless``, ``echo_auth``, ``bad_utf8``, ``bad_usage``, ``huge``); each ends by itself.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from fakes.llm import FAST_RETRY
from reliability_helpers import CORRECT, JUDGE, QUESTIONS, by_question, server_backbone
from run_helpers import compose_config, fixture_overrides, read_records

from benchmarks.pipeline.run import run
from memsys.llm import Accounting, Backbone, BackboneSettings, LLMRequest, ResponseCache
from memsys.llm.errors import LLMRequestError, ProviderError, TransientProviderError
from memsys.llm.pool import Cancelled
from memsys.llm.providers.openai_compat import (
    OpenAICompatConfig,
    OpenAICompatProvider,
    reply_char_cap,
)
from memsys.llm.redact import MASK, redact, register_secret
from memsys.llm.types import Completion, SamplingParams

pytestmark = pytest.mark.usefixtures("no_env_overrides")

KEY = "sk-hostile-ECHOED-5d1f0a9c7e3b"
REQUEST = LLMRequest(({"role": "user", "content": "Hello?"},), SamplingParams(max_tokens=16))


@pytest.fixture
def hostile() -> Iterator[FakeChatServer]:
    """A server whose hostile replies end by themselves within 5 s."""
    with FakeChatServer(hang_s=5.0, huge_chars=20_000) as running:
        yield running


@pytest.fixture
def provider(hostile: FakeChatServer, monkeypatch: pytest.MonkeyPatch) -> OpenAICompatProvider:
    monkeypatch.setenv("HOSTILE_KEY", KEY)
    return OpenAICompatConfig("fake", base_url=hostile.base_url, api_key_env="HOSTILE_KEY").build()


# -- one deadline per attempt ----------------------------------------------------------------


@pytest.mark.parametrize("action", ["trickle", "endless", "hang"])
def test_an_attempt_ends_at_its_deadline_whatever_the_server_sends(
    hostile: FakeChatServer, provider: OpenAICompatProvider, action: str
) -> None:
    """A byte every 0.2 s (headers, then body), a chunked body without end, or nothing: each
    read returns long before a read timeout, so only a deadline on the whole attempt ends it."""
    hostile.script(action)
    started = time.monotonic()
    with pytest.raises(TransientProviderError, match=r"timed out after 1\.0s"):
        provider.generate(REQUEST, timeout_s=1.0)
    assert 0.9 < time.monotonic() - started < 1.8
    assert provider.generate(REQUEST, timeout_s=1.0).text == "echo: Hello?"  # pool still fine


def test_a_trickling_server_is_retried_then_counted_as_a_failure(
    hostile: FakeChatServer, provider: OpenAICompatProvider
) -> None:
    hostile.script("trickle", "trickle", "trickle")
    accounting = Accounting()
    policy = dataclasses.replace(FAST_RETRY, request_timeout_s=0.5)
    backbone = Backbone(
        provider,
        cache=ResponseCache.disabled(),
        accounting=accounting,
        settings=BackboneSettings(retry=policy),
    )
    started = time.monotonic()
    with pytest.raises(LLMRequestError, match=r"failed after 3 attempt\(s\): .*timed out"):
        backbone.complete(REQUEST.messages, REQUEST.params)
    assert time.monotonic() - started < 3 * 0.5 + 1.0
    assert accounting.summary()["total"]["failed"] == 1


# -- replies over the cap are cut, or refused when too large to hold -------------------------


def test_a_reply_longer_than_its_cap_is_cut_counted_and_cached_cut(
    hostile: FakeChatServer, provider: OpenAICompatProvider, tmp_path: Path
) -> None:
    hostile.huge_chars = 3 * reply_char_cap(16)  # over the text cap, under the body cap
    hostile.script("huge")
    accounting = Accounting()
    cache = ResponseCache(tmp_path / "responses.sqlite")
    backbone = Backbone(provider, cache=cache, accounting=accounting)
    reply = backbone.complete(REQUEST.messages, REQUEST.params)
    assert len(reply.text) == reply_char_cap(16) and reply.finish_reason == "length"
    assert accounting.summary()["total"]["cut"] == 1
    cached = cache.get(provider.model_id, REQUEST)
    assert cached is not None and cached.text == reply.text and not cached.cut
    again = Backbone(provider, cache=cache, accounting=Accounting())
    assert again.complete(REQUEST.messages, REQUEST.params).cached


def test_a_reply_too_large_to_hold_fails_without_being_read_whole(
    hostile: FakeChatServer, provider: OpenAICompatProvider
) -> None:
    hostile.huge_chars = 2_000_000  # 2 MB, what a server ignoring max_tokens=16 sent
    hostile.script("huge")
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"reply larger than \d+ bytes for max_tokens=16"):
        provider.generate(REQUEST, timeout_s=10.0)
    assert time.monotonic() - started < 2.0


# -- bad bytes and bad counts: retried, then counted, never a crash --------------------------


@pytest.mark.parametrize(
    ("action", "message"),
    [("bad_utf8", r"malformed reply: .*can't decode"), ("bad_usage", r"malformed reply: token")],
)
def test_a_reply_that_does_not_decode_is_a_transient_failure(
    hostile: FakeChatServer, provider: OpenAICompatProvider, action: str, message: str
) -> None:
    hostile.script(action)
    with pytest.raises(TransientProviderError, match=message):
        provider.generate(REQUEST, timeout_s=5.0)
    hostile.script(action)  # the next attempt of a backbone gets a good reply
    backbone = Backbone(provider, cache=ResponseCache.disabled(), accounting=Accounting(),
                        settings=BackboneSettings(retry=FAST_RETRY))  # fmt: skip
    reply = backbone.complete(REQUEST.messages, REQUEST.params)
    assert reply.text == "echo: Hello?" and reply.completion_tokens == 2


# -- no key in anything written --------------------------------------------------------------


def test_redact_masks_keys_tokens_and_the_configured_key() -> None:
    register_secret("plain-configured-value-1234")
    register_secret("EMPTY")  # too short to mask: a placeholder, not a secret
    text = (
        "Authorization: Bearer abc.def-123 key sk-proj-abcdefghijkl "
        "echo plain-configured-value-1234 at http://u:p@h/v1?api_key=z EMPTY"
    )
    assert redact(text) == (
        f"Authorization: Bearer {MASK} key {MASK} echo {MASK} at http://{MASK}@h/v1?api_key="
        f"{MASK} EMPTY"
    )


def test_an_echoed_key_is_masked_in_the_error(
    hostile: FakeChatServer, provider: OpenAICompatProvider
) -> None:
    hostile.script("echo_auth")
    with pytest.raises(ProviderError) as failed:
        provider.generate(REQUEST, timeout_s=5.0)
    assert KEY not in str(failed.value) and "Bearer ***" in str(failed.value)
    assert hostile.authorization_headers == [f"Bearer {KEY}"], "the key was sent"


def test_a_server_echoing_the_key_leaves_it_in_no_file(
    tmp_path: Path, server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 whose body echoes the header, and a reply that repeats the key: neither reaches
    the records, the caches or the ledger."""
    key = "not-an-sk-pattern-" + KEY[::-1]  # masked because it is the configured key
    monkeypatch.setenv("ECHO_KEY", key)
    server.on(QUESTIONS["dog"], "echo_auth")
    server.on(QUESTIONS["cat"], reply=f"I was told {key}")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server, api_key_env="ECHO_KEY"),
    ]
    run_dir = Path(run(compose_config(overrides))["run_dir"])
    records = by_question(read_records(run_dir))
    assert "HTTP 401: " in records["dog"]["failure"] and "Bearer ***" in records["dog"]["failure"]
    assert records["cat"]["prediction"] == "I was told ***"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


# -- an in-process model stops mid-generation ------------------------------------------------


class GeneratingProvider:
    """Stands in for llama.cpp: a generation of many steps that :meth:`interrupt` cuts."""

    model_id = "in-process"
    endpoint = "in-process test model"
    in_process = True

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.started = threading.Event()

    def interrupt(self) -> None:
        self.stopping.set()

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        self.started.set()
        for _ in range(600):  # a minute of tokens
            if self.stopping.is_set():
                raise Cancelled("stopping")
            time.sleep(0.1)
        return Completion("done", 1, 1)


def ctrl_c_when(started: threading.Event) -> None:
    if started.wait(60):
        time.sleep(0.3)
        signal.raise_signal(signal.SIGINT)


def test_interrupting_an_in_process_generation_stops_it_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = GeneratingProvider()
    backbone = Backbone(
        provider,  # type: ignore[arg-type]
        cache=ResponseCache.disabled(),
        accounting=Accounting(),
    )
    requests = [LLMRequest(({"role": "user", "content": f"q{i}"},)) for i in range(2)]
    started = time.monotonic()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # Ctrl-C once the generation is under way and the caller waits for it
        threading.Thread(target=ctrl_c_when, args=(provider.started,), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            backbone.complete_many(requests)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 2.0, "the generation was waited out"
    assert provider.stopping.is_set()
    assert "stops at its next token" in caplog.text


def test_interrupting_llama_cpp_stops_its_generation_within_a_token() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from memsys.llm.providers.llamacpp import LlamaCppConfig

    provider = LlamaCppConfig(n_ctx=1024, n_threads=1).build()
    long = LLMRequest(
        ({"role": "user", "content": "Write a very long story about a dragon."},),
        SamplingParams(max_tokens=900),
    )
    outcome: list[BaseException | Completion] = []

    def generate() -> None:
        try:
            outcome.append(provider.generate(long, timeout_s=60))
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=generate, daemon=True)
    worker.start()
    time.sleep(1.0)  # the prompt is in, tokens are coming
    stopped = time.monotonic()
    provider.interrupt()
    worker.join(timeout=30)
    assert time.monotonic() - stopped < 2.0
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)
    with pytest.raises(Cancelled):
        provider.generate(long, timeout_s=60)  # the run is stopping: nothing new starts


def test_the_fake_server_actions_end_by_themselves(hostile: FakeChatServer) -> None:
    """No hostile reply outlives ``hang_s``: a client that never gives up still gets an end."""
    hostile.hang_s = 0.6
    hostile.script("endless")
    provider = OpenAICompatConfig("fake", base_url=hostile.base_url, api_key_env=None).build()
    started = time.monotonic()
    with pytest.raises(TransientProviderError):
        provider.generate(REQUEST, timeout_s=30.0)
    assert time.monotonic() - started < 3.0
