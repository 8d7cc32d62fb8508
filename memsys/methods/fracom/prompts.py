"""FraCom's one prompt, the Fragment prompt (Appendix K, Figure 9), and the schema of its reply.

The paper's prompt takes the whole history and asks for lines of
``{"Predicate": ..., "Argument": ...}``; the harness asks once per utterance and wraps the lines
in one JSON object so that the reply can be schema-constrained (``docs/methods/fracom.md`` lists
both deviations and why). The bounds below cap a small model's runaway replies; the card
justifies each number. Changing any of them changes what ``extraction: llm`` builds: bump
:attr:`~memsys.methods.fracom.FraCom.construction_version` with it.
"""

from __future__ import annotations

from typing import Any

#: Figure 9's instruction in the project's words; ``{speaker}`` and ``{utterance}`` are filled in.
# From: Appendix K, Figure 9 ("Prompt for Propositional Representation"), also quoted in §3.1.
FRAGMENT_PROMPT = """Here is one utterance from a conversation.
{speaker}: {utterance}

Extract the basic propositions (predicate, arguments) of each sentence in it. In the theory of \
propositional representation a predicate is usually a verb, an adjective or another word of \
relation, and the arguments are usually nouns; the predicate states how the arguments it \
connects are related. Take every predicate and argument from the utterance itself, writing \
{speaker} for "I" or "me". Reply with JSON only and no reasoning, in this form:
{{"propositions": [{{"Predicate": "freed", "Argument": ["Lincoln", "slaves"]}}, \
{{"Predicate": "bitter", "Argument": ["war"]}}]}}"""

#: Propositions kept from one reply: about 2.4 times the lite extractor's mean per LoCoMo turn
#: (2,212 propositions from 419 turns of conv-26, ``results/graph_stats.md``).
MAX_PROPOSITIONS = 12
#: Arguments of one proposition: Figure 9's largest example has three.
MAX_ARGUMENTS = 6
#: Characters of a predicate (a verb or adjective, with a particle or preposition).
MAX_PREDICATE_CHARS = 60
#: Characters of an argument (a noun phrase; a longer one is a clause, not a node).
MAX_ARGUMENT_CHARS = 80
#: Reply budget of one utterance: a full reply of :data:`MAX_PROPOSITIONS` propositions takes 246
#: tokens with two one-word arguments each and 306 with three arguments of one to three words
#: (SmolLM2's tokenizer); a reply cut off here fails to parse and is retried
#: (:func:`memsys.llm.structured.ask_json_many`).
FRAGMENT_MAX_TOKENS = 320

#: The reply of :data:`FRAGMENT_PROMPT`.
FRAGMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "propositions": {
            "type": "array",
            "maxItems": MAX_PROPOSITIONS,
            "items": {
                "type": "object",
                "properties": {
                    "Predicate": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_PREDICATE_CHARS,
                    },
                    "Argument": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_ARGUMENTS,
                        "items": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_ARGUMENT_CHARS,
                        },
                    },
                },
                "required": ["Predicate", "Argument"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["propositions"],
    "additionalProperties": False,
}
