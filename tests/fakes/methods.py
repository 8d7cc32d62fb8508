"""A method that misbehaves on one conversation, for the runner's failure tests: it raises,
kills its process, or stalls there, and is :class:`FullHistory` everywhere else.

Importable by name (``method._target_=fakes.methods.Misbehaving``) in worker processes too: they
are spawned with the parent's ``sys.path``, which pytest gives ``tests/``. The trouble comes from
the environment, not the config, so that a run can resume without it under the same identity.
"""

from __future__ import annotations

import os
import time

from memsys.methods.baselines import FullHistory, ItemMemory
from memsys.types import Conversation

#: Its value: ``<raise|exit|stall>:<conversation id>``.
TROUBLE = "MEMBENCH_TEST_TROUBLE"


class Misbehaving(FullHistory):
    """Has the trouble that ``$MEMBENCH_TEST_TROUBLE`` names when constructing its conversation."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        trouble, _, at = os.environ.get(TROUBLE, "").partition(":")
        if conversation.conversation_id == at:
            if trouble == "raise":
                raise ValueError(f"cannot construct {at}")
            if trouble == "exit":
                os._exit(3)  # as the kernel's OOM killer would leave it: no reply, no cleanup
            if trouble == "stall":
                time.sleep(120)
        return super().construct(conversation)
