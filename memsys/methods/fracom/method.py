"""FraCom: propositional fragments composed into a graph (Ke et al., ``papers/fracom.txt``).

Implements §3.1 (Fragment: each utterance → propositions ``{Predicate, Argument: [...]}``, the
prompt of Appendix K / Figure 9; :mod:`.fragment`, :mod:`.prompts`), §3.2 (Compose: Eqs. 1–4
and Algorithm 1; :mod:`.memory`), §3.3 (plausible retrieval, Eq. 5 with threshold θ;
:mod:`.retrieval`), the §5 add-on "w/ Predicate" (Table 6; ``predicate_filter``, off in the main
method) and the two ablations of Table 3: "w/o Plausible Retrieval" (``plausible: false``) and
"w/o Memory Retention" (``retained_sessions``). ``extraction: lite`` replaces the LLM of §3.1 by
the dependency-parse extractor of :mod:`memsys.propositions` (its own readings are listed
there). ``docs/methods/fracom.md`` maps each part of the paper to the code; :mod:`.memory` holds the
memory and :class:`FraComOptions` the options.

Readings taken where the paper is vague (each a config value where it can vary):

* Unit of fragmenting: one utterance per LLM call (``Speaker: text``), so every proposition keeps
  its source turn id and session date; the paper's prompt takes the whole history at once. The
  prompt names the speaker so that "I" becomes a name, as the lite extractor does.
* Output format: Figure 9's lines of ``{"Predicate": ..., "Argument": [...]}`` wrapped in one
  JSON object (``{"propositions": [...]}``) so that it can be schema-constrained. A reply is
  used when it parses against the schema and keeps at least one proposition whose predicate and
  arguments occur in the utterance ("must be identified from the original sentence"; ungrounded
  ones are dropped) — or is empty where the lite extractor finds nothing either. Otherwise one
  retry, then the lite extractor for that utterance, counted (``memory.report``).
* Query arguments (§3.3 "propositional representation on current utterances"): every argument
  and noun phrase of the question (``query_extraction: lite``, the default), or the fragment
  prompt on the question (``llm``). An LLM reading without a usable proposition is retried
  once, then the question is read the lite way, counted in :attr:`FraCom.query_report`.
* Ranking (``ranking``): the paper retrieves a set (the θ-set), the reader's token budget cuts
  it, so the harness orders it: ``idf`` (the default: cosine × idf of the matched argument,
  :mod:`.retrieval`) or ``time`` (most recent first, ``fracom_time_order``). Each question's
  trace records the θ-set's size (``theta_set``), its share of the memory and how many of its
  members only a speaker's name reached (``speaker_only``).
* Speaker names (``speaker_arguments``): the paper lets every argument retrieve (``keep``, the
  default); ``exclude`` (``fracom_no_speaker_arguments``) lets no speaker's name retrieve.
* Predicate filter (§5, "such as 0.5"): off in the main method (``predicate_filter: false``),
  on in ``fracom_predicate``. §5 does not say what happens when a query's predicates are all
  be/have/do, as most questions' are; ``predicate_skip_light_verbs: true`` (the default) does
  not filter on those (:data:`.retrieval.LIGHT_PREDICATES`), ``false`` filters on them too. A
  query with no predicate at all is never filtered.
* Memory retention ("w/o Memory Retention", Tables 3 and 16–18) is never defined in the paper.
  §4.2 ties its effect to "cross-session argument sharing in propositional graphs", i.e. to the
  cross-session merging of Algorithm 1; the harness reads the ablation as a memory that retains
  only the most recent session(s): ``retained_sessions: null`` keeps every session (the main
  method), an integer N only the propositions of the last N sessions of the history. The paper
  generates a response in session t from a memory of sessions < t, so there the last session is
  t - 1; on QA over a whole LoCoMo history it is the final session, which drops the evidence of
  nearly every question: a far harsher ablation than the paper's small drops.
* Context (``context``): ``propositions`` renders each as a short statement, its session date
  given by the harness's date header and its utterance's date expressions resolved against
  that date (``yesterday = 7 May 2023``); ``turns`` hands over the source turns instead, each
  once, ranked by their best proposition.
* FraCom was evaluated on response generation; the harness asks QA questions of the same memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import networkx as nx

from memsys.base import EXTRACTION_MODES, MemorySystem, MethodOptions, Services, check_choices
from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport, PendingJSON
from memsys.methods.fracom.fragment import fragment_requests, fragment_with_llm, read_fragments
from memsys.methods.fracom.memory import (
    EMBEDDED_KINDS,
    FraComMemory,
    StoredProposition,
    compose,
    retained,
)
from memsys.methods.fracom.prompts import FRAGMENT_PROMPT
from memsys.methods.fracom.retrieval import (
    RANKINGS,
    SPEAKER_ARGUMENTS,
    RetrievalOptions,
    order,
    plausible_retrieval,
    rank_every,
)
from memsys.propositions import (
    Proposition,
    PropositionExtractor,
    Utterance,
    dialogue_utterances,
    time_notes,
)
from memsys.types import Conversation, MemoryItem, Question, Retrieval
from memsys.usage import PARSER

CONTEXT_MODES = ("propositions", "turns")


@dataclass(frozen=True, kw_only=True)
class FraComOptions(RetrievalOptions, MethodOptions):
    """FraCom's options, the keys of ``conf/method/fracom.yaml``: the retrieval settings
    (:class:`.retrieval.RetrievalOptions`, which retrieval reads) and the construction's and the
    reader's (readings: the module docstring and ``docs/methods/fracom.md``)."""

    retained_sessions: int | None = None
    context: str = "propositions"
    query_extraction: str = "lite"

    def check(self) -> None:
        check_choices(
            ("query_extraction", self.query_extraction, EXTRACTION_MODES),
            ("context", self.context, CONTEXT_MODES),
        )
        if self.retained_sessions is not None and self.retained_sessions < 1:
            raise ValueError(
                f"retained_sessions must be null or at least 1, got {self.retained_sessions}"
            )
        for name in ("theta", "predicate_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        check_choices(
            ("ranking", self.ranking, RANKINGS),
            ("speaker_arguments", self.speaker_arguments, SPEAKER_ARGUMENTS),
        )


class FraCom(MemorySystem[FraComMemory]):
    """Fragment-then-Compose memory with plausible retrieval."""

    #: 2: the memory keeps its speakers' names (``speaker_arguments``, the trace).
    construction_version = 2
    options_type = FraComOptions
    options: FraComOptions

    def __init__(self, services: Services, **options: Any) -> None:
        super().__init__(services, FraComOptions(**options))
        self.extractor = PropositionExtractor(services.nlp)
        self.query_report = ExtractionReport()
        self._queries: dict[str, tuple[list[str], list[str]]] = {}

    def construction_services(self) -> frozenset[str]:
        """The parser too: the propositions' spaCy parses and the turns' time notes."""
        return super().construction_services() | {PARSER}

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"extraction": self.options.extraction}
        if self.options.extraction == "llm":
            config["prompt"] = FRAGMENT_PROMPT
        if self.options.retained_sessions is not None:  # absent for the main method's config
            config["retained_sessions"] = self.options.retained_sessions
        return config

    # -- Fragment and Compose ------------------------------------------------------------------

    def construct(self, conversation: Conversation) -> FraComMemory:
        kept = retained(conversation.sessions, self.options.retained_sessions)
        turns = conversation.turns
        first = len(turns) - sum(len(session.turns) for session in kept)  # kept: a suffix
        utterances = dialogue_utterances(turns)[first:]  # addressees seen in the whole history
        report = ExtractionReport()
        fragments: list[list[Proposition] | None] = [None] * len(utterances)
        texts = [turn.text for turn in turns[first:]]
        # The LLM's requests need only the utterances: spaCy parses while they are answered.
        with self._fragment_requests(utterances, report) as pending:
            lite = self.extractor.extract(utterances)
            notes = time_notes(self.services.nlp, texts, [turn.timestamp for turn in turns[first:]])
            if pending is not None:
                empty_ok = [not found for found in lite]
                fragments = read_fragments(pending, utterances, empty_ok)
        graph: nx.Graph = nx.Graph()
        propositions: list[StoredProposition] = []
        index = 0  # into the kept turns; their position in the conversation is first + index
        for session in kept:  # incremental merging, one session at a time (Algorithm 1)
            new = []
            for turn in session.turns:
                chosen = fragments[index]
                source = "llm" if chosen is not None else "lite"
                for proposition in chosen if chosen is not None else lite[index]:
                    new.append(
                        StoredProposition(
                            proposition,
                            turn.turn_id,
                            first + index,
                            turn.timestamp,
                            notes[index],
                            source,
                        )
                    )
                index += 1
            compose(graph, new, len(propositions))
            propositions.extend(new)
        sources = {turn.turn_id: f"{turn.speaker}: {turn.text}" for turn in turns[first:]}
        speakers = tuple(dict.fromkeys(turn.speaker for turn in turns if turn.speaker))
        memory = FraComMemory(graph, propositions, sources, report.to_json(), speakers)
        for kind in EMBEDDED_KINDS:  # Sentence-BERT node vectors (Eq. 5), cached
            memory.node_vectors(kind, self.services.embedder)
        return memory

    def _fragment_requests(
        self, utterances: Sequence[Utterance], report: ExtractionReport
    ) -> AbstractContextManager[PendingJSON | None]:
        """The LLM's fragment requests, sent now; nothing in lite mode."""
        if self.options.extraction != "llm":
            return nullcontext()
        return fragment_requests(self._llm(), utterances, report)

    def _llm(self, stage: str | None = None) -> Backbone:
        """The construction backbone, its calls booked to ``stage`` where one is given."""
        backbone = self.services.backbone
        if backbone is None:
            raise ValueError("extraction: llm needs a construction backbone (services.backbone)")
        return backbone if stage is None else backbone.with_stage(stage)

    # -- Plausible retrieval -------------------------------------------------------------------

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Read the batch's questions (one parse, or one LLM batch) and embed their phrases."""
        texts = [q.question for q in questions if q.question not in self._queries]
        if not texts:
            return
        lite_arguments = self.extractor.arguments(texts)
        utterances = [Utterance(text) for text in texts]
        lite_propositions = self.extractor.extract(utterances)
        llm: list[list[Proposition] | None] = [None] * len(texts)
        if self.options.query_extraction == "llm" and self.services.backbone is not None:
            empty_ok = [False] * len(texts)  # a question always has something to look for
            llm = fragment_with_llm(self._llm("retrieval"), utterances, empty_ok, self.query_report)
        for i, text in enumerate(texts):
            reading = llm[i]
            propositions = reading if reading is not None else lite_propositions[i]
            arguments = [a for p in propositions for a in p.arguments]
            if reading is None:
                arguments += lite_arguments[i]
            self._queries[text] = (
                list(dict.fromkeys(arguments)),
                list(dict.fromkeys(p.predicate for p in propositions)),
            )
        phrases = [phrase for text in texts for part in self._queries[text] for phrase in part]
        if phrases:
            self.services.embedder.encode(phrases)

    def retrieve(self, memory: FraComMemory, question: Question) -> Retrieval:
        if question.question not in self._queries:
            self.prepare_queries([question])
        arguments, predicates = self._queries[question.question]
        found = plausible_retrieval(
            memory, arguments, predicates, self.services.embedder, self.options
        )
        ranked = order(memory, found.scores, self.options.ranking)
        every = rank_every(memory, arguments, self.services.embedder, self.options)
        deeper = tuple(memory.propositions[index].turn_id for index in every)
        trace = found.trace(len(memory.propositions))
        return Retrieval(self.render(memory, ranked), trace, ranking=deeper)

    def render(
        self, memory: FraComMemory, ranked: Sequence[tuple[int, float]]
    ) -> tuple[MemoryItem, ...]:
        """Retrieved propositions as items (``context: propositions``) or their source turns."""
        items: list[MemoryItem] = []
        seen: set[str] = set()
        for index, score in ranked:
            stored = memory.propositions[index]
            if self.options.context == "propositions":
                text, kind = stored.text(), "proposition"
            elif stored.turn_id in seen:
                continue
            else:
                text, kind = memory.turns[stored.turn_id], "turn"
                seen.add(stored.turn_id)
            items.append(
                MemoryItem(text, (stored.turn_id,), stored.timestamp, stored.position, score, kind)
            )
        return tuple(items)

    # -- Serialization ---------------------------------------------------------------------------

    def dump_memory(self, memory: FraComMemory) -> dict[str, Any]:
        return memory.to_json()

    def load_memory(self, payload: dict[str, Any]) -> FraComMemory:
        return FraComMemory.from_json(payload)

    def stored_texts(self, memory: FraComMemory) -> list[str]:
        """Each proposition, rendered (its source turns are the conversation's, not stored
        anew)."""
        return [stored.proposition.render() for stored in memory.propositions]
