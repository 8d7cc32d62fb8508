"""Replies a caller can use, at no cost: the smallest JSON value a JSON schema accepts, and a
plain reply the methods' text parsers accept.

Two stand-ins for a model answer from here: the scripted backbone of ``python -m benchmarks.plan``
(:mod:`memsys.llm.providers.scripted`), which counts the requests a run would make, and the test
suite's fake OpenAI-compatible server (``tests/fakes/chat_server.py``), which a construction
benchmark measures the harness's HTTP path against. Both measure how the harness sends requests,
not what a model writes; but a reply that breaks the schema sends a method down its retry and
fallback paths, which changes the set of requests measured. :func:`usable_text` gives each
request a reply its caller accepts: for a schema-constrained request, :func:`minimal_instance`,
the simplest reply its schema allows: required properties only, arrays at their
``minItems``, the first ``enum``/``const`` value (the i-th for an array's i-th item, so that the
items of an array differ where the schema allows: ES-Mem's intent reply must name two different
labels), numbers at their lower bound, the first branch
of ``anyOf``/``oneOf``, local ``$ref`` followed. ``pattern`` and ``format`` are not honoured
(a string is ``minLength`` letters ``x``): the schemas this project sends put no pattern on a
required string.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

#: A ``[Exchange k]`` label of SeCom's segmentation prompt (memsys/methods/secom/segmenter.py).
_EXCHANGE = re.compile(r"^\[Exchange (\d+)\]: ", re.MULTILINE)
#: A plain reply of three words or more, no JSON, no prompt scaffolding: ES-Mem's boundary
#: description (memsys/methods/esmem/prompts.py, ``clean_boundary``) accepts it.
PLAIN_REPLY = "The conversation moves from the previous topic to a new one."


def usable_text(prompt: str, schema: Mapping[str, Any] | None, stops: Sequence[str]) -> str:
    """A reply that a request's caller can use: the smallest instance of its JSON ``schema``;
    without one, for SeCom's segmentation prompt one segment over all its numbered exchanges,
    else :data:`PLAIN_REPLY`. Cut at the first ``stop`` string, as servers do."""
    if schema is not None:
        return json.dumps(minimal_instance(schema))
    numbers = [int(number) for number in _EXCHANGE.findall(prompt)]
    text = PLAIN_REPLY
    if numbers:
        segment = {
            "segment_id": 0,
            "start_exchange_number": min(numbers),
            "end_exchange_number": max(numbers),
            "num_exchanges": max(numbers) - min(numbers) + 1,
        }
        text = f"<segmentation>\n{json.dumps(segment)}\n</segmentation>"
    for stop in stops:
        text = text.split(stop, 1)[0]
    return text


def minimal_instance(
    schema: Mapping[str, Any], root: Mapping[str, Any] | None = None, variant: int = 0
) -> Any:
    """The smallest value valid for ``schema`` (``root`` resolves ``#/...`` references);
    ``variant`` picks the enum value (an array's i-th item is variant i).

    >>> minimal_instance({"type": "object", "required": ["n"], "properties": {
    ...     "n": {"type": "integer", "minimum": 2}, "note": {"type": "string"}}})
    {'n': 2}
    >>> minimal_instance({"type": "array", "minItems": 2, "items": {"enum": ["a", "b"]}})
    ['a', 'b']
    """
    root = schema if root is None else root
    if "$ref" in schema:
        return minimal_instance(_resolve(schema["$ref"], root), root, variant)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][variant % len(schema["enum"])]
    for combinator in ("anyOf", "oneOf"):
        if schema.get(combinator):
            branch = {**_without(schema, combinator), **schema[combinator][0]}
            return minimal_instance(branch, root, variant)
    if schema.get("allOf"):
        merged = _without(schema, "allOf")
        for part in schema["allOf"]:
            merged = _merge(merged, part)
        return minimal_instance(merged, root, variant)
    return _BUILDERS[_type_of(schema)](schema, root, variant)


def _type_of(schema: Mapping[str, Any]) -> str:
    """The schema's type (the first non-null one of a list), inferred from its keywords when
    it names none."""
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((name for name in declared if name != "null"), "null")
    if declared:
        return str(declared)
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "minItems" in schema:
        return "array"
    if "minimum" in schema or "maximum" in schema:
        return "number"
    return "string" if "minLength" in schema else "null"


def _object(schema: Mapping[str, Any], root: Mapping[str, Any], variant: int) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {
        name: minimal_instance(properties.get(name, {}), root, variant)
        for name in schema.get("required", [])
    }


def _array(schema: Mapping[str, Any], root: Mapping[str, Any], variant: int) -> list[Any]:
    items = schema.get("items", {})
    item_schema = items if isinstance(items, Mapping) else {}
    return [minimal_instance(item_schema, root, i) for i in range(int(schema.get("minItems", 0)))]


def _string(schema: Mapping[str, Any], root: Mapping[str, Any], variant: int) -> str:
    return "x" * int(schema.get("minLength", 0))


def _bounds(schema: Mapping[str, Any], step: float) -> tuple[float, float]:
    """The inclusive range a number may take, exclusive bounds moved in by ``step`` (draft 4's
    boolean ``exclusiveMinimum`` is not read)."""
    low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(exclusive_low, (int, float)) and not isinstance(exclusive_low, bool):
        low = max(low, exclusive_low + step)
    if isinstance(exclusive_high, (int, float)) and not isinstance(exclusive_high, bool):
        high = min(high, exclusive_high - step)
    return low, high


def _number(schema: Mapping[str, Any], root: Mapping[str, Any], variant: int) -> float:
    """0 where the bounds allow it, else the bound nearest 0."""
    low, high = _bounds(schema, 1e-6)
    return low if low > 0 else high if high < 0 else 0


def _integer(schema: Mapping[str, Any], root: Mapping[str, Any], variant: int) -> int:
    """0 where the bounds allow it, else the integer bound nearest 0."""
    low, high = _bounds(schema, 1)
    return math.ceil(low) if low > 0 else math.floor(high) if high < 0 else 0


_BUILDERS = {
    "object": _object,
    "array": _array,
    "string": _string,
    "number": _number,
    "integer": _integer,
    "boolean": lambda schema, root, variant: False,
    "null": lambda schema, root, variant: None,
}


def _resolve(reference: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """The subschema a local JSON pointer (``#/$defs/Name``) names."""
    if not reference.startswith("#"):
        raise ValueError(f"only local references are supported, got {reference!r}")
    node: Any = root
    for part in filter(None, reference[1:].split("/")):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _without(schema: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in schema.items() if name != key}


def _merge(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two schemas' keywords together (``allOf``): properties and required lists united."""
    merged = {**first, **second}
    merged["properties"] = {**first.get("properties", {}), **second.get("properties", {})}
    merged["required"] = list(
        dict.fromkeys([*first.get("required", []), *second.get("required", [])])
    )
    if not merged["properties"] and not merged["required"]:
        del merged["properties"], merged["required"]
    return merged
