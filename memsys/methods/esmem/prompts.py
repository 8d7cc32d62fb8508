"""ES-Mem's prompts (papers/es-mem.txt Appendix E), in the project's words with the paper's
instructions, labels and output fields, and the rules for reading their replies.

* Segmentation (§3.1, Figures 6-7), asked by :mod:`.segmenter`: stage 1's topic and keywords of a
  turn (:data:`TOPIC_SYSTEM_PROMPT`, :data:`TOPIC_SCHEMA`) and stage 2's intent labels at a
  candidate boundary (:data:`INTENT_SYSTEM_PROMPT`, :data:`INTENT_SCHEMA`). The schemas
  constrain decoding where the provider supports it and validate every reply.
* Boundary descriptions (§3.2, Figure 8), asked by :mod:`.method`: :func:`boundary_messages`,
  read by :func:`clean_boundary`.

The prompts are data: changing one changes what ``extraction: llm`` builds. The boundary prompt's
hash is part of the memory's cache identity
(:meth:`memsys.methods.esmem.ESMem.construction_config`); the segmentation prompts are covered by
the segmenter's ``version`` (bump it when one changes).
"""

from __future__ import annotations

import re
from typing import Any

from memsys.llm.types import Message

from .memory import Event

# Segmentation (Figures 6-7).
SHIFT_LABELS = ("Topic_Intro", "Topic_Shift")
CONTINUE_LABELS = ("Detail_Elaborate", "Direct_Resp")
INTENT_LABELS = SHIFT_LABELS + CONTINUE_LABELS

# From: Appendix E, Figure 6 (its SYSTEM_PROMPT): a turn's topic and keywords, stage 1 of §3.1.
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

# From: Appendix E, Figure 6 (its USER_PROMPT).
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

# From: Appendix E, Figure 7 (its SYSTEM_PROMPT): the intent labels, stage 2 of §3.1.
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

# From: Appendix E, Figure 7 (its USER_PROMPT).
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

#: Figure 6's previous turn where there is none (the harness's filler).
FIRST_TURN = "(none: this is the first turn)"

# Boundary descriptions (Figure 8).

#: Figure 8's instructions in the project's words.
# From: Appendix E, Figure 8 (its SYSTEM_PROMPT): the boundary description b_i of §3.2.
BOUNDARY_SYSTEM_PROMPT = """\
You study long conversations and the boundaries between their events. In human memory an event \
boundary is a retrieval anchor: it marks where the topic, the task or the focus of a \
conversation changes. Your task is NOT to summarize the two events. Describe HOW the \
conversation moves from the previous event to the next one.

### Focus on
- which topic or intent is coming to an end;
- which new topic or focus is starting;
- any explicit or implicit signal of the transition (a topic shift, a refocusing, a casual \
segue).

### Output rules
- Third person, objective.
- Short, but semantically clear.
- Do not explain your reasoning.
- Reply with the boundary description text only."""

# From: Appendix E, Figure 8 (its USER_PROMPT).
BOUNDARY_USER_PROMPT = """\
Event A (the previous event):
- Topic summary: {previous_topics}
- Keywords: {previous_keywords}
- Dialogue snippet:
{previous_snippet}

Event B (the current event):
- Topic summary: {current_topics}
- Keywords: {current_keywords}
- Dialogue snippet:
{current_snippet}

Describe how the conversation moves from Event A to Event B. Reply with the boundary \
description text only."""

#: Figure 8 for the "w/o sum" ablation: the summary fields removed, the snippets kept.
# From: Appendix E, Figure 8 (its USER_PROMPT), cut for §4.4's "w/o sum".
BOUNDARY_USER_PROMPT_WITHOUT_SUMMARIES = """\
Event A (the previous event):
- Dialogue snippet:
{previous_snippet}

Event B (the current event):
- Dialogue snippet:
{current_snippet}

Describe how the conversation moves from Event A to Event B. Reply with the boundary \
description text only."""

#: The prompt's scaffolding, which an unusable reply echoes back (a reply may name "Event A").
_ECHO = re.compile(
    r"^\s*-?\s*(?:topic summary|keywords|dialogue snippet)\s*:|event [ab] \(the \w+ event\)",
    re.IGNORECASE | re.MULTILINE,
)
_LABEL = re.compile(r"^[\s*_#]*boundary description[\s*_]*:[\s*_]*", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2,}")


def boundary_user_prompt(with_summaries: bool) -> str:
    """The user-prompt template: Figure 8's, or its "w/o sum" form."""
    return BOUNDARY_USER_PROMPT if with_summaries else BOUNDARY_USER_PROMPT_WITHOUT_SUMMARIES


def boundary_messages(
    previous: Event, current: Event, context: int, with_summaries: bool = True
) -> tuple[Message, ...]:
    """The Figure 8 request for the boundary between ``previous`` and ``current``: both
    summaries (topics, keywords) unless ``with_summaries`` is off, and the last/first
    ``context`` turns of the two events."""
    prompt = boundary_user_prompt(with_summaries).format(
        previous_topics="; ".join(previous.topics),
        previous_keywords=", ".join(previous.keywords),
        previous_snippet="\n".join(previous.lines[-context:]),
        current_topics="; ".join(current.topics),
        current_keywords=", ".join(current.keywords),
        current_snippet="\n".join(current.lines[:context]),
    )
    return (
        {"role": "system", "content": BOUNDARY_SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    )


def clean_boundary(text: str) -> str | None:
    """A usable boundary description from a reply, or ``None`` when, after stripping a leading
    "Boundary description:" label and quotes, it has fewer than three words, is JSON, or echoes
    the prompt's scaffolding (merely naming "Event A" is fine).

    >>> clean_boundary('Boundary description: "The talk turns from pets to cooking."')
    'The talk turns from pets to cooking.'
    >>> clean_boundary('{"boundary": "x"}') is None, clean_boundary("- Keywords: a, b") is None
    (True, True)
    """
    cleaned = " ".join(_LABEL.sub("", text).split()).strip("\"'` ")
    if len(_WORD.findall(cleaned)) < 3 or cleaned[:1] in "{[" or _ECHO.search(text):
        return None
    return cleaned
