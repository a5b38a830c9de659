"""``E2RAGIndex``: build, update, persist and load the narrative graph as a LlamaIndex index.

A build runs in two phases so that a failure never leaves a half-written index: first everything
is computed in memory (chunking, extraction, story-order edges, document builders, embeddings), then
each document is committed (graph, one vector store namespace per node kind, docstore). The graph
itself travels inside the index struct as a versioned JSON string, so plain
``StorageContext.persist`` / ``load_index_from_storage`` round-trip it with llama-index's
own stores.
"""

from __future__ import annotations

import importlib
import json
import logging
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
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
    TransformComponent,
)
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.simple import SimpleVectorStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_e2rag.builders import DocumentBuilder
from llama_index_e2rag.errors import BadDocumentError, GraphStoreError
from llama_index_e2rag.extract.base import (
    DOC_ORDER_KEY,
    chunk_doc_id,
    chunk_graph_node,
    hide_internal_keys,
    pop_graph,
)
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.llm import run_sync
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind, make_id

if TYPE_CHECKING:
    from llama_index_e2rag.llm import LLMRunner

logger = logging.getLogger(__name__)

E2RAG_STRUCT_TYPE = "e2rag"
NAMESPACE_PREFIX = "e2rag_"
#: Node kinds that get a vector store namespace and are embedded when built.
EMBEDDED_KINDS = (
    NodeKind.CHUNK,
    NodeKind.SENTENCE,
    NodeKind.MENTION,
    NodeKind.EVENT,
    NodeKind.FACT,
    NodeKind.ENTITY,
)
#: LightRAG's defaults, which the E²RAG paper keeps (appendix C).
DEFAULT_CHUNK_SIZE = 1200
DEFAULT_CHUNK_OVERLAP = 100
#: Share of non-text characters above which a document is refused as binary/undecodable.
_MAX_NON_TEXT_SHARE = 0.05
_RETRIEVER_MODES = {
    "entity_event": ("llama_index_e2rag.retrievers.entity_event", "EntityEventRetriever"),
    "grounded": ("llama_index_e2rag.retrievers.grounded", "GroundedGraphRetriever"),
    "chrono": ("llama_index_e2rag.retrievers.chrono", "ChronoRetriever"),
    "vector": ("llama_index_e2rag.retrievers.vector", "VectorChunkRetriever"),
}
RETRIEVER_MODES = tuple(_RETRIEVER_MODES)


def namespace(kind: NodeKind | str) -> str:
    """Vector store namespace of a node kind (never contains llama-index's ``__`` separator)."""
    return NAMESPACE_PREFIX + (kind.value if isinstance(kind, NodeKind) else str(kind))


@dataclass
class E2RAGIndexStruct(IndexStruct):
    """What the index store keeps: the graph (as a JSON string) and build bookkeeping.

    ``graph_json`` is a string on purpose: dataclasses_json then stores it verbatim instead of
    walking tens of thousands of node dicts on every save.
    """

    graph_json: str = ""
    doc_order: Dict[str, int] = field(default_factory=dict)
    failures: List[Dict[str, str]] = field(default_factory=list)
    llm_stats: Dict[str, Any] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return E2RAG_STRUCT_TYPE


def validate_document(doc: Document) -> None:
    """Refuse empty, binary or undecodable text before anything is written."""
    text = doc.text or ""
    if not text.strip():
        raise BadDocumentError(f"document {doc.id_!r} is empty: there is no text to index")
    if "\x00" in text:
        raise BadDocumentError(
            f"document {doc.id_!r} contains NUL bytes, so it looks binary; "
            "convert it to plain text first (e.g. extract the text of a PDF)"
        )
    sample = text[:50_000]
    non_text = sum(
        1 for ch in sample if ch == "\ufffd" or (not ch.isprintable() and ch not in "\n\r\t\f\v")
    )
    if non_text / len(sample) > _MAX_NON_TEXT_SHARE:
        raise BadDocumentError(
            f"document {doc.id_!r} is not readable text ({non_text / len(sample):.0%} of its "
            "characters are control or undecodable characters); check its encoding"
        )


@dataclass
class _StagedDoc:
    """One document computed in memory, ready to commit."""

    document: Optional[Document]
    doc_id: str
    order: int
    chunks: list[TextNode]
    graph: NetworkXGraphStore
    failures: list[dict[str, str]]


class E2RAGIndex(BaseIndex[E2RAGIndexStruct]):
    """Entity–event narrative graph index (E²RAG) with pluggable extractors and builders.

    Args:
        llm: extraction/answer LLM; resolved lazily (explicit > ``Settings.llm`` > OpenAI when
            ``OPENAI_API_KEY`` is set > none, which selects the LLM-free grounded extractor).
        embed_model: resolved lazily the same way, ending at the offline MiniLM embedding.
        extractors: chunk ``TransformComponent``s; default ``EntityEventExtractor`` with an LLM,
            else ``GroundedExtractor``.
        doc_builders: ``DocumentBuilder``s run once per document after extraction.
        cache_dir: folder of the persistent LLM response cache; ``None`` keeps no disk cache.
            Give one to make an interrupted build resumable without repeating finished calls.
        graph_store: a ``GraphStore``; defaults to the NetworkX store kept in the index struct.
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
        combined: Optional[bool] = None,
        num_workers: int = 4,
        max_retries: int = 3,
        cache_dir: Optional[str] = None,
        graph_store: Optional[GraphStore] = None,
        show_progress: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        **kwargs: Any,
    ) -> None:
        config = dict(index_struct.config) if index_struct is not None else {}
        self._chunk_size = chunk_size or config.get("chunk_size", DEFAULT_CHUNK_SIZE)
        if chunk_overlap is None:
            # scale the default with a user-chosen chunk size (LightRAG's ratio, 100 per 1200)
            chunk_overlap = config.get(
                "chunk_overlap", min(DEFAULT_CHUNK_OVERLAP, self._chunk_size // 12)
            )
        self._chunk_overlap = chunk_overlap
        self._combined = combined if combined is not None else config.get("combined", False)
        self._llm_arg = llm
        self._embed_model_arg = embed_model
        self._extractors_arg = list(extractors) if extractors is not None else None
        self._default_extractors: list[TransformComponent] = []
        self._doc_builders = list(doc_builders or [])
        self._num_workers = num_workers
        self._max_retries = max_retries
        self._cache_dir = cache_dir
        self._llm_resolved = False
        self._llm: Optional[LLM] = None
        self._llm_runner: Optional["LLMRunner"] = None
        self._embed_model: Optional[BaseEmbedding] = None
        if graph_store is not None:
            self._e2rag_graph: GraphStore = graph_store
        elif index_struct is not None and index_struct.graph_json:
            self._e2rag_graph = _graph_from_json(index_struct.graph_json)
        else:
            self._e2rag_graph = NetworkXGraphStore()
        self._splitter = SentenceSplitter(
            chunk_size=self._chunk_size, chunk_overlap=self._chunk_overlap
        )
        storage_context = storage_context or StorageContext.from_defaults()
        for kind in EMBEDDED_KINDS:
            if namespace(kind) not in storage_context.vector_stores:
                storage_context.add_vector_store(SimpleVectorStore(), namespace(kind))
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
        for doc in documents:
            validate_document(doc)
        index = cls(
            index_struct=E2RAGIndexStruct(),
            storage_context=storage_context,
            show_progress=show_progress,
            callback_manager=callback_manager,
            **kwargs,
        )
        try:
            run_sync(index.ainsert_documents(documents))
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
            from llama_index_e2rag.llm import resolve_llm

            self._llm = resolve_llm(self._llm_arg)
            self._llm_resolved = True
        return self._llm

    @property
    def llm_runner(self) -> Optional["LLMRunner"]:
        """The retrying, caching door to ``llm`` (``None`` without an LLM)."""
        if self._llm_runner is None and self.llm is not None:
            from llama_index_e2rag.llm import LLMRunner, ResponseCache

            cache = ResponseCache(self._cache_path()) if self._cache_dir else None
            self._llm_runner = LLMRunner(
                self.llm,
                cache=cache,
                num_workers=self._num_workers,
                max_retries=self._max_retries,
            )
        return self._llm_runner

    def _cache_path(self) -> str:
        return str(Path(self._cache_dir or ".") / "llm_cache.json")

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedding model of every namespace; warns if it differs from the build's."""
        if self._embed_model is None:
            from llama_index_e2rag.embeddings import resolve_embed_model

            model = resolve_embed_model(self._embed_model_arg)
            built_with = self._index_struct.config.get("embed_model")
            if built_with and built_with != model.model_name:
                warnings.warn(
                    f"this index was embedded with {built_with!r} but {model.model_name!r} is "
                    "in use; similarities will be meaningless. Pass embed_model=... when loading.",
                    stacklevel=2,
                )
            self._embed_model = model
        return self._embed_model

    # -- accessors other modules rely on --------------------------------------------------------
    @property
    def graph_store(self) -> GraphStore:
        return self._e2rag_graph

    def vector_store(self, kind: NodeKind | str) -> BasePydanticVectorStore:
        """The llama-index vector store of namespace ``e2rag_<kind>``."""
        name = namespace(kind)
        if name not in self._storage_context.vector_stores:
            self._storage_context.add_vector_store(SimpleVectorStore(), name)
        return self._storage_context.vector_stores[name]

    def get_chunks(self, ids: Sequence[str]) -> list[TextNode]:
        """Chunk TextNodes from the docstore, in the order asked, skipping unknown ids."""
        found = []
        for node_id in ids:
            node = self.docstore.get_node(node_id, raise_error=False)
            if isinstance(node, TextNode):
                found.append(node)
        return found

    def doc_order(self, doc_id: str) -> Optional[int]:
        """Document order (insertion order) of an indexed document."""
        return self._index_struct.doc_order.get(doc_id)

    def extraction_report(self) -> list[dict[str, str]]:
        """Chunks whose extraction failed: ``{doc_id, chunk_id, reason}`` (they stay as text)."""
        return [dict(f) for f in self._index_struct.failures]

    def llm_stats(self) -> dict[str, Any]:
        """LLM calls, cache hits, failures, retries and tokens of every build so far."""
        return dict(self._index_struct.llm_stats)

    @property
    def ref_doc_info(self) -> Dict[str, RefDocInfo]:
        info = {}
        for doc_id in self._index_struct.doc_order:
            ref = self.docstore.get_ref_doc_info(doc_id)
            if ref is not None:
                info[doc_id] = ref
        return info

    # -- insertion ------------------------------------------------------------------------------
    def insert(self, document: Document, **insert_kwargs: Any) -> None:
        """Index one document; re-inserting a known document id replaces it."""
        validate_document(document)
        run_sync(self.ainsert(document, **insert_kwargs))

    async def ainsert(self, document: Document, **insert_kwargs: Any) -> None:
        await self.ainsert_documents([document])

    def insert_documents(self, documents: Sequence[Document]) -> None:
        """Index several documents in one build (extraction runs concurrently across them)."""
        run_sync(self.ainsert_documents(documents))

    async def ainsert_documents(self, documents: Sequence[Document]) -> None:
        """Validate all, chunk, extract, build, embed; then commit document by document."""
        for doc in documents:
            validate_document(doc)
        orders = self._doc_orders([doc.id_ for doc in documents])
        groups = [
            (doc, doc.id_, orders[doc.id_], self._chunk(doc, orders[doc.id_])) for doc in documents
        ]
        await self._aindex_groups(groups)

    def insert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        run_sync(self.ainsert_nodes(nodes, **insert_kwargs))

    async def ainsert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        """Index pre-chunked nodes (their ids are kept; document builders need documents)."""
        await self._aindex_nodes(nodes)

    def _insert(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        run_sync(self._aindex_nodes(nodes))

    async def _aindex_nodes(self, nodes: Sequence[BaseNode]) -> None:
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
        orders = self._doc_orders(list(by_doc))
        for doc_id, chunks in by_doc.items():
            for chunk in chunks:
                chunk.metadata[DOC_ORDER_KEY] = orders[doc_id]
                hide_internal_keys(chunk)
        await self._aindex_groups(
            [(None, doc_id, orders[doc_id], chunks) for doc_id, chunks in by_doc.items()]
        )

    def _doc_orders(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """Insertion order; a re-inserted document keeps its place in the story.

        Nothing is recorded here: the order is stored when the document is committed.
        """
        known = self._index_struct.doc_order
        orders: dict[str, int] = {}
        next_order = max(known.values(), default=-1) + 1
        for doc_id in doc_ids:
            if doc_id in known:
                orders[doc_id] = known[doc_id]
            elif doc_id not in orders:
                orders[doc_id] = next_order
                next_order += 1
        return orders

    def _chunk(self, doc: Document, doc_order: int) -> list[TextNode]:
        """SentenceSplitter chunks with deterministic ids and absolute char offsets."""
        chunks = [n for n in self._splitter.get_nodes_from_documents([doc]) if n.get_content()]
        renamed: dict[str, str] = {}
        cursor = 0
        for chunk in chunks:
            text = chunk.get_content(metadata_mode=MetadataMode.NONE)
            start = chunk.start_char_idx
            if start is None:
                found = doc.text.find(text, cursor)
                start = found if found >= 0 else cursor
            chunk.start_char_idx, chunk.end_char_idx = start, start + len(text)
            cursor = start + 1
            new_id = make_id(doc.id_, NodeKind.CHUNK, (start,), text)
            renamed[chunk.node_id] = new_id
            chunk.id_ = new_id
            chunk.metadata[DOC_ORDER_KEY] = doc_order
            hide_internal_keys(chunk)
        for chunk in chunks:
            for rel in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
                info = chunk.relationships.get(rel)
                if isinstance(info, RelatedNodeInfo) and info.node_id in renamed:
                    info.node_id = renamed[info.node_id]
        return chunks

    @property
    def extractors(self) -> list[TransformComponent]:
        """The chunk extractors: the ones given, else the defaults once a build chose them."""
        return list(self._extractors_arg or self._default_extractors)

    def _resolve_extractors(self) -> list[TransformComponent]:
        if self._extractors_arg is not None:
            return self._extractors_arg
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

    async def _aindex_groups(
        self, groups: Sequence[tuple[Optional[Document], str, int, list[TextNode]]]
    ) -> None:
        """Phase 1 computes everything in memory; phase 2 commits each document."""
        runner = self.llm_runner if self._extractors_arg is None else None
        stats_before = runner.stats.as_dict() if runner is not None else {}
        chunks = [c for *_, doc_chunks in groups for c in doc_chunks]
        for extractor in self._resolve_extractors():
            chunks = list(await extractor.acall(chunks, show_progress=self._show_progress))
        by_id = {c.node_id: c for c in chunks}
        staged = []
        for document, doc_id, order, doc_chunks in groups:
            extracted = [by_id[c.node_id] for c in doc_chunks if c.node_id in by_id]
            staged.append(await self._astage(document, doc_id, order, extracted))
        vectors = await self._aembed([s.graph for s in staged])
        for stage in staged:
            await self._acommit(stage, vectors)
        if runner is not None:
            runner.flush()
            _add_stats(self._index_struct.llm_stats, runner.stats.as_dict(), stats_before)
        await self._arefresh_struct()

    async def _astage(
        self, document: Optional[Document], doc_id: str, order: int, chunks: list[TextNode]
    ) -> _StagedDoc:
        """Collect one document's graph in a staging store: chunks, fragments, story edges."""
        from llama_index_e2rag.extract.linking import story_order_edges

        graph = NetworkXGraphStore()
        graph.upsert_nodes(chunk_graph_node(c) for c in chunks)
        edges: list[GraphEdge] = []
        failures = []
        for chunk in chunks:
            nodes, chunk_edges, reason = pop_graph(chunk)
            graph.upsert_nodes(nodes)
            edges.extend(chunk_edges)
            if reason:
                failures.append({"doc_id": doc_id, "chunk_id": chunk.node_id, "reason": reason})
        graph.upsert_edges(edges)
        graph.upsert_edges(story_order_edges(graph, doc_id))
        if document is not None:
            for builder in self._doc_builders:
                adopt = getattr(builder, "use_llm_runner", None)
                if adopt is not None:
                    adopt(self.llm_runner)
                new_nodes, new_edges = await builder.abuild(document, order, chunks, graph)
                graph.upsert_nodes(new_nodes)
                graph.upsert_edges(new_edges)
        return _StagedDoc(document, doc_id, order, chunks, graph, failures)

    async def _aembed(self, graphs: Sequence[GraphStore]) -> dict[str, list[float]]:
        """Embed every embeddable staged node once per distinct text (text -> vector)."""
        texts = sorted(
            {node.text for graph in graphs for node in graph.nodes() if _embeddable(node)}
        )
        if not texts:
            return {}
        vectors = await self.embed_model.aget_text_embedding_batch(
            texts, show_progress=self._show_progress
        )
        self._index_struct.config["embed_model"] = self.embed_model.model_name
        return dict(zip(texts, vectors, strict=True))

    async def _acommit(self, stage: _StagedDoc, vectors: dict[str, list[float]]) -> None:
        """Replace the document everywhere: graph, vector namespaces, docstore, failures."""
        await self._aremove_doc(stage.doc_id, keep_order=True)
        self._e2rag_graph.upsert_nodes(stage.graph.nodes())
        self._e2rag_graph.upsert_edges(stage.graph.edges())
        by_kind: dict[NodeKind, list[TextNode]] = {}
        for node in stage.graph.nodes():
            if _embeddable(node):
                by_kind.setdefault(node.kind, []).append(_vector_node(node, vectors[node.text]))
        for kind, text_nodes in by_kind.items():
            await self.vector_store(kind).async_add(text_nodes)
        await self._docstore.async_add_documents(stage.chunks, allow_update=True)
        if stage.document is not None:
            await self._docstore.aset_document_hash(stage.doc_id, stage.document.hash)
        self._index_struct.failures.extend(stage.failures)
        self._index_struct.doc_order[stage.doc_id] = stage.order

    def update_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        """Replace a document, keeping its place in the story (insert already replaces)."""
        self.insert(document)

    async def aupdate_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        await self.ainsert(document)

    # -- deletion -------------------------------------------------------------------------------
    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **delete_kwargs: Any
    ) -> None:
        """Remove a document's chunks, graph nodes, edges and vectors in every namespace."""
        run_sync(self.adelete_ref_doc(ref_doc_id, delete_from_docstore, **delete_kwargs))

    async def adelete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **delete_kwargs: Any
    ) -> None:
        if ref_doc_id not in self._index_struct.doc_order:
            logger.warning("ref_doc_id %s not found, nothing deleted.", ref_doc_id)
            return
        await self._aremove_doc(ref_doc_id, keep_order=False, docstore=delete_from_docstore)
        await self._arefresh_struct()

    async def _aremove_doc(self, doc_id: str, keep_order: bool, docstore: bool = True) -> None:
        self._e2rag_graph.delete_doc(doc_id)
        for name, store in self._storage_context.vector_stores.items():
            if name.startswith(NAMESPACE_PREFIX):
                await store.adelete(doc_id)
        if docstore and await self._docstore.aget_ref_doc_info(doc_id) is not None:
            await self._docstore.adelete_ref_doc(doc_id, raise_error=False)
        self._index_struct.failures = [
            f for f in self._index_struct.failures if f["doc_id"] != doc_id
        ]
        if not keep_order:
            self._index_struct.doc_order.pop(doc_id, None)

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        """Remove one graph node (and its edges) and its vector."""
        node = self._e2rag_graph.get_node(node_id)
        if node is None:
            return
        self._e2rag_graph.delete_nodes([node_id])
        if node.kind in EMBEDDED_KINDS:
            self.vector_store(node.kind).delete_nodes([node_id])

    # -- persistence ----------------------------------------------------------------------------
    async def _arefresh_struct(self) -> None:
        """Serialise the graph into the struct and re-add it, so ``persist`` writes it."""
        self._index_struct.graph_json = json.dumps(self._e2rag_graph.to_dict(), ensure_ascii=False)
        self._index_struct.config.update(
            chunk_size=self._chunk_size,
            chunk_overlap=self._chunk_overlap,
            combined=self._combined,
        )
        await self._storage_context.index_store.async_add_index_struct(self._index_struct)

    # -- retrieval ------------------------------------------------------------------------------
    def as_retriever(self, mode: str = "entity_event", **kwargs: Any) -> BaseRetriever:
        """``mode``: entity_event | grounded | chrono | vector; kwargs go to the retriever."""
        if mode not in _RETRIEVER_MODES:
            raise ValueError(
                f"unknown retrieval mode {mode!r}; choose one of {', '.join(RETRIEVER_MODES)}"
            )
        module_name, class_name = _RETRIEVER_MODES[mode]
        retriever_cls = getattr(importlib.import_module(module_name), class_name)
        return retriever_cls(self, **kwargs)

    def as_query_engine(  # type: ignore[override]
        self,
        mode: str = "entity_event",
        hyde: Optional[str] = None,
        llm: Optional[LLM] = None,
        streaming: bool = False,
        **kwargs: Any,
    ) -> BaseQueryEngine:
        """A ``RetrieverQueryEngine`` over ``as_retriever(mode, **kwargs)``.

        The answer LLM reads the assembled narrative context; with no LLM configured answers
        are extractive. ``hyde`` selects an E²RAG HyDE variant (``entity_event`` only).
        """
        from llama_index_e2rag.query_engine import build_query_engine

        return build_query_engine(
            self, mode=mode, hyde=hyde, llm=llm, streaming=streaming, **kwargs
        )


def _embeddable(node: GraphNode) -> bool:
    return (
        node.kind in EMBEDDED_KINDS
        and node.attrs.get("embed") is not False
        and bool(node.text.strip())
    )


def _vector_node(node: GraphNode, embedding: list[float]) -> TextNode:
    """The vector store record of a graph node: same id, source document, flat metadata."""
    return TextNode(
        id_=node.id,
        text=node.text,
        embedding=embedding,
        metadata={
            "kind": node.kind.value,
            "doc_id": node.doc_id,
            "chunk_id": node.chunk_id or "",
            "doc_order": node.pos[0],
            "char_offset": node.pos[1],
            "ordinal": node.pos[2],
        },
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=node.doc_id)},
    )


def _add_stats(totals: dict[str, Any], after: dict[str, Any], before: dict[str, Any]) -> None:
    """Add one build's LLM spending (``after - before``) to the running totals."""
    for key, value in after.items():
        if isinstance(value, dict):
            _add_stats(totals.setdefault(key, {}), value, before.get(key, {}))
        elif isinstance(value, (int, float)):
            totals[key] = totals.get(key, 0) + value - before.get(key, 0)


def _graph_from_json(text: str) -> NetworkXGraphStore:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphStoreError(f"the e2rag graph in the index store is corrupt: {exc}") from exc
    return NetworkXGraphStore.from_dict(data, source="the e2rag graph in the index store")


INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS[E2RAG_STRUCT_TYPE] = E2RAGIndexStruct  # type: ignore[index]
INDEX_STRUCT_TYPE_TO_INDEX_CLASS[E2RAG_STRUCT_TYPE] = E2RAGIndex  # type: ignore[index]
