"""How a run is named in a table: its row key (method, backbone, extraction mode, whether it
answered) and the names of its method, of the model that built its memory, and of its judge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.registry import display_names, role_of


@dataclass(frozen=True)
class RowKey:
    """What distinguishes one table row from another."""

    retrieval_only: bool
    backbone: str
    #: Whether the run's method config declares ``role: baseline`` (:mod:`benchmarks.registry`):
    #: the rows a method is tested against, whatever module their class lives in.
    baseline: bool
    method: str
    extraction: str

    def label(self) -> str:
        """Short row label for the plot."""
        parts = [self.method, self.backbone or "retrieval only", self.extraction]
        return " · ".join(part for part in parts if part)


#: How a row names its compressor. The self-information stand-in says it is not the paper's
#: denoiser: with it, denoising lowers SeCom's evidence recall on LoCoMo (docs/methods/secom.md).
COMPRESSION_LABELS = {
    "none": "no compression",
    "self_info": "self-info stand-in, not LLMLingua-2",
    "llmlingua2": "LLMLingua-2",
}


def method_name(method: dict[str, Any]) -> str:
    """Display name: the name the method configs of ``_target_``'s class declare (else the class
    name), plus the retriever, the memory unit and any compressor and rate, e.g. ``TurnRAG (bm25,
    per exchange)``, ``SeCom (dense, no compression)``, ``ES-Mem``."""
    class_name = str(method.get("_target_", "?")).rsplit(".", 1)[-1]
    name = display_names().get(class_name, class_name)
    details = [str(method["retriever"])] if method.get("retriever") else []
    if "unit" in method:
        details.append(f"per {method['unit']}")
    compressor = method.get("compression")
    if compressor is not None:
        details.append(COMPRESSION_LABELS.get(compressor, f"{compressor} compression"))
        if compressor != "none" and "compression_rate" in method:
            details.append(f"rate {method['compression_rate']:g}")
    return f"{name} ({', '.join(details)})" if details else name


def row_key(config: dict[str, Any], variant: str = "") -> RowKey:
    """A run's row: method (and variant), backbone, extraction mode, whether it answered."""
    method = config.get("method", {})
    retrieval_only = config.get("answer", {}).get("template") is None
    return RowKey(
        retrieval_only=retrieval_only,
        backbone="" if retrieval_only else str(config.get("backbone", {}).get("name", "?")),
        baseline=role_of(method) == "baseline",
        method=f"{method_name(method)} [{variant}]" if variant else method_name(method),
        extraction=extraction_description(config),
    )


def extraction_description(config: dict[str, Any]) -> str:
    """The extraction mode, and for ``llm`` the model that built the memory: ``llm
    (gpt-4o-mini)``, so a row says which model constructed and which (Backbone) answered."""
    extraction = str(config.get("method", {}).get("extraction") or "")
    builder = construction_model(config) if extraction == "llm" else None
    return f"llm ({builder})" if builder else extraction


def construction_model(config: dict[str, Any]) -> str | None:
    """The name of the model that builds llm-mode memories: the construction backbone's, else
    (``construction=same``) the reader's; None when the config names neither."""
    builder = (config.get("construction") or {}).get("backbone") or config.get("backbone") or {}
    return builder.get("name")


def judge_description(judge: dict[str, Any] | None) -> str:
    """The judge model as the header states it."""
    judge = judge or {}
    if not judge.get("enabled"):
        return "none (judge disabled)"
    backbone = judge.get("backbone")
    return "same as answering backbone" if backbone is None else str(backbone.get("name", "?"))
