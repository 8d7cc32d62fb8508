"""Table producers: the tables built from run records (written by :mod:`benchmarks.render`)."""
