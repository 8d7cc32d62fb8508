"""Answer prompt templates: ``uniform`` (the tables' default), ``locomo`` and ``memory``.

Templates are data: each is a module constant, written in this project's words after the
source it follows, and :func:`answer_messages` only fills them in.

* ``uniform`` — one short-answer instruction for every category, so differences between rows
  come from memory, not from prompt engineering per category. It names the refusal phrase
  LoCoMo's scorer recognises, so unanswerable questions can be answered correctly.
* ``locomo`` — the dataset's own per-category QA prompts (snap-research/locomo): a short-phrase
  instruction; temporal questions are told to use the conversation's dates; adversarial
  questions become a two-option choice between "Not mentioned in the conversation" and the
  presupposed answer, in an order drawn from a seeded generator per question.
* ``memory`` — a mem0-style memories prompt: dated memories, resolve relative times against the
  memory's date, prefer the most recent of conflicting memories, answer in a few words.

When the question has a date (LongMemEval), every template states it as today's date.
"""

from __future__ import annotations

import hashlib
import random
from typing import Literal

from memsys.llm.types import Message
from memsys.types import Question

Template = Literal["uniform", "locomo", "memory"]
TEMPLATES: tuple[str, ...] = ("uniform", "locomo", "memory")
REFUSAL = "No information available"
NOT_MENTIONED = "Not mentioned in the conversation"

UNIFORM_SYSTEM = (
    "You answer questions about a long conversation, using only the memories you are given."
)
UNIFORM_USER = """Memories from the conversation, under the date each was said:
{context}

{today}Question: {question}
Answer with a short phrase of a few words, using the words of the memories where you can. \
If the memories do not contain the answer, reply "{refusal}".
Answer:"""

LOCOMO_USER = """{context}

{today}Based on the conversation above, write a short phrase that answers the question below. \
Use the exact words of the conversation whenever you can.

Question: {question}{hint} Short answer:"""
LOCOMO_TEMPORAL_HINT = " Use the dates of the conversation to give an approximate date."
LOCOMO_CHOICE = " Pick the correct answer: (a) {first} (b) {second}."

MEMORY_USER = """You are a memory assistant. Below are memories from a conversation between \
two people, each under the date and time it was recorded.

How to answer:
1. Read every memory and its date.
2. If the question is about time, work out the actual date from the memory's date \
(for example, "last year" in a memory dated 4 May 2022 means 2021).
3. If memories contradict each other, trust the most recent one.
4. Answer in five or six words.

Memories:
{context}

{today}Question: {question}
Answer:"""


def answer_messages(
    template: str, question: Question, context: str, *, seed: int = 0
) -> list[Message]:
    """The chat messages that ask the reader to answer ``question`` from ``context``."""
    today = (
        f"Today's date: {question.question_date:%Y/%m/%d (%a) %H:%M}\n"
        if question.question_date
        else ""
    )
    if template == "uniform":
        user = UNIFORM_USER.format(
            context=context, today=today, question=question.question, refusal=REFUSAL
        )
        return [{"role": "system", "content": UNIFORM_SYSTEM}, {"role": "user", "content": user}]
    if template == "locomo":
        hint = ""
        if question.category == "temporal":
            hint = LOCOMO_TEMPORAL_HINT
        elif question.category == "adversarial" and question.adversarial_answer is not None:
            first, second = adversarial_options(question, seed)
            hint = LOCOMO_CHOICE.format(first=first, second=second)
        user = LOCOMO_USER.format(
            context=context, today=today, question=question.question, hint=hint
        )
        return [{"role": "user", "content": user}]
    if template == "memory":
        return [
            {
                "role": "user",
                "content": MEMORY_USER.format(
                    context=context, today=today, question=question.question
                ),
            }
        ]
    raise ValueError(f"unknown answer template {template!r}; expected one of {TEMPLATES}")


def adversarial_options(question: Question, seed: int) -> tuple[str, str]:
    """The two choices for an adversarial item, in an order fixed by ``seed`` and the question.

    >>> q = Question("conv-26:q5", "conv-26", "Is Oscar Melanie's pet?", "Yes", "adversarial",
    ...              adversarial_answer="Yes")
    >>> sorted(adversarial_options(q, seed=0))
    ['Not mentioned in the conversation', 'Yes']
    """
    digest = hashlib.sha256(f"{seed}:{question.question_id}".encode()).digest()
    options = [NOT_MENTIONED, str(question.adversarial_answer)]
    random.Random(digest).shuffle(options)
    return options[0], options[1]
