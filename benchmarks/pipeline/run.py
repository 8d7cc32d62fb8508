"""``python -m benchmarks.pipeline.run [method=...] [backbone=...] [dataset=...] [subset=...]``.

For each conversation: construct the memory (or load it from the memory cache), then for each
question not yet in the run's log, or logged as failed (:func:`benchmarks.pipeline.harness.failed`):
retrieve, render the context, answer, judge, score, and append one JSON line. The run directory
is named by a hash of the config (minus locations), so running the same config again resumes
(docs/running.md); ``metrics.json`` is rewritten from the log at the end, beside
``questions.json``, and the judge's probe set is graded once
(:mod:`benchmarks.metrics.judge_probes`). With ``workers=N`` N processes construct and answer,
and this one logs their records in the same order (:mod:`benchmarks.pipeline.workers`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from benchmarks.config.compose import CONF, without_registry
from benchmarks.config.values import ConfigError
from benchmarks.data.digests import check_unchanged, dataset_digests, recorded_digests
from benchmarks.data.paths import shown_path
from benchmarks.metrics.aggregate import format_summary, summarize_run
from benchmarks.metrics.agreement import judge_repeats, protocol_agreement
from benchmarks.metrics.judge_probes import (
    PROBES_FILE,
    Probe,
    ProbeSet,
    grade_probes,
    probe_counts,
    probes_lost_to_failed_calls,
    probes_settled,
    read_probes,
)
from benchmarks.metrics.longmemeval_official import Corpus
from benchmarks.metrics.ranking import corpus_of
from benchmarks.pipeline.cli import (
    ConfChangedError,
    IncompleteRunError,
    redact_run_outputs,
    rerun_command,
    run_or_exit,
)
from benchmarks.pipeline.footprint import FootprintLog
from benchmarks.pipeline.harness import (
    ConstructionCounts,
    Harness,
    answer_conversation,
    build_harness,
    failed,
    lost_to_a_failed_request,
)
from benchmarks.pipeline.memories_ahead import MemoriesAhead
from benchmarks.pipeline.packed import PACKED, PLAIN, predictions_file, unpack
from benchmarks.pipeline.progress import STAGES, QuestionBar, llm_calls_status, show_stage, ticking
from benchmarks.pipeline.provenance import code_versions, provenance
from benchmarks.pipeline.ray_pool import RayPool
from benchmarks.pipeline.runlog import (
    QUESTIONS_FILE,
    RecordLog,
    ResultsWriteError,
    exclusive,
    log_invocation,
    read_question_set,
    summarize_invocations,
    write_atomically,
)
from benchmarks.pipeline.settings import (
    RunSettings,
    check_method_options,
    run_id,
    run_identity,
    validate,
)
from benchmarks.pipeline.subsets import select
from benchmarks.pipeline.workers import Task, WorkerPool, WorkerUsage, peak_rss_mb
from memsys.llm.accounting import Accounting
from memsys.llm.redact import redact
from memsys.types import Conversation, Question

log = logging.getLogger("benchmarks.pipeline.run")


def conversations_source(
    settings: RunSettings, data_dir: Path
) -> Callable[[], Iterable[Conversation]]:
    """A factory of fresh conversation streams for the configured dataset."""
    return settings.spec.source(settings.variant, settings.dataset_file, data_dir)


def answer_pending(
    harness: Harness,
    log: RecordLog,
    conversations: Iterable[Conversation],
    name: str,
    progress: bool,
    construction: ConstructionCounts,
    footprints: FootprintLog,
) -> None:
    """Construct (or load) each memory and log every question not logged yet, a batch at a
    time, in the dataset's order; count memories built and loaded, and construction time, into
    ``construction``, and log each memory's footprint into ``footprints``. An llm-mode method on a server builds up to ``memories_at_once`` memories
    at once (:mod:`benchmarks.pipeline.memories_ahead`)."""
    done = log.done()
    bar = QuestionBar(name, enabled=progress, judged=harness.judge is not None)
    memories = MemoriesAhead.of_run(harness)
    answering = "answering" if harness.settings.template else "retrieving"

    def status() -> str:
        shown = bar.status()
        doing = [shown] if shown else []
        if memories.building:
            doing.append(f"constructing {', '.join(memories.building)}")
        return (
            f"{' · '.join(doing)} · memories {construction.built} built, "
            f"{construction.loaded} loaded · {llm_calls_status(harness.accounting, harness.limiters)}"
        )

    def work() -> Iterator[tuple[Conversation, list[Question]]]:
        for conversation in conversations:
            pending = [q for q in conversation.questions if q.question_id not in done]
            bar.settled(len(conversation.questions) - len(pending))
            if pending:
                bar.set_stage(STAGES[0], conversation.conversation_id)
                yield conversation, pending

    with ticking(bar.bar, status, enabled=progress), harness.accounting.listening(bar.listener):
        for conversation, pending, built in memories(work()):
            construction.count(built)
            footprints.note([built.footprint])
            bar.set_stage(answering, conversation.conversation_id)
            for records in answer_conversation(harness, built.memory, conversation, pending):
                log.append(records)
                bar.logged(records)
    bar.close()


def answer_pending_in_workers(
    settings: RunSettings,
    run_dir: Path,
    log: RecordLog,
    conversations: Iterable[Conversation],
    construction: ConstructionCounts,
    usage: WorkerUsage,
    footprints: FootprintLog,
) -> None:
    """:func:`answer_pending` with ``settings.worker_count`` processes (here, or Ray actors with
    ``executor=ray``) constructing and answering, one conversation each at a time; records are
    logged a conversation at a time, in order. ``construction`` sums the workers' seconds (not
    wall time); ``usage`` takes the rest."""
    done = log.done()
    where = " on Ray" if settings.executor.name == "ray" else ""
    bar = tqdm(
        desc=f"{run_dir.name} questions ({settings.worker_count} workers{where})",
        unit="q",
        disable=not settings.progress,
        file=sys.stderr,
    )

    def tasks() -> Iterator[Task]:
        for conversation in conversations:
            pending = [q.question_id for q in conversation.questions if q.question_id not in done]
            bar.update(len(conversation.questions) - len(pending))
            if pending:
                yield conversation, pending

    with worker_pool(settings, run_dir) as pool:
        for outcome in pool.map_ordered(tasks(), window=2 * settings.worker_count):
            log.append(outcome.records)
            construction.add(outcome.construction)
            footprints.note(outcome.construction.footprints)
            usage.add(outcome)
            bar.update(len(outcome.records))
    bar.close()


def worker_pool(settings: RunSettings, run_dir: Path) -> WorkerPool | RayPool:
    """The processes that do a spread run's work: ``workers`` here, or Ray actors."""
    if settings.executor.name == "ray":
        return RayPool(settings.executor, settings, run_dir)
    return WorkerPool(settings.workers, settings, run_dir)


def grade_judge_probes(
    harness: Harness, run_dir: Path, probes: Sequence[Probe], progress: bool
) -> None:
    """Grade the judge's probe set into ``judge_probes.json`` (its calls are cached: the runs of
    one table with one judge pay once)."""
    assert harness.judge is not None
    protocols = ", ".join(harness.judge.protocols)
    bar = tqdm(desc=f"{run_dir.name} judge probes ({protocols})", total=len(probes),
               unit="probe", disable=not progress, file=sys.stderr)  # fmt: skip
    with ticking(
        bar, lambda: llm_calls_status(harness.accounting, harness.limiters), enabled=progress
    ):
        graded = grade_probes(harness.judge, probes)
        bar.update(len(probes))
    bar.close()
    write_atomically(run_dir / PROBES_FILE, json.dumps(graded, indent=1))


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run (or resume) one configuration; return its metrics summary. The method's registry
    block leaves ``cfg`` first (:func:`benchmarks.config.compose.without_registry`): what
    ``@hydra.main`` composed holds it."""
    cfg = without_registry(cfg)
    redact_run_outputs()
    settings = validate(cfg)
    check_method_options(settings.method)
    identity = run_identity(cfg)  # the last read of the config node: the rest reads settings
    run_dir = settings.paths.results_dir / run_id(identity)
    created = not run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ResultsWriteError(run_dir, error) from error
    try:
        with exclusive(run_dir):
            return run_in(run_dir, settings, identity)
    except ConfigError:  # the method refused its options: no run directory left behind
        if created:
            remove_new_run_dir(run_dir)
        raise


#: The files a run writes before it builds its method (all a refused option leaves behind).
STARTING_FILES = ("config.yaml", ".lock")


def remove_new_run_dir(run_dir: Path) -> None:
    """Remove a run directory this invocation made and wrote nothing in but
    :data:`STARTING_FILES` (left as it is if anything else is in it)."""
    for name in STARTING_FILES:
        (run_dir / name).unlink(missing_ok=True)
    with suppress(OSError):  # something else is in it: not ours to remove
        run_dir.rmdir()


def selected(
    settings: RunSettings, data_dir: Path, digests: Mapping[str, str]
) -> Iterator[Conversation]:
    """A run's conversations, its subset's questions only; the data files' ``digests`` key the
    sample this process drew of the same data (a sweep's jobs draw it once)."""
    data_key = (settings.dataset, settings.variant, settings.dataset_file, *sorted(digests.items()))
    return select(conversations_source(settings, data_dir), settings.subset, data_key)


def question_ids(settings: RunSettings, data_dir: Path, digests: Mapping[str, str]) -> list[str]:
    """The ids of a run's questions, in the dataset's order: what its log may hold."""
    conversations = selected(settings, data_dir, digests)
    return [question.question_id for c in conversations for question in c.questions]


def noting_questions(
    conversations: Iterable[Conversation],
    seen: list[str],
    corpora: dict[str, Corpus] | None = None,
) -> Iterator[Conversation]:
    """``conversations``, appending their question ids to ``seen`` as they go by, and (given
    ``corpora``, on LongMemEval) each one's official retrieval corpus, which the run's summary
    scores the stored rankings against, with no second pass over the dataset."""
    for conversation in conversations:
        seen.extend(question.question_id for question in conversation.questions)
        if corpora is not None:
            corpora[conversation.conversation_id] = corpus_of(conversation)
        yield conversation


def run_in(run_dir: Path, settings: RunSettings, identity: dict[str, Any]) -> dict[str, Any]:
    """:func:`run` once ``run_dir`` is held by this process."""
    started, started_at = time.perf_counter(), datetime.now(timezone.utc).isoformat()
    write_atomically(run_dir / "config.yaml", redact(OmegaConf.to_yaml(OmegaConf.create(identity))))
    data_dir = settings.paths.data_dir
    if predictions_file(run_dir).name == PACKED:  # a committed, packed run resumed: append plain
        unpack(run_dir)
    log = RecordLog(run_dir / PLAIN, retryable=failed)
    invocations = RecordLog(run_dir / "invocations.jsonl", key="started")
    digests = dataset_digests(
        settings.spec.files(settings.variant, settings.dataset_file), data_dir
    )
    check_unchanged(recorded_digests(invocations.records()), digests, data_dir)
    if len(log):  # resuming: the rows logged must be this run's own
        owner = f"this run's question set ({settings.dataset}, subset {settings.subset.name})"
        # the question set a finished invocation wrote, else one pass over the dataset
        log.check_ids(
            read_question_set(run_dir) or question_ids(settings, data_dir, digests), owner
        )
    harness = build_harness(settings, run_dir)
    seen: list[str] = []
    corpora: dict[str, Corpus] | None = {} if settings.spec.longmemeval_scores else None
    conversations: Iterable[Conversation] = noting_questions(
        selected(settings, data_dir, digests), seen, corpora
    )
    answered_before = len(log)
    construction = ConstructionCounts()
    usage = WorkerUsage()  # stays empty with one process
    footprints = FootprintLog(run_dir)
    try:
        if not settings.spread:
            wanted = settings.judge_probes and not probes_settled(read_probes(run_dir))
            probe_set = ProbeSet(settings.seed) if wanted and harness.judge is not None else None
            if probe_set is not None:
                conversations = probe_set.collect(conversations)
            progress = settings.progress
            answer_pending(
                harness, log, conversations, run_dir.name, progress, construction, footprints
            )
            if probe_set is not None:
                grade_judge_probes(harness, run_dir, probe_set.probes(), progress)
        else:
            answer_pending_in_workers(
                settings, run_dir, log, conversations, construction, usage, footprints
            )
    finally:  # an interrupted invocation (Ctrl-C, SIGTERM, an error) logs its cost too
        harness.close()
        invocation = {
            "started": f"{started_at} pid {os.getpid()}",
            "questions": log.count_on_disk() - answered_before,
            "retried": log.superseded,  # failed questions asked again (their lines superseded)
            "wall_s": round(time.perf_counter() - started, 1),
            # This process's peak so far (a multirun's jobs in one process share it), plus each
            # worker's: an upper bound on the memory in use at once.
            "peak_rss_mb": peak_rss_mb() + usage.total_peak_rss_mb(),
            "construction_s": round(construction.seconds, 1),
            **usage.work_with(harness.work_counts()),
            "workers": settings.worker_count,
            "executor": settings.executor.name,
            "data": digests,
            "provenance": provenance(settings.method.get("_target_")),
        }
        # on a full disk the line goes to stderr, and the error under way is not buried
        log_invocation(invocations, invocation, unwinding=sys.exc_info()[1] is not None)
    write_atomically(run_dir / QUESTIONS_FILE, json.dumps(seen))
    show_stage(run_dir.name, STAGES[-1], enabled=settings.progress)
    records = log.records()
    summary = summarize_run(records, settings, corpora=corpora)
    summary["run_dir"] = shown_path(run_dir)
    summary["construction"] = {
        **construction.to_json(),
        "corrupt_memories_rebuilt": harness.memories.rebuilt_corrupt + usage.rebuilt_corrupt,
    }
    summary["footprint"] = footprints.summary()
    summary["caches"] = {
        "llm_responses": harness.response_cache.integrity(),
        "embeddings": harness.services.embedder.cache.integrity(),
        "parses": harness.services.nlp.cache.integrity(),
    }
    summary["invocation"] = invocation
    logged = invocations.records()
    summary["invocations"] = summarize_invocations(logged)
    summary["code_versions"] = code_versions(logged)
    summary["accounting"] = Accounting.from_ledger(run_dir / "llm_calls.jsonl").summary()
    summary["accounting"]["this_invocation"] = harness.accounting.summary()
    graded = read_probes(run_dir) or []
    if settings.judge_probes:
        summary["judge_probes"] = probe_counts(graded)
    summary["completeness"] = completeness(records, graded if settings.judge_probes else [])
    if harness.judge is not None:
        summary["judge_parse"] = {name: p.counts() for name, p in harness.judge.parsers.items()}
        summary["judge_agreement"] = {
            "repeats": judge_repeats(records),
            "repeat_temperature": settings.judge_repeat_temperature,
            "protocols": protocol_agreement(records),
        }
    write_atomically(run_dir / "metrics.json", json.dumps(summary, indent=2, sort_keys=True))
    return summary


def completeness(
    records: Sequence[dict[str, Any]], graded_probes: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Whether the run ended with no request lost: no question whose answer or verdict is
    missing because its request failed for good (a server down, a rate limit past its
    patience), no judge probe left without a verdict for that reason. A rerun asks exactly those
    again. A verdict the model's reply could not be read into is counted among the failures,
    and asked again up its ladder by a rerun, but the model did answer: it does not make the
    run incomplete."""
    failed_questions = sum(1 for record in records if lost_to_a_failed_request(record))
    failed_probes = probes_lost_to_failed_calls(graded_probes)
    return {
        "complete": failed_questions == 0 and failed_probes == 0,
        "failed_questions": failed_questions,
        "failed_probes": failed_probes,
    }


def raise_if_incomplete(summary: dict[str, Any]) -> None:
    """Raise :class:`IncompleteRunError` for a run that ended with failed questions or probes
    (its records and ``metrics.json`` written): the command exits non-zero, a sweep lists it."""
    state = summary["completeness"]
    if state["complete"]:
        return
    raise IncompleteRunError(
        f"incomplete run {summary['run_dir']}: {state['failed_questions']} question(s) and "
        f"{state['failed_probes']} judge probe(s) failed (their records and metrics.json are "
        "written, the failures left out of the means); run the same command again to ask "
        f"them again: {rerun_command()}"
    )


def conf_digest(conf: Path = CONF) -> str:
    """sha256 over every file under ``conf`` (relative path and bytes), in path order."""
    digest = hashlib.sha256()
    for path in sorted(found for found in conf.rglob("*") if found.is_file()):
        digest.update(path.relative_to(conf).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class SweepGuard:
    """Refuses a sweep's job once ``conf/`` has changed since its first job.

    A multirun runs its jobs one after another in this process, and Hydra composes each job's
    config from ``conf/`` on disk, while the process keeps the code it started with: a config
    edited in the meantime meets code that may not expect it (measured: a run id computed with
    a key the old code kept and the new code drops). Finished runs stay; rerunning the sweep
    resumes with code and configs that agree.
    """

    def __init__(self, conf: Path = CONF) -> None:
        self.conf = conf
        self.first: str | None = None

    def check(self) -> None:
        """Remember ``conf/`` at the first job; raise :class:`ConfChangedError` when it differs
        later."""
        current = conf_digest(self.conf)
        if self.first is None:
            self.first = current
        elif current != self.first:
            raise ConfChangedError(
                f"{shown_path(self.conf)} changed since this sweep's first job; this process "
                "still runs the code it started with, so the job is refused (finished runs are "
                "kept: run the sweep again)",
            )


SWEEP_GUARD = SweepGuard()


def guarded_run(cfg: DictConfig) -> dict[str, Any]:
    """:func:`run`, after :data:`SWEEP_GUARD` has checked ``conf/``; print the one-screen
    summary, then raise :class:`IncompleteRunError` if questions or probes failed."""
    SWEEP_GUARD.check()
    summary = run(cfg)
    print(format_summary(summary))
    raise_if_incomplete(summary)
    return summary


@hydra.main(version_base="1.3", config_path="../../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: run, print a one-screen summary, exit non-zero on a clear error or an
    incomplete run (signals: :func:`benchmarks.pipeline.cli.run_or_exit`)."""
    run_or_exit(guarded_run, cfg)


if __name__ == "__main__":
    main()
