"""``E2RAGIndex``: build, update, persist and load the narrative graph as a LlamaIndex index.

The write path (``validation``, ``chunking``, then staging and embedding) lives in ``ingest`` and the storage in
``stores`` (a typed ``Stores`` object handed to ingestion and retrievers; never the index); this
module wires them to llama-index's ``BaseIndex`` API and resolves models lazily and thread-safely.
Plain ``StorageContext.persist`` / ``load_index_from_storage`` round-trip everything
(``persistence`` explains how our stores ride along). Importing this module adds the index type
to llama-index's two registries, which is what ``load_index_from_storage`` needs; nothing else.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS
from llama_index.core.indices.base import BaseIndex
from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS
from llama_index.core.llms import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, TextNode, TransformComponent
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.storage.storage_context import StorageContext

from llama_index_e2rag.persist import storage as persistence
from llama_index_e2rag.extract.builders import DocumentBuilder, builder_configs, restore_builders
from llama_index_e2rag.extract.base import DOC_ORDER_KEY, chunk_doc_id, hide_internal_keys
from llama_index_e2rag.extract.passages import DEFAULT_PASSAGE_WORDS
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.extract.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    chunk_document,
    default_chunk_overlap,
    default_chunk_size,
)
from llama_index_e2rag.ingest.pipeline import (
    EMBEDDED_KINDS,
    DocOrders,
    RecordingEmbedding,
    WriteLock,
    add_stats,
    document_write,
    embed_staged,
    link_staged,
    stage_document,
)
from llama_index_e2rag.ingest.validation import (
    validate_document, validate_documents, validate_nodes)
from llama_index_e2rag.llm.runner import run_sync
from llama_index_e2rag.modes import DEFAULT_MODE, RETRIEVER_CLASSES, RETRIEVER_MODES
from llama_index_e2rag.registration import E2RAG_STRUCT_TYPE, STRUCT_TYPES
from llama_index_e2rag.stores.same_text import TextClaims
from llama_index_e2rag.ingest.progress import doc_bar, steps_bar
from llama_index_e2rag.stores.port import Stores

if TYPE_CHECKING:
    from llama_index.core.chat_engine.types import BaseChatEngine

    from llama_index_e2rag.ingest.layers import LayersAdded
    from llama_index_e2rag.llm.runner import LLMRunner
    from llama_index_e2rag.context.timeline import Timeline

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "EMBEDDED_KINDS",
    "RETRIEVER_MODES",
    "E2RAGIndex",
    "E2RAGIndexStruct",
    "validate_document",
]

logger = logging.getLogger(__name__)

_Group = tuple[Optional[Document], str, int, list[TextNode]]


@dataclass
class E2RAGIndexStruct(IndexStruct):
    """What the index store keeps: the build configuration and the LLM spending.

    ``config`` holds the chunking and passage length, the embedding model's name, where the
    vectors live (``vectors``) and ``doc_builders`` (``{name: params}`` of restorable builders).
    The graph, vectors and BM25 index live in the stores. ``graph_json``, ``doc_order`` and
    ``failures`` are only read, from stores written by 0.1.0, which kept the graph in the struct.
    """

    graph_json: str = ""
    doc_order: Dict[str, int] = field(default_factory=dict)
    failures: List[Dict[str, str]] = field(default_factory=list)
    llm_stats: Dict[str, Any] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return E2RAG_STRUCT_TYPE


class E2RAGIndex(BaseIndex[E2RAGIndexStruct]):
    """Entity–event narrative graph index (E²RAG) with pluggable extractors and builders.

    Args:
        llm: extraction/answer LLM; resolved lazily (explicit > ``Settings.llm`` > OpenAI when
            ``OPENAI_API_KEY`` is set > none, which selects the LLM-free grounded extractor).
        embed_model: resolved lazily the same way, ending at the offline MiniLM embedding.
        extractors: chunk ``TransformComponent``s; default ``EntityEventExtractor`` with an LLM,
            else ``GroundedExtractor``.
        doc_builders: ``DocumentBuilder``s run once per document after extraction; restorable
            ones (ChronoRAG's) are recorded and come back when the index is loaded without them.
        chunk_size: tokens per chunk; default 1,200 (LightRAG's), capped at the embedding
            model's input limit when it declares one (``max_length``, 256 for MiniLM).
        chunk_overlap: default ``chunk_size // 12`` (LightRAG's ratio).
        passage_words: length of the ``narrative`` mode's sentence-aligned passages (default 30).
        llm_timeout: seconds one request of the index's ``llm_runner`` may take (``None``: no
            limit); a request past it is retried like any failure, then the chunk is reported
            in ``extraction_report()`` ("timed out after N s") and stays indexed as text.
            Counted in ``llm_stats()["timeouts"]``. Retrieval's cue and HyDE calls go through
            the same runner; the final answer is llama-index's call to the answer LLM (set the
            timeout of its client). An extractor given its own ``LLMRunner`` keeps that one's.
        cache_dir: folder of the persistent LLM response cache; ``None`` keeps no disk cache.
            Give one to make an interrupted build resumable without repeating finished calls.
        graph_store: a ``GraphStore`` (e.g. ``PostgresGraphStore``); default: SQLite, in a
            private file until the index is persisted, then in the persist directory.
        vector_store: any llama-index vector store, one for the whole index (node kinds are
            metadata, filtered at query time); default: the embedded binary vectors, saved in
            the persist directory. ``StorageContext.from_defaults(vector_store=...)`` works too.
        vector_stores: ``{node kind: vector store}``, for one store per kind instead.
        allow_duplicates: index a new document even when its text is already indexed under
            another id (or comes twice in one call); by default it is skipped with a logged
            warning (``same_text``: llama-index's ``DocstoreStrategy.DUPLICATES_ONLY`` for new
            ids, by text alone, and upserts for known ids). ``insert``, ``insert_documents`` and
            their async forms take it per call too.
        persist_dir: where the index was persisted, when loading it from a folder that moved
            (``load_index_from_storage(storage_context, persist_dir=...)``); otherwise the
            folder is found from ``graph_store.json``.

    Inserts may run concurrently (``ainsert`` from several tasks, ``insert`` from several
    threads): documents get distinct story orders and commit one at a time.
    """

    index_struct_cls = E2RAGIndexStruct

    def __init__(
        self,
        nodes: Optional[Sequence[BaseNode]] = None,
        index_struct: Optional[E2RAGIndexStruct] = None,
        storage_context: Optional[StorageContext] = None,
        llm: Optional[LLM] = None,
        embed_model: Optional[BaseEmbedding] = None,
        extractors: Optional[Sequence[TransformComponent]] = None,
        doc_builders: Optional[Sequence[DocumentBuilder]] = None,
        chunk_size: Optional[int] = None,
        chunk_overlap: Optional[int] = None,
        passage_words: Optional[int] = None,
        combined: Optional[bool] = None,
        num_workers: int = 4,
        max_retries: int = 3,
        llm_timeout: Optional[float] = 120.0,
        cache_dir: Optional[str] = None,
        graph_store: Optional[GraphStore] = None,
        vector_store: Optional[BasePydanticVectorStore] = None,
        vector_stores: Optional[Dict[str, BasePydanticVectorStore]] = None,
        persist_dir: Optional[str] = None,
        allow_duplicates: bool = False,
        show_progress: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        **kwargs: Any,
    ) -> None:
        # the stores first: a loaded index's settings are the ones its graph committed last
        storage_context = storage_context or StorageContext.from_defaults()
        self._stores, self._vectors_label = persistence.open_stores(
            storage_context, index_struct, graph_store, vector_store, vector_stores, persist_dir
        )
        config = dict(index_struct.config) if index_struct is not None else {}
        self._chunk_size: Optional[int] = chunk_size or config.get("chunk_size")
        self._chunk_overlap: Optional[int] = (
            chunk_overlap if chunk_overlap is not None else config.get("chunk_overlap")
        )
        self._splitter: Optional[SentenceSplitter] = None
        if passage_words is None:
            passage_words = config.get("passage_words") or DEFAULT_PASSAGE_WORDS
        self.passage_words: int = passage_words
        if self.passage_words < 1:
            raise ValueError(f"passage_words must be at least 1, got {self.passage_words}")
        self._combined = combined if combined is not None else config.get("combined", False)
        self._llm_arg = llm
        self._embed_model_arg = embed_model
        self._extractors_arg = list(extractors) if extractors is not None else None
        self._default_extractors: list[TransformComponent] = []
        if doc_builders is not None:
            self._doc_builders = list(doc_builders)
        else:
            self._doc_builders = restore_builders(config.get("doc_builders", {}))
        self._num_workers = num_workers
        self._max_retries = max_retries
        self._llm_timeout = llm_timeout
        self._cache_dir = cache_dir
        # guards the lazily built models, runner, extractors and splitter (first use may race)
        self._lazy_lock = threading.RLock()
        self._llm_resolved = False
        self._llm: Optional[LLM] = None
        self._llm_runner: Optional["LLMRunner"] = None
        self._stats_synced: dict[str, Any] = {}
        self._embed_model: Optional[BaseEmbedding] = None
        self._write_lock = WriteLock()
        self.doc_orders = DocOrders(self._stores.graph.doc_orders)
        self.allow_duplicates = allow_duplicates
        self._text_claims = TextClaims(self._stores.graph.doc_records)
        storage_context.graph_store.show_progress = show_progress  # type: ignore[attr-defined]
        super().__init__(
            nodes=nodes,
            index_struct=index_struct,
            storage_context=storage_context,
            callback_manager=callback_manager,
            show_progress=show_progress,
            **kwargs,
        )

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_documents(  # type: ignore[override]
        cls,
        documents: Sequence[Document],
        storage_context: Optional[StorageContext] = None,
        show_progress: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        **kwargs: Any,
    ) -> "E2RAGIndex":
        """Validate every document, then build; nothing is stored if a document is bad."""
        validate_documents(documents)
        index = cls(
            index_struct=E2RAGIndexStruct(),
            storage_context=storage_context,
            show_progress=show_progress,
            callback_manager=callback_manager,
            **kwargs,
        )
        try:
            run_sync(index._ainsert_valid(documents))
        except BaseException:
            # nothing was committed; drop the empty struct so the storage context is as it was
            index.storage_context.index_store.delete_index_struct(index.index_id)
            raise
        return index

    def build_index_from_nodes(
        self, nodes: Sequence[BaseNode], **build_kwargs: Any
    ) -> E2RAGIndexStruct:
        """Unlike the base class, nothing reaches the docstore before extraction succeeded."""
        return self._build_index_from_nodes(nodes, **build_kwargs)

    def _build_index_from_nodes(
        self, nodes: Sequence[BaseNode], **build_kwargs: Any
    ) -> E2RAGIndexStruct:
        """Index pre-chunked nodes (grouped by their source document)."""
        self._index_struct = E2RAGIndexStruct()
        run_sync(self._aindex_nodes(nodes))
        return self._index_struct

    # -- models (resolved lazily so that loading never needs an API key) -----------------------
    @property
    def llm(self) -> Optional[LLM]:
        """The LLM used for extraction and answers, or ``None`` in the LLM-free setup."""
        if not self._llm_resolved:
            with self._lazy_lock:
                if not self._llm_resolved:
                    from llama_index_e2rag.llm.runner import resolve_llm

                    self._llm = resolve_llm(self._llm_arg)
                    self._llm_resolved = True
        return self._llm

    @property
    def llm_runner(self) -> Optional["LLMRunner"]:
        """The retrying, caching door to ``llm`` (``None`` without an LLM); built once."""
        if self._llm_runner is None and self.llm is not None:
            with self._lazy_lock:
                if self._llm_runner is None:
                    from llama_index_e2rag.llm.runner import LLMRunner, ResponseCache

                    cache = ResponseCache(self._cache_path()) if self._cache_dir else None
                    self._llm_runner = LLMRunner(
                        self.llm,
                        cache=cache,
                        num_workers=self._num_workers,
                        max_retries=self._max_retries,
                        timeout=self._llm_timeout,
                    )
        return self._llm_runner

    def _cache_path(self) -> str:
        return str(Path(self._cache_dir or ".") / "llm_cache.json")

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedding model of every node kind (built once); warns if it differs from the
        build's."""
        if self._embed_model is None:
            with self._lazy_lock:
                if self._embed_model is None:
                    self._embed_model = self._resolve_embed_model()
        return self._embed_model

    def _resolve_embed_model(self) -> BaseEmbedding:
        from llama_index_e2rag.embeddings import resolve_embed_model

        model = resolve_embed_model(self._embed_model_arg)
        built_with = self._index_struct.config.get("embed_model")
        if built_with and built_with != model.model_name:
            warnings.warn(
                f"this index was embedded with {built_with!r} but {model.model_name!r} is "
                "in use; similarities will be meaningless. Pass embed_model=... when loading.",
                stacklevel=3,
            )
        return model

    @property
    def chunk_size(self) -> int:
        """Tokens per chunk: the one given or stored, else the default capped by the embedding."""
        if self._chunk_size is None:
            with self._lazy_lock:
                if self._chunk_size is None:
                    self._chunk_size = default_chunk_size(self.embed_model)
        return self._chunk_size

    @property
    def chunk_overlap(self) -> int:
        if self._chunk_overlap is None:
            return default_chunk_overlap(self.chunk_size)
        return self._chunk_overlap

    @property
    def splitter(self) -> SentenceSplitter:
        if self._splitter is None:
            with self._lazy_lock:
                if self._splitter is None:
                    self._splitter = SentenceSplitter(
                        chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap
                    )
        return self._splitter

    @property
    def doc_builders(self) -> list[DocumentBuilder]:
        """The document builders run on every inserted document (given or restored)."""
        return list(self._doc_builders)

    def add_doc_builders(self, builders: Sequence[DocumentBuilder]) -> None:
        """Run ``builders`` on later inserts too, keeping the given or restored ones (passing
        ``doc_builders=`` replaces them). A builder whose ``config_name`` is already there is
        skipped, so ``e2rag index --sentence-graph`` on a chrono store keeps one of each. The
        next write records the new set for later loads."""
        names = {getattr(b, "config_name", None) for b in self._doc_builders}
        for builder in builders:
            name = getattr(builder, "config_name", None)
            if name is None or name not in names:
                self._doc_builders.append(builder)
            names.add(name)

    def add_layers(
        self, builders: Sequence[DocumentBuilder], documents: Sequence[Document] = ()
    ) -> "LayersAdded":
        """Build the layers of ``builders`` the index lacks for every stored document, without
        extracting anything again, and run them on later inserts too (``layers.py``)."""
        return run_sync(self.aadd_layers(builders, documents))

    async def aadd_layers(
        self, builders: Sequence[DocumentBuilder], documents: Sequence[Document] = ()
    ) -> "LayersAdded":
        """``add_layers``: builders already present are skipped; the stored graph of each
        document is their input, only their nodes are embedded, and every document commits in
        one write. ``documents`` may give stored documents' source text (used when unchanged)."""
        from llama_index_e2rag.ingest.layers import LayersAdded, missing_builders, stage_layers

        new = missing_builders(self._doc_builders, builders)
        if not new:
            return LayersAdded()
        await self._acheck_dim()
        async with self._stores.locks.awriter():
            await asyncio.to_thread(self._stores.sync)
            build = await stage_layers(
                self._stores,
                new,
                self.embed_model,
                lambda: self.llm_runner,
                documents,
                show_progress=self._show_progress,
            )
            async with self._write_lock.hold():
                await link_staged(build.staged, new, self._stores.graph, lambda: self.llm_runner)
                before = list(self._doc_builders)
                self._doc_builders.extend(new)
                try:
                    self._sync_llm_stats()
                    self._record_config()
                    writes = build.writes()
                    with steps_bar("Writing stores", len(writes), self._show_progress):
                        await self._stores.areplace_documents(
                            writes, persistence.index_meta(self._index_struct)
                        )
                except BaseException:
                    self._doc_builders = before
                    self._record_config()
                    raise
                await self._afinish_write()
        return build.report

    # -- accessors ----------------------------------------------------------------------------
    @property
    def stores(self) -> Stores:
        """The typed stores (graph, vectors, chunks, BM25) that retrievers and ingestion use."""
        return self._stores

    @property
    def graph_store(self) -> GraphStore:
        return self._stores.graph

    def doc_order(self, doc_id: str) -> Optional[int]:
        """Document order (insertion order) of an indexed document."""
        return self._stores.graph.doc_orders().get(doc_id)

    def entity_timeline(self, name: str, *, doc_id: Optional[str] = None) -> "Timeline":
        """A fused entity's mentions and events in story order, with positions (needs the
        ``EventGraphBuilder`` layer; ``timeline.entity_timeline``)."""
        from llama_index_e2rag.context.timeline import entity_timeline

        with self._stores.reading():
            return entity_timeline(self._stores.graph, name, doc_id=doc_id)

    def extraction_report(self) -> list[dict[str, str]]:
        """Failed parts ``{doc_id, chunk_id, reason}``: chunk extractions (the chunk stays as
        text) and document-builder failures such as a ChronoRAG group without facts."""
        return self._stores.graph.failures()

    def llm_stats(self) -> dict[str, Any]:
        """LLM calls, cache hits, failures, retries and tokens of every build so far."""
        return dict(self._index_struct.llm_stats)

    @property
    def ref_doc_info(self) -> Dict[str, RefDocInfo]:
        info = {}
        for doc_id in self._stores.graph.doc_orders():
            ref = self.docstore.get_ref_doc_info(doc_id)
            if ref is not None:
                info[doc_id] = ref
        return info

    # -- insertion ------------------------------------------------------------------------------
    def insert(self, document: Document, **insert_kwargs: Any) -> None:
        """Index one document; re-inserting a known document id replaces it (validated first,
        by ``ainsert_documents``). A new id whose text is already indexed is skipped unless
        ``allow_duplicates=True``."""
        run_sync(self.ainsert(document, **insert_kwargs))

    async def ainsert(self, document: Document, **insert_kwargs: Any) -> None:
        await self.ainsert_documents(
            [document], allow_duplicates=insert_kwargs.get("allow_duplicates")
        )

    def insert_documents(
        self, documents: Sequence[Document], *, allow_duplicates: Optional[bool] = None
    ) -> None:
        """Index several documents in one build (extraction runs concurrently across them).
        ``allow_duplicates`` (default: the index's) keeps new documents whose text is indexed."""
        run_sync(self.ainsert_documents(documents, allow_duplicates=allow_duplicates))

    async def ainsert_documents(
        self, documents: Sequence[Document], *, allow_duplicates: Optional[bool] = None
    ) -> None:
        """Validate all, skip the same text twice, chunk, extract, build, embed; then commit
        them as one."""
        validate_documents(documents)
        await self._ainsert_valid(documents, allow_duplicates)

    async def _ainsert_valid(
        self, documents: Sequence[Document], allow_duplicates: Optional[bool] = None
    ) -> None:
        """``ainsert_documents`` after validation (``from_documents`` validates before it
        builds the index)."""
        allow = self.allow_duplicates if allow_duplicates is None else allow_duplicates
        async with self._stores.locks.awriter():
            kept, duplicates, claimed = self._text_claims.claim(documents, allow)
            for duplicate in duplicates:
                logger.warning(duplicate.notice())
            if duplicates and not kept:
                return  # nothing new: no build, no commit
            orders: dict[str, int] = {}
            try:
                orders = self.doc_orders.reserve([doc.id_ for doc in kept])
                groups = [
                    (doc, doc.id_, orders[doc.id_], chunk_document(self.splitter, doc, orders[doc.id_]))
                    for doc in kept
                ]
                await self._aindex_groups(groups)
            finally:
                self.doc_orders.release(orders)
                self._text_claims.release(claimed)

    def insert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        run_sync(self.ainsert_nodes(nodes, **insert_kwargs))

    async def ainsert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        """Index pre-chunked nodes (their ids are kept; document builders need documents)."""
        await self._aindex_nodes(nodes)

    def _insert(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        run_sync(self._aindex_nodes(nodes))

    async def _aindex_nodes(self, nodes: Sequence[BaseNode]) -> None:
        validate_nodes(nodes)
        if self._doc_builders and nodes:
            raise ValueError(
                "document builders need whole documents; index with from_documents() or "
                "insert(document) instead of nodes"
            )
        by_doc: dict[str, list[TextNode]] = {}
        for node in nodes:
            if not isinstance(node, TextNode):
                raise TypeError(f"E2RAGIndex indexes TextNodes, got {type(node).__name__}")
            by_doc.setdefault(chunk_doc_id(node), []).append(node)
        async with self._stores.locks.awriter():
            orders = self.doc_orders.reserve(list(by_doc))
            try:
                for doc_id, chunks in by_doc.items():
                    for chunk in chunks:
                        chunk.metadata[DOC_ORDER_KEY] = orders[doc_id]
                        hide_internal_keys(chunk)
                await self._aindex_groups(
                    [(None, doc_id, orders[doc_id], chunks) for doc_id, chunks in by_doc.items()]
                )
            finally:
                self.doc_orders.release(orders)

    @property
    def extractors(self) -> list[TransformComponent]:
        """The chunk extractors: the ones given, else the defaults once a build chose them."""
        return list(self._extractors_arg or self._default_extractors)

    def _resolve_extractors(self) -> list[TransformComponent]:
        if self._extractors_arg is not None:
            return self._extractors_arg
        with self._lazy_lock:
            if not self._default_extractors:
                runner = self.llm_runner
                if runner is not None:
                    from llama_index_e2rag.extract.e2rag import EntityEventExtractor

                    extractor: TransformComponent = EntityEventExtractor(
                        llm_runner=runner, combined=self._combined
                    )
                else:
                    from llama_index_e2rag.extract.grounded import GroundedExtractor

                    extractor = GroundedExtractor()
                self._default_extractors = [extractor]
            return self._default_extractors

    async def _aindex_groups(self, groups: Sequence[_Group]) -> None:
        """Phase 1 computes everything in memory; phase 2 commits each document, one build at
        a time."""
        await self._acheck_dim()
        chunks = [c for *_, doc_chunks in groups for c in doc_chunks]
        for extractor in self._resolve_extractors():
            chunks = list(await extractor.acall(chunks, show_progress=self._show_progress))
        by_id = {c.node_id: c for c in chunks}
        staged = []
        recorder: Optional[RecordingEmbedding] = None

        def builders_embedding() -> RecordingEmbedding:
            nonlocal recorder
            if recorder is None:
                recorder = RecordingEmbedding(self.embed_model)
            return recorder

        # a book's layers take minutes: the bar names the builder at work, even for one document
        layers = doc_bar(
            groups,
            "Building document layers",
            self._show_progress and (len(groups) > 1 or bool(self._doc_builders)),
        )
        for document, doc_id, order, doc_chunks in layers:
            extracted = [by_id[c.node_id] for c in doc_chunks if c.node_id in by_id]
            staged.append(
                await stage_document(
                    document,
                    doc_id,
                    order,
                    extracted,
                    self._doc_builders,
                    lambda: self.llm_runner,
                    self.passage_words,
                    builders_embedding,
                    on_builder=layers.set_postfix_str,
                )
            )
        embed_model = self.embed_model
        known = recorder.take() if recorder is not None else None
        vectors = await embed_staged(
            embed_model, [s.graph for s in staged], self._show_progress, known
        )
        async with self._write_lock.hold():
            # links join the batch to the graph as committed now, so they run under the lock
            await link_staged(
                staged, self._doc_builders, self._stores.graph, lambda: self.llm_runner
            )
            writes = [document_write(stage, vectors) for stage in staged]
            if vectors:
                self._index_struct.config["embed_model"] = embed_model.model_name
            self._sync_llm_stats()
            self._record_config()
            with steps_bar("Writing stores", len(writes), self._show_progress):
                # the whole batch is one commit: a crash leaves all of it or none
                await self._stores.areplace_documents(
                    writes, persistence.index_meta(self._index_struct)
                )
            await self._afinish_write()

    async def _acheck_dim(self) -> None:
        """Refuse vector storage the embedding cannot fill before extraction spends anything
        (a model's declared ``dimension``, else one probe embedding)."""
        dim = getattr(self.embed_model, "dimension", None)
        if not isinstance(dim, int):
            dim = len(await self.embed_model.aget_query_embedding("dimension probe"))
        for storage in (self._stores.vectors, self._stores.vector_copy):
            if storage is not None:
                await asyncio.to_thread(storage.check_dim, dim)
        self._index_struct.config["dim"] = dim

    def _sync_llm_stats(self) -> None:
        """Add the runner's spending since the last sync (exact even when builds overlap)."""
        runner = self._llm_runner
        if runner is None:
            return
        runner.flush()
        now = runner.stats.as_dict()
        add_stats(self._index_struct.llm_stats, now, self._stats_synced)
        self._stats_synced = now

    def update_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        """Replace a document, keeping its place in the story (insert already replaces)."""
        self.insert(document)

    async def aupdate_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        await self.ainsert(document)

    # -- deletion -------------------------------------------------------------------------------
    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **delete_kwargs: Any
    ) -> None:
        """Remove a document's chunks, graph nodes, edges and vectors."""
        run_sync(self.adelete_ref_doc(ref_doc_id, delete_from_docstore, **delete_kwargs))

    async def adelete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **delete_kwargs: Any
    ) -> None:
        if ref_doc_id not in self._stores.graph.doc_orders():
            logger.warning("ref_doc_id %s not found, nothing deleted.", ref_doc_id)
            return
        async with self._stores.locks.awriter(), self._write_lock.hold():
            await self._stores.adelete_document(ref_doc_id, docstore=delete_from_docstore)
            await self._afinish_write()

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        """Remove one graph node (and its edges) and its vector, as one commit."""
        self._stores.delete_nodes([node_id])

    # -- persistence ----------------------------------------------------------------------------
    def _record_config(self) -> None:
        """The build settings the struct records (and each commit writes into the graph)."""
        self._index_struct.config.update(
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            passage_words=self.passage_words,
            combined=self._combined,
            doc_builders=builder_configs(self._doc_builders),
            vectors=self._vectors_label,
        )

    async def _afinish_write(self) -> None:
        """Hand the struct to llama-index's index store (saved by the next ``persist``)."""
        self._record_config()
        await self._storage_context.index_store.async_add_index_struct(self._index_struct)

    # -- retrieval ------------------------------------------------------------------------------
    def as_retriever(self, mode: str = DEFAULT_MODE, **kwargs: Any) -> BaseRetriever:
        """``mode``: narrative (default) | entity_event | grounded | chrono | sentence_graph |
        event_graph | vector; kwargs go to the retriever (``budget_words=`` and
        ``filters=MetadataFilters(...)`` on document metadata work in every mode)."""
        if mode not in RETRIEVER_CLASSES:
            raise ValueError(
                f"unknown retrieval mode {mode!r}; choose one of {', '.join(RETRIEVER_MODES)}"
            )
        module_name, class_name = RETRIEVER_CLASSES[mode]
        retriever_cls = getattr(importlib.import_module(module_name), class_name)
        needs = {**self._retriever_needs(mode), **kwargs}  # the caller's arguments win
        return retriever_cls(self._stores, self.embed_model, **needs)

    def _retriever_needs(self, mode: str) -> dict[str, Any]:
        """What a mode needs besides the stores and the embedding (resolved here, typed)."""
        if mode in ("narrative", "grounded"):
            from llama_index_e2rag.retrievers.parsing import extractors_parser

            needs: dict[str, Any] = {"parser": extractors_parser(self.extractors)}
            if mode == "narrative":
                needs["passage_words"] = self.passage_words
            return needs
        if mode == "entity_event":
            from llama_index_e2rag.retrievers.parsing import extractors_parser

            return {"llm_runner": self.llm_runner, "parser": extractors_parser(self.extractors)}
        if mode == "sentence_graph":
            return {"llm_runner": self.llm_runner}
        if mode == "event_graph":
            from llama_index_e2rag.retrievers.parsing import extractors_parser

            return {"llm_runner": self.llm_runner, "parser": extractors_parser(self.extractors)}
        return {}

    def _answer_llm(self, llm: Optional[LLM]) -> Optional[LLM]:
        """The LLM an engine answers with: ``llm=`` when given (a ``NoLLM``: none, so
        extractive answers), else the index's."""
        if llm is None:
            return self.llm
        from llama_index_e2rag.llm.runner import resolve_llm

        return resolve_llm(llm)

    def as_query_engine(  # type: ignore[override]
        self,
        mode: str = DEFAULT_MODE,
        hyde: Optional[str] = None,
        llm: Optional[LLM] = None,
        streaming: bool = False,
        **kwargs: Any,
    ) -> BaseQueryEngine:
        """A ``RetrieverQueryEngine`` over ``as_retriever(mode, ...)``.

        ``kwargs`` are split as llama-index's own ``as_query_engine`` does: the arguments of
        ``RetrieverQueryEngine.from_args`` / ``get_response_synthesizer`` (``node_postprocessors``,
        ``response_mode``, ``text_qa_template``, ``response_synthesizer`` …) go to the engine,
        the rest to the retriever. The answer LLM reads the assembled narrative context; with
        no LLM configured answers are extractive. ``hyde`` selects an E²RAG HyDE variant
        (``entity_event`` only). ``mode="event_graph"`` gets E²GraphRAG's two-stage engine
        instead (draft and decomposition, then the answer enriched with events and paths).
        """
        from llama_index_e2rag.answer.query_engine import build_query_engine, split_engine_kwargs

        engine_kwargs, kwargs = split_engine_kwargs(kwargs)
        answer_llm = self._answer_llm(llm)
        llm = answer_llm if llm is not None else None  # a NoLLM given: no LLM at all
        if mode == "event_graph":
            from llama_index_e2rag.answer.event_graph_engine import build_event_graph_engine
            from llama_index_e2rag.llm.runner import LLMRunner

            if llm is not None:  # the draft call uses the same model as the answer
                kwargs.setdefault("llm_runner", LLMRunner(llm))
            return build_event_graph_engine(
                self.as_retriever(mode=mode, **kwargs),  # type: ignore[arg-type]
                self._stores.graph,
                self.embed_model,
                answer_llm,
                streaming=streaming,
                **engine_kwargs,
            )

        if hyde is not None:
            if mode != "entity_event":
                raise ValueError(f"hyde variants apply to mode='entity_event', not {mode!r}")
            kwargs["hyde"] = hyde
        if llm is not None and mode == "entity_event":
            kwargs.setdefault("llm", llm)
        return build_query_engine(
            self.as_retriever(mode=mode, **kwargs),
            self._stores.graph,
            self.embed_model,
            answer_llm,
            streaming=streaming,
            **engine_kwargs,
        )

    def as_chat_engine(  # type: ignore[override]
        self,
        chat_mode: str = "condense_plus_context",
        llm: Optional[LLM] = None,
        mode: str = DEFAULT_MODE,
        **kwargs: Any,
    ) -> "BaseChatEngine":
        """A chat engine over ``as_retriever(mode, ...)``.

        With an LLM (``llm=`` or the index's): llama-index's engine of ``chat_mode``
        (``condense_plus_context`` by default, also ``context``, ``condense_question``,
        ``simple``), its own arguments (``system_prompt``, ``memory`` …) split from the
        retriever's as ``as_query_engine`` does. Without one: an offline chat engine whose
        every answer is the extractive one (no LLM rewrites follow-ups).
        """
        from llama_index_e2rag.answer.chat_engine import build_chat_engine

        chat_llm = self._answer_llm(llm)
        return build_chat_engine(
            chat_mode,
            chat_llm,
            lambda rest: self.as_retriever(mode=mode, **rest),
            lambda rest: self.as_query_engine(mode=mode, llm=chat_llm, **rest),
            kwargs,
        )

    def visualize(
        self,
        query: Optional[str] = None,
        path: Optional[str | Path] = None,
        *,
        entity: Optional[str] = None,
        mode: str = DEFAULT_MODE,
        **retriever_kwargs: Any,
    ) -> str:
        """One self-contained HTML page of the story (``visualize.story_page``): the story
        axis; with ``query``, what ``as_retriever(mode, **retriever_kwargs)`` returns and its
        subgraph along the story; with ``entity``, that character's timeline. Written whole to
        ``path`` when given; returns the HTML."""
        from llama_index_e2rag.visualize import evidence_from_results, story_page, write_page

        results = (
            self.as_retriever(mode=mode, **retriever_kwargs).retrieve(query)
            if query is not None
            else []
        )
        with self._stores.reading():
            page = story_page(
                self._stores.graph,
                query=query,
                evidence=evidence_from_results(results),
                entity=entity,
                mode=mode if query is not None else None,
            )
        if path is not None:
            write_page(path, page)
        return page


# the real classes take the place of the lazy entries ``registration`` put there
for _type in STRUCT_TYPES:
    INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS[_type] = E2RAGIndexStruct  # type: ignore[index]
    INDEX_STRUCT_TYPE_TO_INDEX_CLASS[_type] = E2RAGIndex  # type: ignore[index]
