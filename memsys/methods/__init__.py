"""Memory methods and baselines: a module each, or for a paper method a package of one shape
(``cast/``, ``esmem/``, ``fracom/``, ``hingemem/``, ``secom/``: ``method.py`` with the class and its
options, ``memory.py``, ``retrieval.py``, ``prompts.py`` and the parts only it has); each with its
YAML in ``conf/method/`` and its card in ``docs/methods/``."""
