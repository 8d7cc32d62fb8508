"""Memory methods and baselines, one module each (a method = one module + one YAML)."""
