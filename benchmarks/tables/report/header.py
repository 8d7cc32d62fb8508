"""What a report says besides its cells: the one setting line under its title (dataset, subset
and question count, reader, extraction, judge, budget, embedder, code version), and its numbered
notes (:class:`benchmarks.render.Footnotes`; the J note with each judge's probe figures), their
words the ``report`` and ``judges`` templates of :mod:`benchmarks.tables.notes` filled from the
facts :mod:`benchmarks.runs` computes. Every branch here chooses what to say about the runs at
hand (the committed LongMemEval runs include runs logged before the records kept rankings,
contexts or code versions: their notes say so)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.data.specs import DatasetSpec, dataset_spec, spec_of
from benchmarks.metrics.aggregate import Cell, plural, resampling_case, understated
from benchmarks.metrics.judge import ABSTENTION_RULE, PROTOCOLS
from benchmarks.metrics.judge_probes import EXPECTED
from benchmarks.metrics.stats import MIN_CLUSTERS
from benchmarks.runs.folders import (
    Run,
    recorded_code_versions,
    recorded_data_digests,
    unfinished_runs,
)
from benchmarks.runs.judges import (
    ProbeFigures,
    grades_itself,
    judge_model,
    judge_protocols,
    judged_runs,
    own_protocol,
    probe_figures,
)
from benchmarks.runs.naming import row_key
from benchmarks.runs.rows import Row, baselines_faced, context_orders, shallow_rankings, table_cells
from benchmarks.tables.notes import note, template

#: A method name longer than this is shortened in the tables (the notes give it whole).
LABEL_WIDTH = 32
#: The mark of a stale row in its Run cell (:attr:`Row.source_changed`).
STALE_MARK = "†"


def subset_description(subset: dict[str, Any], spec: DatasetSpec) -> str:
    """The subset in words; a cut-down subset says plainly that it is not the paper setting."""
    name = subset.get("name")
    conversations, questions = subset.get("conversations"), subset.get("max_questions")
    if spec.own_memory_per_question:
        if conversations is None and questions is None:
            return note("report.subset.every_question", name=name)
        first = note("report.subset.first_of", conversations=conversations) if conversations else ""
        return note(
            "report.subset.per_question", name=name, questions=questions or "all", first=first
        )
    sessions = subset.get("max_sessions")
    if sessions:
        which = plural(conversations, "conversation") if conversations else "every conversation"
        return note(
            "report.subset.sessions",
            name=name,
            which=which,
            sessions=plural(sessions, "session"),
            questions=questions or "all",
        )
    if name == "smoke":
        conversations = plural(conversations, "conversation")
        return note("report.subset.smoke", conversations=conversations, questions=questions)
    return note(
        "report.subset.conversations",
        name=name,
        conversations=conversations or "all",
        questions=questions or "all",
    )


def dataset_description(dataset: dict[str, Any]) -> str:
    """Dataset name and file, or its variant in words."""
    spec = dataset_spec(dataset.get("name"))
    variant = dataset.get("variant")
    if None not in spec.variants:
        return f"{dataset.get('name')}_{variant} ({spec.describe(variant)})"
    where = dataset.get("file") or dataset.get("variant")
    return f"{dataset.get('name')} ({where})" if where else str(dataset.get("name"))


def one_value(values: Iterable[str]) -> str | None:
    """The one non-empty value of ``values``, or None when they vary or are all empty (the setting
    line states a shared value)."""
    found = {value for value in values if value}
    return found.pop() if len(found) == 1 else None


def short_label(method: str) -> str:
    """A method name as a table cell shows it: whole up to :data:`LABEL_WIDTH` characters, else
    its name and the first of the details its last parentheses list (``SeCom (dense, …)``; a
    name with one detail stays whole), the notes giving it whole.

    >>> short_label("SeCom (dense, self-info stand-in, not LLMLingua-2, rate 0.75)")
    'SeCom (dense, …)'
    >>> short_label("Oracle (gold evidence) (per turns, budget 512)")
    'Oracle (gold evidence) (per turns, …)'
    """
    if len(method) <= LABEL_WIDTH or not method.endswith(")") or " (" not in method:
        return method
    name, details = method[:-1].rsplit(" (", 1)
    first, *rest = details.split(", ")
    return f"{name} ({first}, …)" if rest else method


def labels_note(rows: Sequence[Row]) -> str | None:
    """The note giving the shortened method names whole (None when none is shortened)."""
    long = [row.key.method for row in rows if short_label(row.key.method) != row.key.method]
    if not long:
        return None
    names = "; ".join(f"{short_label(name)} = {name}" for name in dict.fromkeys(long))
    return note("report.labels", names=names)


def judge_setting(runs: Sequence[Run]) -> str:
    """The judge in the setting line: its model (and whether it is the reader) and the protocol
    of J."""
    judged = judged_runs(runs)
    if not judged:
        return "no judge"
    model = one_value(judge_model(run.config) for run in judged) or "per row (notes)"
    itself = " (the reader)" if all(grades_itself(run.config) for run in judged) else ""
    return f"judge {model}{itself}, {own_protocol(judged[0].config)} protocol"


def setting_line(shared: dict[str, Any], runs: Sequence[Run], rows: Sequence[Row]) -> str:
    """The one line under a report's title: dataset, subset, questions, and each setting every row
    shares (else its column says), the embedder and the code version."""
    spec = spec_of(shared)
    subset = subset_description(shared["subset"], spec)
    questions = max((len(row.run.records) for row in rows), default=0)
    if f"{questions} questions" not in subset:
        subset += f", {questions:,} questions"
    parts = [dataset_description(shared["dataset"]), f"subset {subset}", f"seed {shared['seed']}"]
    answered = [row for row in rows if not row.key.retrieval_only]
    budget = f"context budget {shared['answer.context_budget']} tokens"
    if answered:
        reader = one_value(row.key.backbone for row in answered)
        parts.append(f"reader {reader}" if reader else "readers: Backbone column")
    extraction = one_value(row.key.extraction for row in rows)
    if extraction:
        parts.append(f"extraction {extraction}")
    if answered:
        parts.append(judge_setting([row.run for row in answered]))
        parts.append(
            f"{budget}, template {shared['answer.template']}, at most "
            f"{shared['answer.max_tokens']} answer tokens"
        )
    else:
        parts.append(f"retrieval only (no reader), {budget}")
    parts += [f"embedder {shared['embedder.model']}", data_digests(runs), code_versions(runs)]
    return "Setting: " + " · ".join(parts)


def data_digests(runs: Sequence[Run]) -> str:
    """The sha256 (12 hex digits) of each dataset file the runs read; several digests of one
    file, or runs that recorded none, are counted."""
    found, unknown = recorded_data_digests(runs)
    parts = [f"{Path(name).name} {counted(digests, unknown)}" for name, digests in found.items()]
    if unknown:
        parts.append(note("report.data_unknown", runs=plural(unknown, "run")))
    return f"data sha256 {'; '.join(parts)}"


def counted(values: Counter[str], unknown: int) -> str:
    """Each value, with its count of runs where the runs do not all share it."""
    alone = len(values) == 1 and not unknown
    return ", ".join(
        value if alone else f"{value} ({plural(count, 'run')})" for value, count in values.items()
    )


def evidence_note(spec: DatasetSpec, answered: bool) -> str:
    """What Ev. recall and All ev. (and the per-category tables' All ev. shown) measure."""
    shown = note("report.evidence_shown") if answered else ""
    return note("report.evidence", evidence=spec.evidence) + shown


def tokens_note(shared: dict[str, Any], answered: bool) -> str:
    """What Ctx tok counts, and for retrieval-only rows what the budget does."""
    budget = note("report.tokens", budget=shared["answer.context_budget"])
    return budget + ("" if answered else note("report.tokens_retrieval_only"))


def f1_note(shared: dict[str, Any], metric: str) -> str:
    """The F1 scorer, and where the dataset has adversarial questions, their place in Overall."""
    text = note("report.f1", definition=template("report.scorer")[metric])
    if spec_of(shared).adversarial_category:
        policy = shared["adversarial"]
        text += note("report.f1_overall", policy=template("report.adversarial").get(policy, policy))
    return text


def judge_note(runs: Sequence[Run], scores: Sequence[str], rows: Sequence[Row]) -> str | None:
    """The J columns' note (None without a judge): the protocols, and per judge its pooled probe
    figures and whether it reads as accuracy."""
    judged = judged_runs(runs)
    if not judged:
        return None
    own = own_protocol(judged[0].config)
    graded = "; ".join(
        f"{protocol} ({'J' if protocol == own else f'J {protocol}'}: "
        f"{PROTOCOLS[protocol].description})"
        for protocol in judge_protocols(runs, scores)
    )
    lines = [note("judges.protocols", protocols=graded, abstention=ABSTENTION_RULE)]
    for model, by_protocol in probe_figures(runs, scores).items():
        readers = sorted({str(run.config["backbone"].get("name")) for run in judged
                          if judge_model(run.config) == model and grades_itself(run.config)})  # fmt: skip
        if readers:
            lines.append(note("judges.grades_itself", model=model, readers=", ".join(readers)))
        for protocol, figures in by_protocol.items():
            if figures is None:
                lines.append(note("judges.no_probes", model=model, protocol=protocol))
                continue
            lines.append(
                note("judges.probes", model=model, protocol=protocol, figures=describe(figures))
            )
    hidden = any(row.hidden_judges for row in rows)
    return note("report.judge", lines="; ".join(lines)) + (
        note("report.judge_hidden") if hidden else ""
    )


def describe(figures: ProbeFigures) -> str:
    """A judge's probe figures in words, and whether its column can be read as accuracy."""
    counts = {kind: figures.per_kind.get(kind, {}) for kind in EXPECTED}

    def shown(kind: str) -> str:
        cell = counts[kind]
        failed = f", {cell['failed']} without verdict" if cell.get("failed") else ""
        return f"{cell.get('accepted', 0)}/{cell.get('graded', 0)}{failed}"

    verdict = "discriminates"
    if figures.accepts_wrong or figures.rejects_right:
        verdict = "accepts_wrong" if figures.accepts_wrong else "rejects_right"
    return note(
        "judges.figures",
        **{kind: shown(kind) for kind in ("gold", "other_question", "distractor")},
        rejected_right=share(figures.right - figures.right_accepted, figures.right),
        accepted_wrong=share(figures.wrong_accepted, figures.wrong),
        verdict=note(f"judges.verdict.{verdict}"),
    )


def share(part: int, whole: int) -> str:
    """``part / whole`` as a whole percentage, or a dash."""
    return f"{part / whole:.0%}" if whole else "—"


def context_order_line(rows: Sequence[Row]) -> str:
    """The order each row's context reached the reader in: its method's own, or, naming the rows, an
    override (a CAST row in time order has its fused ranking sorted away, which the header must
    say)."""
    words = template("report.order_words")
    own: dict[str, list[str]] = {}
    others: list[str] = []
    for row in rows:
        used, target, declared = context_orders(row.run)
        if declared is None:
            others.append(
                note("report.order_unknown", method=row.key.method, used=used, target=target)
            )
        elif declared == used:
            own.setdefault(used, []).append(row.key.method)
        else:
            lost = note("report.order_lost") if declared == "rank" else ""
            others.append(
                note(
                    "report.order_override",
                    method=row.key.method,
                    used=used,
                    declared=declared,
                    lost=lost,
                )
            )
    groups = sorted(own.items(), key=lambda group: -len(group[1]))
    parts = [f"{words[o]} for {', '.join(dict.fromkeys(names))}" for o, names in groups[1:]]
    if groups:
        rest = "every row" if len(groups) == 1 and not others else "the other rows"
        parts.append(f"{words[groups[0][0]]} for {rest}")
    pieces = [note("report.order_own", parts="; ".join(parts))] if parts else []
    return note("report.order", parts="; ".join(pieces + list(dict.fromkeys(others))))


def interval_description(cells: Sequence[Cell], unit: str, memory_name: str) -> str:
    """The intervals in words: the unit resampled, the conversations behind the questions and, where
    questions were resampled on LoCoMo, why and that they understate uncertainty."""
    resampled = "1000 resamples"
    if not cells:
        return note("report.intervals.none", unit=unit, resampled=resampled)
    conversations = max(found.conversations for found in cells)
    clustered = [found for found in cells if found.unit == "conversation"]
    case = resampling_case(
        own=all(found.conversations == found.n for found in cells),
        requested=unit,
        clustered=bool(clustered),
    )
    facts = {
        "resampled": resampled,
        "memory": memory_name,
        "understated": understated("these intervals"),
        "min_clusters": MIN_CLUSTERS,
        "conversations": conversations
        if case not in ("asked", "too_few")
        else plural(conversations, "conversation"),
    }
    text = note(f"report.intervals.{case}", **facts)
    fallen = len(cells) - len(clustered)
    if case == "clustered" and fallen:
        text += note("report.intervals.fallen", fallen=fallen, min_clusters=MIN_CLUSTERS)
    return text


def statistics_note(rows: Sequence[Row], unit: str, memory_name: str) -> str:
    """The cells' format and what their intervals resample."""
    answered = any(not row.key.retrieval_only for row in rows)
    return note(
        "report.statistics",
        left_out=note("report.statistics_left_out") if answered else "",
        intervals=interval_description(table_cells(rows), unit, memory_name),
    )


def faced_note(rows: Sequence[Row], tested: str) -> str:
    """Whom the rows' p-values on ``tested`` were computed against: the best baseline of the
    row's backbone, named (once, or per backbone)."""
    faced = baselines_faced(rows, tested)
    if not faced:
        return note("report.baseline.none")
    if len(set(faced.values())) == 1:
        return note("report.baseline.one", baseline=next(iter(faced.values())))
    named = "; ".join(f"{baseline} for {backbone}" for backbone, baseline in faced.items())
    return note("report.baseline.per_backbone", named=named)


def p_value_note(shared: dict[str, Any], metric: str, rows: Sequence[Row]) -> str:
    """The p columns: the test, the score it is on and the baseline each row faced, named once."""
    spec = spec_of(shared)
    scores = f"{metric} vs {faced_note(rows, metric)}"
    if spec.longmemeval_scores:
        scores = note(
            "report.p_longmemeval",
            metric=metric,
            faced=faced_note(rows, metric),
            faced_judge=faced_note(rows, "judge_acc"),
        )
    units = {c.unit for row in rows for c in row.comparisons.values()}
    resampling = "resampling as the CIs do"
    if units == {"conversation"} and spec.own_memory_per_question:
        # Each question is its own conversation: say what is drawn in the reader's terms.
        resampling = f"resampling questions (each its own {spec.memory_name})"
    elif len(units) == 1:
        resampling = f"resampling {units.pop()}s"
    return note("report.p", scores=scores, resampling=resampling)


def code_versions(runs: Sequence[Run]) -> str:
    """The code versions the rows' records came from, for the setting line; the full
    LongMemEval runs were logged before runs recorded one."""
    counts, unknown = recorded_code_versions(runs)
    parts = [counted(counts, unknown)] if counts else []
    if unknown:
        parts.append(note("report.code_unknown", runs=plural(unknown, "run")))
    return f"code {', '.join(parts)}"


def stale_rows_line(rows: Sequence[Row]) -> str | None:
    """The note on the rows marked stale, with each run's recorded and current method
    fingerprint (None when no row is stale)."""
    changes = [
        note("report.stale_run", run=row.run.directory.name, recorded=old, now=new)
        for row in rows
        if row.source_changed is not None
        for old, new in [row.source_changed]
    ]
    return note("report.stale", mark=STALE_MARK, changes="; ".join(changes)) if changes else None


def restamped_rows_line(rows: Sequence[Row]) -> str | None:
    """The note on the rows a behavioural check re-stamped fresh (None when there are none)."""
    stamps = [
        note("report.restamp", run=row.run.directory.name, recorded=stamp["recorded"],
             now=stamp["now"], questions=stamp["questions"], conversations=stamp["conversations"])
        for row in rows
        for stamp in row.restamped
    ]  # fmt: skip
    return note("report.restamped", stamps="; ".join(stamps)) if stamps else None


def no_context_line(rows: Sequence[Row]) -> str | None:
    """The note naming the methods that handed over no context for any question (None when there are
    none), leaving out baselines whose memory no LLM builds (ZeroHistory hands over nothing by
    design)."""
    empty = [
        row.key.label()
        for row in rows
        if row.context_tokens == 0
        and not (row.key.baseline and not row.key.extraction.startswith("llm"))
    ]
    return note("report.no_context", rows="; ".join(empty)) if empty else None


def shallow_rows_line(rows: Sequence[Row]) -> str | None:
    """The note naming the LongMemEval rows whose stored rankings are not full depth, or None."""
    shallow = []
    for row in rows:
        if row.longmemeval is not None and (short := shallow_rankings(row.run)):
            label = row.key.label()
            shallow.append(label if short == len(row.run.records) else f"{label} ({short} records)")
    return note("report.shallow", rows="; ".join(shallow)) if shallow else None


def partial_rows_line(rows: Sequence[Row]) -> str | None:
    """The note naming the rows of runs not finished yet (``--partial``), with the questions
    each has done: their cells are over those questions only (None when every run finished)."""
    partial = [f"{row.key.label()} ({len(row.run.records)})" for row in rows if row.run.partial]
    return note("report.partial", rows="; ".join(partial)) if partial else None


def unfinished_runs_line(
    configs: dict[Path, dict[str, Any]], dataset: str, subset: str, where: dict[str, Any] | None
) -> str | None:
    """Name the matching runs left out because they have not finished, with how far they got,
    so a table built over several sittings says what it is still waiting for."""
    unfinished = []
    for directory, config, logged in unfinished_runs(configs, dataset, subset, where):
        key = row_key(config)
        label = f"{key.method}, {key.extraction}" if key.extraction else key.method
        unfinished.append(f"{label} ({logged} questions logged, run {directory.name})")
    if not unfinished:
        return None
    return note("report.unfinished", runs="; ".join(unfinished))


def invalid_rows_line(rows: Sequence[Row], max_failure_share: float) -> str | None:
    """The note that some rows do not stand, and why (None when all do)."""
    invalid = [row for row in rows if row.invalid]
    if not invalid:
        return None
    return note("report.invalid", count=len(invalid), share=max_failure_share)
