"""Checks that a run or a table still says what it said: the CI regression, the re-ask report and
the reproduction check."""
