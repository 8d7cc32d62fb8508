"""The smallest valid instance of a JSON schema, and the fake server's replies built from it:
every schema the methods send gets a valid reply, and the plain replies pass the methods' text
parsers."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from fakes.chat_server import FakeChatServer, usable_reply
from fakes.segment import rule_backbone

from memsys.llm.providers.openai_compat import OpenAICompatConfig
from memsys.llm.schema_reply import PLAIN_REPLY, minimal_instance
from memsys.llm.types import LLMRequest, SamplingParams
from memsys.methods.cast.prompts import FILTER_SCHEMA, OPENIE_SCHEMA, SUMMARY_SCHEMA
from memsys.methods.cast.prompts import QUERY_SCHEMA as CAST_QUERY_SCHEMA
from memsys.methods.esmem.prompts import INTENT_SCHEMA, clean_boundary
from memsys.methods.esmem.prompts import TOPIC_SCHEMA as ESMEM_TOPIC_SCHEMA
from memsys.methods.fracom.prompts import FRAGMENT_SCHEMA
from memsys.methods.hingemem.prompts import BOUNDARY_SCHEMA, TOPIC_SCHEMA, constrained
from memsys.methods.hingemem.prompts import QUERY_SCHEMA as HINGEMEM_QUERY_SCHEMA
from memsys.methods.secom.segmenter import SeComSegmenter, parse_segmentation
from memsys.segment.base import DialogueText

SYNTHETIC: dict[str, dict[str, Any]] = {
    "empty": {},
    "required_only": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["b"],
        "additionalProperties": False,
    },
    "array_min_items": {"type": "array", "items": {"type": "boolean"}, "minItems": 3},
    "enum_and_const": {
        "type": "object",
        "properties": {"kind": {"enum": ["x", "y"]}, "fixed": {"const": 7}},
        "required": ["kind", "fixed"],
    },
    "string_min_length": {"type": "string", "minLength": 4, "maxLength": 4},
    "integer_bounds": {"type": "integer", "minimum": 3, "maximum": 9},
    "integer_exclusive": {"type": "integer", "exclusiveMinimum": 3},
    "negative_number": {"type": "number", "maximum": -2.5},
    "number_exclusive": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "nullable": {"type": ["null", "string"], "minLength": 1},
    "null": {"type": "null"},
    "any_of": {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string"}]},
    "one_of": {"oneOf": [{"type": "array", "minItems": 1}, {"type": "object"}]},
    "all_of": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
            {"properties": {"b": {"const": "z"}}, "required": ["b"]},
        ]
    },
    "ref": {
        "$defs": {
            "item": {"type": "object", "required": ["n"], "properties": {"n": {"minimum": 1}}}
        },
        "type": "array",
        "minItems": 2,
        "items": {"$ref": "#/$defs/item"},
    },
    "untyped_object": {"required": ["q"], "properties": {"q": {"type": "number"}}},
}
#: Every JSON schema a method sends (HingeMem's as its grammar, all properties required).
METHODS: dict[str, dict[str, Any]] = {
    "esmem_topic": ESMEM_TOPIC_SCHEMA,
    "esmem_intent": INTENT_SCHEMA,
    "hingemem_boundary": constrained(BOUNDARY_SCHEMA),
    "hingemem_topic": constrained(TOPIC_SCHEMA),
    "hingemem_query": constrained(HINGEMEM_QUERY_SCHEMA),
    "cast_openie": OPENIE_SCHEMA,
    "cast_summary": SUMMARY_SCHEMA,
    "cast_query": CAST_QUERY_SCHEMA,
    "cast_filter": FILTER_SCHEMA,
    "fracom_fragment": FRAGMENT_SCHEMA,
}


@pytest.mark.parametrize("name", [*SYNTHETIC, *METHODS])
def test_minimal_instance_is_valid(name: str) -> None:
    schema = {**SYNTHETIC, **METHODS}[name]
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert [error.message for error in validator.iter_errors(minimal_instance(schema))] == []


def test_minimal_instance_is_minimal() -> None:
    assert minimal_instance(SYNTHETIC["required_only"]) == {"b": 0}
    assert minimal_instance(SYNTHETIC["integer_exclusive"]) == 4
    assert minimal_instance(SYNTHETIC["ref"]) == [{"n": 1}, {"n": 1}]
    assert minimal_instance(SYNTHETIC["all_of"]) == {"a": False, "b": "z"}
    # The i-th item of an array takes the i-th enum value: ES-Mem's two labels must differ.
    assert minimal_instance(INTENT_SCHEMA) == {
        "labels": [{"name": "Topic_Intro", "prob": 0}, {"name": "Topic_Shift", "prob": 0}]
    }


def test_plain_replies_pass_the_text_parsers() -> None:
    assert clean_boundary(usable_reply({"messages": [{"content": "Event A ..."}]})) == PLAIN_REPLY
    segmenter = SeComSegmenter(backbone=rule_backbone(lambda request: "")[0])
    dialogue = DialogueText(("hi", "hello", "how are you", "fine"), ("A", "B", "A", "B"))
    messages, params = segmenter.messages(dialogue), segmenter.params(dialogue)
    reply = usable_reply({"messages": messages, "stop": list(params.stop)})
    assert "</segmentation>" not in reply  # cut at the stop string, as servers do
    assert parse_segmentation(reply, len(dialogue)).gaps == ()


def test_the_fake_server_answers_each_schema_validly() -> None:
    with FakeChatServer(schema_replies=True) as server:
        provider = OpenAICompatConfig(
            model="fake", base_url=server.base_url, api_key_env=None
        ).build()
        for schema in (INTENT_SCHEMA, constrained(BOUNDARY_SCHEMA)):
            request = LLMRequest(
                ({"role": "user", "content": "Label this."},), SamplingParams(json_schema=schema)
            )
            completion = provider.generate(request, timeout_s=10)
            jsonschema.validate(json.loads(completion.text), schema)
        plain = provider.generate(LLMRequest(({"role": "user", "content": "Describe."},)), 10)
        assert plain.text == PLAIN_REPLY
    with FakeChatServer() as server:  # without the mode: the echo, as before
        provider = OpenAICompatConfig(
            model="fake", base_url=server.base_url, api_key_env=None
        ).build()
        echo = provider.generate(LLMRequest(({"role": "user", "content": "Hi"},)), 10)
        assert echo.text == "echo: Hi"
