"""What a report says besides its cells, in words: the one setting line under its title
(dataset, subset and question count, reader, extraction, judge, budget, embedder, code version),
and the texts of its numbered notes (:class:`benchmarks.tables.render.Footnotes`): what the
cells are and their intervals resample, the order each row's context reached the reader in, what
each column measures, the p-values' test and baseline, costs and sources, the rows whose method
source changed since their run and the rows that do not stand."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.data.paths import shown_path
from benchmarks.data.specs import DatasetSpec, dataset_spec, spec_of
from benchmarks.metrics.ranking import stored_turn_ranking
from benchmarks.metrics.stats import MIN_CLUSTERS
from benchmarks.pipeline.provenance import UNKNOWN
from benchmarks.pipeline.settings import ConfigError, declared_context_order
from benchmarks.tables.judge_calibration import grades_itself, judge_model, own_protocol
from benchmarks.tables.report.rows import Row
from benchmarks.tables.report.runs import Run, lookup
from benchmarks.tables.summary import Cell, plural, resampling_case, understated

SCORER_DEFINITIONS = {
    "f1_set": "f1_set, the A-Mem/mem0 set F1 (lowercase, .,!? to spaces, F1 over token sets)",
    "f1_locomo": "f1_locomo, LoCoMo's own F1 (normalized, Porter-stemmed token multisets, "
    "per-category rules)",
}
BLEU_DEFINITION = "bleu1, sentence BLEU-1 (weights (1,0,0,0), smoothing method 1)"
#: The context orders in words (:data:`memsys.base.CONTEXT_ORDERS`).
ORDER_WORDS = {
    "time": "time (oldest first, under their session dates)",
    "rank": "rank (best first, in the method's own ranking)",
}
ADVERSARIAL_POLICY = {
    "exclude": "adversarial questions excluded from overall means (mem0); shown per category",
    "include": "adversarial questions included in overall means (A-Mem)",
}


def subset_description(subset: dict[str, Any], spec: DatasetSpec) -> str:
    """The subset in words; a cut-down subset says plainly that it is not the paper setting."""
    name = subset.get("name")
    conversations, questions = subset.get("conversations"), subset.get("max_questions")
    if spec.own_memory_per_question:
        if conversations is None and questions is None:
            return f"{name} (every question)"
        first = f" of the first {conversations}" if conversations else ""
        return (
            f"{name} ({questions or 'all'} questions{first}, stratified by question type, "
            "deterministic — offline setting, not the paper's)"
        )
    sessions = subset.get("max_sessions")
    if sessions:
        which = plural(conversations, "conversation") if conversations else "every conversation"
        return (
            f"{name} (offline sample: {which} cut to the first {plural(sessions, 'session')}, "
            f"{questions or 'all'} of the questions whose evidence lies there — not the paper "
            "setting)"
        )
    if name == "smoke":
        return (
            f"smoke (offline smoke subset: {plural(conversations, 'conversation')}, "
            f"{questions} questions — not the paper setting)"
        )
    return (
        f"{name} ({conversations or 'all'} conversations, {questions or 'all'} questions per run)"
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
    """The one non-empty value of ``values``, or None when they vary or are all empty: a
    table shows a column of rows' values only where they vary, the setting line states the
    rest."""
    found = {value for value in values if value}
    return found.pop() if len(found) == 1 else None


#: A method name longer than this is shortened in the tables (the notes give it whole).
LABEL_WIDTH = 32


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
    return f"Method names shortened in the tables (the csv has them whole): {names}"


def judge_setting(runs: Sequence[Run]) -> str:
    """The judge in the setting line: its model (and whether it is the reader) and the protocol
    of J."""
    judged = [run for run in runs if (run.config.get("judge") or {}).get("enabled")]
    if not judged:
        return "no judge"
    model = one_value(judge_model(run.config) for run in judged) or "per row (notes)"
    itself = " (the reader)" if all(grades_itself(run.config) for run in judged) else ""
    return f"judge {model}{itself}, {own_protocol(judged[0].config)} protocol"


def setting_line(shared: dict[str, Any], runs: Sequence[Run], rows: Sequence[Row]) -> str:
    """The one line under a report's title: dataset, subset and question count, the reader, the
    extraction mode and the judge where every row shares them (else their columns say), the
    context budget, the embedder and the code version."""
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
    parts += [f"embedder {shared['embedder.model']}", code_versions(runs)]
    return "Setting: " + " · ".join(parts)


def evidence_note(spec: DatasetSpec, answered: bool) -> str:
    """What Ev. recall and All ev. (and the per-category tables' All ev. shown) measure."""
    text = (
        f"Ev. recall: evidence recall, the share of a question's evidence ({spec.evidence}) in the "
        "context handed to the reader, over every question that has evidence; All ev.: the share "
        "of questions with all of it there"
    )
    if answered:
        text += (
            "; All ev. shown (per-category tables): the overall questions whose evidence all "
            "reached the reader, which tells a reading failure (evidence shown, answer wrong) "
            "from a retrieval one"
        )
    return text


COVERAGE_NOTE = (
    "Ans. cov.: answer coverage, the share of questions whose gold answer occurs in the context "
    "handed to the reader (DPR's has_answer: the answer's tokens contiguous among the context's, "
    "uncased; benchmarks/metrics/coverage.py), over the questions that have an answer "
    "(adversarial and abstention questions have none); strict for long free-form answers, so a "
    "lower bound on what the reader could copy; — for runs logged before records kept the "
    "reader's context"
)


def tokens_note(shared: dict[str, Any], answered: bool) -> str:
    """What Ctx tok counts, and for retrieval-only rows what the budget does."""
    text = (
        "Ctx tok: mean tokens of the context handed to the reader (one tokenizer, SmolLM2's, "
        f"whatever the reader), within the context budget of {shared['answer.context_budget']} "
        "tokens (the method's items kept best first within it)"
    )
    if not answered:
        text += (
            ". The order the kept items are shown in changes no number of a retrieval-only row "
            "except through that budget: rank order repeats a date header wherever the date "
            "changes, which context tokens count and which can leave out an item at the "
            "budget's edge"
        )
    return text


def f1_note(shared: dict[str, Any], metric: str) -> str:
    """The F1 scorer, and where the dataset has adversarial questions, their place in Overall."""
    text = f"F1: {SCORER_DEFINITIONS[metric]}"
    if spec_of(shared).adversarial_category:
        policy = shared["adversarial"]
        text += f"; Overall: {ADVERSARIAL_POLICY.get(policy, policy)}"
    return text


def judge_note(lines: Sequence[str], rows: Sequence[Row]) -> str | None:
    """The J columns' note: the judges' protocols and probe figures (``lines``:
    :func:`benchmarks.tables.judge_calibration.calibration_lines`), and what a dash says."""
    if not lines:
        return None
    text = "J: share of answers the judge accepted. " + "; ".join(lines)
    if any(row.hidden_judges for row in rows):
        text += (
            ". — in a J column: its judge does not discriminate on the probes (it accepts most "
            "known-wrong answers or rejects most known-right ones), so its verdicts are no "
            "measure of accuracy and are not shown (the csv keeps them)"
        )
    return text


def costs_note() -> str:
    """What the cost columns count, and where from."""
    return (
        "Costs: LLM calls and tokens per stage (construction / answering / judging: answering and "
        "judging summed from the per-question log, a call per attempt), construction from "
        "metrics.json (* = memories loaded from cache, cost of this run only); answer latency "
        "over answers not served from the response cache; construction (s), texts embedded / "
        "asked (what the embedding model encoded, of the texts the run asked for: the rest came "
        "from the content-keyed cache), texts parsed / asked (the same for the lite extractors' "
        "spaCy parses; — for runs begun before parses were counted), wall time and peak resident "
        "memory are summed (peak: maximum; with worker processes, the parent's plus each "
        "worker's) over the run's invocations, and shown only where those cover every question"
    )


def source_note(runs_dir: Path) -> str:
    """Where every number comes from."""
    return (
        f"Source: predictions.jsonl of each run in {shown_path(runs_dir)} (every mean recomputed "
        "from it); package versions in each run's invocations.jsonl"
    )


LONGMEMEVAL_ACCURACY_NOTE = (
    "LongMemEval accuracy: judge_acc per question type (n = questions of the type, _abs "
    "questions included), overall over every judged question, task-averaged = mean of the "
    "per-type means (a point value), abstention = the _abs questions alone"
)
LONGMEMEVAL_RETRIEVAL_NOTE = (
    "LongMemEval retrieval, official definition (the behaviour of LongMemEval's "
    "run_retrieval.py and eval_utils.py, scored from each record's stored ranking: "
    "benchmarks/metrics/longmemeval_official.py): the user turns the method's items "
    "cover, in rank order; gold = has_answer user turns of answer sessions (the others "
    "relabelled noans); session level from the turn ranking with k grown until k "
    "distinct sessions are covered; recall_all@k, ndcg_any@k, recall_any@1 and MRR (the "
    "harness's addition); _abs questions and questions without a has_answer user turn "
    "are skipped (n = questions scored; records without a stored ranking have none)"
)


def context_order_line(rows: Sequence[Row]) -> str:
    """The order each row's context reached the reader in (``answer.order`` as its run resolved
    it): its method's own (:attr:`memsys.base.MemorySystem.context_order`), or, naming the rows,
    an override. A CAST row shown in time order has its fused ranking sorted away: its semantic
    half's items in time order, which the header must say."""
    own: dict[str, list[str]] = {}
    others: list[str] = []
    for row in rows:
        used = str(lookup(row.run.config, "answer.order", "time"))
        target = str(lookup(row.run.config, "method._target_", ""))
        try:
            declared = declared_context_order(target)
        except ConfigError:
            others.append(
                f"{row.key.method}: {used} ({target} does not import here: its own unknown)"
            )
            continue
        if declared == used:
            own.setdefault(used, []).append(row.key.method)
        else:
            lost = ": its ranking does not reach the reader" if declared == "rank" else ""
            others.append(f"{row.key.method}: {used} by answer.order, not its own {declared}{lost}")
    groups = sorted(own.items(), key=lambda group: -len(group[1]))
    parts = [f"{ORDER_WORDS[o]} for {', '.join(dict.fromkeys(names))}" for o, names in groups[1:]]
    if groups:
        rest = "every row" if len(groups) == 1 and not others else "the other rows"
        parts.append(f"{ORDER_WORDS[groups[0][0]]} for {rest}")
    pieces = ["each method's own: " + "; ".join(parts)] if parts else []
    return "Context order (how the kept items reach the reader): " + "; ".join(
        pieces + list(dict.fromkeys(others))
    )


def table_cells(rows: Sequence[Row]) -> list[Cell]:
    """Every interval of the table's rows (answered and retrieval-only, LongMemEval's too)."""
    cells: list[Cell | None] = []
    for row in rows:
        cells += [found for scope in row.scores.values() for found in scope.values()]
        cells.append(row.evidence_recall)
        if row.longmemeval is not None:
            lme = row.longmemeval
            cells += [*lme.per_type.values(), lme.overall, lme.abstention]
            cells += [found for level in lme.retrieval.values() for found in level.values()]
    return [found for found in cells if found is not None]


def interval_description(cells: Sequence[Cell], unit: str, memory_name: str) -> str:
    """The intervals in words: the unit their bootstrap resampled, how many conversations the
    questions come from, and, where questions were resampled on LoCoMo, why and that the
    intervals then understate uncertainty (questions of one conversation share its memory)."""
    resampled = "1000 resamples"
    if not cells:
        return f"95% bootstrap CIs resampling {unit}s ({resampled}; no cell has one)"
    conversations = max(found.conversations for found in cells)
    clustered = [found for found in cells if found.unit == "conversation"]
    case = resampling_case(
        own=all(found.conversations == found.n for found in cells),
        requested=unit,
        clustered=bool(clustered),
    )
    if case == "own":
        return (
            f"95% percentile bootstrap CIs resampling questions ({resampled}; each question has "
            f"its own {memory_name}, so the questions are the clusters)"
        )
    if case == "asked":
        return (
            f"95% percentile bootstrap CIs resampling questions, as asked (--interval-unit "
            f"question; {resampled}; {plural(conversations, 'conversation')}): "
            f"{understated('these intervals')}"
        )
    if case == "too_few":
        return (
            f"95% percentile bootstrap CIs resampling questions ({resampled}) because the subset "
            f"has {plural(conversations, 'conversation')}, fewer than the {MIN_CLUSTERS} a "
            f"cluster bootstrap needs: {understated('these intervals')}"
        )
    text = (
        f"95% cluster bootstrap CIs resampling the {conversations} conversations ({resampled}; "
        "questions of one conversation share its memory: a cell draws the conversations its "
        "questions come from and averages over their questions)"
    )
    fallen = len(cells) - len(clustered)
    if fallen:
        text += (
            f"; {fallen} cell(s) whose questions come from fewer than {MIN_CLUSTERS} "
            "conversations resample questions instead and understate uncertainty"
        )
    return text


def statistics_note(rows: Sequence[Row], unit: str, memory_name: str) -> str:
    """The cells' format and what their intervals resample."""
    answered = any(not row.key.retrieval_only for row in rows)
    left_out = " (a per-category table whose every cell would be — is left out)" if answered else ""
    return (
        "Statistics: cells are mean [95% CI] over questions (0.658 [0.45,0.87]: a mean of 0.658 "
        "with a 95% percentile bootstrap interval from 0.45 to 0.87), — where no question of the "
        f"row has the score{left_out}; "
        f"{interval_description(table_cells(rows), unit, memory_name)}"
    )


def baselines_faced(rows: Sequence[Row], tested: str) -> str:
    """Whom the rows' p-values on ``tested`` were computed against: the best baseline of the
    row's backbone, named (once, or per backbone)."""
    faced: dict[str, str] = {}
    for row in rows:
        found = row.comparisons.get(tested)
        if found is not None:
            faced.setdefault(row.key.backbone, found.baseline)
    if not faced:
        return "the best baseline of the row's backbone (no row here faced one)"
    if len(set(faced.values())) == 1:
        return f"{next(iter(faced.values()))}, the best baseline of the row's backbone"
    named = "; ".join(f"{baseline} for {backbone}" for backbone, baseline in faced.items())
    return f"the best baseline of the row's backbone ({named})"


def p_value_note(shared: dict[str, Any], metric: str, rows: Sequence[Row]) -> str:
    """The p columns: the test, the score it is on and the baseline each row faced, named once."""
    spec = spec_of(shared)
    if spec.longmemeval_scores:
        scores = (
            f"{metric} (Overall) vs {baselines_faced(rows, metric)}, and on judge_acc "
            f"(LongMemEval accuracy) vs {baselines_faced(rows, 'judge_acc')}"
        )
    else:
        scores = f"{metric} vs {baselines_faced(rows, metric)}"
    units = {c.unit for row in rows for c in row.comparisons.values()}
    resampling = "resampling as the CIs do"
    if units == {"conversation"} and spec.own_memory_per_question:
        # Each question is its own conversation: say what is drawn in the reader's terms.
        resampling = f"resampling questions (each its own {spec.memory_name})"
    elif len(units) == 1:
        resampling = f"resampling {units.pop()}s"
    return (
        f"p: two-sided paired bootstrap on {scores}; paired by question, {resampling}; — for "
        "baseline rows and rows without a baseline of their backbone"
    )


def code_versions(runs: Sequence[Run]) -> str:
    """The code versions the rows' records came from (``metrics.json`` ``code_versions``), for
    the setting line."""
    counts: dict[str, int] = {}
    for run in runs:
        for version in run.metrics.get("code_versions") or [UNKNOWN]:
            counts[version] = counts.get(version, 0) + 1
    unknown = counts.pop(UNKNOWN, 0)
    parts = [
        version if len(counts) == 1 and not unknown else f"{version} ({plural(count, 'run')})"
        for version, count in counts.items()
    ]
    if unknown:
        parts.append(f"not recorded for {plural(unknown, 'run')} (logged before runs recorded it)")
    return f"code {', '.join(parts)}"


#: The mark of a stale row in its Run cell (:attr:`Row.source_changed`).
STALE_MARK = "†"


def stale_rows_line(rows: Sequence[Row]) -> str | None:
    """The header note on the rows marked stale, with each run's recorded and current method
    fingerprint (None when no row is stale)."""
    changes = [
        f"run {row.run.directory.name}: recorded {row.source_changed[0]}, now "
        f"{row.source_changed[1]}"
        for row in rows
        if row.source_changed is not None
    ]
    if not changes:
        return None
    return (
        f"{STALE_MARK} stale: the method's source changed since this run was produced "
        f"({'; '.join(changes)})"
    )


def no_context_line(rows: Sequence[Row]) -> str | None:
    """The header note naming the methods that handed over no context for any question (None
    when there are none): an empty memory (or nothing within the budget), so their scores are
    those of having no history, whatever the method would do with a working construction model.
    Baselines whose memory no LLM builds are left out (ZeroHistory hands over nothing by
    design); the libraries, baselines that build with the LLM, are not."""
    empty = [
        row.key.label()
        for row in rows
        if row.context_tokens == 0
        and not (row.key.baseline and not row.key.extraction.startswith("llm"))
    ]
    if not empty:
        return None
    return (
        f"NO CONTEXT: {'; '.join(empty)} handed over no context for any question (an empty "
        "memory, or nothing within the budget; a memory's construction stats in the cache say "
        "why, e.g. unparseable LLM replies): the row scores having no history, not the method"
    )


def unranked_rows_line(rows: Sequence[Row]) -> str | None:
    """The header note naming the LongMemEval rows whose records stored no ranking (logged
    before records kept one), in whole or in part: those records have no ranking metric, and
    the metric they carried then was not LongMemEval's definition (None when every record has
    its ranking)."""
    unranked, partly = [], []
    for row in rows:
        if row.longmemeval is None:
            continue
        missing = sum(stored_turn_ranking(r) is None for r in row.run.records)
        if missing == len(row.run.records):
            unranked.append(row.key.label())
        elif missing:
            partly.append(f"{row.key.label()} ({missing} of {len(row.run.records)} records)")
    if not unranked and not partly:
        return None
    which = (
        "none of these runs stored its rankings"
        if len(unranked) == len(rows)
        else "records without a stored ranking in " + "; ".join(unranked + partly)
    )
    return (
        f"NO RANKING: {which} (records from before records kept one), so no official "
        "LongMemEval ranking metric can be computed for them (the metric they carried then was "
        "not LongMemEval's definition and is not shown; n counts the others); rebuilding the "
        "run gives them (docs/longmemeval-at-scale.md gives the cost)"
    )


def invalid_rows_line(rows: Sequence[Row], max_failure_share: float) -> str | None:
    """The header note that some rows do not stand, and why (None when all do)."""
    invalid = [row for row in rows if row.invalid]
    if not invalid:
        return None
    return (
        f"INVALID rows: {len(invalid)} run(s) with more than {max_failure_share:.0%} of their "
        "questions failed (answer or verdict; rerun the config to ask them again): their means "
        "leave the failures out and do not stand for the method"
    )
