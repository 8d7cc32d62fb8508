"""What the ES-Mem tests share: a word counter for token counts, hand-written conversations on
known topics, and scripted LLM replies for the segmenter and the boundary descriptions."""

from __future__ import annotations

import json
from datetime import datetime

from fakes.dialogues import build_conversation
from fakes.segment import user_text
from memsys.llm.errors import ProviderError
from memsys.llm.types import LLMRequest
from memsys.methods.esmem import BOUNDARY_SYSTEM_PROMPT
from memsys.methods.esmem.prompts import INTENT_SCHEMA, TOPIC_SCHEMA
from memsys.types import Conversation, Question


class WordCounter:
    """Whitespace words as tokens: a stand-in for the reader's token counter."""

    def count(self, text: str) -> int:
        return len(text.split())


PETS = [
    ("Alice", "Do you have any pets at home?"),
    ("Bob", "Yes, two cats and a dog. The cats sleep all day."),
    ("Alice", "Cats are lovely pets. Does your dog chase the cats?"),
    ("Bob", "Our dog is old now, but the cats still play with him."),
]
COOKING = [
    ("Alice", "What did you cook for dinner tonight?"),
    ("Bob", "I cooked pasta with tomato sauce and garlic."),
    ("Alice", "Pasta with garlic sauce is my favourite dinner to cook."),
    ("Bob", "Cook the sauce longer next time, the tomato gets sweeter."),
]
HIKING = [
    ("Bob", "I went hiking in the mountains last weekend."),
    ("Alice", "Which trail did you hike? Was the mountain steep?"),
    ("Bob", "The ridge trail, very steep, but the mountain views were great."),
    ("Alice", "I want to hike that ridge trail too."),
]
GUITAR = [
    ("Alice", "By the way, I started guitar lessons."),
    ("Bob", "Cool! Acoustic or electric guitar?"),
    ("Alice", "Acoustic. My guitar teacher makes me practise chords daily."),
    ("Bob", "Chords hurt at first, keep practising the guitar."),
]
TOPIC_WORDS = {
    "pets": ("pets", "cats", "dog"),
    "cooking": ("cook", "pasta", "sauce", "dinner"),
    "hiking": ("hik", "trail", "mountain"),
    "guitar": ("guitar", "chords"),
}


def tiny_conversation() -> Conversation:
    questions = [
        Question("q1", "tiny", "Which trail did Bob hike?", "the ridge trail", "single_hop"),
        Question("q2", "tiny", "What did Bob cook for dinner?", "pasta", "single_hop"),
    ]
    return build_conversation(
        [(datetime(2023, 5, 8, 13, 0), PETS + COOKING), (datetime(2023, 6, 1), HIKING + GUITAR)],
        ("Alice", "Bob"),
        questions,
    )


WORK = [
    ("Alice", "My new job at the bank starts on Monday."),
    ("Bob", "Congratulations! What will you do at the bank?"),
    ("Alice", "I will review loans for small businesses."),
    ("Bob", "Reviewing loans sounds like a serious job."),
]
MOVIES = [
    ("Bob", "Have you seen the new space movie?"),
    ("Alice", "Yes, the space battles in that movie were amazing."),
    ("Bob", "The movie soundtrack was my favourite part."),
    ("Alice", "I bought the soundtrack after the movie."),
]
GARDEN = [
    ("Alice", "My tomatoes are finally growing in the garden."),
    ("Bob", "Do you water the garden every morning?"),
    ("Alice", "Every morning, and I added compost to the soil."),
    ("Bob", "Compost makes the soil rich, your garden will thrive."),
]
TRAVEL = [
    ("Bob", "We booked a trip to Lisbon for August."),
    ("Alice", "Lisbon! Will you take the tram up the hills?"),
    ("Bob", "Yes, the old tram and a boat trip on the river."),
    ("Alice", "Send me photos of the river and the tram."),
]


def four_session_conversation() -> Conversation:
    """Eight topics in four sessions (about 11 lite events) and a question on each topic: a
    memory larger than K, so that what an ablation removes shows in the reader's context."""
    questions = [
        Question(f"q{i}", "four", text, "", "single_hop")
        for i, text in enumerate(
            [
                "Which trail did Bob hike?",
                "What did Bob cook for dinner?",
                "Does Bob have a dog or cats?",
                "What kind of guitar does Alice play?",
                "Where does Alice work?",
                "Which movie did they see?",
                "What grows in Alice's garden?",
                "Where is Bob travelling in August?",
            ]
        )
    ]
    sessions = [
        (datetime(2023, 5, 8), PETS + COOKING),
        (datetime(2023, 6, 1), HIKING + GUITAR),
        (datetime(2023, 7, 1), WORK + MOVIES),
        (datetime(2023, 7, 20), GARDEN + TRAVEL),
    ]
    return build_conversation(sessions, ("Alice", "Bob"), questions, "four")


def topic_of(text: str) -> str:
    lowered = text.lower()
    return next(topic for topic, words in TOPIC_WORDS.items() if any(w in lowered for w in words))


def scripted(request: LLMRequest) -> str:
    """Segmenter: topic by keyword, a shift where the topic changes. Boundaries: a good reply
    into cooking, a failed request into hiking, garbage into guitar."""
    text = user_text(request)
    if request.params.json_schema == TOPIC_SCHEMA:
        topic = topic_of(text.split("[Current turn]\n", 1)[1])
        return json.dumps({"topic": topic, "keywords": [topic, "home"]})
    if request.params.json_schema == INTENT_SCHEMA:
        left, right = text.split("[FOLLOWING CONTEXT (right of the cut)]\n", 1)
        last_left = [line for line in left.splitlines() if line.strip()][-1]
        if topic_of(last_left) != topic_of(right.splitlines()[0]):
            labels = [{"name": "Topic_Shift", "prob": 0.9}, {"name": "Direct_Resp", "prob": 0.1}]
        else:
            labels = [
                {"name": "Detail_Elaborate", "prob": 0.8},
                {"name": "Topic_Shift", "prob": 0.1},
            ]
        return json.dumps({"labels": labels})
    assert request.messages[0]["content"] == BOUNDARY_SYSTEM_PROMPT
    current = text.split("Event B", 1)[1]
    if "hiking" in current:
        raise ProviderError("bad request")
    if "guitar" in current:
        return '{"boundary": "a JSON reply where text was asked for"}'
    return 'Boundary description: "Pets are left behind as the talk turns to cooking dinner."'
