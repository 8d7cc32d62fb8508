"""Words that carry topic: a regex tokenizer, a stop-word list, Porter stems, keywords.

TextTiling compares blocks by their content words, and ES-Mem's lite mode needs per-turn
keywords for its event summaries; both need the same notion of a content word, so it lives here.
Everything works offline: the tokenizer is one regular expression, the stop-word list is written
out below (English function words plus the fillers of chat transcripts: "lol", "yeah", "um"),
and nltk's Porter stemmer needs no data files.

The datasets are lowercased and pre-tokenized ("do n't", "i 'm"); the tokenizer keeps
contraction tails as their own tokens ("n't", "'m" -> "m"), which the stop-word list removes.
"""

from __future__ import annotations

import re
from collections import Counter

from nltk.stem.porter import PorterStemmer

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

_STOP_WORD_TEXT = """
    a about above after again against all almost also am an and any anyone anything are aren't
    around as at be because been before being below between both but by can can't cannot could
    couldn't did didn't do does doesn't doing don't done down during each either else enough even
    ever every few for from further get gets getting go goes going gone got gotta had hadn't has
    hasn't have haven't having he he's her here hers herself him himself his how i i'd i'll i'm
    i've if in into is isn't it it's its itself just let let's like likes lot lots me might mine
    more most much must my myself n't need no nor not now of off often oh ok okay on once one only
    or other others our ours ourselves out over own perhaps please pretty quite rather re really
    right same say says said see seem seems shall she she's should shouldn't since so some
    someone something sometimes soon still such sure than that that's the their theirs them
    themselves then there there's these they they're thing things think this those though through
    thus to too toward under until up upon us use used very want wants was wasn't way we we're
    we've well went were weren't what what's when where which while who who's whom whose why will
    with won't would wouldn't yes yet you you'd you'll you're you've your yours yourself
    yourselves ll ve re d m s t
    hi hey hello bye goodbye thanks thank yeah yea yep nope nah lol haha hahaha hmm hm um uh ah
    aw wow cool nice great good awesome alright gonna wanna kinda sorta dont im ive youre
    thats cant wont didnt doesnt isnt
"""
#: Function words, pronouns, auxiliaries, and chat fillers that say nothing about the topic.
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORD_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens (letters and digits, an apostrophe tail kept with its word).

    >>> tokenize("I'm into Cats, dogs & 1000 hats!")
    ["i'm", 'into', 'cats', 'dogs', '1000', 'hats']
    """
    return _TOKEN.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Tokens that are neither stop words nor single characters, in order, with repeats.

    >>> content_words("hey ! do you love cats ? i have two cats")
    ['love', 'cats', 'two', 'cats']
    """
    return [token for token in tokenize(text) if len(token) > 1 and token not in STOP_WORDS]


def keywords(text: str, limit: int = 5) -> list[str]:
    """Up to ``limit`` distinct content words, most frequent first (ties: first seen first).

    >>> keywords("i love cats . my cats love hats , big hats", limit=3)
    ['love', 'cats', 'hats']
    """
    counts = Counter(content_words(text))
    return [word for word, _ in counts.most_common(limit)]


class Stemmer:
    """Porter stems with a per-instance memo (dialogue words repeat a lot)."""

    def __init__(self) -> None:
        self._stemmer = PorterStemmer()
        self._memo: dict[str, str] = {}

    def __call__(self, word: str) -> str:
        stem = self._memo.get(word)
        if stem is None:
            stem = self._memo[word] = self._stemmer.stem(word)
        return stem
