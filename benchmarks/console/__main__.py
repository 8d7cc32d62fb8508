"""``python -m benchmarks.console``: the ``memsys-bench`` command without its script."""

import sys

from benchmarks.console import main

if __name__ == "__main__":
    sys.exit(main())
