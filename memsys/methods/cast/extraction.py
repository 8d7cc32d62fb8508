"""CAST's reading of the LLM's replies (``extraction: llm``): which OpenIE reply a message keeps,
which scene summary is the LLM's and which the extractive fallback, and how a mention becomes a
speaker's name. The requests themselves are sent by :class:`memsys.methods.cast.method.CAST`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memsys.llm.structured import PendingJSON
from memsys.propositions import (
    ADDRESSEE_PRONOUNS,
    SPEAKER_PRONOUNS,
    Utterance,
    grounded,
    phrase_key,
)

from .hipporag import PassageFacts, Triple

PRONOUNS = SPEAKER_PRONOUNS | ADDRESSEE_PRONOUNS


def openie_accept(
    utterances: Sequence[Utterance], lite_facts: Sequence[PassageFacts]
) -> Callable[[int, Any], tuple[list[str], str | None, PassageFacts] | None]:
    """What an OpenIE reply keeps (``None``: the lite facts stand in). Names, the place and
    triples' subjects and objects must occur in the message (or be a party to it); a reply
    keeping no triple where the parse finds some is rejected."""

    def accept(index: int, value: Any) -> tuple[list[str], str | None, PassageFacts] | None:
        u = utterances[index]
        names = [n for n in (u.speaker, u.addressee) if n]
        persons = [
            " ".join(p.split())
            for p in value["persons"]
            if p.strip()[:1].isupper()
            and p.strip().lower() not in PRONOUNS
            and grounded(p, u.text, names)
        ]
        place = " ".join(value["location"].split())
        location = place if phrase_key(place) and grounded(place, u.text) else None
        kept: list[Triple] = [
            (" ".join(s.split()), " ".join(p.split()), " ".join(o.split()))
            for s, p, o in value["triples"]
            if all(phrase_key(part) for part in (s, p, o))
            and grounded(s, u.text, names)
            and grounded(o, u.text, names)
        ]
        if not kept and lite_facts[index][1]:
            return None
        return persons, location, ([part for s, _, o in kept for part in (s, o)], kept)

    return accept


def chosen_summaries(
    pending: PendingJSON | None, extractive: Sequence[str]
) -> list[tuple[str, str]]:
    """φ(s) for each scene: ``(summary, "llm" | "extractive")``."""
    if pending is None:
        return [(text, "extractive") for text in extractive]

    def accept(index: int, value: Any) -> str | None:
        summary = " ".join(value["summary"].split())
        return summary if len(summary.split()) >= 3 else None

    return [
        (text, "llm") if text is not None else (fallback, "extractive")
        for text, fallback in zip(pending.results(accept), extractive, strict=True)
    ]


def canonical_person(name: str, speakers: Sequence[str]) -> str:
    """A mention as a speaker's name where it is one (``Mel`` → ``Melanie``: the same first name,
    or a prefix of it of three letters or more, as LoCoMo's nicknames are), else as written.

    >>> canonical_person("Mel", ["Caroline", "Melanie"]), canonical_person("Gina", ["Jon"])
    ('Melanie', 'Gina')
    """
    first = name.split()[0].lower() if name.split() else ""
    for speaker in speakers:
        head = speaker.split()[0].lower() if speaker.split() else ""
        if first and (first == head or (len(first) >= 3 and head.startswith(first))):
            return speaker
    return name
