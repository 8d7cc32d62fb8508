"""Memory methods and baselines: a module each, or a package where a method has several parts
(``cast/``, ``fracom/``, ``secom/``); each with its YAML in ``conf/method/`` and its card in
``docs/methods/``."""
