"""``E2RAGIndex``: build, update, persist and load the narrative graph as a LlamaIndex index.

A façade wiring llama-index's ``BaseIndex`` API to collaborators that work without it:
``ingest.models`` (models, resolved lazily), ``ingest.writer`` (inserts, layers, deletes),
``answer.engines`` (retrievers and engines), ``context.timeline`` and ``visualize`` (reads), over
the ``Stores`` that ``persist.storage`` opens. Importing it adds the index type to llama-index's
two registries, which ``load_index_from_storage`` needs; nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.chat_engine.types import BaseChatEngine
from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS
from llama_index.core.indices.base import BaseIndex
from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS
from llama_index.core.llms import LLM
from llama_index.core.schema import BaseNode, Document, TransformComponent
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_e2rag.answer.engines import EngineFactory
from llama_index_e2rag.context.timeline import Timeline, entity_timeline
from llama_index_e2rag.extract.builders import DocumentBuilder, restore_builders
from llama_index_e2rag.extract.chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from llama_index_e2rag.extract.passages import DEFAULT_PASSAGE_WORDS
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.ingest.layers import LayersAdded
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.ingest.ray_workers import RayIngest, ray_option
from llama_index_e2rag.ingest.validation import validate_document, validate_documents
from llama_index_e2rag.ingest.writer import IndexWriter
from llama_index_e2rag.llm.runner import run_sync
from llama_index_e2rag.modes import DEFAULT_MODE, RETRIEVER_MODES
from llama_index_e2rag.persist import storage as persistence
from llama_index_e2rag.persist.index_store import STRUCT_TYPES
from llama_index_e2rag.persist.struct import E2RAGIndexStruct
from llama_index_e2rag.schema import EMBEDDED_KINDS
from llama_index_e2rag.stores.port import Stores

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "EMBEDDED_KINDS",
    "RETRIEVER_MODES",
    "E2RAGIndex",
    "E2RAGIndexStruct",
    "validate_document",
]


class _FromSettings:
    """Given to ``BaseIndex.__init__`` as the index's transformations when the caller gave
    none, so that it does not read ``Settings.transformations`` there (see
    ``E2RAGIndex._transformations``)."""


_FROM_SETTINGS: Any = _FromSettings()


def _models_property(name: str, doc: str) -> Any:
    """A read-only property of the index that is its ``IndexModels``'s (the façade's wiring)."""
    return property(lambda index: getattr(index._models, name), doc=doc)


class E2RAGIndex(BaseIndex[E2RAGIndexStruct]):
    """Entity–event narrative graph index (E²RAG) with pluggable extractors and builders.

    Args:
        llm, embed_model, extractors, chunk_size, chunk_overlap, combined, num_workers,
            max_retries, llm_timeout, cache_dir: the models and how they are called, all
            resolved lazily (``ingest.models.IndexModels`` documents each).
        doc_builders: ``DocumentBuilder``s run once per document after extraction; restorable
            ones (ChronoRAG's) are recorded and come back when the index is loaded without them.
        passage_words: length of the ``narrative`` mode's sentence-aligned passages (default 30).
        graph_store, vector_store, vector_stores, persist_dir: where the stores live and
            where a moved store is (``persist.storage.open_stores`` documents each).
        allow_duplicates: index a new document even when its text is already indexed under
            another id (or comes twice in one call); by default it is skipped with a logged
            warning (``same_text``: llama-index's ``DocstoreStrategy.DUPLICATES_ONLY`` for new
            ids, by text alone, and upserts for known ids). ``insert``, ``insert_documents`` and
            their async forms take it per call too.
        ray: stage documents (chunking, extraction, layers, embedding) on Ray workers and
            commit them here as one write: ``True`` (a local cluster, or the one joined),
            an address (``"auto"``, ``"ray://host:10001"``) or a ``RayIngest``; needs the
            ``ray`` extra. ``insert_documents`` takes it per call too.

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
        ray: Union[None, bool, str, RayIngest] = None,
        **kwargs: Any,
    ) -> None:
        # the stores first: a loaded index's settings are the ones its graph committed last
        storage_context = storage_context or StorageContext.from_defaults()
        self._stores, vectors_label = persistence.open_stores(
            storage_context, index_struct, graph_store, vector_store, vector_stores, persist_dir
        )
        config = dict(index_struct.config) if index_struct is not None else {}
        if passage_words is None:
            passage_words = config.get("passage_words") or DEFAULT_PASSAGE_WORDS
        self.passage_words: int = passage_words
        if self.passage_words < 1:
            raise ValueError(f"passage_words must be at least 1, got {self.passage_words}")
        self._models = IndexModels(
            llm=llm,
            embed_model=embed_model,
            extractors=extractors,
            chunk_size=chunk_size or config.get("chunk_size"),
            chunk_overlap=chunk_overlap if chunk_overlap is not None else config.get("chunk_overlap"),
            combined=combined if combined is not None else config.get("combined", False),
            num_workers=num_workers,
            max_retries=max_retries,
            llm_timeout=llm_timeout,
            cache_dir=cache_dir,
            built_with=lambda: self._index_struct.config.get("embed_model"),
        )
        if doc_builders is None:
            doc_builders = restore_builders(config.get("doc_builders", {}))
        self._writer = IndexWriter(
            self._stores,
            self._models,
            doc_builders,
            self.passage_words,
            vectors_label,
            struct=lambda: self._index_struct,
            index_store=lambda: self._storage_context.index_store,
            show_progress=show_progress,
            ray=ray_option(ray),
        )
        self._engines = EngineFactory(self._stores, self._models, self.passage_words)
        self.doc_orders = self._writer.doc_orders
        self.allow_duplicates = allow_duplicates
        storage_context.graph_store.show_progress = show_progress  # type: ignore[attr-defined]
        super().__init__(
            nodes=nodes,
            index_struct=index_struct,
            storage_context=storage_context,
            callback_manager=callback_manager,
            transformations=kwargs.pop("transformations", None) or _FROM_SETTINGS,
            show_progress=show_progress,
            **kwargs,
        )

    @property
    def _transformations(self) -> list[TransformComponent]:
        """llama-index's ingestion transformations of this index, read from ``Settings`` only
        when asked: its default, a ``SentenceSplitter``, loads tiktoken's vocabulary (~0.5 s of
        every load), and this index never runs them (inserts chunk with the index's own
        splitter, ``extract.chunking``)."""
        if self._given_transformations is None:
            self._given_transformations = Settings.transformations
        return self._given_transformations

    @_transformations.setter
    def _transformations(self, value: Any) -> None:
        self._given_transformations = None if value is _FROM_SETTINGS else value

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
        run_sync(index._writer.abuild(documents, index.allow_duplicates))
        return index

    def _build_index_from_nodes(
        self, nodes: Sequence[BaseNode], **build_kwargs: Any
    ) -> E2RAGIndexStruct:
        """Index pre-chunked nodes (grouped by their source document)."""
        self._index_struct = E2RAGIndexStruct()
        run_sync(self._writer.ainsert_nodes(nodes))
        return self._index_struct

    # unlike the base class's, nothing reaches the docstore before extraction succeeded
    build_index_from_nodes = _build_index_from_nodes

    # -- models (``IndexModels``: resolved lazily so that loading never needs an API key) -------
    llm = _models_property("llm", "The LLM of extraction and answers (``None``: LLM-free).")
    llm_runner = _models_property("llm_runner", "The retrying, caching door to ``llm``.")
    embed_model = _models_property(
        "embed_model", "The embedding of every node kind; warns if it differs from the build's."
    )
    chunk_size = _models_property("chunk_size", "Tokens per chunk (given, stored or default).")
    chunk_overlap = _models_property("chunk_overlap", "Tokens shared by neighbouring chunks.")
    splitter = _models_property("splitter", "The ``SentenceSplitter`` of ``chunk_size``.")
    extractors = _models_property(
        "extractors", "The chunk extractors: the ones given, else the defaults a build chose."
    )

    # -- layers (``ingest.layers``) -------------------------------------------------------------
    @property
    def doc_builders(self) -> list[DocumentBuilder]:
        """The document builders run on every inserted document (given or restored)."""
        return list(self._writer.doc_builders)

    def add_doc_builders(self, builders: Sequence[DocumentBuilder]) -> None:
        """Run ``builders`` on later inserts too, keeping the given or restored ones (passing
        ``doc_builders=`` replaces them). A builder whose ``config_name`` is already there is
        skipped, so ``e2rag index --sentence-graph`` on a chrono store keeps one of each. The
        next write records the new set for later loads."""
        self._writer.add_doc_builders(builders)

    def add_layers(
        self, builders: Sequence[DocumentBuilder], documents: Sequence[Document] = ()
    ) -> LayersAdded:
        """Build the layers of ``builders`` the index lacks for every stored document, without
        extracting anything again, and run them on later inserts too (``layers.py``)."""
        return run_sync(self.aadd_layers(builders, documents))

    async def aadd_layers(
        self, builders: Sequence[DocumentBuilder], documents: Sequence[Document] = ()
    ) -> LayersAdded:
        """``add_layers``: builders already present are skipped; the stored graph of each
        document is their input, only their nodes are embedded, and every document commits in
        one write. ``documents`` may give stored documents' source text (used when unchanged)."""
        return await self._writer.aadd_layers(builders, documents)

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

    def entity_timeline(self, name: str, *, doc_id: Optional[str] = None) -> Timeline:
        """A fused entity's mentions and events in story order, with positions (needs the
        ``EventGraphBuilder`` layer; ``timeline.entity_timeline``)."""
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
        refs = {d: self.docstore.get_ref_doc_info(d) for d in self._stores.graph.doc_orders()}
        return {doc_id: ref for doc_id, ref in refs.items() if ref is not None}

    # -- writes (``IndexWriter``) ---------------------------------------------------------------
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
        self,
        documents: Sequence[Document],
        *,
        allow_duplicates: Optional[bool] = None,
        ray: Union[None, bool, str, RayIngest] = None,
    ) -> None:
        """Index several documents in one build (extraction runs concurrently across them).
        ``allow_duplicates`` (default: the index's) keeps new documents whose text is indexed;
        ``ray`` (default: the index's) stages them on Ray workers."""
        run_sync(self.ainsert_documents(documents, allow_duplicates=allow_duplicates, ray=ray))

    async def ainsert_documents(
        self,
        documents: Sequence[Document],
        *,
        allow_duplicates: Optional[bool] = None,
        ray: Union[None, bool, str, RayIngest] = None,
    ) -> None:
        """Validate all, skip the same text twice, chunk, extract, build, embed; then commit
        them as one."""
        validate_documents(documents)
        allow = self.allow_duplicates if allow_duplicates is None else allow_duplicates
        await self._writer.ainsert_documents(documents, allow, ray_option(ray))

    def insert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        run_sync(self.ainsert_nodes(nodes, **insert_kwargs))

    async def ainsert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        """Index pre-chunked nodes (their ids are kept; document builders need documents)."""
        await self._writer.ainsert_nodes(nodes)

    def _insert(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        run_sync(self._writer.ainsert_nodes(nodes))

    def update_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        """Replace a document, keeping its place in the story (insert already replaces)."""
        self.insert(document)

    async def aupdate_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        await self.ainsert(document)

    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **delete_kwargs: Any
    ) -> None:
        """Remove a document's chunks, graph nodes, edges and vectors."""
        run_sync(self.adelete_ref_doc(ref_doc_id, delete_from_docstore, **delete_kwargs))

    async def adelete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **delete_kwargs: Any
    ) -> None:
        await self._writer.adelete_document(ref_doc_id, delete_from_docstore)

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        """Remove one graph node (and its edges) and its vector, as one commit."""
        self._stores.delete_nodes([node_id])

    # -- retrieval and answers (``EngineFactory``) ----------------------------------------------
    def as_retriever(self, mode: str = DEFAULT_MODE, **kwargs: Any) -> BaseRetriever:
        """``mode``: narrative (default) | entity_event | grounded | chrono | sentence_graph |
        event_graph | vector; kwargs go to the retriever (``budget_words=`` and
        ``filters=MetadataFilters(...)`` on document metadata work in every mode)."""
        return self._engines.retriever(mode, **kwargs)

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
        return self._engines.query_engine(mode, hyde, llm, streaming, **kwargs)

    def as_chat_engine(  # type: ignore[override]
        self,
        chat_mode: str = "condense_plus_context",
        llm: Optional[LLM] = None,
        mode: str = DEFAULT_MODE,
        **kwargs: Any,
    ) -> BaseChatEngine:
        """A chat engine over ``as_retriever(mode, ...)``.

        With an LLM (``llm=`` or the index's): llama-index's engine of ``chat_mode``
        (``condense_plus_context`` by default, also ``context``, ``condense_question``,
        ``simple``), its own arguments (``system_prompt``, ``memory`` …) split from the
        retriever's as ``as_query_engine`` does. Without one: an offline chat engine whose
        every answer is the extractive one (no LLM rewrites follow-ups).
        """
        return self._engines.chat_engine(chat_mode, llm, mode, **kwargs)

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
        # the page's renderer (HTML and SVG building) is loaded only when a page is asked for
        from llama_index_e2rag.visualize import stores_page

        results = (
            self.as_retriever(mode=mode, **retriever_kwargs).retrieve(query)
            if query is not None
            else []
        )
        return stores_page(self._stores, results, query=query, entity=entity, mode=mode, path=path)


# the real classes take the place of the lazy entries ``registration`` put there
for _type in STRUCT_TYPES:
    INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS[_type] = E2RAGIndexStruct  # type: ignore[index]
    INDEX_STRUCT_TYPE_TO_INDEX_CLASS[_type] = E2RAGIndex  # type: ignore[index]
