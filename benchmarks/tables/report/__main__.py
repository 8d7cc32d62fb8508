"""``python -m benchmarks.tables.report``: run :func:`benchmarks.tables.report.cli.main`."""

import sys

from benchmarks.tables.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
