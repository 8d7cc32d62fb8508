"""``python -m benchmarks.published``: run :func:`benchmarks.published.cli.main`."""

import sys

from benchmarks.published.cli import main

if __name__ == "__main__":
    sys.exit(main())
