"""The embedding phase of a write (``pipeline``): every text a staged node's vector is made of,
embedded once, into one float32 matrix.

Between staging (``pipeline.stage_document``) and the commit (``pipeline.document_write``):
``embed_staged`` reads the staging graphs a kind and a page at a time and ``embed_texts``
embeds each distinct text once, shortest first, a bounded call at a time; what the document
builders embedded while staging (``RecordingEmbedding``) is not embedded again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from llama_index_e2rag.embeddings import aembed_rows
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.ingest import node_vectors
from llama_index_e2rag.schema import EMBEDDED_KINDS, GraphNode, embeddable


@dataclass
class StagedVectors:
    """One float32 row per distinct embedded text."""

    rows: dict[str, int]
    matrix: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def of(self, text: str) -> np.ndarray:
        return self.matrix[self.rows[text]]


class RecordingEmbedding(BaseEmbedding):
    """The index's embedding model as builders get it while staging: it keeps the vectors of
    the texts they embed, so ``embed_staged`` does not embed them again (E²GraphRAG's fusion
    embeds every mention name, which the mentions' own vectors need too)."""

    _inner: BaseEmbedding = PrivateAttr()
    _seen: dict[str, np.ndarray] = PrivateAttr(default_factory=dict)

    def __init__(self, inner: BaseEmbedding, **kwargs: Any) -> None:
        super().__init__(
            model_name=inner.model_name, embed_batch_size=inner.embed_batch_size, **kwargs
        )
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "RecordingEmbedding"

    def take(self) -> dict[str, np.ndarray]:
        """The recorded text vectors, forgotten here (a builder may keep this model)."""
        seen, self._seen = self._seen, {}
        return seen

    def _keep(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> Any:
        for text, vector in zip(texts, vectors):
            self._seen[text] = np.asarray(vector, dtype=np.float32)
        return vectors

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return await self._inner.aget_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._keep([text], [self._inner.get_text_embedding(text)])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._keep(texts, self._inner.get_text_embedding_batch(texts))

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return self._keep([text], [await self._inner.aget_text_embedding(text)])[0]

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._keep(texts, await self._inner.aget_text_embedding_batch(texts))


async def embed_staged(
    embed_model: BaseEmbedding,
    graphs: Sequence[GraphStore],
    show_progress: bool = False,
    known: Optional[Mapping[str, np.ndarray]] = None,
) -> StagedVectors:
    """Embed every text a staged node's vector is made of (``node_vectors.sources``) once;
    the graphs are read a kind and a page at a time."""
    texts = {
        text
        for graph in graphs
        for node in embeddable_nodes(graph)
        for text in node_vectors.sources(node, graph)
    }
    return await embed_texts(embed_model, texts, show_progress, known)


def embeddable_nodes(graph: GraphStore) -> Iterator[GraphNode]:
    """The staged nodes that get a vector, a kind and a page at a time."""
    for kind in sorted(EMBEDDED_KINDS, key=lambda k: k.value):
        for page in graph.scan_nodes(kind):
            yield from (node for node in page if embeddable(node))


async def embed_texts(
    embed_model: BaseEmbedding,
    texts: Iterable[str],
    show_progress: bool = False,
    known: Optional[Mapping[str, np.ndarray]] = None,
) -> StagedVectors:
    """One float32 row per distinct text, shortest texts first (the model pads a batch to its
    longest text, so similar lengths batch together); texts in ``known`` (a
    ``RecordingEmbedding``'s) take the vector they have."""
    from tqdm.auto import tqdm

    distinct = set(texts)
    reused = sorted(distinct & set(known or {}))
    todo = sorted(distinct.difference(reused), key=lambda t: (len(t), t))
    order = [*todo, *reused]
    with tqdm(total=len(todo), desc="Embedding", unit="text", disable=not show_progress) as bar:
        matrix = await aembed_rows(embed_model, todo, rows=len(order), on_call=bar.update)
    if reused and known is not None:
        known_rows = np.stack([known[t] for t in reused])
        if todo:
            matrix[len(todo) :] = known_rows
        else:
            matrix = known_rows
    return StagedVectors({t: i for i, t in enumerate(order)}, matrix)
