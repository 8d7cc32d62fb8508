"""QA answer scorers: LoCoMo's own F1, the A-Mem / mem0 set F1 and BLEU-1, and their means.

Published memory papers report "F1" from at least three incompatible codes, so each definition
here is implemented exactly as METRICS.md states it and carries its own name; a table says which
one it uses. Run ``python -m benchmarks.metrics.qa --pred PRED.jsonl`` for all three at once;
``--judge PROTOCOL`` grades the answers with the harness's LLM judge instead
(:mod:`benchmarks.metrics.judged_answers`).

Readings taken where the sources leave a choice:

* ``bleu1`` cannot use nltk's ``word_tokenize`` offline (it needs punkt data). It lowercases,
  splits sentences after ``.``/``!``/``?`` followed by whitespace (punkt's decision for every
  word that is not an abbreviation), and tokenizes each sentence with nltk's
  ``NLTKWordTokenizer``, the word tokenizer ``word_tokenize`` itself applies per sentence.
  Known divergence: after an abbreviation ("mr. smith") punkt keeps ``mr.`` whole, we split it.
* For category-5 (adversarial) items the lexical scorers compare against ``adversarial_answer``
  when the record has one, else against ``answer`` (A-Mem's reference; in :mod:`memsys.types`
  ``Question.answer`` already holds it); ``f1_locomo`` scores them by the refusal phrases, as
  LoCoMo's own evaluation does. Whether those items enter the overall means is the
  ``adversarial`` option, applied to every metric alike so that an overall column always
  averages one set of questions; they are always reported per category.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nltk.stem import PorterStemmer
from nltk.tokenize import NLTKWordTokenizer
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from benchmarks.metrics.jsonl import InputError, require
from benchmarks.metrics.judge import DEFAULT_JUDGE_BACKBONE
from benchmarks.metrics.judge import PROTOCOLS as JUDGE_PROTOCOLS
from benchmarks.metrics.predictions import ADVERSARIAL, read_lines_by_id, text_field
from memsys.types import LOCOMO_CATEGORIES

AdversarialPolicy = Literal["exclude", "include"]
ADVERSARIAL_POLICIES: tuple[AdversarialPolicy, ...] = ("exclude", "include")
#: A category-5 prediction scores 1 under ``f1_locomo`` when it contains one of these.
REFUSAL_PHRASES = ("no information available", "not mentioned")
METRIC_NAMES = ("f1_locomo", "f1_set", "bleu1")
#: What ``--dataset`` names for judged answers: LoCoMo, or a LongMemEval variant.
JUDGED_DATASETS = ("locomo", "longmemeval_s", "longmemeval_oracle")

_DROPPED_WORDS = re.compile(r"\b(a|an|the|and)\b")
_ASCII_PUNCTUATION = str.maketrans("", "", string.punctuation)
_SIMPLE_SEPARATORS = str.maketrans(".,!?", "    ")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
STEMMER = PorterStemmer()
_WORD_TOKENIZER = NLTKWordTokenizer()
_SMOOTHING = SmoothingFunction().method1


def normalize_category(category: str | int) -> str:
    """Map LoCoMo's integer codes to names; names (LoCoMo or LongMemEval) pass through.

    >>> normalize_category(1), normalize_category("temporal_reasoning")
    ('multi_hop', 'temporal_reasoning')
    """
    if isinstance(category, bool) or not isinstance(category, int | str):
        raise ValueError(f"category must be a LoCoMo code 1..5 or a name, got {category!r}")
    if isinstance(category, int):
        if category not in LOCOMO_CATEGORIES:
            raise ValueError(f"unknown LoCoMo category code {category} (expected 1..5)")
        return LOCOMO_CATEGORIES[category]
    return category


def normalize_locomo_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer``: commas, case, ASCII punctuation, a/an/the/and, spacing.

    >>> normalize_locomo_answer("The cat, and a DOG!")
    'cat dog'
    """
    text = text.replace(",", "").lower().translate(_ASCII_PUNCTUATION)
    return " ".join(_DROPPED_WORDS.sub(" ", text).split())


def _locomo_token_f1(prediction: str, answer: str) -> float:
    """F1 over Porter-stemmed token multisets; LoCoMo's ``f1_score``."""
    predicted = [STEMMER.stem(word) for word in normalize_locomo_answer(prediction).split()]
    gold = [STEMMER.stem(word) for word in normalize_locomo_answer(answer).split()]
    overlap = sum((Counter(predicted) & Counter(gold)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_locomo(prediction: str, answer: str | int, category: str | int) -> float:
    """LoCoMo's own QA score (task_eval/evaluation.py), category rules included.

    Args:
        prediction: the reader's answer.
        answer: the gold answer; ints (some LoCoMo / LongMemEval answers) are ``str()``-ed.
        category: a LoCoMo code 1..5 or a normalized name. ``multi_hop`` averages, over the
            comma-separated gold parts, the best F1 against any comma-separated prediction part;
            ``open_domain`` keeps the gold before the first ``;``; ``adversarial`` is 1.0 when
            the lowercased prediction contains a :data:`REFUSAL_PHRASES` entry, else 0.0
            (the gold is not used); every other category, LongMemEval's included, is plain F1.

    Returns:
        A score in [0, 1].

    >>> f1_locomo("The cat sat", "a cat sat down", "single_hop")
    0.8
    >>> f1_locomo("Paris, Rome", "Rome, Oslo", 1)
    0.5
    >>> f1_locomo("hiking", "hiking; walking in the woods", "open_domain")
    1.0
    >>> f1_locomo("That is not mentioned in the conversation.", "a red car", 5)
    1.0
    """
    name = normalize_category(category)
    if name == ADVERSARIAL:
        lowered = prediction.lower()
        return float(any(phrase in lowered for phrase in REFUSAL_PHRASES))
    answer = str(answer)
    if name == "multi_hop":
        predicted_parts = [part.strip() for part in prediction.split(",")]
        gold_parts = [part.strip() for part in answer.split(",")]
        best = [max(_locomo_token_f1(p, gold) for p in predicted_parts) for gold in gold_parts]
        return sum(best) / len(best)
    if name == "open_domain":
        answer = answer.split(";")[0].strip()
    return _locomo_token_f1(prediction, answer)


def _simple_tokens(text: str) -> set[str]:
    """A-Mem's ``simple_tokenize``: lowercase, ``.,!?`` to spaces, whitespace split; as a set."""
    return set(text.lower().translate(_SIMPLE_SEPARATORS).split())


def f1_set(prediction: str, answer: str | int) -> float:
    """The A-Mem / mem0 lexical F1: token *sets*, no stemming, no article removal.

    Args:
        prediction: the reader's answer.
        answer: the gold answer; ints are ``str()``-ed.

    Returns:
        F1 in [0, 1]; 0.0 when either side has no tokens.

    >>> f1_set("The cat sat. The cat!", "the cat sat down")
    0.8571428571428571
    >>> f1_set("", "anything")
    0.0
    """
    predicted = _simple_tokens(prediction)
    gold = _simple_tokens(str(answer))
    if not predicted or not gold:
        return 0.0
    overlap = len(predicted & gold)
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def _word_tokens(text: str) -> list[str]:
    """Lowercased word tokens as ``word_tokenize`` would give them (see the module docstring)."""
    sentences = SENTENCE_END.split(text.lower())
    return [token for sentence in sentences for token in _WORD_TOKENIZER.tokenize(sentence)]


def bleu1(prediction: str, answer: str | int) -> float:
    """Sentence BLEU-1 with smoothing method 1 (Chen & Cherry), as A-Mem and mem0 compute it.

    Tokens come from nltk's ``NLTKWordTokenizer`` after a punkt-like sentence split on
    lowercased text (``word_tokenize`` needs punkt data we do not have; details in the module
    docstring).

    Args:
        prediction: the reader's answer (the hypothesis).
        answer: the gold answer (the single reference); ints are ``str()``-ed.

    Returns:
        BLEU-1 in [0, 1]; 0.0 when either side has no tokens (nltk is not called then).

    >>> bleu1("Paris in May.", "paris")
    0.25
    >>> round(bleu1("paris", "Paris in May."), 4)
    0.0498
    >>> bleu1("", "paris")
    0.0
    """
    hypothesis = _word_tokens(prediction)
    reference = _word_tokens(str(answer))
    if not hypothesis or not reference:
        return 0.0
    return float(
        sentence_bleu([reference], hypothesis, weights=(1, 0, 0, 0), smoothing_function=_SMOOTHING)
    )


@dataclass(frozen=True, slots=True)
class QAPrediction:
    """One scored question: the reader's prediction beside its gold answer(s).

    ``category`` is normalized (see :func:`normalize_category`); ``adversarial_answer`` is the
    lexical reference of a category-5 item when the data keeps it apart from ``answer``.
    """

    question_id: str
    category: str
    prediction: str
    answer: str
    adversarial_answer: str | None = None

    @property
    def lexical_reference(self) -> str:
        """What ``f1_set`` and ``bleu1`` compare against (A-Mem's choice for category 5)."""
        if self.category == ADVERSARIAL and self.adversarial_answer is not None:
            return self.adversarial_answer
        return self.answer


def score_prediction(item: QAPrediction) -> dict[str, float]:
    """All three scores of one question, keyed by :data:`METRIC_NAMES`.

    Args:
        item: the prediction and its gold answer.

    Returns:
        ``{"f1_locomo": ..., "f1_set": ..., "bleu1": ...}``.

    >>> score_prediction(QAPrediction("q1", "single_hop", "in May", "May"))
    {'f1_locomo': 0.6666666666666666, 'f1_set': 0.6666666666666666, 'bleu1': 0.5}
    """
    return {
        "f1_locomo": f1_locomo(item.prediction, item.answer, item.category),
        "f1_set": f1_set(item.prediction, item.lexical_reference),
        "bleu1": bleu1(item.prediction, item.lexical_reference),
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_predictions(
    items: Sequence[QAPrediction], *, adversarial: AdversarialPolicy = "exclude"
) -> dict[str, Any]:
    """Overall and per-category means of every QA metric.

    Args:
        items: the scored questions.
        adversarial: ``"exclude"`` (mem0, the default table) leaves category-5 items out of
            every overall mean; ``"include"`` (A-Mem; LoCoMo's own evaluation) keeps them.
            Per-category means always list them.

    Returns:
        ``{"adversarial": policy, "n": questions, <metric>: {"mean", "n", "per_category":
        {category: {"mean", "n"}}}}`` for each metric; a mean over no questions is ``None``.

    >>> items = [QAPrediction("q1", "temporal", "May", "May"),
    ...          QAPrediction("q2", "adversarial", "Not mentioned.", "red", "red")]
    >>> report = score_predictions(items)
    >>> report["f1_set"]["mean"], report["f1_set"]["n"], report["f1_locomo"]["mean"]
    (1.0, 1, 1.0)
    >>> report["f1_set"]["per_category"]["adversarial"]
    {'mean': 0.0, 'n': 1}
    """
    if adversarial not in ADVERSARIAL_POLICIES:
        raise ValueError(f"adversarial must be one of {ADVERSARIAL_POLICIES}, got {adversarial!r}")
    overall: dict[str, list[float]] = defaultdict(list)
    per_category: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        excluded = adversarial == "exclude" and item.category == ADVERSARIAL
        for metric, value in score_prediction(item).items():
            per_category[metric][item.category].append(value)
            if not excluded:
                overall[metric].append(value)
    report: dict[str, Any] = {"adversarial": adversarial, "n": len(items)}
    for metric in METRIC_NAMES:
        report[metric] = {
            "mean": _mean(overall[metric]),
            "n": len(overall[metric]),
            "per_category": {
                category: {"mean": _mean(values), "n": len(values)}
                for category, values in sorted(per_category[metric].items())
            },
        }
    return report


def read_predictions(path: Path | str) -> list[QAPrediction]:
    """Read a prediction JSONL file, one question per line.

    Args:
        path: lines ``{"id", "category", "prediction", "answer"[, "adversarial_answer"]}``
            (``question_id`` in place of ``id``, as a run's ``predictions.jsonl`` has it);
            ``category`` is a LoCoMo code 1..5 or a normalized name. A category-5 line may
            have ``adversarial_answer`` and no ``answer``, as in LoCoMo's own file.

    Returns:
        The predictions in file order.

    Raises:
        InputError: a line is malformed, misses a key, or repeats an id; the message names the
            file and line.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
    ...     _ = f.write('{"id": "q1", "category": 2, "prediction": "2022", "answer": 2022}\\n')
    >>> read_predictions(f.name)
    [QAPrediction(question_id='q1', category='temporal', prediction='2022', answer='2022', adversarial_answer=None)]
    >>> os.remove(f.name)
    """
    path = Path(path)
    items: list[QAPrediction] = []
    for line, question_id, record in read_lines_by_id(path):
        try:
            category = normalize_category(require(record, "category", path, line))
        except ValueError as exc:
            raise InputError(path, line, str(exc)) from None
        adversarial_answer = None
        if record.get("adversarial_answer") is not None:
            adversarial_answer = text_field(record, "adversarial_answer", path, line)
        # LoCoMo's own category-5 rows carry only ``adversarial_answer``: it is their gold.
        lone_adversarial = category == ADVERSARIAL and record.get("answer") is None
        items.append(
            QAPrediction(
                question_id=question_id,
                category=category,
                prediction=text_field(record, "prediction", path, line),
                answer=adversarial_answer
                if lone_adversarial and adversarial_answer is not None
                else text_field(record, "answer", path, line),
                adversarial_answer=adversarial_answer,
            )
        )
    return items


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print one JSON object with every QA metric's overall and per-category means, or with
    ``--judge``, judge accuracy (:mod:`benchmarks.metrics.judged_answers`)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.metrics.qa", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pred", required=True, type=Path, help="prediction JSONL file")
    parser.add_argument(
        "--adversarial",
        choices=ADVERSARIAL_POLICIES,
        default="exclude",
        help="category-5 items in the overall means, lexical or judged (default: exclude, as mem0)",
    )
    judging = parser.add_argument_group("judged answers (with --judge)")
    judging.add_argument(
        "--judge", choices=JUDGE_PROTOCOLS, help="grade every answer under this judge protocol"
    )
    judging.add_argument(
        "--judge-backbone",
        help=f"the judge model: a conf/backbone/ config name (default: {DEFAULT_JUDGE_BACKBONE})",
    )
    judging.add_argument(
        "--dataset",
        choices=JUDGED_DATASETS,
        help="take question, answer and category from this dataset by id "
        "(LongMemEval's hypothesis files: {question_id, hypothesis})",
    )
    judging.add_argument("--out", type=Path, help="write one JSON line per verdict here")
    judging.add_argument(
        "overrides",
        nargs="*",
        metavar="OVERRIDE",
        help="Hydra overrides of the judge's config, e.g. backbone.provider.model=NAME",
    )
    args = parser.parse_args(argv)
    if args.judge is not None:
        # Imported here: the lexical scores need neither Hydra nor a model.
        from benchmarks.metrics import judged_answers

        return judged_answers.run(args)
    given = [
        option
        for option, value in (
            ("--judge-backbone", args.judge_backbone),
            ("--dataset", args.dataset),
            ("--out", args.out),
            ("OVERRIDE", args.overrides),
        )
        if value
    ]
    if given:
        parser.error(f"{', '.join(given)} need --judge")
    try:
        items = read_predictions(args.pred)
    except (InputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(score_predictions(items, adversarial=args.adversarial), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
