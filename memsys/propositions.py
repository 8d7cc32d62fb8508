"""Predicate–argument propositions from a dependency parse: the lite extractor of FraCom and CAST.

FraCom fragments each utterance into propositions ``{Predicate, Argument: [...]}`` and CAST's
semantic memory needs OpenIE triples; without an LLM both come from the same spaCy parse, so the
extractor lives here and each method reads what it needs (:func:`triples` turns a proposition
into ``(subject, predicate, object)`` triples). Readings taken where a parse has to stand in for
the papers' LLM prompts:

* A predicate is a verb (lemma, with its particle: ``give up``), a copula's adjective
  (``it was powerful`` → ``powerful(it)``) and an attributive adjective (``bitter war`` →
  ``bitter(war)``, the paper's own example). ``be``/``have`` with a noun attribute or object stay
  predicates (``be(Caroline, counselor)``).
* Arguments are nouns with their compound modifiers (``LGBTQ support group``), a named entity as
  a whole (``the United States`` → ``United States``), taken from the predicate's subjects,
  objects, attributes, datives and prepositional objects, conjuncts included. A person's name
  inside a compound (``Caroline research``) is split off as its own argument. A verb with no
  subject of its own (``... and gave a home``, ``want to try``) inherits its head's subjects; a
  verb modifying a noun (``researching agencies``) takes that noun.
* Pronouns: in dialogue ``I``/``me``/``my``/``we`` are the speaker and ``you`` the addressee, so
  they become those names; other pronouns (``it``, ``she``, ``that``) are dropped, there being no
  coreference resolution. Date and time expressions are not arguments (they would join
  unrelated propositions through ``yesterday``); :func:`time_notes` resolves them against the
  session date instead.
* Node identity is :func:`phrase_key`: lower case, no leading article or possessive, no
  punctuation; common nouns are lemmatized by the parser (``kids`` → ``kid``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsys.nlp import NLP, TIME_LABELS, resolve_time

SPEAKER_PRONOUNS = frozenset(
    {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"}
)
ADDRESSEE_PRONOUNS = frozenset({"you", "your", "yours", "yourself", "yourselves"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj"})
OBJECT_DEPS = frozenset({"dobj", "attr", "oprd", "dative", "obj", "iobj"})
INHERITS_SUBJECT = frozenset({"conj", "xcomp", "advcl"})
NOUN_TAGS = frozenset({"NOUN", "PROPN", "NUM"})
ARGUMENT_TAGS = frozenset({"NOUN", "PROPN"})
# fmt: off
#: Chat words the small NER model tags as person names (``Glad``, ``Bye Caroline``, ``Fri``).
NOT_NAMES = frozenset({
    "hey", "hi", "hello", "bye", "thanks", "thank", "wow", "glad", "nah", "wanna", "gonna",
    "yeah", "yay", "omg", "lol", "haha", "aww", "awesome", "congrats", "cool", "sure", "ok",
    "okay", "hmm", "oh", "mon", "tue", "tues", "wed", "thu", "thurs", "fri", "sat", "sun",
})
# fmt: on
_LEADING = re.compile(
    r"^(?:(?:a|an|the|my|your|his|her|its|our|their|this|that|these|those|some)\s+)+"
)
_NON_WORD = re.compile(r"[^\w\s'-]+")


@dataclass(frozen=True)
class Proposition:
    """A predicate and its arguments; the first ``subjects`` arguments are its subjects."""

    predicate: str
    arguments: tuple[str, ...]
    subjects: int = 0

    def render(self) -> str:
        """A short statement: ``Caroline go: LGBTQ support group``, ``bitter: war``."""
        subjects = " and ".join(self.arguments[: self.subjects])
        rest = ", ".join(self.arguments[self.subjects :])
        head = f"{subjects} {self.predicate}" if subjects else self.predicate
        return f"{head}: {rest}" if rest else head


def phrase_key(text: str) -> str:
    """The identity of a predicate or argument node.

    >>> phrase_key("The United States")
    'united states'
    >>> phrase_key("  my  Flat! ")
    'flat'
    """
    words = _NON_WORD.sub(" ", text.lower()).split()
    return _LEADING.sub("", " ".join(words)).strip()


def triples(proposition: Proposition) -> list[tuple[str, str, str]]:
    """OpenIE-style ``(subject, predicate, object)`` triples of a proposition.

    Each subject with each further argument; without a subject, the first argument stands in.

    >>> triples(Proposition("freed", ("Lincoln", "slaves"), subjects=1))
    [('Lincoln', 'freed', 'slaves')]
    >>> triples(Proposition("bitter", ("war",)))
    []
    """
    count = proposition.subjects or 1
    heads, objects = proposition.arguments[:count], proposition.arguments[count:]
    return [(head, proposition.predicate, obj) for head in heads for obj in objects]


def grounded(phrase: str, text: str, names: Sequence[str] = ()) -> bool:
    """Whether every word of ``phrase`` occurs in ``text`` (or in ``names``), up to inflection.

    The papers ask that predicates and arguments be taken from the sentence; an LLM's output is
    checked with this. Words match when they share their first four letters (``freed``/``free``).

    >>> grounded("Lincoln freed", "Lincoln, who ..., frees the slaves")
    True
    >>> grounded("Abraham", "Lincoln frees the slaves")
    False
    """
    available = {word[:4] for word in _words(" ".join([text, *names]))}
    return all(word[:4] in available for word in _words(phrase))


def _words(text: str) -> list[str]:
    return [word for word in _NON_WORD.sub(" ", text.lower()).replace("-", " ").split() if word]


@dataclass(frozen=True)
class Utterance:
    """What the extractor needs of a turn: its text, who says it and to whom."""

    text: str
    speaker: str = ""
    addressee: str = ""


def dialogue_utterances(turns: Sequence[Any]) -> list[Utterance]:
    """Turns (anything with ``text``, ``speaker``, ``session_id``) as utterances with addressees.

    The addressee is the other party where a conversation has two speakers; otherwise the
    nearest different speaker before (else after) the turn in its session.
    """
    speakers = list(dict.fromkeys(turn.speaker for turn in turns))
    utterances = []
    for index, turn in enumerate(turns):
        if len(speakers) == 2:
            addressee = speakers[1] if turn.speaker == speakers[0] else speakers[0]
        else:
            session = [t for t in turns if t.session_id == turn.session_id]
            local = index - turns.index(session[0])
            others = [t.speaker for t in [*reversed(session[:local]), *session[local + 1 :]]]
            addressee = next((name for name in others if name != turn.speaker), "")
        utterances.append(Utterance(turn.text, turn.speaker, addressee))
    return utterances


class PropositionExtractor:
    """Propositions of utterances from spaCy dependency parses (batched through :class:`NLP`)."""

    def __init__(self, nlp: NLP) -> None:
        self.nlp = nlp

    def extract(self, utterances: Sequence[Utterance]) -> list[list[Proposition]]:
        """The propositions of each utterance, in order, without duplicates."""
        docs = self.nlp.parse([utterance.text for utterance in utterances])
        return [
            _doc_propositions(doc, utterance)
            for doc, utterance in zip(docs, utterances, strict=True)
        ]

    def arguments(self, texts: Sequence[str]) -> list[list[str]]:
        """Every argument-like phrase of each text: its propositions' arguments and every other
        noun phrase (possessors included), for reading a query generously."""
        found = []
        utterances = [Utterance(text) for text in texts]
        docs = self.nlp.parse(list(texts))
        for doc, utterance in zip(docs, utterances, strict=True):
            phrases = [a for p in _doc_propositions(doc, utterance) for a in p.arguments]
            for token in doc:
                if token.dep_ != "compound":
                    phrases.extend(_phrases(token, utterance))
            found.append(list(dict.fromkeys(p for p in phrases if phrase_key(p))))
        return found

    def persons(self, texts: Sequence[str]) -> list[list[str]]:
        """Person names mentioned in each text (spaCy NER), stripped of words that are not names
        (not proper nouns, or in :data:`NOT_NAMES`)."""
        found = []
        for doc in self.nlp.parse(list(texts)):
            names = []
            for entity in doc.ents:
                if entity.label_ != "PERSON":
                    continue
                name = " ".join(
                    t.text
                    for t in entity
                    if t.pos_ == "PROPN" and t.text[:1].isupper() and t.lower_ not in NOT_NAMES
                )
                if name and name not in names:
                    names.append(name)
            found.append(names)
        return found

    def entities(self, texts: Sequence[str]) -> list[list[tuple[str, str]]]:
        """``(text, label)`` of each text's named entities."""
        return [[(e.text, e.label_) for e in doc.ents] for doc in self.nlp.parse(list(texts))]


def time_notes(nlp: NLP, texts: Sequence[str], anchors: Sequence[datetime | None]) -> list[str]:
    """Each text's date expressions resolved against its anchor: ``yesterday = 7 May 2023``.

    Empty where a text has none or the anchor is unknown. Day-granular expressions show the day,
    coarser ones their week, month or year.
    """
    notes = []
    for doc, anchor in zip(nlp.parse(list(texts)), anchors, strict=True):
        parts = []
        for entity in doc.ents:
            if entity.label_ not in TIME_LABELS or anchor is None:
                continue
            resolved = resolve_time(entity.text, anchor)
            if resolved is None:
                continue
            parts.append(f"{entity.text} = {_date_text(resolved.timestamp, resolved.granularity)}")
        notes.append("; ".join(dict.fromkeys(parts)))
    return notes


def _date_text(moment: datetime, granularity: str) -> str:
    if granularity == "year":
        return str(moment.year)
    if granularity == "month":
        return f"{moment:%B %Y}"
    if granularity == "week":
        return f"the week of {moment.day} {moment:%B %Y}"
    return f"{moment.day} {moment:%B %Y}"


def _doc_propositions(doc: Any, utterance: Utterance) -> list[Proposition]:
    found: list[Proposition] = []
    for token in doc:
        if token.pos_ == "ADJ" and token.dep_ == "amod":
            found.append(
                Proposition(token.lemma_.lower(), tuple(_arguments(token.head, utterance)))
            )
        elif token.pos_ == "VERB" or (token.pos_ == "AUX" and _has_complement(token)):
            found.extend(_verb_propositions(token, utterance))
    unique: dict[tuple[str, tuple[str, ...]], Proposition] = {}
    for proposition in found:
        arguments = tuple(dict.fromkeys(a for a in proposition.arguments if phrase_key(a)))
        if proposition.predicate and arguments:
            subjects = len(set(proposition.arguments[: proposition.subjects]))
            key = (proposition.predicate, arguments)
            unique.setdefault(key, Proposition(proposition.predicate, arguments, subjects))
    return list(unique.values())


def _has_complement(token: Any) -> bool:
    return any(child.dep_ in {"attr", "acomp", "dobj"} for child in token.children)


def _verb_propositions(verb: Any, utterance: Utterance) -> list[Proposition]:
    subjects = _subjects(verb, utterance)
    objects: list[str] = []
    adjectives: list[str] = []
    for child in verb.children:
        if child.dep_ in OBJECT_DEPS:
            objects.extend(_arguments(child, utterance))
        elif child.dep_ in {"prep", "agent"}:
            for grandchild in child.children:
                if grandchild.dep_ == "pobj":
                    objects.extend(_arguments(grandchild, utterance))
        elif child.dep_ == "acomp" and child.pos_ == "ADJ":
            adjectives.append(child.lemma_.lower())
    if verb.dep_ == "amod" and verb.head.pos_ in NOUN_TAGS:
        objects.extend(_arguments(verb.head, utterance))
    propositions = [Proposition(adjective, tuple(subjects)) for adjective in adjectives]
    subjects = list(dict.fromkeys(subjects))
    copula_only = verb.lemma_ == "be" and adjectives and not objects
    if not copula_only:
        particle = " ".join(c.text.lower() for c in verb.children if c.dep_ == "prt")
        predicate = f"{verb.lemma_.lower()} {particle}".strip()
        propositions.append(Proposition(predicate, tuple(subjects + objects), len(subjects)))
    return propositions


def _subjects(verb: Any, utterance: Utterance) -> list[str]:
    own = [child for child in verb.children if child.dep_ in SUBJECT_DEPS]
    subjects = [s for child in own for s in _arguments(child, utterance)]
    relative = all(child.tag_ in {"WP", "WDT"} for child in own)
    if relative and verb.dep_ == "relcl" and verb.head.pos_ in NOUN_TAGS:
        subjects = _arguments(verb.head, utterance)
    if not own and verb.dep_ in INHERITS_SUBJECT and verb.head is not verb:
        subjects = [
            s
            for c in verb.head.children
            if c.dep_ in SUBJECT_DEPS
            for s in _arguments(c, utterance)
        ]
    return subjects


def _arguments(token: Any, utterance: Utterance) -> list[str]:
    """The argument phrases a noun or pronoun token stands for, its conjuncts included."""
    phrases: list[str] = []
    for member in (token, *token.conjuncts):
        phrases.extend(_phrases(member, utterance))
    return phrases


def _phrases(token: Any, utterance: Utterance) -> list[str]:
    lower = token.text.lower()
    if token.pos_ == "PRON":
        if lower in SPEAKER_PRONOUNS and utterance.speaker:
            return [utterance.speaker]
        if lower in ADDRESSEE_PRONOUNS and utterance.addressee:
            return [utterance.addressee]
        return []
    if token.pos_ not in ARGUMENT_TAGS or token.ent_type_ in TIME_LABELS:
        return []
    if token.ent_type_:
        entity = _entity_of(token)
        if entity is not None:
            text = entity.text
            return [text[4:] if text.lower().startswith("the ") else text]
    names, modifiers = [], []
    for child in _compounds(token):
        if child.ent_type_ == "PERSON":
            names.append(child.text)
        elif child.ent_type_ not in TIME_LABELS:
            modifiers.append(child.text)
    head = token.lemma_ if token.pos_ == "NOUN" else token.text
    return [*names, " ".join([*modifiers, head])]


def _compounds(token: Any) -> list[Any]:
    """The compound modifiers of a noun, nested ones included, in sentence order."""
    found = []
    for child in token.lefts:
        if child.dep_ == "compound":
            found.extend([*_compounds(child), child])
    return sorted(found, key=lambda t: t.i)


def _entity_of(token: Any) -> Any:
    for entity in token.doc.ents:
        if entity.start <= token.i < entity.end:
            return entity
    return None
