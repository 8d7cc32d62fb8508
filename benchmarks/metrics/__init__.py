"""Scorers, one job per module, each defined exactly as METRICS.md states it.

``qa`` (f1_locomo, f1_set, bleu1), ``segmentation`` (Pk, WindowDiff, F1, score), ``retrieval``
(evidence recall, recall_any/all@k, ndcg_any@k), ``ranking`` (LongMemEval's session and turn
rankings of a method's items, scored with ``retrieval``'s @k metrics) and ``stats`` (bootstrap CI
and paired p-value, resampling conversations).
"""
