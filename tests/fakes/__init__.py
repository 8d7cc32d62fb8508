"""Stand-ins the tests use instead of real models, servers, methods and data.

- :mod:`fakes.llm`: LLM providers (scripted, batching, and rule-driven: replies from a function of
  the request, as canned replies are written), a backbone factory with fast retries, the check
  that concurrency changes nothing; a free port.
- :mod:`fakes.chat_server`: a scriptable OpenAI-compatible chat server with no model (fault
  injection, hostile replies, latency); ``scripts/bench_construction.py`` and
  ``scripts/bench_llm.py`` measure the HTTP path against it.
- :mod:`fakes.embed`: hashing sentence models standing in for MiniLM (one with its window).
- :mod:`fakes.segment`: hand-made dialogues and a tiny data directory for the segmenters.
- :mod:`fakes.dialogues`: small hand-written conversations for the method tests.
- :mod:`fakes.llmlingua`: a tiny LLMLingua-2 model built offline.
- :mod:`fakes.methods`: a method that misbehaves on one conversation (the runner's failures).
- :mod:`fakes.esmem`, :mod:`fakes.hingemem`, :mod:`fakes.libraries` (Mem0 and LangMem): what the
  split test files of one method share (its hand-written conversations, scripted replies,
  services).

Imported as ``fakes.<module>``: ``tests/`` has no ``__init__.py``, so pytest puts it on
``sys.path`` and ``fakes`` is a top-level package there. Worker processes get the same path; a
CLI started in a subprocess needs ``PYTHONPATH=tests`` to find ``fakes.methods.Misbehaving``.
Helpers that compose configs and read run folders are not fakes: ``tests/*_helpers.py``.
"""
