"""The run pipeline: validated settings, the harness, workers and the kill-safe run log behind
``python -m benchmarks.pipeline.run`` (QA) and ``python -m benchmarks.pipeline.segment`` (segmentation)."""
