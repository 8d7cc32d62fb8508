"""SeCom's prompts (papers/secom.txt Appendix A.1), in the project's words with the paper's
structure, keys, tags and requirements.

* Segmentation (§2.2, Figure 6; with a learned guidance, Figure 7), asked by :mod:`.segmenter`:
  :data:`SEGMENTATION_PROMPT`, whose ``{guidance}`` is :meth:`.reflection.Guidance.render`'s.
* Reflection (§2.2, Figure 8), asked by :mod:`.reflection`: :data:`REFLECTION_PROMPT`.

The prompts are data: each is part of what it produces' identity (the segmenter's config and the
learned guidance's store key).
"""

# From: Appendix A.1, Figure 6 ("Prompt for GPT-4 segmentation (zero-shot)"); ``{guidance}`` is
# where Figure 7 ("... (w/ reflection)") adds the learned rubric and examples.
SEGMENTATION_PROMPT = """\
# Instruction
## Context
- **Goal**: Split a multi-turn conversation between a user and a chatbot into units that are \
each about one topic. Consecutive user-bot exchanges on the same topic belong to the same \
segment; start a new segment where the topic changes.
- **Data**: The input is a sequence of user-bot exchanges separated by "\\n\\n". Each exchange \
is one turn of the conversation and begins with "[Exchange (Exchange Number)]: ".

### Output Format
- Write the segmentation in **JSONL (JSON Lines)** format: one dictionary per segment, where a \
segment is one or more consecutive exchanges on the same topic. Every dictionary has these keys:
  - **segment_id**: the index of the segment, counting from 0.
  - **start_exchange_number**: the number of the **first** exchange of the segment.
  - **end_exchange_number**: the number of the **last** exchange of the segment.
  - **num_exchanges**: how many exchanges the segment holds, i.e. \
**end_exchange_number** - **start_exchange_number** + 1.

An example of the expected output:
'''
<segmentation>
{{"segment_id": 0, "start_exchange_number": 0, "end_exchange_number": 5, "num_exchanges": 6}}
{{"segment_id": 1, "start_exchange_number": 6, "end_exchange_number": 8, "num_exchanges": 3}}
...
</segmentation>
'''
{guidance}
# Data
{exchanges}

# Question
## Produce a segmentation of the data above that satisfies all of these requirements:
- **No Missing Exchanges**: together, the segments cover every exchange of the conversation.
- **No Overlapping Exchanges**: consecutive segments share no exchange.
- **Accurate Counting**: the num_exchanges of all segments add up to the number of exchanges.
- Put the segmentation between the tags <segmentation></segmentation>.

# Output
Now give the segmentation, following the instructions above."""

# From: Appendix A.1, Figure 8 ("Prompt for generating segmentation guidance").
REFLECTION_PROMPT = """\
# Instruction
## Context
**Goal**: Compare a language model's predicted segmentation with the ground-truth segmentation \
made by expert annotators, for several human-bot conversations. Study the differences, reflect \
on what the prediction got wrong, and write one concise rubric item that will make future \
segmentations better. You also receive the rubric items learned from earlier examples.
1. Start by reading the existing rubric items and copying them.
2. Change, update or replace existing items where they do not explain the current errors.
3. Write only one new rubric item that would avoid the errors in these examples.
4. Choose the most representative example from the data and reflect on it.

**Data**: Each example shows one conversation twice, as predicted and as the ground truth; each \
segment starts with "Segment segment_id:". The existing rubric items come from earlier examples: \
change, update or even replace them if they do not explain the current mistakes.

## Requirements
- Add at most one new rubric item per reply, even though several examples are given.
- Keep the rubric user-centric and concise, with items that do not overlap.
- You may change, update or replace existing items when they do not cover the current errors.
- Put the rubric items between '<rubric></rubric>', one per line starting with "- ".
- Put the most representative example, with your reflection on it, between '<example></example>'.

An example of the expected output:
'''
<reflection>
Your reflection on the prediction errors, example by example.
</reflection>
<rubric>
- [the rubric items, with one and only one new item]
</rubric>
<example>
The most representative example, with your reflection on it.
</example>
'''

# Existing Rubric:
{rubric}

# Examples:
{examples}

# Output"""
