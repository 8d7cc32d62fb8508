"""``python -m benchmarks.plan``: run :func:`benchmarks.plan.cli.main`."""

import sys

from benchmarks.plan.cli import main

if __name__ == "__main__":
    sys.exit(main())
