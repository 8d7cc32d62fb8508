"""The per-question inspector's pieces: :mod:`.model` (run files → plain data) and :mod:`.page`
(that data → one self-contained HTML page, with ``inspector.js`` and ``inspector.css`` inline).
The command is :mod:`benchmarks.tables.inspect`."""
