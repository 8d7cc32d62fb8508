"""Level 1 without an LLM: template boundaries b_i that the embedder reads in full.

The paper gives b_i's structured format, "Topic A ended. Transitioned to Topic B. Context: ..."
(§3.2), filled here from the two events' labels and the raw boundary context c_i^raw (the last
L turns of event i - 1, the first L of event i). Eight raw turns often exceed the embedder's
input window (all-MiniLM-L6-v2 reads 256 word pieces, about 35 per LoCoMo turn), and the
embedder silently drops what lies beyond it: in time order, event i's own turns, so anchor i
embedded the end of event i - 1. So the template is built to fit the window,
counted with the embedder's own tokenizer, keeping what anchors event i first: the current
event's opening turn (cut to fit if it alone is too long), the head naming both events, the
current event's next turns, then the previous event's turns from the boundary backwards. A turn
that does not fit whole ends its side, so the kept turns always adjoin the boundary.

The template's ``Context:`` field is raw turns (level 3), so the "w/o raw" ablation shows a
template boundary without it (:func:`shown_without_raw`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memsys.embed import Embedder

from .memory import Event

#: Where a template's raw boundary turns begin (:func:`render`).
CONTEXT_FIELD = "Context: "


@dataclass(frozen=True)
class EmbedderWindow:
    """How much text the embedder reads: ``limit`` tokens of its own tokenizer (its
    ``max_seq_length`` less the special tokens it adds)."""

    tokenizer: Any
    limit: int

    @classmethod
    def of(cls, embedder: Embedder) -> EmbedderWindow:
        """The window of the embedder's model (a sentence-transformers model: every one has a
        ``tokenizer`` and a ``max_seq_length``); loads the model if it is not loaded."""
        model = embedder.model()
        tokenizer = model.tokenizer
        return cls(tokenizer, int(model.max_seq_length) - tokenizer.num_special_tokens_to_add())

    def count(self, text: str) -> int:
        """Tokens of ``text``, special tokens aside."""
        return len(self._offsets(text))

    def cut(self, text: str, tokens: int) -> str:
        """The beginning of ``text`` that makes its first ``tokens`` tokens (spelling kept)."""
        if tokens < 1:
            return ""
        offsets = self._offsets(text)
        return text if tokens >= len(offsets) else text[: offsets[tokens - 1][1]]

    def _offsets(self, text: str) -> list[tuple[int, int]]:
        """Each token's character span; quiet about texts longer than the window, which is
        what the caller is measuring (the tokenizer would warn of "indexing errors")."""
        encoded = self.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        return list(encoded["offset_mapping"])


def render(head: str, previous: Sequence[str], current: Sequence[str]) -> str:
    """``"<head> Context: <previous turns> / <current turns>"`` (no head: ``"Context: ..."``)."""
    context = f"{CONTEXT_FIELD}{' / '.join([*previous, *current])}"
    return f"{head} {context}" if head else context


def fit_boundary(
    head: str, previous: Sequence[str], current: Sequence[str], window: EmbedderWindow
) -> str:
    """The template over ``head`` and the boundary context, within ``window`` (module
    docstring): ``previous`` are the last L turns of the previous event, ``current`` the first
    L of the current one."""
    kept_previous: list[str] = []
    kept_current: list[str] = []

    def fits(head_text: str, previous_turns: list[str], current_turns: list[str]) -> bool:
        return window.count(render(head_text, previous_turns, current_turns)) <= window.limit

    def longest_cut(text: str, rendered: Callable[[str], str]) -> str:
        """The longest beginning of ``text`` whose ``rendered`` form fits the window."""
        tokens = min(window.count(text), window.limit - window.count(rendered("")))
        while tokens > 0 and window.count(rendered(window.cut(text, tokens))) > window.limit:
            tokens -= 1
        return window.cut(text, tokens)

    if current:
        kept_current.append(longest_cut(current[0], lambda text: render("", [], [text])))
    kept_head = longest_cut(head, lambda text: render(text, [], kept_current))
    for turn in current[1:]:
        if not fits(kept_head, [], [*kept_current, turn]):
            break
        kept_current.append(turn)
    for turn in reversed(previous):
        if not fits(kept_head, [turn, *kept_previous], kept_current):
            break
        kept_previous.insert(0, turn)
    return render(kept_head, kept_previous, kept_current)


def template_boundary(previous: Event, current: Event, context: int, window: EmbedderWindow) -> str:
    """The lite b_i (and the ``llm`` fallback): the paper's structured format over both events'
    labels (none without summaries) and their last/first ``context`` turns, within ``window``."""
    head = ""
    if previous.label() or current.label():
        head = f"{previous.label()} ended. Transitioned to {current.label()}."
    return fit_boundary(head, previous.lines[-context:], current.lines[:context], window)


def opening_boundary(event: Event, context: int, window: EmbedderWindow) -> str:
    """b_1, for the event that starts the conversation (no predecessor), within ``window``."""
    head = f"The conversation opens with {event.label()}." if event.label() else ""
    return fit_boundary(head, (), event.lines[:context], window)


def shown_without_raw(event: Event) -> str:
    """b_i as the "w/o raw" reader sees it: a template (opening, lite, ``llm`` fallback) cut
    before its ``Context:`` field, whose verbatim turns are the level 3 the ablation removes, so
    only its head naming both events is left; an LLM description whole (it quotes no field of
    turns, and is level 1 as the paper builds it).

    >>> shown_without_raw(Event("s", None, 0, ("D1:1",), ("A: hi",), (), ("pets",),
    ...     boundary="pets ended. Transitioned to guitar. Context: A: hi", boundary_source="template"))
    'pets ended. Transitioned to guitar.'
    """
    if event.boundary_source == "llm":
        return event.boundary
    return event.boundary.partition(CONTEXT_FIELD)[0].strip()
