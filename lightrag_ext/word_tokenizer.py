"""A LightRAG tokenizer that needs no download: a token is a word with its trailing whitespace.

LightRAG's default tokenizer is tiktoken's, which downloads its vocabulary on first use. Offline
(examples, tests, air-gapped trials) pass ``tokenizer=word_tokenizer()`` instead: it fulfils
LightRAG's ``TokenizerInterface`` contract (thread-safe ``encode``/``decode``, shared through
``copy.deepcopy``), and decoding gives the text back exactly, which matters because LightRAG
builds chunk texts by decoding token windows. Token counts are then word counts, so LightRAG's
token budgets (chunk size, context limits) are read in words.
"""

from __future__ import annotations

import re

from lightrag.utils import Tokenizer

_PIECE = re.compile(r"\S+\s*|\s+")


class WordTokenizer:
    """Words (with trailing whitespace) numbered in order of first sight."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: dict[int, str] = {}

    def encode(self, content: str) -> list[int]:
        tokens = []
        for piece in _PIECE.findall(content):
            token = self._ids.setdefault(piece, len(self._ids))  # atomic: thread-safe
            self._words.setdefault(token, piece)
            tokens.append(token)
        return tokens

    def decode(self, tokens: list[int]) -> str:
        return "".join(self._words[t] for t in tokens)

    def __deepcopy__(self, memo: dict) -> "WordTokenizer":
        return self  # LightRAG deep-copies its configuration; the vocabulary is shared


def word_tokenizer() -> Tokenizer:
    return Tokenizer("offline-words", WordTokenizer())
