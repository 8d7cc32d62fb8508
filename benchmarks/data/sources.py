"""Where every data file comes from: public GitHub repositories pinned to a commit, what ``make
data`` downloads (each file's provenance: the data folder's README). The LongMemEval archives
are packed here from per-question files and verified member by member."""

from __future__ import annotations

from dataclasses import dataclass

RAW_BASE = "https://raw.githubusercontent.com"

LOCOMO = "snap-research/LoCoMo/3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
TADAM = "xyease/TADAM/683c9e971bef06a93037cf8481e668415f743f04"
DTS_HUB = "lxing532/Dialogue-Topic-Segmenter/6e93de6dff4c6f6e138002f8ec067ddd3a5a549c"
SUPERDIALSEG_MIRROR = (
    "milteam/unsupervised-summary-based-segmentation/38db53b58524322278ffc16b1819b5e6b249e089"
)
TIAGE = "HuiyuanXie/tiage/08f98dfa066a5f2fba2bbd1d6ed6ee9a783a2b1d"
MEMORIA = "hussainzs/Memoria/959167b875ddc992661da1cf1a3263821e6831ed"
LONGMEMEVAL_CODE = "xiaowu0162/LongMemEval/9e0b455f4ef0e2ab8f2e582289761153549043fc"
#: The last commit before mem0 retired its ``evaluation/`` folder.
MEM0_CODE = "mem0ai/mem0/b3ede5b7c0ac0e847b03786a603c107ac943b3ee"
#: The public audit of LoCoMo's answer key (:mod:`benchmarks.data.locomo_audit`).
LOCOMO_AUDIT = "dial481/locomo-audit/9493fb4b4af4256ed17a18e8fd0b3cfdeec29539"


@dataclass(frozen=True)
class Source:
    """One data file: its place in the data folder and its path under ``RAW_BASE``."""

    local: str
    remote: str


#: LongMemEval's QA judge (``get_anscheck_prompt``) and mem0's (``ACCURACY_PROMPT``).
LONGMEMEVAL_JUDGE = Source(
    "evaluators/longmemeval/evaluate_qa.py", f"{LONGMEMEVAL_CODE}/src/evaluation/evaluate_qa.py"
)
MEM0_JUDGE = Source("evaluators/mem0/llm_judge.py", f"{MEM0_CODE}/evaluation/metrics/llm_judge.py")
EVALUATOR_FILES: tuple[Source, ...] = (
    LONGMEMEVAL_JUDGE,
    Source(
        "evaluators/longmemeval/eval_utils.py", f"{LONGMEMEVAL_CODE}/src/retrieval/eval_utils.py"
    ),
    Source(
        "evaluators/longmemeval/run_retrieval.py",
        f"{LONGMEMEVAL_CODE}/src/retrieval/run_retrieval.py",
    ),
    MEM0_JUDGE,
)


def _tiage(name: str) -> Source:
    split = name.split("_")[1]
    return Source(f"tiage/official/{name}", f"{TIAGE}/data/personachat/anno/{split}/{name}")


PLAIN_FILES: tuple[Source, ...] = (
    Source("locomo/locomo10.json", f"{LOCOMO}/data/locomo10.json"),
    *(
        Source(f"locomo/audit/{name}", f"{LOCOMO_AUDIT}/audit/{name}")
        for name in [f"errors_conv_{index}.json" for index in range(10)]
    ),
    Source(
        "dialseg711/tadam/en_dataset_reference_2.txt",
        f"{TADAM}/examples/DATASET/en/en_dataset_reference_2.txt",
    ),
    Source(
        "dialseg711/tadam/document_en_dataset_2.json",
        f"{TADAM}/examples/DATASET/en/document_en_dataset_2.json",
    ),
    Source(
        "dialseg711/superdialseg_release/segmentation_file_test.txt",
        f"{SUPERDIALSEG_MIRROR}/lib/data/dialseg711/segmentation_file_test.txt",
    ),
    Source("dialseg711/dts_hub/dialseg_711.json", f"{DTS_HUB}/data/eval/dialseg_711.json"),
    Source("tiage/dts_hub/tiage.json", f"{DTS_HUB}/data/eval/tiage.json"),
    *(
        _tiage(name)
        for name in (
            "anno_train.json",
            "anno_dev.json",
            "anno_test.json",
            "anno_train_all_dialogs.tsv",
            "anno_test_dialogs.tsv",
            "anno_train_dialogs_single_line.tsv",
            "anno_dev_dialogs_single_line.tsv",
            "anno_test_dialogs_single_line.tsv",
        )
    ),
    *(
        Source(
            f"tiage/superdialseg_release/segmentation_file_{split}.json",
            f"{SUPERDIALSEG_MIRROR}/lib/data/tiage/segmentation_file_{split}.json",
        )
        for split in ("train", "validation", "test")
    ),
    *(
        Source(f"superdialseg/superseg/{name}", f"{SUPERDIALSEG_MIRROR}/lib/data/superseg/{name}")
        for name in ("segmentation_file_test.txt", "segmentation_file_validation.txt", "README.md")
    ),
    *EVALUATOR_FILES,
)

#: Per-question LongMemEval files, ``<n_sessions>_<question_id>.json``, oracle and S alike.
LONGMEMEVAL_MEMBERS = f"{MEMORIA}/evaluations/data/lme_jsons"
#: The verified copy of the S item that was never committed with the others.
LONGMEMEVAL_RECONSTRUCTED = f"{MEMORIA}/evaluations/lme_jsons_verified/62_7e00a6cb.json"
