"""ES-Mem's segmentation prompts (papers/es-mem.txt Appendix E, Figs. 6-7) and reply schemas.

In the project's words, with the paper's instructions, labels and output fields; the schemas
constrain decoding where the provider supports it and validate every reply.
"""

from __future__ import annotations

from typing import Any

SHIFT_LABELS = ("Topic_Intro", "Topic_Shift")
CONTINUE_LABELS = ("Detail_Elaborate", "Direct_Resp")
INTENT_LABELS = SHIFT_LABELS + CONTINUE_LABELS

TOPIC_SYSTEM_PROMPT = """\
You label what a conversation turn is about. You are given the previous turn together with the \
topic and keywords found for it, and then the current turn.

Describe the current turn; look at the previous turn only to keep the labels continuous. Give \
the current turn's [single main topic] and its [core keywords].

### Rules
- topic: one short phrase, at most 15 characters, that names the main intent concisely and \
abstractly.
- keywords: mostly nouns and key phrases, a few verbs allowed; leave out pronouns and forms of \
address ("you", "I", "he"), interjections and function words; no duplicates; most important \
first.
- If the turn touches several topics, choose the one that takes up more of it and is developed \
more clearly.
- Do not copy the previous turn's output unchanged.
- Reply with JSON only, with exactly the keys topic and keywords, and no other text.

### Output format
{"topic": "main topic", "keywords": ["keyword1", "keyword2", "keyword3"]}"""

TOPIC_USER_PROMPT = """\
[Previous turn]
{previous_text}

[Topic and keywords of the previous turn]
{previous_annotation}

[Current turn]
{text}"""

TOPIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "maxLength": 120},
        "keywords": {
            "type": "array",
            "items": {"type": "string", "maxLength": 60},
            "maxItems": 10,
        },
    },
    "required": ["topic", "keywords"],
    "additionalProperties": False,
}

INTENT_SYSTEM_PROMPT = """\
You judge the intent of a conversation at a possible cut. You see the PRIOR context (the turns \
to the left of the cut) and the FOLLOWING context (the turns to the right of it). From the fixed \
label set below, choose the label that fits best (highest confidence) and the label that fits \
worst (lowest confidence):

["Topic_Intro", "Topic_Shift", "Detail_Elaborate", "Direct_Resp"]

### Labels
- Topic_Intro: brings in a new topic that is related to what came before, but the core content \
moves elsewhere.
- Topic_Shift: leaves the previous topic completely for a new, unrelated topic or direction.
- Detail_Elaborate: adds to what was said before (follow-up questions, further discussion, extra \
details) without opening another direction or bringing new information.
- Direct_Resp: answers what was said before directly (understanding, agreement, a plain answer) \
without new information or a new direction.

### Output rules
- Give exactly 2 labels: first the best-fitting one, then the worst-fitting one.
- The two labels are different and both come from the fixed set.
- Give each label a prob in [0, 1]; the first prob is larger than the second.
- Reply with JSON only: a "labels" list whose items have the fields name and prob and nothing \
else; no explanations.

### Example (illustration only)
{"labels": [{"name": "Topic_Shift", "prob": 0.87}, {"name": "Direct_Resp", "prob": 0.13}]}"""

INTENT_USER_PROMPT = """\
[PRIOR CONTEXT (left of the cut)]
{left_context}

[FOLLOWING CONTEXT (right of the cut)]
{right_context}"""

INTENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "labels": {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"enum": list(INTENT_LABELS)},
                    "prob": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["name", "prob"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["labels"],
    "additionalProperties": False,
}

FIRST_TURN = "(none: this is the first turn)"
