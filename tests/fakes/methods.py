"""Methods that misbehave, for the runner's failure tests: one that raises, kills its process,
or stalls on one conversation (:class:`FullHistory` everywhere else), and ones that use a service
while building a memory without declaring it.

Importable by name (``method._target_=fakes.methods.Misbehaving``) in worker processes too: they
are spawned with the parent's ``sys.path``, which pytest gives ``tests/``. The trouble comes from
the environment, not the config, so that a run can resume without it under the same identity.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memsys.methods.baselines import FullHistory, ItemMemory
from memsys.types import Conversation
from memsys.usage import PARSER

#: Its value: ``<raise|exit|stall>:<conversation id>``.
TROUBLE = "MEMBENCH_TEST_TROUBLE"


class Misbehaving(FullHistory):
    """Has the trouble that ``$MEMBENCH_TEST_TROUBLE`` names when constructing its conversation
    (``<trouble>:<conversation>``; ``exit-once:<conversation>:<marker file>`` exits only while
    the marker file does not exist, and creates it: a worker that dies once)."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        trouble, _, rest = os.environ.get(TROUBLE, "").partition(":")
        at, _, marker = rest.partition(":")
        if conversation.conversation_id == at:
            if trouble == "raise":
                raise ValueError(f"cannot construct {at}")
            if trouble == "exit" or (trouble == "exit-once" and not Path(marker).exists()):
                if marker:
                    Path(marker).touch()
                os._exit(3)  # as the kernel's OOM killer would leave it: no reply, no cleanup
            if trouble == "stall":
                time.sleep(120)
        return super().construct(conversation)


class AsksTheLLMUndeclared(FullHistory):
    """Asks the construction LLM while building, without setting ``uses_llm``: its memories
    would be keyed without the model that built them."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        assert self.services.backbone is not None, "run it with a backbone"
        self.services.backbone.complete([{"role": "user", "content": "Summarize: hello."}])
        return super().construct(conversation)


class ParsesUndeclared(FullHistory):
    """Parses its turns with spaCy while building, without declaring the parser."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        self.services.nlp.parse([turn.text for turn in conversation.sessions[0].turns])
        return super().construct(conversation)


class ParsesDeclared(ParsesUndeclared):
    """The same, declared: the parser's identity joins its memories' identity."""

    def construction_services(self) -> frozenset[str]:
        return super().construction_services() | {PARSER}
