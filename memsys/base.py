"""The plugin contract: a memory method is ``construct`` plus ``retrieve``, nothing else.

The runner does batching, caching, resuming, answering and scoring without knowing a method's
internals. A method receives its services (embedder, token counter, parser, construction LLM) by
injection, declares what its memory depends on (:meth:`MemorySystem.construction_config`) so
that constructed memories can be cached and shared across answering backbones, and turns its
memory into plain JSON and back (no pickle) so the cache is portable and inspectable.
"""

from __future__ import annotations

import inspect
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.nlp import NLP
from memsys.tokens import TokenCounter
from memsys.types import Conversation, MemoryItem, Question, Retrieval
from memsys.usage import EMBEDDER, LLM, PARSER, Usage

MemoryT = TypeVar("MemoryT")

#: How a method builds its memory: with its paper's LLM prompts, or their non-LLM substitutes.
EXTRACTION_MODES = ("lite", "llm")
#: How a method's kept items reach the reader: oldest first under their session dates, or in
#: the method's own rank order, best first (:mod:`benchmarks.answering.context` renders both).
CONTEXT_ORDERS = ("time", "rank")


def check_choices(*options: tuple[str, Any, Sequence[Any]]) -> None:
    """Each ``(name, value, allowed)``: a ValueError naming the option whose value is not allowed.

    >>> check_choices(("extraction", "llm", EXTRACTION_MODES))
    >>> check_choices(("fusion", "mix", ("rerank", "slot3")))
    Traceback (most recent call last):
    ...
    ValueError: fusion must be one of ('rerank', 'slot3'), got 'mix'
    """
    for name, value, allowed in options:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


@dataclass(frozen=True)
class Services:
    """What methods may use: injected, never global.

    ``backbone`` is the construction LLM (booked to the ``construction`` stage); ``None`` when the
    run has none (``extraction: lite`` methods and baselines never call it). ``nlp`` is the
    spaCy pipeline and date resolver of the lite extractors, loaded on first use. ``cache_dir``
    is where a method may keep persistent caches of its own (SQLite files, e.g. SeCom's
    compressed texts); ``None`` keeps them in memory for the process.
    """

    embedder: Embedder
    tokens: TokenCounter
    backbone: Backbone | None = None
    nlp: NLP = field(default_factory=NLP)
    cache_dir: Path | None = None


@dataclass(frozen=True, kw_only=True)
class MethodOptions:
    """A paper method's options: one field per key of its YAML (``conf/method/<method>.yaml``),
    a nested key (``construction:``) a dataclass field of its own, built from the YAML's mapping.
    Checked when built, in one place: ``extraction`` (lite | llm, every paper method's) here,
    the method's own options in its :meth:`check`."""

    extraction: str = "lite"

    def __post_init__(self) -> None:
        check_choices(("extraction", self.extraction, EXTRACTION_MODES))
        for option in fields(self):
            group, value = option.default_factory, getattr(self, option.name)
            if isinstance(group, type) and is_dataclass(group) and not isinstance(value, group):
                object.__setattr__(self, option.name, group(**dict(value or {})))
        self.check()

    def check(self) -> None:
        """Refuse values the method cannot run with: a ValueError naming the option."""

    @property
    def uses_llm(self) -> bool:
        """Whether ``construct`` calls the LLM (:attr:`MemorySystem.uses_llm`)."""
        return self.extraction == "llm"


class MemorySystem(ABC, Generic[MemoryT]):
    """Base class of every method and baseline."""

    #: Bump when construction logic changes, so cached memories are rebuilt.
    construction_version: ClassVar[int] = 1
    #: Whether ``construct`` calls the LLM (its model then becomes part of the memory's identity);
    #: methods with an ``extraction`` option set it per instance (``extraction == "llm"``).
    uses_llm: bool = False
    #: The order its items reach the reader in (one of :data:`CONTEXT_ORDERS`): ``time`` unless
    #: the method's paper hands the reader its ranked list. A class fact, read without building
    #: the method, so a run's identity can record it (``answer.order=method``, the default).
    context_order: ClassVar[str] = "time"
    #: A paper method's options (a :class:`MethodOptions`). Its constructor,
    #: ``__init__(self, services, **options)``, takes their fields as keywords (Hydra hands it
    #: the YAML's keys) and is given their signature, so that a run checks each option by name
    #: and type before any work (``benchmarks.pipeline.settings.check_method_options``).
    options_type: ClassVar[type[MethodOptions] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse an unknown :attr:`context_order` when the class is defined, not mid-run; sign
        the constructor of a class that declares its :attr:`options_type`."""
        super().__init_subclass__(**kwargs)
        check_choices(("context_order", cls.context_order, CONTEXT_ORDERS))
        options_type = vars(cls).get("options_type")
        if options_type is not None:
            constructor = vars(cls).get("__init__")
            if constructor is None:
                raise TypeError(
                    f"{cls.__name__} has options: it must define __init__(self, services, **options)"
                )
            _sign_with_options(constructor, options_type)

    def __init__(self, services: Services, options: MethodOptions | None = None) -> None:
        """``options``: a paper method's, built from its YAML's keys (``self.options``), which
        also say whether ``construct`` calls the LLM."""
        self.services = services
        if options is not None:
            self.options = options
            self.uses_llm = options.uses_llm

    @abstractmethod
    def construct(self, conversation: Conversation) -> MemoryT:
        """Build the memory of one conversation."""

    @abstractmethod
    def retrieve(self, memory: MemoryT, question: Question) -> Retrieval:
        """Items for the reader, best first, each with the turn ids it came from."""

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Batch per-question work (e.g. query embeddings) before ``retrieve`` is called on each.

        The runner calls it once per batch; the default does nothing.
        """

    def prepare_retrieval(self, memory: MemoryT, questions: Sequence[Question]) -> None:
        """Batch per-question work that needs the memory (e.g. an LLM filtering each question's
        candidates), after :meth:`prepare_queries` and before ``retrieve``; default: nothing.
        """

    @abstractmethod
    def construction_config(self) -> dict[str, Any]:
        """Every setting that changes what :meth:`construct` builds (JSON values)."""

    @abstractmethod
    def dump_memory(self, memory: MemoryT) -> dict[str, Any]:
        """The memory as JSON-serializable data."""

    @abstractmethod
    def load_memory(self, payload: dict[str, Any]) -> MemoryT:
        """Inverse of :meth:`dump_memory`."""

    @abstractmethod
    def stored_texts(self, memory: MemoryT) -> list[str]:
        """The text of each unit ``memory`` stores (a turn, a session, a segment, an event, a
        proposition, a hyperedge, a scene, a fact...): its footprint's items and tokens."""

    def construction_services(self) -> frozenset[str]:
        """The services :meth:`construct` may call (:data:`memsys.usage.SERVICES`), each of which
        joins the memory's identity: the embedder always, the construction LLM where
        :attr:`uses_llm`. A method that parses adds :data:`~memsys.usage.PARSER`. The harness
        records what a construction really used (:mod:`memsys.usage`) and fails the run when it is
        not declared here (:func:`undeclared_services`)."""
        return frozenset({EMBEDDER, LLM} if self.uses_llm else {EMBEDDER})

    def construction_identity(self) -> dict[str, Any]:
        """What a cached memory is keyed by: class, version, config, and the identity of every
        service of :meth:`construction_services` (embedder, construction model, parser)."""
        services = self.construction_services()
        identity = {
            "method": f"{type(self).__module__}.{type(self).__qualname__}",
            "version": self.construction_version,
            "config": self.construction_config(),
            "embedder": self.services.embedder.config.identity,
        }
        if LLM in services:
            backbone = self.services.backbone
            identity["construction_model"] = backbone.model_id if backbone else None
        if PARSER in services:
            identity["parser"] = self.services.nlp.identity
        return identity


class UndeclaredServiceError(RuntimeError):
    """A method's construction used a service its identity does not declare: its cached memories
    would be keyed without what built them."""


def undeclared_services(system: MemorySystem[Any], used: Usage) -> None:
    """Raise :class:`UndeclaredServiceError` naming the method and each service ``used`` (as
    :func:`memsys.usage.recording` filled it) that :meth:`~MemorySystem.construction_services`
    does not declare."""
    missing = sorted(used.services - system.construction_services())
    if missing:
        name = f"{type(system).__module__}.{type(system).__qualname__}"
        services = f"the {' and the '.join(missing)}"
        raise UndeclaredServiceError(
            f"{name} used {services} while building a memory but its construction_services() "
            f"does not declare {'them' if len(missing) > 1 else 'it'}, so the memory's identity "
            "would leave it out: declare it there (an LLM: uses_llm, or the options' uses_llm)"
        )


def _sign_with_options(constructor: Callable[..., None], options_type: type[MethodOptions]) -> None:
    """Give ``constructor(self, services, **options)`` the signature and annotations it would
    have if it listed every field of ``options_type`` as a keyword parameter."""
    hints = typing.get_type_hints(options_type)
    own = inspect.signature(constructor).parameters.values()
    signature = inspect.Signature(
        [
            *(p for p in own if p.kind is not inspect.Parameter.VAR_KEYWORD),
            *(
                inspect.Parameter(
                    option.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=_default(option),
                    annotation=hints[option.name],
                )
                for option in fields(options_type)
            ),
        ]
    )
    constructor.__signature__ = signature  # type: ignore[attr-defined]
    constructor.__annotations__ = {
        name: p.annotation
        for name, p in signature.parameters.items()
        if p.annotation is not p.empty
    }


def _default(option: Field[Any]) -> Any:
    if option.default is not MISSING:
        return option.default
    if option.default_factory is not MISSING:
        return option.default_factory()
    return inspect.Parameter.empty


def item_to_json(item: MemoryItem) -> dict[str, Any]:
    """A memory item as JSON (timestamps in ISO 8601)."""
    return {
        "text": item.text,
        "turn_ids": list(item.turn_ids),
        "timestamp": item.timestamp.isoformat() if item.timestamp else None,
        "position": item.position,
        "score": item.score,
        "kind": item.kind,
    }


def item_from_json(data: dict[str, Any]) -> MemoryItem:
    """Inverse of :func:`item_to_json`."""
    timestamp = data.get("timestamp")
    return MemoryItem(
        text=data["text"],
        turn_ids=tuple(data["turn_ids"]),
        timestamp=datetime.fromisoformat(timestamp) if timestamp else None,
        position=int(data.get("position", 0)),
        score=float(data.get("score", 0.0)),
        kind=data.get("kind", "turn"),
    )
