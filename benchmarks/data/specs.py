"""What the harness does differently per QA dataset, declared in one place.

The runner, the run summary, the report and the published-number comparison never branch on a
dataset's name: they ask its :class:`DatasetSpec`. A new dataset is one loader and one entry in
:data:`DATASET_SPECS` (its ``conf/dataset/*.yaml`` names it by ``name``).

Why here and not as keys of ``conf/dataset/*.yaml``: every key of that node is part of a run's
identity (``benchmarks.pipeline.settings.run_identity``), and the committed runs' ``config.yaml`` files
predate these traits; a table in code keyed by ``dataset.name`` keeps every run id and reads old
runs the same way. The one trait a config may change, the judge protocol of ``judge_acc``, is
the dataset config's ``judge_protocol`` (``earlier_judge_protocol`` below is only for runs logged
before that key existed).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchmarks.data import load_locomo
from benchmarks.data.locomo import LOCOMO_FILE
from benchmarks.data.longmemeval import ARCHIVES, RECONSTRUCTED_S, iter_longmemeval
from memsys.types import Conversation


class Conversations(Protocol):
    """Makes a fresh stream of a dataset's conversations in the dataset's order; ``wanted``:
    only those conversation ids (LongMemEval-S then parses no other haystack)."""

    def __call__(self, wanted: Collection[str] | None = None) -> Iterable[Conversation]: ...


#: Makes a dataset's :class:`Conversations`: ``(variant, file, data_dir)``.
Source = Callable[[str | None, str | None, Path], Conversations]


@dataclass(frozen=True)
class DatasetSpec:
    """One QA dataset's traits, as the runner and the tables use them."""

    #: ``dataset.name`` in the config.
    name: str
    #: The accepted ``dataset.variant`` values and each in words (``{None: ...}``: the dataset
    #: has no variants and the key is not read).
    variants: Mapping[str | None, str]
    #: Whether ``dataset.file`` names the file to read (relative to the data directory).
    reads_file: bool
    #: The paper table a report of this dataset reproduces, and where it writes by default.
    table: str
    table_path: str
    #: What a question's evidence is, for the tables' header.
    evidence: str
    #: Whether every question comes with a memory of its own (LongMemEval's haystacks), so a
    #: subset is a number of questions, and a bootstrap over questions already resamples memories.
    own_memory_per_question: bool
    #: What that memory is called in the header ("haystack"); "conversation" otherwise.
    memory_name: str
    #: Whether records carry LongMemEval's official scores: accuracy per question type,
    #: task-averaged and abstention, and a stored ranking scored under LongMemEval's official
    #: retrieval definition (sessions and turns); the tables then test judge_acc too.
    longmemeval_scores: bool
    #: Whether the dataset has LoCoMo's adversarial category, whose place in the overall means
    #: is the run's ``adversarial`` policy (the header states it).
    adversarial_category: bool
    #: ``judge_acc``'s protocol for runs logged before the config's ``judge_protocol`` existed.
    earlier_judge_protocol: str
    #: The loader.
    source: Source
    #: The files the loader reads for ``(variant, file)``, relative to the data folder (their
    #: digests are recorded with each invocation: :mod:`benchmarks.data.digests`).
    files: Callable[[str | None, str | None], tuple[str, ...]]
    #: The dataset's name as a title says it, per variant (``Retrieval on LoCoMo``).
    display_names: Mapping[str | None, str]
    #: Whether a third-party audit of the answer key exists (LoCoMo's,
    #: :mod:`benchmarks.data.locomo_audit`), which the tables show beside the published key.
    audited_key: bool

    def display_name(self, variant: str | None) -> str:
        """The dataset's name as a title says it (the spec's name for an unknown variant)."""
        return self.display_names.get(variant, self.name)

    def describe(self, variant: str | None) -> str:
        """The variant in words (``unknown variant`` for one the spec does not know)."""
        return self.variants.get(variant, "unknown variant")


def _locomo(variant: str | None, file: str | None, data_dir: Path) -> Conversations:
    del variant  # LoCoMo has none

    def stream(wanted: Collection[str] | None = None) -> Iterable[Conversation]:
        conversations = load_locomo(str(data_dir), file or LOCOMO_FILE)
        return [c for c in conversations if wanted is None or c.conversation_id in wanted]

    return stream


def _longmemeval(variant: str | None, file: str | None, data_dir: Path) -> Conversations:
    del file  # the variant names the file

    def stream(wanted: Collection[str] | None = None) -> Iterable[Conversation]:
        return iter_longmemeval(variant, data_dir, wanted)  # type: ignore[arg-type]

    return stream


def _locomo_files(variant: str | None, file: str | None) -> tuple[str, ...]:
    del variant
    return (file or LOCOMO_FILE,)


def _longmemeval_files(variant: str | None, file: str | None) -> tuple[str, ...]:
    del file
    archive = ARCHIVES.get(variant or "")
    if archive is None:
        return ()
    return (archive, RECONSTRUCTED_S) if variant == "s" else (archive,)


DATASET_SPECS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="locomo",
            variants={None: ""},
            reads_file=True,
            table="Table 1",
            table_path="results/table1",
            evidence="the dataset's evidence turns",
            own_memory_per_question=False,
            memory_name="conversation",
            longmemeval_scores=False,
            adversarial_category=True,
            earlier_judge_protocol="mem0",
            source=_locomo,
            files=_locomo_files,
            display_names={None: "LoCoMo"},
            audited_key=True,
        ),
        DatasetSpec(
            name="longmemeval",
            variants={
                "s": "LongMemEval-S, each question with its haystack of about 115k tokens",
                "oracle": "LongMemEval oracle, each question with its evidence sessions only",
            },
            reads_file=False,
            table="Table 2",
            table_path="results/table2",
            evidence="LongMemEval's has_answer turns",
            own_memory_per_question=True,
            memory_name="haystack",
            longmemeval_scores=True,
            adversarial_category=False,
            earlier_judge_protocol="longmemeval",
            source=_longmemeval,
            files=_longmemeval_files,
            display_names={"s": "LongMemEval-S", "oracle": "LongMemEval (oracle)"},
            audited_key=False,
        ),
    )
}
#: The spec of a dataset name this checkout does not know (a report over foreign runs): LoCoMo's
#: traits, the harness's first dataset, under that name.
DEFAULT_SPEC = "locomo"


def dataset_spec(name: str | None) -> DatasetSpec:
    """The spec of ``dataset.name`` (:data:`DEFAULT_SPEC`'s for a name not in the table)."""
    return DATASET_SPECS.get(name or "", DATASET_SPECS[DEFAULT_SPEC])


def spec_of(config: Mapping[str, Any]) -> DatasetSpec:
    """The spec of a run's config (its ``dataset.name``)."""
    return dataset_spec((config.get("dataset") or {}).get("name"))


def named_spec(named: str) -> DatasetSpec:
    """The spec of a dataset as ``metrics.json`` and the report's ``--dataset`` name it
    (``locomo``, ``longmemeval_s``: the name, and the variant after an underscore)."""
    for spec in DATASET_SPECS.values():
        if named == spec.name or named.startswith(f"{spec.name}_"):
            return spec
    return DATASET_SPECS[DEFAULT_SPEC]
