"""RequestFlow: requests submitted while replies are read, within the backbone's concurrency,
failures handed back or raised as complete_many does, rounds for a batching provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.llm import BatchingProvider, ScriptedProvider, ask, make_backbone

from memsys.llm import LLMRequest, LLMRequestError, ProviderError, chain
from memsys.llm.cache import ResponseCache
from memsys.llm.errors import BackboneUnavailableError
from memsys.llm.flow import RequestFlow


def request(text: str) -> LLMRequest:
    return LLMRequest(tuple(ask(text)))


def test_chains_advance_as_their_replies_arrive_within_the_concurrency() -> None:
    provider = ScriptedProvider(delay_s=0.01)
    backbone = make_backbone(provider, concurrency=3)
    seen: dict[int, list[str]] = {chain: [] for chain in range(5)}
    with RequestFlow[tuple[int, int]](backbone) as flow:
        for chain in seen:
            flow.submit((chain, 0), request(f"{chain}-0"))
        for (chain, step), reply in flow:
            seen[chain].append(reply.text)
            if step < 3:
                flow.submit((chain, step + 1), request(f"{chain}-{step + 1}"))
    assert seen == {c: [f"echo: {c}-{s}" for s in range(4)] for c in seen}
    assert provider.calls == 20 and provider.peak_in_flight == 3


def test_each_reply_comes_back_at_its_chain_depth_and_a_cached_one_adds_none(
    tmp_path: Path,
) -> None:
    cache = ResponseCache(tmp_path / "replies.sqlite")
    backbone = make_backbone(ScriptedProvider(delay_s=0.01), cache=cache)
    chain.handling(0)  # this thread's flows of other tests read replies before
    depths: dict[tuple[int, int], int] = {}
    with RequestFlow[tuple[int, int]](backbone) as flow:
        for length, name in ((3, 0), (1, 1)):  # chains interleaved on one flow
            flow.submit((name, length), request(f"{name}-{length}"))
        for (name, left), _ in flow:
            depths[name, left] = chain.depth()
            if left > 1:
                flow.submit((name, left - 1), request(f"{name}-{left - 1}"))
        assert chain.depth() == 3  # all read: the deepest
    assert depths == {(0, 3): 1, (0, 2): 2, (0, 1): 3, (1, 1): 1}
    with RequestFlow[int](backbone) as flow:
        flow.submit(0, request("0-1"))  # asked before: from the cache, no round trip
        list(flow)
    assert chain.depth() == 3


def test_waiting_requests_go_out_by_priority_then_in_order() -> None:
    provider = ScriptedProvider(delay_s=0.05)  # the only worker is busy while the rest wait
    with RequestFlow[str](make_backbone(provider, concurrency=1)) as flow:
        flow.submit("first", request("first"))
        for name in ("bulk-1", "bulk-2"):
            flow.submit(name, request(name), priority=1)
        flow.submit("urgent", request("urgent"), priority=0)
        order = [tag for tag, _ in flow]
    assert order.index("urgent") < order.index("bulk-1") < order.index("bulk-2")


def test_failed_requests_come_back_and_a_tripped_breaker_is_raised() -> None:
    provider = ScriptedProvider(errors=[ProviderError("bad request")])
    with RequestFlow[int](make_backbone(provider, concurrency=1)) as flow:
        flow.submit(0, request("a"))
        flow.submit(1, request("b"))
        outcomes = dict(flow)
    assert isinstance(outcomes[0], LLMRequestError) and outcomes[1].text == "echo: b"

    dead = ScriptedProvider(errors=[ProviderError("down")] * 10)
    backbone = make_backbone(dead, concurrency=1)
    with pytest.raises(BackboneUnavailableError), RequestFlow[int](backbone) as flow:
        for index in range(5):
            flow.submit(index, request(str(index)))
        list(flow)


def test_a_batching_provider_gets_rounds() -> None:
    provider = BatchingProvider()
    with RequestFlow[int](make_backbone(provider)) as flow:
        for index in range(4):
            flow.submit(index, request(str(index)))
        for index, _ in flow:
            if index < 2:
                flow.submit(10 + index, request(f"again {index}"))
    assert provider.batches == [4, 2]


def test_next_without_a_pending_request_is_an_error() -> None:
    with (
        RequestFlow[int](make_backbone(ScriptedProvider())) as flow,
        pytest.raises(RuntimeError, match="no request is pending"),
    ):
        flow.next()
