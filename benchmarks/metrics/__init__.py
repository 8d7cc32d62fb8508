"""Scorers, one job per module, each defined exactly as METRICS.md states it.

``qa`` (f1_locomo, f1_set, bleu1), ``segmentation`` (Pk, WindowDiff, F1, score), ``retrieval``
(evidence recall, recall_any/all@k, ndcg_any@k) and ``stats`` (bootstrap CI and paired p-value,
resampling conversations).
"""
