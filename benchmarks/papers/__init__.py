"""What the papers printed, read from ``results/published/``, below every table that quotes it:
:mod:`.segmentation` (the published segmentation rows) and :mod:`.models` (which harness backbone
serves a paper's model). The report comparing a grid with the papers is
:mod:`benchmarks.published`."""
