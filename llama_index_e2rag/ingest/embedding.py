"""The embedding phase of a write (``pipeline``): every text a staged node's vector is made of,
embedded once, into one float32 matrix.

Between staging (``pipeline.stage_document``) and the commit (``pipeline.document_write``):
``embed_staged`` reads the staging graphs a kind and a page at a time and ``embed_texts``
embeds each distinct text once, shortest first, a bounded call at a time; what the document
builders embedded while staging (``RecordingEmbedding``) is not embedded again. Those vectors
wait in a scratch file (``KeptVectors``), not in memory from the first builder to the commit:
a million-word book's builders embed hundreds of thousands of texts.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from llama_index_e2rag.disk.scratch import make_scratch_dir, remove_scratch_dir
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


#: Prefix of the scratch folders ``KeptVectors`` writes (a killed build's are swept).
KEPT_PREFIX = "e2rag-embedded-"
#: Rows read at a time when kept vectors are copied out.
_READ_ROWS = 8192


class KeptVectors:
    """Vectors of distinct texts, appended to a float32 file in a private scratch folder and
    read back in file order; the folder goes when ``close`` is called or the object is
    collected."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.dim = 0
        self._file: Optional[BinaryIO] = None
        self._remove: Optional[weakref.finalize] = None

    def __contains__(self, text: object) -> bool:
        return text in self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Keep the vector of each text not kept yet."""
        for text, vector in zip(texts, vectors):
            if text in self.rows:
                continue
            row = np.asarray(vector, dtype=np.float32)
            if self._file is None:
                folder, lock = make_scratch_dir(KEPT_PREFIX)
                self._file = open(os.path.join(folder, "vectors.f32"), "w+b")
                self._remove = weakref.finalize(self, _remove_kept, self._file, folder, lock)
                self.dim = row.size
            self._file.write(row.tobytes())
            self.rows[text] = len(self.rows)

    def read_into(self, texts: Sequence[str], out: np.ndarray) -> None:
        """``out[i]`` = the vector of ``texts[i]``, reading the file ``_READ_ROWS`` at a time."""
        if not len(texts):
            return
        assert self._file is not None
        self._file.flush()
        wanted = np.fromiter((self.rows[t] for t in texts), dtype=np.int64, count=len(texts))
        order = np.argsort(wanted, kind="stable")
        sorted_rows = wanted[order]
        row_bytes = self.dim * 4
        for start in range(0, int(sorted_rows[-1]) + 1, _READ_ROWS):
            lo, hi = np.searchsorted(sorted_rows, [start, start + _READ_ROWS])
            if lo == hi:
                continue
            count = min(_READ_ROWS, len(self.rows) - start)
            raw = os.pread(self._file.fileno(), count * row_bytes, start * row_bytes)
            block = np.frombuffer(raw, dtype=np.float32).reshape(count, self.dim)
            out[order[lo:hi]] = block[sorted_rows[lo:hi] - start]

    def close(self) -> None:
        """Delete the scratch folder now."""
        if self._remove is not None:
            self._remove()


def _remove_kept(file: BinaryIO, folder: str, lock: Optional[int]) -> None:
    file.close()
    remove_scratch_dir(folder, lock)


class RecordingEmbedding(BaseEmbedding):
    """The index's embedding model as builders get it while staging: it keeps the vectors of
    the texts they embed, so ``embed_staged`` does not embed them again (E²GraphRAG's fusion
    embeds every mention name, which the mentions' own vectors need too)."""

    _inner: BaseEmbedding = PrivateAttr()
    _seen: KeptVectors = PrivateAttr(default_factory=KeptVectors)

    def __init__(self, inner: BaseEmbedding, **kwargs: Any) -> None:
        super().__init__(
            model_name=inner.model_name, embed_batch_size=inner.embed_batch_size, **kwargs
        )
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "RecordingEmbedding"

    def take(self) -> KeptVectors:
        """The recorded text vectors, forgotten here (a builder may keep this model); the
        caller closes them when done."""
        seen, self._seen = self._seen, KeptVectors()
        return seen

    def _keep(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> Any:
        self._seen.add(texts, vectors)
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
    known: Optional[KeptVectors] = None,
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
    known: Optional[KeptVectors] = None,
) -> StagedVectors:
    """One float32 row per distinct text, shortest texts first (the model pads a batch to its
    longest text, so similar lengths batch together); texts in ``known`` (a
    ``RecordingEmbedding``'s) take the vector they have.

    The progress bar counts characters, with the texts done beside them: shortest first, a
    count of texts runs ahead of the work (a million-word book's texts were 77 % done after
    8:56 of 23:32)."""
    from tqdm.auto import tqdm

    distinct = set(texts)
    reused = sorted(t for t in distinct if known is not None and t in known)
    todo = sorted(distinct.difference(reused), key=lambda t: (len(t), t))
    order = [*todo, *reused]
    with tqdm(total=sum(map(len, todo)), desc="Embedding", unit="char", unit_scale=True,
              disable=not show_progress) as bar:
        done = 0

        def advance(count: int) -> None:
            nonlocal done
            bar.set_postfix_str(f"{done + count:,}/{len(todo):,} texts", refresh=False)
            bar.update(sum(map(len, todo[done : done + count])))
            done += count

        matrix = await aembed_rows(embed_model, todo, rows=len(order), on_call=advance)
    if reused and known is not None:
        if not todo:
            matrix = np.empty((len(reused), known.dim), dtype=np.float32)
        known.read_into(reused, matrix[len(todo) :])
    return StagedVectors({t: i for i, t in enumerate(order)}, matrix)
