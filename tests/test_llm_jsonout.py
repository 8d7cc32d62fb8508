"""JSON replies: the repairs that cannot change meaning, validation, and the failure counts."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsys.llm import JSONReplyParser, extract_json
from memsys.llm.jsonout import JSONReplyError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
containers = st.one_of(
    st.lists(json_values, max_size=4), st.dictionaries(st.text(max_size=8), json_values, max_size=4)
)
prose = st.text(alphabet=st.characters(blacklist_characters='{}[]`"'), max_size=30)


@given(value=containers, before=prose, after=prose, fenced=st.booleans())
def test_any_object_survives_prose_and_fences(value, before, after, fenced) -> None:
    body = json.dumps(value)
    if fenced:
        body = f"```json\n{body}\n```"
    assert extract_json(f"{before}{body}{after}")[0] == value


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
        ('Here you go:\n```\n{"facts": ["x"]}\n```', {"facts": ["x"]}),
        ('{"text": "a, } b ,]"}', {"text": "a, } b ,]"}),
        ('Answer: {"quote": "she said \\"hi\\" {ok}"} done', {"quote": 'she said "hi" {ok}'}),
        ('[{"id": 1},]', [{"id": 1}]),
    ],
)
def test_repairs(reply: str, expected: object) -> None:
    assert extract_json(reply)[0] == expected


@pytest.mark.parametrize("reply", ["", "no json here", '{"a": 1', "{'a': 1}", "```json\n```"])
def test_unrepairable_replies_raise(reply: str) -> None:
    with pytest.raises(JSONReplyError):
        extract_json(reply)


def test_parser_validates_and_counts_each_outcome() -> None:
    parser = JSONReplyParser(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    assert parser.parse('{"n": 1}').value == {"n": 1}
    assert parser.parse('sure: {"n": 2,}').repaired
    invalid = parser.parse('{"n": "two"}')
    assert not invalid.ok and "schema" in invalid.error
    assert not parser.parse("sorry").ok
    assert parser.counts() == {"clean": 1, "repaired": 1, "unparseable": 1, "invalid": 1}


def test_parser_rejects_a_broken_schema_up_front() -> None:
    with pytest.raises(jsonschema.SchemaError):
        JSONReplyParser({"type": "no-such-type"})
