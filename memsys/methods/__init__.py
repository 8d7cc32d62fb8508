"""Memory methods and baselines, one module each (a method = one module + one YAML)."""

#: How the papers spell a method whose name is not a valid class name, keyed by class name
#: (tables print these; every other method is shown by its class name).
PAPER_NAMES: dict[str, str] = {"ESMem": "ES-Mem"}
