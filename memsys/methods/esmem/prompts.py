"""ES-Mem's boundary prompt (Appendix E, Figure 8) and the rules for reading its replies.

The prompt is data: changing it changes what ``extraction: llm`` builds, and its hash is part of
the memory's cache identity (:meth:`memsys.methods.esmem.ESMem.construction_config`). The
segmentation prompts (Figures 6-7) live with the segmenter, :mod:`memsys.segment.esmem`.
"""

from __future__ import annotations

import re

from memsys.llm.types import Message

from .events import Event

#: Figure 8's instructions in the project's words.
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
