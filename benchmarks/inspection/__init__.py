"""Looking at runs question by question: :mod:`.diff` (two runs, question by question), the
inspector's :mod:`.model` (run files → plain data), :mod:`.page` (that data → one self-contained
HTML page, with ``inspector.js`` and ``inspector.css`` inline), :mod:`.index` and :mod:`.server`
(the same views served lazily). The command is :mod:`.inspect`."""
