"""FraCom (Ke et al., ``papers/fracom.txt``): Fragment-then-Compose memory.

One module per step of the paper: :mod:`.prompts` (Figure 9 and its reply schema),
:mod:`.fragment` (§3.1), :mod:`.memory` (§3.2, Algorithm 1, memory retention), :mod:`.retrieval`
(§3.3 plausible retrieval, the §5 predicate filter, the harness's ranking) and :mod:`.method` (the
:class:`FraCom` memory system and its options, :class:`FraComOptions`; its docstring lists the
readings taken where the paper is vague). ``docs/methods/fracom.md`` maps the paper to this code;
the configs are ``conf/method/fracom*.yaml``.
"""

from memsys.methods.fracom.fragment import fragment_with_llm, parse_fragments
from memsys.methods.fracom.memory import FraComMemory, StoredProposition, compose, retained
from memsys.methods.fracom.method import CONTEXT_MODES, FraCom, FraComOptions
from memsys.methods.fracom.prompts import FRAGMENT_MAX_TOKENS, FRAGMENT_PROMPT, FRAGMENT_SCHEMA
from memsys.methods.fracom.retrieval import (
    LIGHT_PREDICATES,
    RANKINGS,
    SPEAKER_ARGUMENTS,
    RetrievalOptions,
    ThetaSet,
    filter_by_predicate,
    is_light,
    match_arguments,
    order,
    plausible_retrieval,
)

__all__ = [
    "CONTEXT_MODES",
    "FRAGMENT_MAX_TOKENS",
    "FRAGMENT_PROMPT",
    "FRAGMENT_SCHEMA",
    "LIGHT_PREDICATES",
    "RANKINGS",
    "SPEAKER_ARGUMENTS",
    "FraCom",
    "FraComMemory",
    "FraComOptions",
    "RetrievalOptions",
    "StoredProposition",
    "ThetaSet",
    "compose",
    "filter_by_predicate",
    "fragment_with_llm",
    "is_light",
    "match_arguments",
    "order",
    "parse_fragments",
    "plausible_retrieval",
    "retained",
]
