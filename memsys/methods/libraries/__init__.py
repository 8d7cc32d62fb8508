"""Published memory libraries behind the harness's ``construct`` / ``retrieve`` interface.

Each library builds its memory with its own prompts and update logic, its LLM requests going
through the run's construction backbone (:mod:`memsys.llm.bridge`) and its embeddings through the
harness embedder. The libraries are optional extras (``pip install memsys-bench[mem0]``,
``[langmem]``); nothing here imports them until a memory is built or loaded.
"""
