"""Mutation testing of the code where a silent change moves a published number (``make mutation``).

mutmut (``[tool.mutmut]`` in pyproject.toml) copies ``benchmarks/`` and ``memsys/`` into
``mutants/``, with ``conf/`` and ``tests/`` beside them, and mutates the files it lists; this script
picks the functions of each file that are in scope (:data:`SCOPE`: the scorers, the context
packer and budget, the run log's resume and duplicate rules, each paper method's thresholds and
orderings), runs their mutants on ``--max-children`` processes, then prints each module's score
and every surviving mutant with its diff. A survivor that no behaviour can tell from the original
is listed in :data:`EQUIVALENT` with the reason, and counted apart; every other survivor is a
test to write. Which tests a mutant runs: those of mutmut's ``pytest_add_cli_args_test_selection``
(the test files nearest the scope) that call the mutated function, as mutmut records them in one
clean pass first. The copy finds ``conf/`` beside it and the datasets through ``MEMBENCH_DATA``,
set here to the repository's data directory when it is not set.

    python scripts/mutation.py                  # the whole scope, from a fresh mutants/
    python scripts/mutation.py --only fracom    # the modules whose path contains "fracom"
    python scripts/mutation.py --report         # the scores of the last run again

Exit status 1 when a group is under its target (:data:`TARGETS`) or a survivor is neither
killed nor listed. Measured time, scores and the equivalent survivors: docs/development.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The score each group must reach, in percent of its mutants (equivalent ones left out).
TARGETS = {"scorers and packer": 90.0, "run log": 90.0, "methods": 80.0}


@dataclass(frozen=True)
class Module:
    """One mutated file: its group and the functions in scope, in mutmut's keys (``x_name`` for
    a function, ``xǁClassǁname`` for a method; properties and other decorated functions are not
    mutated by mutmut)."""

    path: str
    group: str
    functions: tuple[str, ...]
    #: The test files nearest the module: a mutant runs those of their tests that call it.
    tests: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")

    def globs(self) -> list[str]:
        return [f"{self.dotted}.{function}__mutmut_*" for function in self.functions]

    def in_scope(self, mutant: str) -> bool:
        return mutant.partition("__mutmut_")[0].rpartition(".")[2] in self.functions

    def near(self, test: str) -> bool:
        return test.partition("::")[0] in self.tests


def method(cls: str, name: str) -> str:
    return f"xǁ{cls}ǁ{name}"


SCORERS = "scorers and packer"
SCOPE = (
    Module(
        "benchmarks/metrics/qa.py",
        SCORERS,
        (
            "x_normalize_category",
            "x_normalize_locomo_answer",
            "x__locomo_token_f1",
            "x_f1_locomo",
            "x__simple_tokens",
            "x_f1_set",
            "x__word_tokens",
            "x_bleu1",
            "x_score_prediction",
            "x__mean",
            "x_score_predictions",
        ),
        (
            "tests/test_metrics_qa.py",
            "tests/test_mutation_kills_scorers.py",
        ),
    ),
    Module(
        "benchmarks/metrics/retrieval.py",
        SCORERS,
        ("x_evidence_recall", "x_summarize_evidence_recall"),
        (
            "tests/test_metrics_retrieval.py",
            "tests/test_boundaries.py",
            "tests/test_mutation_kills_scorers.py",
        ),
    ),
    Module(
        "benchmarks/metrics/coverage.py",
        SCORERS,
        ("x_dpr_tokens", "x_covers", "x_answer_coverage"),
        (
            "tests/test_answer_coverage.py",
            "tests/test_boundaries.py",
            "tests/test_mutation_kills_scorers.py",
        ),
    ),
    Module(
        "benchmarks/metrics/ranking.py",
        SCORERS,
        (
            "x_official_turn_id",
            "x_corpus_of",
            method("OfficialIds", "of"),
            method("OfficialIds", "rankings"),
            "x_stored_turn_ranking",
            "x_record_scores",
            "x_decided",
            "x_score_lines",
        ),
        (
            "tests/test_metrics_longmemeval_official.py",
            "tests/test_mutation_kills_ranking.py",
        ),
    ),
    Module(
        "benchmarks/metrics/segmentation.py",
        SCORERS,
        (
            "x_window_size",
            method("SegmentationScores", "means"),
            "x__flatten",
            "x__window_errors",
            "x__f1",
            "x_score_segmentation",
        ),
        (
            "tests/test_metrics_segmentation.py",
            "tests/test_mutation_kills_scorers.py",
        ),
    ),
    Module(
        "benchmarks/metrics/stats.py",
        SCORERS,
        (
            "x__scores",
            "x__cluster_index",
            "x__resampled_means",
            "x_resampling_unit",
            "x_bootstrap_ci",
            "x_paired_bootstrap_pvalue",
        ),
        (
            "tests/test_metrics_stats.py",
            "tests/test_mutation_kills_scorers.py",
        ),
    ),
    Module(
        "benchmarks/answering/context.py",
        SCORERS,
        ("x_date_header", "x_render_context", "x_fit"),
        (
            "tests/test_answering.py",
            "tests/test_boundaries.py",
            "tests/test_mutation_kills_packer.py",
        ),
    ),
    Module(
        "benchmarks/pipeline/runlog.py",
        "run log",
        (
            method("RecordLog", "__init__"),
            method("RecordLog", "_load"),
            method("RecordLog", "check_ids"),
            method("RecordLog", "__contains__"),
            method("RecordLog", "__len__"),
            method("RecordLog", "count_on_disk"),
            method("RecordLog", "done"),
            method("RecordLog", "records"),
            method("RecordLog", "append"),
            "x__read_lines",
            "x_latest_records",
            "x__drop_partial_tail",
        ),
        (
            "tests/test_run_storage.py",
            "tests/test_reliability_disk.py",
            "tests/test_hostile_runs.py",
            "tests/test_mutation_kills_runlog.py",
        ),
    ),
    Module(
        "memsys/methods/cast/retrieval.py",
        "methods",
        ("x_fuse", "x_insert_at_slot", "x_union", "x_combine"),
        (
            "tests/test_cast.py",
            "tests/test_mutation_kills_methods.py",
        ),
    ),
    Module(
        "memsys/methods/fracom/retrieval.py",
        "methods",
        (
            "x_is_light",
            method("RetrievalOptions", "filtering_predicates"),
            "x_plausible_retrieval",
            "x_order",
            "x_match_arguments",
            "x_rank_every",
            "x_filter_by_predicate",
        ),
        (
            "tests/test_fracom.py",
            "tests/test_boundaries.py",
            "tests/test_mutation_kills_methods.py",
        ),
    ),
    Module(
        "memsys/methods/hingemem/retrieval.py",
        "methods",
        (
            method("QueryPlan", "ranked_elements"),
            method("QueryPlan", "has"),
            "x_person_matches",
            method("Routes", "all_edges"),
            "x_route",
            "x_candidate_set",
            method("RetrievalIndex", "match"),
            method("RetrievalIndex", "match_scores"),
            "x__overlaps",
            "x_adaptive_stop",
        ),
        (
            "tests/test_hingemem_formulas.py",
            "tests/test_hingemem.py",
            "tests/test_mutation_kills_hingemem.py",
        ),
    ),
    Module(
        "memsys/methods/esmem/retrieval.py",
        "methods",
        ("x_rank_events", "x_rank_flat", "x_rank_rest"),
        (
            "tests/test_esmem_retrieval.py",
            "tests/test_mutation_kills_methods.py",
        ),
    ),
    Module(
        "memsys/methods/secom/retrieval.py",
        "methods",
        ("x_rank_segments",),
        (
            "tests/test_secom_method.py",
            "tests/test_mutation_kills_methods.py",
        ),
    ),
)


@dataclass(frozen=True)
class Equivalent:
    """A surviving mutant no behaviour can tell from the original: its function, the line it
    changes (as the diff shows it, stripped) into what, and why nothing can see the change."""

    function: str
    before: str
    after: str
    reason: str


#: Survivors judged equivalent, matched by function and changed line (not by mutmut's number,
#: which moves when the function changes).
EQUIVALENT: tuple[Equivalent, ...] = (
    # benchmarks/metrics/qa.py
    Equivalent(
        "x_f1_set",
        "if not predicted or not gold:",
        "if not predicted and not gold:",
        "with one side empty the overlap is 0, and the next test returns the same 0.0",
    ),
    Equivalent(
        "x_bleu1",
        "if not hypothesis or not reference:",
        "if not hypothesis and not reference:",
        "nltk's sentence_bleu returns 0 for an empty hypothesis or reference, the guard's value",
    ),
    Equivalent(
        "x_normalize_locomo_answer",
        'text = text.replace(",", "").lower().translate(_ASCII_PUNCTUATION)',
        'text = text.replace("XX,XX", "").lower().translate(_ASCII_PUNCTUATION)',
        "the punctuation table right after drops commas too (only an answer holding the literal"
        " 'XX,XX' would differ)",
    ),
    # benchmarks/metrics/coverage.py
    *(
        Equivalent(
            "x_covers",
            "for start, token in enumerate(context_tokens[: len(context_tokens) - width + 1])",
            f"for start, token in enumerate(context_tokens[: len(context_tokens) {bound}])",
            "a window starting past len - width is shorter than the answer and never equals it:"
            " the bound only saves work",
        )
        for bound in ("+ width + 1", "- width + 2")
    ),
    # benchmarks/metrics/ranking.py
    *(
        Equivalent(
            "x_decided",
            'return int(metric.rsplit("@", 1)[1]) <= depth',
            f"return int(metric.{split}[1]) <= depth",
            "every metric name holds exactly one '@'",
        )
        for split in ('rsplit("@", )', 'split("@", 1)', 'rsplit("@", 2)')
    ),
    # benchmarks/metrics/segmentation.py
    Equivalent(
        "x__f1",
        "where=denominator > 0,",
        "where=denominator > 1,",
        "a denominator of 1 means one side has no such label, so TP = 0 and the F1 is the 0 of out",
    ),
    *(
        Equivalent(
            "x__flatten",
            f"{name} = np.fromiter(chain.from_iterable({v} for {pair} in pairs), np.int64, count=total)",
            f"{name} = np.fromiter(chain.from_iterable({v} for {pair} in pairs), np.int64, )",
            "count only preallocates: the labels number exactly total",
        )
        for name, v, pair in (("reference", "r", "r, _"), ("prediction", "p", "_, p"))
    ),
    *(
        Equivalent(
            function,
            f"{name} = np.bincount(dialogue, weights={weights}, minlength=n_dialogues){tail}",
            f"{name} = np.bincount(dialogue, weights={weights}, ){tail}",
            "every dialogue has a label and a window, so the last index is n - 1 and bincount"
            " is n long without minlength",
        )
        for function, name, weights, tail in (
            ("x__window_errors", "pk", "pk_errors", " / n_windows"),
            ("x__window_errors", "wd", "wd_errors", " / n_windows"),
            ("x_score_segmentation", "hits", "reference & prediction", ""),
            ("x_score_segmentation", "zero_hits", "both_zero", ""),
        )
    ),
    *(
        Equivalent(
            "x_score_segmentation",
            "both_zero = (1 - reference) & (1 - prediction)",
            f"both_zero = {mutated}",
            "labels are 0 or 1, and 2 & x = 0 for x in {0, 1}: 1 + label masks like 1 - label",
        )
        for mutated in ("(1 + reference) & (1 - prediction)", "(1 - reference) & (1 + prediction)")
    ),
    # benchmarks/metrics/stats.py
    *(
        Equivalent(
            "x__cluster_index",
            "return np.array([numbers.setdefault(label, len(numbers)) for label in clusters],"
            " dtype=np.intp)",
            "return np.array([numbers.setdefault(label, len(numbers)) for label in clusters],"
            f" {dtype})",
            "Python ints become int64, which is intp on a 64-bit platform",
        )
        for dtype in ("dtype=None", "")
    ),
    *(
        Equivalent(
            "x__resampled_means",
            f"{name} = rng.integers(0, {size}, size=(n_resamples, {size}))",
            f"{name} = rng.integers({size}, size=(n_resamples, {size}))",
            "Generator.integers(high) draws from [0, high) with the same stream as"
            " integers(0, high)",
        )
        for name, size in (("indices", "values.size"), ("drawn", "sums.size"))
    ),
    # benchmarks/answering/context.py
    Equivalent(
        "x_date_header",
        'clock = timestamp.strftime("%I:%M %p").lstrip("0").lower()',
        'clock = timestamp.strftime("%I:%M %P").lstrip("0").lower()',
        "glibc's %P is the lower-case am/pm that .lower() makes of %p",
    ),
    Equivalent(
        "x_date_header",
        'clock = timestamp.strftime("%I:%M %p").lstrip("0").lower()',
        'clock = timestamp.strftime("%I:%M %p").lstrip("XX0XX").lower()',
        "lstrip takes a set of characters, and a clock never opens with 'X'",
    ),
    *(
        Equivalent(
            "x_render_context",
            f"previous{annotation} = None",
            f'previous{annotation} = ""',
            "a date header is never empty, so no header equals the first previous either way",
        )
        for annotation in (": str | None", "")
    ),
    *(
        Equivalent(
            "x_render_context",
            'text = fit(tokens, item.text, room) if room > 0 else ""',
            f'text = fit(tokens, item.text, room) if {condition} else ""',
            "fit returns the empty text itself for a room of 0 or less",
        )
        for condition in ("(room > 0) or True", "room >= 0")
    ),
    Equivalent(
        "x_render_context",
        'turn for turn in item.turn_ids if (turn_texts or {}).get(turn, "\\0") in text',
        'turn for turn in item.turn_ids if (turn_texts or {}).get(turn, "XX\\0XX") in text',
        "neither marker occurs in a context's text (it holds no NUL)",
    ),
    Equivalent(
        "x_fit",
        "while limit > 0:",
        "while limit >= 0:",
        "a prefix of 0 tokens is the empty text, which fits: the return the loop falls to",
    ),
    # benchmarks/pipeline/runlog.py
    Equivalent(
        "xǁRecordLogǁappend",
        'line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\\n"',
        'line = json.dumps(record, ensure_ascii=None, sort_keys=True) + "\\n"',
        "json reads ensure_ascii as a truth value: None is False",
    ),
    Equivalent(
        "x__read_lines",
        'record = json.loads(line.decode("utf-8"))',
        'record = json.loads(line.decode("UTF-8"))',
        "codec names are case-insensitive",
    ),
    Equivalent(
        "xǁRecordLogǁappend",
        '_append_line(fd, self.path, line.encode("utf-8"))',
        '_append_line(fd, self.path, line.encode("UTF-8"))',
        "codec names are case-insensitive",
    ),
    Equivalent(
        "xǁRecordLogǁ__init__",
        "self.retryable = retryable or (lambda record: False)",
        "self.retryable = retryable or (lambda record: None)",
        "the default predicate's answer is only ever negated (not retryable(...))",
    ),
    Equivalent(
        "x__drop_partial_tail",
        "step = min(4096, position)",
        "step = min(4097, position)",
        "the chunk size of the backward search, not where the last newline is",
    ),
    Equivalent(
        "x__drop_partial_tail",
        "chunk = handle.read(step)",
        "chunk = handle.read(None)",
        "reading on to the end rescans bytes already known to hold no newline",
    ),
    Equivalent(
        "x__drop_partial_tail",
        "if end < size:",
        "if end <= size:",
        "truncating a file to its own size changes nothing",
    ),
    # memsys/methods/fracom/retrieval.py
    Equivalent(
        "x_rank_every",
        "scores = match_arguments(memory, arguments, embedder, options, cut=False).scores",
        "scores = match_arguments(memory, arguments, embedder, options, cut=None).scores",
        "match_arguments reads `not cut`: None and False alike",
    ),
    *(
        Equivalent(
            "x_rank_every",
            'return [index for index, _ in order(memory, scores, "idf")]',
            f"return [index for index, _ in order({arguments})]",
            "order reads the memory and the ranking name only for 'time'; anything else is idf",
        )
        for arguments in (
            'None, scores, "idf"',
            "memory, scores, None",
            'memory, scores, "XXidfXX"',
            'memory, scores, "IDF"',
        )
    ),
    # memsys/methods/hingemem/retrieval.py
    *(
        Equivalent(
            "xǁRetrievalIndexǁmatch",
            "names = plan.names.get(element, ())",
            f"names = plan.names.get(element, {default})",
            "a missing element's names are falsy either way and the element is skipped",
        )
        for default in ("None", "")
    ),
    Equivalent(
        "xǁRetrievalIndexǁmatch",
        'exact = {f"{element}:{normalize_name(element, name)}" for name in names}',
        'exact = {f"{element}:{normalize_name(None, name)}" for name in names}',
        "normalize_name sets only 'person' apart; locations and topics normalize alike",
    ),
    Equivalent(
        "xǁRetrievalIndexǁmatch",
        "matched[element] |= exact & set(nodes)",
        "matched[element] = exact & set(nodes)",
        "the element's set is still empty there, so = and |= agree",
    ),
    # memsys/methods/esmem/retrieval.py
    *(
        Equivalent(
            function,
            f'order = np.argsort(-{scores}, kind="stable")[:{cut}]',
            f'order = np.argsort(-{scores}, kind="STABLE")[:{cut}]',
            "numpy reads the sort kind case-insensitively",
        )
        for function, scores, cut in (
            ("x_rank_events", "anchor_scores", "anchor_k"),
            ("x_rank_flat", "summary_scores", "top_events"),
        )
    ),
    Equivalent(
        "x_rank_events",
        "if best is None or (-candidate[0], candidate[1]) < (-best[0], best[1]):",
        "if best is None or (-candidate[0], candidate[1]) <= (-best[0], best[1]):",
        "an equal (score, distance) would replace the entry with an equal one",
    ),
)

MODULES = {module.dotted: module for module in SCOPE}
KILLED = ("killed", "timeout", "caught by type check")


def mutmut_config() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]


def check_scope() -> None:
    """The modules here and mutmut's ``only_mutate`` agree, and every module's tests are in
    mutmut's test selection."""
    config = mutmut_config()
    listed = set(config["only_mutate"])
    here = {module.path for module in SCOPE}
    if listed != here:
        raise SystemExit(
            "scripts/mutation.py's SCOPE and pyproject.toml's [tool.mutmut] only_mutate differ: "
            f"only here {sorted(here - listed)}, only there {sorted(listed - here)}"
        )
    selected = set(config["pytest_add_cli_args_test_selection"])
    missing = sorted({test for module in SCOPE for test in module.tests} - selected)
    if missing:
        raise SystemExit(
            f"pyproject.toml's [tool.mutmut] pytest_add_cli_args_test_selection lacks {missing}"
        )


def environment() -> dict[str, str]:
    from benchmarks.data.paths import resolve_data_dir

    env = dict(os.environ)
    # The copy's own repository root is mutants/: the data directory must not be relative.
    env.setdefault("MEMBENCH_DATA", str(resolve_data_dir()))
    # Forked workers, two cores: one thread each.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_mutmut(modules: list[Module], max_children: int, fresh: bool) -> float:
    """Run the in-scope mutants of ``modules`` (in a child process: mutmut forks its workers
    from the process that runs it); the minutes it took."""
    if fresh:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    globs = [glob for module in modules for glob in module.globs()]
    command = [sys.executable, __file__, "--mutmut", str(max_children), *globs]
    start = time.monotonic()
    if sys.stdout.isatty():
        returncode = subprocess.run(command, cwd=ROOT, env=environment(), check=False).returncode
    else:
        returncode = run_logged(command)
    elapsed = time.monotonic() - start
    if returncode != 0:
        raise SystemExit(f"mutmut run exited {returncode}")
    return elapsed


def mutmut_run(max_children: int, globs: list[str]) -> None:
    """``mutmut run --max-children N GLOBS``, each mutant given only the tests of its module's
    :attr:`Module.tests` that call the mutated function (mutmut itself would give it every
    test of the selection that does: a packer mutant would rerun the pipeline tests of every
    method), fastest first."""
    os.chdir(ROOT)
    import mutmut.__main__ as mutmut_main
    from mutmut.state import state

    collect = mutmut_main.collect_or_load_stats

    def nearest_only(*args, **kwargs) -> None:
        collect(*args, **kwargs)
        tests_of = state().tests_by_mangled_function_name
        for function, tests in tests_of.items():
            module = MODULES.get(function.rpartition(".")[0])
            if module is not None:
                tests_of[function] = {test for test in tests if module.near(test)}

    def tests_for_mutant_names(names) -> set[str]:
        tests_of = state().tests_by_mangled_function_name
        return {
            test for name in names for test in tests_of.get(name.partition("__mutmut_")[0], set())
        }

    make_runner = mutmut_main.get_mutant_runner

    def fastest_first(*args, **kwargs):
        """Hand each mutant its tests fastest first: pytest stops at the first failure (-x),
        so a killed mutant is mostly done in milliseconds."""
        runner = make_runner(*args, **kwargs)
        submit = runner.submit

        def ordered(name: str, tests: list[str], *rest) -> None:
            durations = state().duration_by_test
            submit(name, sorted(tests, key=lambda test: (durations.get(test, 0.0), test)), *rest)

        runner.submit = ordered
        return runner

    mutmut_main.collect_or_load_stats = nearest_only
    mutmut_main.tests_for_mutant_names = tests_for_mutant_names
    mutmut_main.get_mutant_runner = fastest_first
    mutmut_main._run(tuple(globs), max_children)


#: The frames of mutmut's spinner, which opens each line it redraws in place.
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
#: What opens each line of mutmut's per-mutant verdicts.
VERDICTS = "🎉🙁🫥⏰🤔🔇🧙?"


def run_logged(command: list[str], every_s: float = 60.0) -> int:
    """Run mutmut with its output fit for a log file: the status line it redraws in place
    (``\r``) shown once every ``every_s`` seconds, every other line as it comes."""
    process = subprocess.Popen(
        command, cwd=ROOT, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert process.stdout is not None
    last_status = 0.0
    pending = ""
    for raw in iter(lambda: process.stdout.read1(65536), b""):
        pending += raw.decode("utf-8", errors="replace")
        *segments, pending = pending.replace("\r", "\n").split("\n")
        for segment in segments:
            text = segment.strip()
            if not text:
                continue
            if text[0] in SPINNER:
                now = time.monotonic()
                if now - last_status >= every_s:
                    print(f"  [{time.strftime('%H:%M:%S')}] {text.lstrip(SPINNER).strip()}")
                    last_status = now
                continue
            if text[0] in VERDICTS:
                continue  # mutmut's list of every mutant named: the report below has them
            print(segment, flush=True)
    if pending.strip():
        print(pending)
    return process.wait()


def results(module: Module) -> dict[str, str]:
    """Each in-scope mutant of ``module`` and its status, from mutmut's record of the last run."""
    from mutmut.stats import status_by_exit_code

    meta = ROOT / "mutants" / f"{module.path}.meta"
    if not meta.exists():
        return {}
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {
        name: status_by_exit_code[code] for name, code in codes.items() if module.in_scope(name)
    }


def diff_of(mutant: str, module: Module) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return get_diff_for_mutant(mutant, path=module.path)
    finally:
        os.chdir(cwd)


def changed_lines(diff: str) -> tuple[str, str]:
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+")]
    removed = [line for line in removed if not line.startswith("--")]
    added = [line for line in added if not line.startswith("++")]
    return " ".join(removed), " ".join(added)


def equivalent(mutant: str, diff: str) -> Equivalent | None:
    function = mutant.partition("__mutmut_")[0].rpartition(".")[2]
    before, after = changed_lines(diff)
    for entry in EQUIVALENT:
        if (entry.function, entry.before, entry.after) == (function, before, after):
            return entry
    return None


def report(modules: list[Module]) -> bool:
    """Print the scores and the survivors; whether every group reached its target with no
    unexplained survivor."""
    per_group: dict[str, Counter] = {}
    unexplained: list[tuple[str, str, str]] = []
    explained: list[tuple[str, Equivalent]] = []
    rows = []
    for module in modules:
        statuses = results(module)
        counts = Counter()
        for mutant, status in sorted(statuses.items(), key=lambda pair: natural(pair[0])):
            if status in KILLED:
                counts["killed"] += 1
                continue
            diff = diff_of(mutant, module)
            entry = equivalent(mutant, diff) if status == "survived" else None
            if entry is not None:
                counts["equivalent"] += 1
                explained.append((mutant, entry))
            else:
                counts["survived"] += 1
                unexplained.append((mutant, status, diff))
        counts["total"] = len(statuses)
        rows.append((module, counts))
        per_group.setdefault(module.group, Counter()).update(counts)

    print("\nMutation score per module (killed / mutants; equivalent survivors left out):")
    for module, counts in rows:
        print(f"  {module.path:42} {score_line(counts)}")
    print("\nPer group:")
    ok = True
    for group, counts in per_group.items():
        target = TARGETS[group]
        value = score(counts)
        passed = value is not None and value >= target
        ok &= passed
        verdict = "ok" if passed else "UNDER TARGET"
        print(f"  {group:42} {score_line(counts)}  target {target:.0f}%: {verdict}")
    if explained:
        print(f"\nEquivalent survivors ({len(explained)}):")
        for mutant, entry in explained:
            print(f"  {mutant}: {entry.reason}")
    if unexplained:
        ok = False
        print(f"\nSurviving mutants ({len(unexplained)}):")
        for mutant, status, diff in unexplained:
            print(f"\n# {mutant}: {status}")
            print(diff)
    return ok


def natural(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("__mutmut_")
    return stem, int(number) if number.isdigit() else 0


def score(counts: Counter) -> float | None:
    scored = counts["total"] - counts["equivalent"]
    return 100.0 * counts["killed"] / scored if scored else None


def score_line(counts: Counter) -> str:
    value = score(counts)
    shown = f"{value:5.1f}%" if value is not None else "  n/a "
    scored = counts["total"] - counts["equivalent"]
    return (
        f"{shown}  {counts['killed']:4d} / {scored:4d}"
        f"  ({counts['equivalent']} equivalent, {counts['survived']} surviving)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-children", type=int, default=2, help="processes running mutants")
    parser.add_argument("--only", action="append", default=[], help="modules whose path has this")
    parser.add_argument("--report", action="store_true", help="report the last run, run nothing")
    parser.add_argument(
        "--keep", action="store_true", help="reuse mutants/ (its recorded test stats) if present"
    )
    parser.add_argument("--mutmut", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mutmut:
        mutmut_run(int(args.mutmut[0]), args.mutmut[1:])
        return 0
    check_scope()
    modules = [m for m in SCOPE if not args.only or any(part in m.path for part in args.only)]
    if not modules:
        parser.error(f"no module in scope matches {args.only}")
    if not args.report:
        fresh = not args.keep and not args.only
        elapsed = run_mutmut(modules, args.max_children, fresh)
        print(f"\nmutmut ran {len(modules)} modules in {elapsed / 60:.1f} min")
    return 0 if report(modules) else 1


if __name__ == "__main__":
    sys.exit(main())
