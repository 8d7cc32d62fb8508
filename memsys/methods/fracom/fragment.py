"""FraCom §3.1, Fragment: utterances → propositions ``{Predicate, Argument: [...]}`` by the LLM.

One :data:`~memsys.methods.fracom.prompts.FRAGMENT_PROMPT` per utterance, all sent at once
through :class:`memsys.llm.structured.PendingJSON` (one retry, then ``None`` so that the caller
uses the lite extractor, counted in the report). The same prompt reads a question (§3.3: "we
perform propositional representation on current utterances").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport, PendingJSON
from memsys.methods.fracom.prompts import FRAGMENT_MAX_TOKENS, FRAGMENT_PROMPT, FRAGMENT_SCHEMA
from memsys.propositions import Proposition, Utterance, grounded, phrase_key

#: Who says an utterance without a speaker (a question): the prompt needs a name for "I".
UNKNOWN_SPEAKER = "Someone"


def fragment_with_llm(
    backbone: Backbone,
    utterances: Sequence[Utterance],
    empty_ok: Sequence[bool],
    report: ExtractionReport,
) -> list[list[Proposition] | None]:
    """The grounded LLM propositions of each utterance, ``None`` where the lite ones must stand in.

    A reply with no usable proposition is rejected (and so retried once) unless
    ``empty_ok[i]``: a history turn may hold no proposition at all (``Ha ha, thanks!``, where
    the lite extractor finds none either), but a question always has something to look for, so
    the caller passes ``False`` for every question.
    """
    with fragment_requests(backbone, utterances, report) as pending:
        return read_fragments(pending, utterances, empty_ok)


def fragment_requests(
    backbone: Backbone, utterances: Sequence[Utterance], report: ExtractionReport
) -> PendingJSON:
    """Every utterance's fragment request, sent now (each utterance on its own), so that the
    caller can parse while they are answered; :func:`read_fragments` reads the replies."""
    prompts = [
        [
            {
                "role": "user",
                "content": FRAGMENT_PROMPT.format(
                    speaker=utterance.speaker or UNKNOWN_SPEAKER, utterance=utterance.text
                ),
            }
        ]
        for utterance in utterances
    ]
    return PendingJSON(
        backbone, prompts, schema=FRAGMENT_SCHEMA, max_tokens=FRAGMENT_MAX_TOKENS, report=report
    )


def read_fragments(
    pending: PendingJSON, utterances: Sequence[Utterance], empty_ok: Sequence[bool]
) -> list[list[Proposition] | None]:
    """The replies to :func:`fragment_requests` as :func:`fragment_with_llm` returns them."""

    def accept(index: int, value: Any) -> list[Proposition] | None:
        found = parse_fragments(value, utterances[index])
        return found if found or empty_ok[index] else None

    return pending.results(accept)


def parse_fragments(value: Any, utterance: Utterance) -> list[Proposition]:
    """The grounded propositions of a schema-valid fragment reply.

    Figure 9 asks that every predicate and argument "be identified from the original sentence";
    a predicate or argument whose words are not in the utterance (the speaker's and addressee's
    names aside) is dropped, and a proposition left without arguments with it. The first of two
    or more arguments is read as the subject (used only to render a statement).

    >>> reply = {"propositions": [{"Predicate": "freed", "Argument": ["Lincoln", "Mars"]}]}
    >>> parse_fragments(reply, Utterance("Lincoln freed the slaves.", "Ana"))
    [Proposition(predicate='freed', arguments=('Lincoln',), subjects=0)]
    """
    names = [name for name in (utterance.speaker, utterance.addressee) if name]
    found: dict[tuple[str, tuple[str, ...]], Proposition] = {}
    for item in value["propositions"]:
        predicate = " ".join(item["Predicate"].split())
        if not phrase_key(predicate) or not grounded(predicate, utterance.text):
            continue
        arguments = tuple(
            dict.fromkeys(
                " ".join(a.split())
                for a in item["Argument"]
                if phrase_key(a) and grounded(a, utterance.text, names)
            )
        )
        if arguments:
            subjects = 1 if len(arguments) >= 2 else 0
            found.setdefault((predicate, arguments), Proposition(predicate, arguments, subjects))
    return list(found.values())
