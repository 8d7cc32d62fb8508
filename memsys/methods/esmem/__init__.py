"""ES-Mem (Zou et al., ``papers/es-mem.txt``): event-segmented three-level memory.

One module per part of the paper: :mod:`.memory` (the memory units M_i, Eq. 5), :mod:`.summary`
(level 2, s_i), :mod:`.boundary` (level 1 without an LLM: b_i templates within the embedder's
window), :mod:`.prompts` (Figures 6-8, their schemas and reply rules), :mod:`.retrieval`
(§3.3, Eqs. 7-10), :mod:`.segmenter` (§3.1's two-stage event segmentation, also run by the
segmentation benchmark: ``conf/segmenter/esmem*.yaml``) and :mod:`.method` (the :class:`ESMem`
memory system and its options, :class:`ESMemOptions`). ``docs/methods/esmem.md`` maps the paper
to this code and lists the readings taken where the paper is vague; the configs are
``conf/method/esmem*.yaml``.
"""

from memsys.methods.esmem.boundary import (
    EmbedderWindow,
    fit_boundary,
    opening_boundary,
    shown_without_raw,
    template_boundary,
)
from memsys.methods.esmem.memory import ESMemMemory, Event, distinct
from memsys.methods.esmem.method import (
    SEGMENTATION_MODES,
    ConstructionOptions,
    ESMem,
    ESMemOptions,
)
from memsys.methods.esmem.prompts import (
    BOUNDARY_SYSTEM_PROMPT,
    BOUNDARY_USER_PROMPT,
    BOUNDARY_USER_PROMPT_WITHOUT_SUMMARIES,
    boundary_messages,
    clean_boundary,
)
from memsys.methods.esmem.retrieval import (
    ANCHOR_MODES,
    CONTEXT_KINDS,
    RetrievalOptions,
    rank_events,
    rank_flat,
)
from memsys.methods.esmem.summary import distinctive_words, llm_summary, summary_without_raw

__all__ = [
    "ANCHOR_MODES",
    "BOUNDARY_SYSTEM_PROMPT",
    "BOUNDARY_USER_PROMPT",
    "BOUNDARY_USER_PROMPT_WITHOUT_SUMMARIES",
    "CONTEXT_KINDS",
    "SEGMENTATION_MODES",
    "ConstructionOptions",
    "ESMem",
    "ESMemMemory",
    "ESMemOptions",
    "EmbedderWindow",
    "Event",
    "RetrievalOptions",
    "boundary_messages",
    "clean_boundary",
    "distinct",
    "distinctive_words",
    "fit_boundary",
    "llm_summary",
    "opening_boundary",
    "rank_events",
    "rank_flat",
    "shown_without_raw",
    "summary_without_raw",
    "template_boundary",
]
