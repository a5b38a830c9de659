"""Deterministic, text-dependent embedding for ranking tests (no model, no network).

Each lower-cased word (and its 4-letter prefix, so "reacted" ~ "react") is hashed into one of
``dim`` buckets; the normalised bag is the vector. Texts that share words are close, others are not,
so tests can assert rankings that follow from the text rather than from a hard-coded answer.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import List

from llama_index.core.base.embeddings.base import BaseEmbedding

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of and or to in on at by for with from as is was were be been it its he she they "
    "his her their them him this that these those what who whom how when why did do does".split()
)


def hash_vector(text: str, dim: int = 256) -> List[float]:
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        for token in {word, word[:4]}:
            h = int.from_bytes(hashlib.md5(token.encode()).digest()[:4], "little")
            vec[h % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class HashEmbedding(BaseEmbedding):
    """A llama-index embedding whose similarity is word overlap."""

    dim: int = 256

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _get_query_embedding(self, query: str) -> List[float]:
        return hash_vector(query, self.dim)

    def _get_text_embedding(self, text: str) -> List[float]:
        return hash_vector(text, self.dim)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return hash_vector(query, self.dim)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return hash_vector(text, self.dim)
