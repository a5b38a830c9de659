"""Phase 1 of a write on Ray workers; phase 2 stays the index's one commit (``writer``).

Each worker is a Ray actor that builds the index's models once (the offline embedding's ONNX
session, spaCy, the LLM runner) and then stages one document per call with the same code as a
build in one process (``stage.astage_batch``): chunking, extraction, document layers,
embedding. It hands back plain rows (``StagedPayload``: graph nodes and edges, chunks, failures,
one float32 matrix of vectors), never a path, so a worker may run on another machine. The
driver rebuilds each document's staging graph from them and commits the batch through
``IndexWriter``'s own link-and-commit step: one write, under the writer lock, all or nothing.

The LLM answer cache is the driver's: every worker starts from a copy of it (one object in
Ray's object store) and hands back the answers it got, which the driver writes to its cache as
each document arrives; a batch that fails later is re-run without paying for them again.

Why actors and not LlamaIndex's ``RayIngestionPipeline``: that pipeline maps ``TextNode``
batches through transformations and adds the embedded nodes to a vector store. Our build needs
a document's chunks extracted together (pronouns carried from chunk to chunk), document layers
over its whole staging graph and a commit of graph and vectors as one write, none of which a
node-to-node transformation gives (see docs/storage.md, "Running on a cluster").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np
from llama_index.core.schema import BaseComponent, Document, TextNode

from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.errors import MissingExtraError
from llama_index_e2rag.extract.builders import DocumentBuilder, builder_configs, restore_builders
from llama_index_e2rag.extract.chunking import chunk_document
from llama_index_e2rag.graph.base import pages
from llama_index_e2rag.ingest.embedding import StagedVectors
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.ingest.pipeline import StagedDoc, add_stats
from llama_index_e2rag.ingest.progress import doc_bar
from llama_index_e2rag.ingest.stage import astage_batch
from llama_index_e2rag.ingest.staging import chunk_words, discard, staging_graph, words_of
from llama_index_e2rag.llm.runner import ResponseCache, run_sync
from llama_index_e2rag.schema import GraphEdge, GraphNode

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner

__all__ = ["RayIngest", "StagedPayload", "DocumentStager", "astage_on_ray", "ray_option"]

logger = logging.getLogger(__name__)

RAY_EXTRA = "pip install 'llama-index-e2rag[ray]'"


@dataclass(frozen=True)
class RayIngest:
    """Where a build's per-document work runs.

    Args:
        address: the cluster to join: ``"auto"`` (the one ``ray start`` runs on this machine),
            ``"ray://host:10001"``, or ``None``: the one this process joined already, else a
            local cluster of this machine's cores started for the build.
        workers: worker actors; default: the cluster's CPUs divided by ``cpus_per_worker``.
        cpus_per_worker: CPUs Ray reserves per worker (its ONNX and spaCy threads use them).
    """

    address: Optional[str] = None
    workers: Optional[int] = None
    cpus_per_worker: float = 1.0


def ray_option(value: Union[None, bool, str, RayIngest]) -> Optional[RayIngest]:
    """``ray=`` as the index takes it: ``None``/``False`` (no Ray), ``True`` (``RayIngest()``),
    an address, or a ``RayIngest``."""
    if value is None or value is False:
        return None
    if value is True:
        return RayIngest()
    if isinstance(value, str):
        return RayIngest(address=value)
    if isinstance(value, RayIngest):
        return value
    raise TypeError(f"ray= takes True, an address or a RayIngest, got {type(value).__name__}")


def import_ray() -> Any:
    """The ``ray`` module, or one line naming the extra that installs it."""
    try:
        import ray  # deferred: optional dependency
    except ImportError as exc:
        raise MissingExtraError(f"building on Ray needs Ray: {RAY_EXTRA}") from exc
    return ray


@dataclass
class StagedPayload:
    """One staged document as plain, picklable rows (what a worker sends back)."""

    doc_id: str
    words: int
    chunks: list[TextNode]
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    failures: list[dict[str, str]]
    vectors: StagedVectors
    #: the LLM answers this document got that the worker's cache did not hold
    answers: dict[str, str] = field(default_factory=dict)
    #: the LLM spending of this document (``LLMStats.as_dict`` counts)
    llm_stats: dict[str, Any] = field(default_factory=dict)


class DocumentStager:
    """A worker's models, built once, and the staging of one document per call (the Ray actor's
    class; usable without Ray).

    ``settings`` are ``IndexModels.worker_settings()``; ``builders`` are the index's document
    builders, restorable ones as their configs (``portable_builders``); ``answers`` the
    driver's LLM cache entries.
    """

    def __init__(
        self,
        settings: dict[str, Any],
        builders: Sequence[Union[DocumentBuilder, dict[str, dict[str, Any]]]],
        passage_words: int,
        answers: dict[str, str],
        cpus: Optional[int] = None,
    ) -> None:
        self._cache = ResponseCache()
        for key, value in answers.items():
            self._cache.put(key, value)
        settings = dict(settings)
        settings["embed_model"] = _with_threads(settings["embed_model"], cpus)
        self.models = IndexModels(**settings, response_cache=self._cache)
        self.builders = [
            restore_builders(b)[0] if isinstance(b, dict) else b for b in builders
        ]
        self.passage_words = passage_words

    def stage(self, document: Document, order: int) -> StagedPayload:
        """Chunk, extract, build the layers of and embed ``document`` (story order ``order``)."""
        return run_sync(self.astage(document, order))

    async def astage(self, document: Document, order: int) -> StagedPayload:
        known = set(self._cache.entries())
        runner = self.models.llm_runner
        before = runner.stats.as_dict() if runner is not None else {}
        chunks = chunk_document(self.models.splitter, document, order)
        words = chunk_words(chunks)
        total = words_of(document, words)
        graph = staging_graph(total)
        try:
            staged, vectors = await astage_batch(
                [(document, document.id_, order, chunks)],
                {document.id_: graph},
                {document.id_: words},
                self.models,
                self.builders,
                self.passage_words,
            )
            return StagedPayload(
                doc_id=document.id_,
                words=total,
                chunks=staged[0].chunks,
                nodes=[n for page in graph.scan_nodes() for n in page],
                edges=[e for page in graph.scan_edges() for e in page],
                failures=staged[0].failures,
                vectors=vectors,
                answers={k: v for k, v in self._cache.entries().items() if k not in known},
                llm_stats=_spent(runner, before),
            )
        finally:
            discard(graph)


class Portable:
    """A llama-index component (LLM, embedding, extractor) as a worker gets it: its class and
    fields, rebuilt there. llama-index's own pickling drops, with a logged warning, a field
    that the standard ``pickle`` cannot take (a function, a closure), so a worker would
    silently run a different model; Ray's cloudpickle takes them."""

    def __init__(self, component: Any) -> None:
        self.cls = type(component)
        self.fields = dict(component.__dict__)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.cls, self.fields))


def _rebuild(cls: type, fields: dict[str, Any]) -> Any:
    """The component again (its private state, e.g. clients and locks, made afresh)."""
    return cls(**fields)


def portable(value: Any) -> Any:
    """``value``, or a list of them, with llama-index components as ``Portable``."""
    if isinstance(value, list):
        return [portable(item) for item in value]
    return Portable(value) if isinstance(value, BaseComponent) else value


def portable_builders(
    builders: Sequence[DocumentBuilder],
) -> list[Union[DocumentBuilder, dict[str, dict[str, Any]]]]:
    """The builders as a worker gets them: a restorable one as its config (it may hold this
    process's LLM runner, which does not pickle), any other as itself."""
    return [builder_configs([b]) or b for b in builders]


def restage(payload: StagedPayload, document: Document, order: int) -> StagedDoc:
    """The driver's staged document from a worker's rows (a staging graph of this process)."""
    graph = staging_graph(payload.words)
    try:
        for node_page in pages(payload.nodes):
            graph.upsert_nodes(node_page)
        for edge_page in pages(payload.edges):
            graph.upsert_edges(edge_page)
    except BaseException:
        discard(graph)
        raise
    return StagedDoc(document, payload.doc_id, order, payload.chunks, graph, payload.failures)


def merge_vectors(parts: Sequence[StagedVectors]) -> StagedVectors:
    """One matrix of the documents' vectors; a text several documents embed keeps its first."""
    rows: dict[str, int] = {}
    blocks = []
    for part in parts:
        new = [text for text in part.rows if text not in rows]
        rows.update({text: len(rows) + i for i, text in enumerate(new)})
        blocks.append(part.matrix[[part.rows[text] for text in new]])
    if not rows:
        return StagedVectors({}, np.zeros((0, 0), dtype=np.float32))
    return StagedVectors(rows, np.concatenate(blocks).astype(np.float32, copy=False))


@dataclass
class RayBatch:
    """What ``astage_on_ray`` hands the commit: the staged documents in batch order, their
    vectors and the workers' LLM spending."""

    staged: list[StagedDoc]
    vectors: StagedVectors
    llm_stats: dict[str, Any]


async def astage_on_ray(
    option: RayIngest,
    models: IndexModels,
    builders: Sequence[DocumentBuilder],
    passage_words: int,
    documents: Sequence[Document],
    orders: dict[str, int],
    show_progress: bool = False,
) -> RayBatch:
    """Stage ``documents`` on a pool of Ray actors (one document per call, the longest first)
    and rebuild them here; the driver's LLM cache gets each document's answers as it arrives.
    A worker that fails or dies fails the batch before anything is committed."""
    ray = import_ray()
    runner = models.llm_runner
    cache = runner.cache if runner is not None else None
    if not ray.is_initialized():
        ray.init(address=option.address, include_dashboard=False)
    workers = option.workers or max(
        1, int(ray.cluster_resources().get("CPU", 1) // option.cpus_per_worker)
    )
    answers = ray.put(cache.entries() if cache is not None else {})
    actor = ray.remote(num_cpus=option.cpus_per_worker)(DocumentStager)
    cpus = max(1, int(option.cpus_per_worker))
    settings = {key: portable(value) for key, value in models.worker_settings().items()}
    shipped = portable_builders(builders)
    actors = [
        actor.remote(settings, shipped, passage_words, answers, cpus)
        for _ in range(min(workers, len(documents)))
    ]
    pool = ray.util.ActorPool(actors)
    by_id = {doc.id_: doc for doc in documents}
    longest_first = sorted(documents, key=lambda doc: -len(doc.text))
    staged: dict[str, StagedDoc] = {}
    parts: dict[str, StagedVectors] = {}
    stats: dict[str, Any] = {}

    def collect() -> None:
        results = pool.map_unordered(
            lambda worker, doc: worker.stage.remote(doc, orders[doc.id_]), longest_first
        )
        bar = doc_bar(documents, "Staging on Ray", show_progress)
        with bar:
            for payload in results:
                if cache is not None:
                    for key, value in payload.answers.items():
                        cache.put(key, value)
                add_stats(stats, payload.llm_stats, {})
                document = by_id[payload.doc_id]
                staged[payload.doc_id] = restage(payload, document, orders[payload.doc_id])
                parts[payload.doc_id] = payload.vectors
                bar.update()

    try:
        await asyncio.to_thread(collect)
    except BaseException:
        for stage in staged.values():
            discard(stage.graph)
        raise
    finally:
        if cache is not None:
            cache.flush()
        for worker in actors:
            ray.kill(worker)
    ordered = [doc.id_ for doc in documents]
    return RayBatch(
        [staged[d] for d in ordered], merge_vectors([parts[d] for d in ordered]), stats
    )


def _with_threads(embed_model: Any, cpus: Optional[int]) -> Any:
    """The offline embedding with ONNX threads for the worker's CPUs, not the machine's (two
    workers each running a thread per core would halve each other)."""
    if cpus and isinstance(embed_model, MiniLMEmbedding) and embed_model.num_threads is None:
        return embed_model.model_copy(update={"num_threads": cpus})
    return embed_model


def _spent(runner: Optional["LLMRunner"], before: dict[str, Any]) -> dict[str, Any]:
    if runner is None:
        return {}
    spent: dict[str, Any] = {}
    add_stats(spent, runner.stats.as_dict(), before)
    return spent

