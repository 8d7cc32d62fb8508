"""FraCom: lite propositions, Algorithm 1, plausible retrieval (the θ-set, its trace, its two
orders for the budget, speaker names), the §5 predicate filter, memory retention, the LLM path
and its fallbacks, and every ``conf/method/fracom*.yaml``."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import networkx as nx
import numpy as np
import pytest
from fakes.dialogues import build_conversation, embedded_llm_services, tiny_fixture
from fakes.llm import (
    RuleProvider,
    assert_concurrency_changes_nothing,
    make_backbone,
    without_timings,
)

from benchmarks.answering.context import render_context
from benchmarks.config.compose import compose_config
from memsys.base import Services
from memsys.embed import Embedder
from memsys.llm import Backbone, LLMRequest
from memsys.methods.fracom import FraCom, StoredProposition, compose, parse_fragments
from memsys.nlp import NLP, ParseProcess
from memsys.propositions import (
    Proposition,
    PropositionExtractor,
    Utterance,
    dialogue_utterances,
    triples,
)
from memsys.types import Conversation, Question

CONF = Path(__file__).resolve().parents[1] / "conf"
FIRST = datetime(2023, 3, 3, 10, 0)
SECOND = datetime(2023, 3, 12, 18, 30)


def conversation() -> Conversation:
    """Two dated sessions between Ana and Ben; Pepper the beagle returns in session 2."""
    first = [
        ("Ana", "I adopted a beagle called Pepper last week."),
        ("Ben", "Congratulations! I started a pottery class."),
        ("Ana", "Pepper loves the park near my flat in Lisbon."),
    ]
    second = [
        ("Ben", "I made my first bowl in the pottery class yesterday!"),
        ("Ana", "Pepper and I ran a charity race on Saturday."),
    ]
    return build_conversation([(FIRST, first), (SECOND, second)], ("Ana", "Ben"))


def question(text: str, evidence: tuple[str, ...] = ()) -> Question:
    return Question(f"q:{text}", "tiny", text, "", "single_hop", evidence)


class PhraseEmbedder:
    """Hand-set vectors for chosen phrases; a pseudo-random direction for anything else."""

    def __init__(self, fixed: dict[str, np.ndarray], dim: int = 512) -> None:
        self.config = SimpleNamespace(model="fake-phrases")
        self.fixed = {key.lower(): vector / np.linalg.norm(vector) for key, vector in fixed.items()}
        self.dim = dim

    def encode(self, texts):
        rows = []
        for text in texts:
            if text.lower() in self.fixed:
                rows.append(self.fixed[text.lower()])
                continue
            seed = int(hashlib.sha256(text.lower().encode()).hexdigest()[:8], 16)
            vector = np.random.default_rng(seed).standard_normal(self.dim)
            rows.append(vector / np.linalg.norm(vector))
        return np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)


def test_lite_propositions_of_a_few_sentences(nlp: NLP) -> None:
    extractor = PropositionExtractor(nlp)
    adopted, race, lincoln = extractor.extract(
        [
            Utterance("I adopted a beagle called Pepper last week.", "Ana", "Ben"),
            Utterance("Pepper and I ran a charity race on Saturday.", "Ana", "Ben"),
            Utterance("Lincoln, who was president during a bitter war, freed the slaves.", "X"),
        ]
    )
    assert Proposition("adopt", ("Ana", "beagle"), 1) in adopted  # "I" is the speaker
    assert all("week" not in " ".join(p.arguments) for p in adopted)  # dates are not arguments
    assert Proposition("run", ("Pepper", "Ana", "charity race"), 2) in race
    assert triples(Proposition("run", ("Pepper", "Ana", "charity race"), 2)) == [
        ("Pepper", "run", "charity race"),
        ("Ana", "run", "charity race"),
    ]
    assert Proposition("bitter", ("war",)) in lincoln  # the paper's own example
    assert Proposition("free", ("Lincoln", "slave"), 1) in lincoln


def test_addressees_in_two_and_three_party_dialogue() -> None:
    two = [u.addressee for u in dialogue_utterances(conversation().turns)]
    assert two == ["Ben", "Ana", "Ben", "Ana", "Ben"]
    said = [("Ana", "s1"), ("Ben", "s1"), ("Cy", "s1"), ("Cy", "s2"), ("Ana", "s2")]
    turns = [SimpleNamespace(speaker=who, session_id=where, text="hi") for who, where in said]
    assert [u.addressee for u in dialogue_utterances(turns)] == ["Ben", "Ana", "Ben", "Ana", "Cy"]


def test_query_arguments_split_names_from_compounds(nlp: NLP) -> None:
    (arguments,) = PropositionExtractor(nlp).arguments(["What did Caroline research?"])
    assert arguments == ["Caroline", "research"]


def test_algorithm_1_shares_argument_nodes_across_sessions() -> None:
    def stored(predicate: str, *arguments: str) -> StoredProposition:
        return StoredProposition(Proposition(predicate, arguments, 1), "D1:1", 0, None, "", "lite")

    graph: nx.Graph = nx.Graph()
    compose(graph, [stored("adopt", "Ana", "beagle"), stored("love", "Pepper", "park")], 0)
    compose(graph, [stored("walk", "Ana", "Pepper"), stored("adopt", "Ben", "cat")], 2)
    kinds = nx.get_node_attributes(graph, "kind")
    assert sorted(kinds.values()).count("proposition") == 4
    assert sorted(n for n, k in kinds.items() if k == "predicate") == [
        "pred:adopt",
        "pred:love",
        "pred:walk",
    ]
    assert set(graph["arg:ana"]) == {"prop:0", "prop:2"}  # one node, linked across sessions
    assert set(graph["pred:adopt"]) == {"prop:0", "prop:3"}
    assert graph.number_of_edges() == 4 + 8


def test_construct_dump_load_retrieve(nlp: NLP, embedder: Embedder) -> None:
    system = FraCom(Services(embedder=embedder, tokens=None, nlp=nlp))  # type: ignore[arg-type]
    built = system.construct(conversation())
    payload = json.loads(json.dumps(system.dump_memory(built)))
    memory = system.load_memory(payload)
    assert nx.utils.graphs_equal(memory.graph, built.graph)
    assert memory.propositions == built.propositions
    assert memory.speakers == built.speakers == ("Ana", "Ben")

    retrieval = system.retrieve(memory, question("Which bowl did Ben make?"))
    best = retrieval.items[0]
    assert best.turn_ids == ("D2:1",) and best.kind == "proposition"
    assert best.timestamp == SECOND and best.position == 3
    assert "yesterday = 11 March 2023" in best.text  # date expressions resolved in context
    assert [i.score for i in retrieval.items] == sorted(
        (i.score for i in retrieval.items), reverse=True
    )

    turns = FraCom(Services(embedder=embedder, tokens=None, nlp=nlp), context="turns")  # type: ignore[arg-type]
    items = turns.retrieve(memory, question("Which park does Pepper love?")).items
    assert items[0].text == "Ana: Pepper loves the park near my flat in Lisbon."
    assert len({i.turn_ids for i in items}) == len(items)  # each source turn once


def test_plausible_retrieval_threshold(nlp: NLP) -> None:
    dog, puppy = np.eye(512)[0], 0.8 * np.eye(512)[0] + 0.6 * np.eye(512)[1]  # cosine 0.8
    fake = PhraseEmbedder({"dog": dog, "beagle": puppy})
    services = Services(embedder=fake, tokens=None, nlp=nlp)  # type: ignore[arg-type]

    def retrieved(text: str, **options: object) -> list[str]:
        system = FraCom(services, **options)  # type: ignore[arg-type]
        memory = system.construct(conversation())
        return [i.text for i in system.retrieve(memory, question(text)).items]

    assert retrieved("Which dog was adopted?", theta=0.75)[0].startswith("Ana adopt: beagle")
    assert retrieved("Which dog was adopted?", theta=0.85) == []  # 0.8 < theta
    assert retrieved("Which dog was adopted?", plausible=False) == []  # "dog" is not "beagle"
    exact = retrieved("Which beagle was adopted?", plausible=False)
    assert exact[0].startswith("Ana adopt: beagle")


def test_predicate_filter_keeps_similar_predicates_only(nlp: NLP) -> None:
    adopt = np.eye(512)[5]
    fake = PhraseEmbedder({"adopt": adopt, "take in": adopt})
    services = Services(embedder=fake, tokens=None, nlp=nlp)  # type: ignore[arg-type]
    unfiltered = FraCom(services, theta=0.99)  # the paper's main method: no predicate filter
    assert not unfiltered.options.predicate_filter
    memory = unfiltered.construct(conversation())
    system = FraCom(services, theta=0.99, predicate_filter=True)  # §5, "w/ Predicate"
    texts = [i.text for i in system.retrieve(memory, question("Did Ana adopt a dog?")).items]
    assert texts and all(" adopt" in text for text in texts)
    before = unfiltered.retrieve(memory, question("Did Ana adopt a dog?"))
    assert len(before.items) > len(texts)
    trace = system.retrieve(memory, question("Did Ana adopt a dog?")).trace
    assert trace is not None and trace["theta_set"] == len(texts)
    assert trace["theta_set_before_predicate_filter"] == before.trace["theta_set"]  # type: ignore[index]

    have = question("What does Ana have?")  # only a light verb: skipped by default
    everything = unfiltered.retrieve(memory, have).items
    assert everything and system.retrieve(memory, have).items == everything
    unfiltered_trace = system.retrieve(memory, have).trace
    assert unfiltered_trace is not None  # not filtered, yet its size before the filter is there
    assert unfiltered_trace["theta_set_before_predicate_filter"] == unfiltered_trace["theta_set"]
    strict = FraCom(services, theta=0.99, predicate_filter=True, predicate_skip_light_verbs=False)
    assert strict.retrieve(memory, have).items == ()  # no predicate of the memory is like "have"


def theta_set_system(nlp: NLP, **options: object) -> tuple[FraCom, Any]:
    """FraCom on the two-session conversation with an embedder under which only equal phrases
    are alike (cosine 1; unrelated ones are near 0), so the θ-set can be worked out by hand."""
    services = Services(embedder=PhraseEmbedder({}), tokens=None, nlp=nlp)  # type: ignore[arg-type]
    system = FraCom(services, **options)  # type: ignore[arg-type]
    return system, system.construct(conversation())


def test_the_theta_set_its_trace_and_its_two_orders(nlp: NLP) -> None:
    # Propositions: 0 Ana adopt beagle (D1:1), 1 call Pepper (D1:1), 2 Ben start pottery class,
    # 3 Pepper love park/flat/Lisbon (D1:3), 4-5 Ben's bowl (D2:1), 6 Pepper and Ana run (D2:2).
    # "Ana" reaches 0 and 6 (idf log(1 + 7/2)); "Pepper" 1, 3 and 6 (idf log(1 + 7/3)).
    ana, pepper = math.log(1 + 7 / 2), math.log(1 + 7 / 3)
    asked = question("Where did Ana and Pepper run?")
    system, memory = theta_set_system(nlp)
    retrieval = system.retrieve(memory, asked)
    assert retrieval.trace == {
        "theta_set": 4,
        "theta_set_fraction": round(4 / 7, 4),
        "speaker_only": 1,  # Ana adopt: beagle, reached through "Ana" alone
    }
    by_idf = [(item.turn_ids[0], round(item.score, 4)) for item in retrieval.items]
    assert by_idf == [
        ("D2:2", round(ana + pepper, 4)),
        ("D1:1", round(ana, 4)),
        ("D1:1", round(pepper, 4)),  # tie with D1:3 goes to the earlier proposition
        ("D1:3", round(pepper, 4)),
    ]

    recent, _ = theta_set_system(nlp, ranking="time")
    by_time = [item.text.split(" (")[0] for item in recent.retrieve(memory, asked).items]
    assert by_time == [
        "Pepper and Ana run: charity race",
        "Pepper love: park, flat, Lisbon",
        "call: Pepper",
        "Ana adopt: beagle",
    ]  # latest turn first, then within it

    without, _ = theta_set_system(nlp, speaker_arguments="exclude")
    kept = without.retrieve(memory, asked)
    assert [item.turn_ids[0] for item in kept.items] == ["D1:1", "D1:3", "D2:2"]  # via Pepper
    assert kept.trace == {"theta_set": 3, "theta_set_fraction": round(3 / 7, 4), "speaker_only": 0}
    only_a_name = question("What did Ana do?")
    assert without.retrieve(memory, only_a_name).items == ()
    assert system.retrieve(memory, only_a_name).trace["speaker_only"] == 2  # type: ignore[index]


def test_a_tie_holds_when_vectors_are_a_last_bit_off_as_on_another_cpu(nlp: NLP) -> None:
    # "beagle" reaches proposition 0 (D1:1) and "park" proposition 3 (D1:3), each with idf
    # log 8 and its phrase's cosine with itself: a tie, the earlier first. Another CPU computes
    # the vectors a last bit apart, so a self-cosine comes out 1 ± 2e-7; either way it must tie.
    asked = question("Was the beagle in the park?")
    orders = set()
    for jitter in (-1e-7, 1e-7):
        fake = PhraseEmbedder({})
        fake.fixed = {
            "beagle": (1 + jitter) * np.eye(512)[7],
            "park": (1 - jitter) * np.eye(512)[8],
        }
        services = Services(embedder=fake, tokens=None, nlp=nlp)  # type: ignore[arg-type]
        system = FraCom(services)
        retrieval = system.retrieve(system.construct(conversation()), asked)
        orders.add(tuple(item.turn_ids[0] for item in retrieval.items))
        assert retrieval.items[0].score == retrieval.items[1].score == math.log(8)
    assert orders == {("D1:1", "D1:3")}


def test_the_budget_keeps_the_best_or_the_newest_end_of_the_theta_set(nlp: NLP) -> None:
    # "Ana" reaches propositions 0 (D1:1) and 6 (D2:2) with the same score; a budget that fits
    # one of them keeps the earlier under idf (its tie rule) and the newer under time order.
    asked = question("What did Ana do?")

    class Words:
        def count(self, text: str) -> int:
            return len(text.split())

    shown = {}
    for ranking in ("idf", "time"):
        system, memory = theta_set_system(nlp, ranking=ranking)
        items = system.retrieve(memory, asked).items
        context = render_context(items, Words(), budget=17)  # 12 + 5 or 11 + 5 words
        assert context.dropped == 1
        shown[ranking] = context.turn_ids
    assert shown == {"idf": ("D1:1",), "time": ("D2:2",)}


def test_ranking_and_speaker_arguments_take_only_their_choices(nlp: NLP) -> None:
    services = Services(embedder=PhraseEmbedder({}), tokens=None, nlp=nlp)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ranking"):
        FraCom(services, ranking="score")
    with pytest.raises(ValueError, match="speaker_arguments"):
        FraCom(services, speaker_arguments="downweight")


def test_memory_retention_keeps_the_last_sessions_only(nlp: NLP, embedder: Embedder) -> None:
    services = Services(embedder=embedder, tokens=None, nlp=nlp)  # type: ignore[arg-type]
    full, last = FraCom(services), FraCom(services, retained_sessions=1)
    everything, recent = full.construct(conversation()), last.construct(conversation())
    assert {p.turn_id[:3] for p in everything.propositions} == {"D1:", "D2:"}
    assert {p.turn_id for p in recent.propositions} == {"D2:1", "D2:2"}
    assert recent.propositions == [p for p in everything.propositions if p.turn_id[:3] == "D2:"]
    assert {p.position for p in recent.propositions} == {3, 4}  # positions in the conversation
    assert set(recent.turns) == {"D2:1", "D2:2"}
    kinds = nx.get_node_attributes(recent.graph, "kind")
    assert list(kinds.values()).count("proposition") == len(recent.propositions)
    assert "arg:park" in everything.graph and "arg:park" not in recent.graph
    assert last.retrieve(recent, question("Which park does Pepper love?")).items[0].turn_ids == (
        "D2:2",  # Pepper is still there (session 2), the park is forgotten
    )
    both = FraCom(services, retained_sessions=2).construct(conversation())
    assert both.propositions == everything.propositions

    # The memory cache tells them apart; the main method's config is what it was before the option.
    assert "retained_sessions" not in full.construction_config()
    assert last.construction_config()["retained_sessions"] == 1
    with pytest.raises(ValueError, match="retained_sessions"):
        FraCom(services, retained_sessions=0)


FRACOM_CONFIGS = sorted(path.stem for path in (CONF / "method").glob("fracom*.yaml"))


def test_the_fracom_configs_are_the_paper_s_method_variant_and_ablations() -> None:
    assert FRACOM_CONFIGS == [
        "fracom",
        "fracom_llm",
        "fracom_no_plausible",
        "fracom_no_retention",
        "fracom_no_speaker_arguments",
        "fracom_predicate",
        "fracom_theta08",
        "fracom_theta09",
        "fracom_time_order",
        "fracom_turns",
    ]


@pytest.mark.parametrize("name", FRACOM_CONFIGS)
def test_every_fracom_config_instantiates(name: str, nlp: NLP, embedder: Embedder) -> None:
    from hydra.utils import instantiate

    cfg = compose_config([f"method={name}"])
    services = Services(embedder=embedder, tokens=None, nlp=nlp)  # type: ignore[arg-type]
    system = instantiate(cfg.method, services=services, _convert_="partial")
    assert isinstance(system, FraCom)
    options = system.options
    assert options.predicate_filter == (name == "fracom_predicate")  # §5 is not the default
    assert options.predicate_threshold == 0.5 and options.predicate_skip_light_verbs
    assert options.retained_sessions == (1 if name == "fracom_no_retention" else None)
    assert options.plausible == (name != "fracom_no_plausible")
    assert options.theta == {"fracom_theta08": 0.8, "fracom_theta09": 0.9}.get(name, 0.7)
    assert options.ranking == ("time" if name == "fracom_time_order" else "idf")
    excluded = name == "fracom_no_speaker_arguments"
    assert options.speaker_arguments == ("exclude" if excluded else "keep")
    assert system.uses_llm == (options.query_extraction == "llm") == (name == "fracom_llm")
    assert options.context == ("turns" if name == "fracom_turns" else "propositions")


def canned_reply(request: LLMRequest) -> str:
    """Replies by rule: good JSON, garbage, good JSON only on the retry request, or (for two
    questions) no proposition at all, on the first request or on both."""
    prompt = request.messages[0]["content"]
    retry = len(request.messages) > 1
    if "run the charity race?" in prompt:  # nothing at first, a reading on the retry
        found = [{"Predicate": "run", "Argument": ["Ana", "charity race"]}] if retry else []
        text = json.dumps({"propositions": found})
    elif "does Pepper love?" in prompt:  # nothing, twice
        text = '{"propositions": []}'
    elif "beagle" in prompt:
        reply = {"propositions": [{"Predicate": "adopted", "Argument": ["Ana", "beagle"]}]}
        text = json.dumps(reply)
    elif "pottery class." in prompt and retry:
        text = '{"propositions": [{"Predicate": "started", "Argument": ["Ben", "pottery class"]}]}'
    elif "pottery class." in prompt:
        text = '{"propositions": [{"Predicate": "flew", "Argument": ["Mars"]}]}'  # ungrounded
    else:
        text = "Sure! Here are the propositions you asked for."
    return text


def canned() -> RuleProvider:
    """The canned replies from ``fake:canned``: 40 prompt, 12 completion tokens each."""
    return RuleProvider(canned_reply, name="canned", tokens=(40, 12))


def test_llm_path_uses_replies_retries_once_and_falls_back(nlp: NLP, embedder: Embedder) -> None:
    provider = canned()
    backbone = make_backbone(provider)  # type: ignore[arg-type]
    system = FraCom(
        Services(embedder=embedder, tokens=None, backbone=backbone, nlp=nlp),  # type: ignore[arg-type]
        extraction="llm",
    )
    assert system.uses_llm and "prompt" in system.construction_config()
    memory = system.construct(conversation())
    report = memory.report
    assert report["units"] == 5 and report["accepted_first"] == 1
    assert report["retried"] == 4 and report["accepted_retry"] == 1 and report["fallbacks"] == 3
    assert report["calls"] == 9 and report["prompt_tokens"] == 9 * 40
    assert report["problems"] == {"bad_json": 6, "rejected": 1}
    sources = {(p.turn_id, p.source) for p in memory.propositions}
    assert ("D1:1", "llm") in sources and ("D1:2", "llm") in sources
    assert ("D1:3", "lite") in sources  # fallback to the parse, never a crash
    assert Proposition("adopted", ("Ana", "beagle"), 1) in [
        p.proposition for p in memory.propositions
    ]
    retries = [r for r in provider.requests if len(r.messages) == 3]
    assert len(retries) == 4 and retries[0].messages[1]["role"] == "assistant"  # a new request


def test_construction_is_the_same_at_any_concurrency(nlp: NLP, embedder: Embedder) -> None:
    def construct(backbone: Backbone) -> dict[str, Any]:
        services = Services(embedder=embedder, tokens=None, backbone=backbone, nlp=nlp)  # type: ignore[arg-type]
        system = FraCom(services, extraction="llm")
        return system.dump_memory(system.construct(conversation()))

    assert_concurrency_changes_nothing(construct, canned)


def test_parsing_on_its_own_process_builds_the_same_memory(nlp: NLP, embedder: Embedder) -> None:
    """A run that sends requests while it parses parses on a process of its own: the memory is
    byte for byte the one parsed here (each NLP fresh, so nothing comes from a memo)."""
    process = ParseProcess(min_texts=1)
    dumps = []
    try:
        for apart in (None, process):
            fresh = NLP(pipeline=nlp.pipeline, process=apart)
            services = Services(
                embedder=embedder, tokens=None, backbone=make_backbone(canned()), nlp=fresh
            )  # type: ignore[arg-type]
            system = FraCom(services, extraction="llm")
            dumps.append(
                json.dumps(without_timings(system.dump_memory(system.construct(conversation()))))
            )
            assert fresh.counts()["parsed"] > 0
    finally:
        process.close()
    assert dumps[0] == dumps[1]


def test_an_empty_llm_reading_of_a_question_is_retried_then_read_the_lite_way(
    nlp: NLP, embedder: Embedder
) -> None:
    provider = canned()
    services = Services(embedder, None, make_backbone(provider), nlp)  # type: ignore[arg-type]
    system = FraCom(services, query_extraction="llm")
    race, park = "Where did Ana run the charity race?", "Which park does Pepper love?"
    system.prepare_queries([question(race), question(park)])
    report = system.query_report.to_json()
    assert report["units"] == 2 and report["accepted_first"] == 0 and report["retried"] == 2
    assert report["accepted_retry"] == 1 and report["fallbacks"] == 1
    assert report["problems"] == {"rejected": 3} and len(provider.requests) == 4
    memory = system.construct(conversation())
    best = system.retrieve(memory, question(race)).items[0]  # the LLM's reading, on the retry
    assert best.turn_ids == ("D2:2",) and "charity race" in best.text
    lite = FraCom(Services(embedder, None, None, nlp))  # type: ignore[arg-type]
    fallback = system.retrieve(memory, question(park))
    assert fallback == lite.retrieve(memory, question(park))  # read the lite way
    assert fallback.items[0].turn_ids == ("D1:3",)


def test_fragment_replies_keep_what_the_utterance_says() -> None:
    utterance = Utterance("Congratulations! I started a pottery class.", "Ben", "Ana")
    reply = {
        "propositions": [
            {"Predicate": "started", "Argument": ["Ben", "pottery class", "Mars"]},
            {"Predicate": "flew", "Argument": ["Ben"]},  # the predicate is not in the utterance
            {"Predicate": "started", "Argument": ["Ana", "pottery class"]},  # the addressee
        ]
    }
    assert parse_fragments(reply, utterance) == [
        Proposition("started", ("Ben", "pottery class"), 1),
        Proposition("started", ("Ana", "pottery class"), 1),
    ]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # SmolLM2 on 2 shared cores: up to 16 calls of several seconds
def test_llm_mode_with_the_embedded_backbone(tmp_path: Path, embedder: Embedder, nlp: NLP) -> None:
    services, accounting = embedded_llm_services(tmp_path / "llm.sqlite", embedder, nlp)
    tiny = tiny_fixture()
    system = FraCom(services, extraction="llm")
    memory = system.load_memory(json.loads(json.dumps(system.dump_memory(system.construct(tiny)))))
    report = memory.report
    assert report["units"] == len(tiny.turns) == 8
    assert report["accepted_first"] + report["accepted_retry"] + report["fallbacks"] == 8
    assert accounting.summary()["total"]["calls"] == report["calls"] >= 8
    assert memory.propositions and {p.source for p in memory.propositions} <= {"llm", "lite"}
    retrieval = system.retrieve(memory, tiny.questions[0])
    assert all(item.turn_ids and item.timestamp for item in retrieval.items)
