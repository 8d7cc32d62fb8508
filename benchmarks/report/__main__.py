"""``python -m benchmarks.report``: run :func:`benchmarks.report.cli.main`."""

import sys

from benchmarks.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
