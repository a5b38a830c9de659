"""The write path of ``E2RAGIndex``: validate, chunk, stage, embed, then hand the stores a write.

A build runs in two phases so that a failure never leaves a half-written index: everything of a
document is first computed in a staging graph (``stage_document``) and embedded
(``embed_staged``); only then does ``document_write`` turn it into the one ``DocumentWrite`` the
stores commit. ``DocOrders`` and ``WriteLock`` make concurrent inserts (coroutines of one
loop, or threads each running their own loop) safe: distinct story orders, one commit at a time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import threading
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Optional,
    Sequence,
)

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
)

from llama_index_e2rag import node_vectors
from llama_index_e2rag.builders import DocumentBuilder, split_result
from llama_index_e2rag.errors import BadDocumentError
from llama_index_e2rag.extract.base import (
    DOC_ORDER_KEY,
    chunk_graph_node,
    hide_internal_keys,
    pop_graph,
)
from llama_index_e2rag.extract.passages import (
    DEFAULT_PASSAGE_WORDS,
    build_passages,
    document_text,
)
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind, make_id
from llama_index_e2rag.stores import CHUNK_NODE_ATTR, DocumentWrite
from llama_index_e2rag.vectors.base import VectorRecord

if TYPE_CHECKING:
    from llama_index_e2rag.llm import LLMRunner

logger = logging.getLogger(__name__)

#: Node kinds that are embedded when built.
EMBEDDED_KINDS = (
    NodeKind.CHUNK,
    NodeKind.SENTENCE,
    NodeKind.MENTION,
    NodeKind.EVENT,
    NodeKind.FACT,
    NodeKind.ENTITY,
    NodeKind.PASSAGE,
)
#: LightRAG's defaults, which the E²RAG paper keeps (appendix C); the overlap keeps their ratio.
DEFAULT_CHUNK_SIZE = 1200
DEFAULT_CHUNK_OVERLAP = DEFAULT_CHUNK_SIZE // 12
#: Share of non-text characters above which a document is refused as binary/undecodable.
_MAX_NON_TEXT_SHARE = 0.05
#: The control characters plain text is made of (line and tab controls): never "non-text".
_ALLOWED_CONTROLS = re.compile(r"[\n\r\t\f\v]+")
#: A letter or a digit of any script: a text without one has no words to index.
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
#: A whitespace-free run longer than this holding more than ``MAX_STOPS_IN_RUN`` stops (. ! ?)
#: is cut into pieces this long before the chunker's sentence tokenizer sees it (see
#: ``run_safe_splitter``). White space is ASCII white space here, the only kind NLTK's punkt
#: splits at (not U+00A0). URLs and CJK text (no ASCII stops) stay whole.
MAX_UNBROKEN_RUN = 100
MAX_STOPS_IN_RUN = 10
_LONG_RUN = re.compile(r"[^ \t\n\r\f\v]{%d,}" % (MAX_UNBROKEN_RUN + 1))
_STOP = re.compile(r"[.!?]")
#: How long a waiting commit yields to its event loop between tries of the write lock.
_LOCK_POLL_SECONDS = 0.005


def default_chunk_size(embed_model: BaseEmbedding) -> int:
    """``DEFAULT_CHUNK_SIZE``, capped at the embedding's input limit when it declares one.

    An embedding truncates longer inputs (the offline MiniLM at 256 word pieces), so a larger
    chunk would be retrieved by the vector of its first part only.
    """
    limit = getattr(embed_model, "max_length", None)
    if isinstance(limit, int) and limit > 0:
        return min(DEFAULT_CHUNK_SIZE, limit)
    return DEFAULT_CHUNK_SIZE


def default_chunk_overlap(chunk_size: int) -> int:
    """LightRAG's overlap ratio (100 tokens per 1,200)."""
    return chunk_size // 12


def validate_documents(documents: Sequence[Document]) -> None:
    """Refuse a batch before any work: a document id given twice (the later one would silently
    replace the earlier), or any document ``validate_document`` refuses."""
    _refuse_duplicate_ids((doc.id_ for doc in documents), "document")
    for doc in documents:
        validate_document(doc)


def validate_document(doc: Document) -> None:
    """Refuse what cannot be indexed or saved, before anything is written: empty text, binary or
    undecodable text, text without a single word, metadata that is not JSON.

    Every check reads the whole text at C speed (a 6 MB text: about 0.1 s).
    """
    text = doc.text or ""
    if not text.strip():
        raise BadDocumentError(f"document {doc.id_!r} is empty: there is no text to index")
    if "\x00" in text:
        raise BadDocumentError(
            f"document {doc.id_!r} contains NUL bytes, so it looks binary; "
            "convert it to plain text first (e.g. extract the text of a PDF)"
        )
    non_text = _non_text_count(text)
    if non_text / len(text) > _MAX_NON_TEXT_SHARE:
        raise BadDocumentError(
            f"document {doc.id_!r} is not readable text ({non_text / len(text):.0%} of its "
            "characters are control or undecodable characters); check its encoding"
        )
    if _LETTER_OR_DIGIT.search(text) is None:
        raise BadDocumentError(
            f"document {doc.id_!r} has no words (not one letter or digit in its {len(text):,} "
            "characters): there is nothing to index"
        )
    _refuse_unsaveable_metadata(doc, "document")


def validate_nodes(nodes: Sequence[BaseNode]) -> None:
    """The checks of pre-chunked nodes (``insert_nodes``, ``E2RAGIndex(nodes=...)``) before any
    work: no node id twice in one call, metadata that JSON can save."""
    _refuse_duplicate_ids((node.node_id for node in nodes), "node")
    for node in nodes:
        _refuse_unsaveable_metadata(node, "node")


def _refuse_duplicate_ids(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for node_id in ids:
        if node_id in seen:
            raise BadDocumentError(
                f"{what} id {node_id!r} is given twice in one call (the later {what} would "
                f"silently replace the earlier); give each {what} its own id_"
            )
        seen.add(node_id)


def _non_text_count(text: str) -> int:
    """Undecodable (U+FFFD) and non-printable characters other than line and tab controls.

    Lines are checked with ``str.isprintable`` and only the lines that fail are counted
    character by character (``Counter``, in C), so plain text costs one pass.
    """
    count = text.count("\ufffd")
    odd = [line for line in _ALLOWED_CONTROLS.split(text) if not line.isprintable()]
    if odd:
        counts = Counter("".join(odd))
        count += sum(n for ch, n in counts.items() if not ch.isprintable())
    return count


def _refuse_unsaveable_metadata(node: BaseNode, what: str) -> None:
    """llama-index saves metadata with ``json.dumps`` (docstore, our graph store, vector stores):
    a ``datetime``, a set or any other object fails there, after work was done, and NaN or an
    infinity is not JSON (``json.dumps`` writes it, PostgreSQL's jsonb refuses it). Refuse it here,
    naming the key (dotted for nested ones: ``meta.published``, ``tags[2]``)."""
    metadata = node.metadata
    try:
        json.dumps(metadata, allow_nan=False)
        return
    except (TypeError, ValueError, RecursionError) as exc:
        error: BaseException = exc
    found = _unsaveable_value(metadata)
    if found is None:  # a reference cycle or nesting too deep for the encoder
        raise BadDocumentError(
            f"{what} {node.node_id!r}: its metadata cannot be saved as JSON "
            f"({type(error).__name__}: {error}); give plain, acyclic values"
        )
    path, problem = found
    raise BadDocumentError(
        f"{what} {node.node_id!r}: metadata key {path!r} {problem}, which is not JSON (metadata "
        "is saved as JSON: docstore, graph store, vector stores); convert it first, e.g. a date "
        "to an ISO string, a set to a list, NaN to None"
    )


def _unsaveable_value(metadata: Any) -> Optional[tuple[str, str]]:
    """``(path, problem)`` of the first value or key ``json.dumps(allow_nan=False)`` refuses.

    Walked with a stack, not recursion, so deep nesting cannot overflow; a container met twice is
    walked once (a shared value is fine in JSON; a cycle is left to the caller's message).
    """
    stack: list[tuple[str, Any]] = [("", metadata)]
    walked: set[int] = set()
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path, f"holds {value!r}"
        if value is None or isinstance(value, (str, int, float)):
            continue
        if id(value) in walked:
            continue
        if isinstance(value, dict):
            walked.add(id(value))
            items = []
            for key, item in value.items():
                bad_key = not (key is None or isinstance(key, (str, int, float)))
                if bad_key or (isinstance(key, float) and not math.isfinite(key)):
                    return path, f"has the key {key!r} (a {type(key).__name__})"
                items.append((_key_path(path, str(key)), item))
            stack.extend(reversed(items))
        elif isinstance(value, (list, tuple)):
            walked.add(id(value))
            stack.extend(reversed([(f"{path}[{i}]", item) for i, item in enumerate(value)]))
        else:
            name = type(value).__name__
            article = "an" if name[:1].lower() in "aeiou" else "a"
            return path, f"holds {article} {name} ({_short_repr(value)})"
    return None


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def chunk_document(splitter: SentenceSplitter, doc: Document, doc_order: int) -> list[TextNode]:
    """SentenceSplitter chunks with deterministic ids and absolute char offsets.

    A text with a long run of stops without white space (``_stop_runs``) is split with
    ``run_safe_splitter(splitter)``; every other text exactly as ``splitter`` splits it.
    """
    if next(_stop_runs(doc.text), None) is not None:
        splitter = run_safe_splitter(splitter)
    chunks = [n for n in splitter.get_nodes_from_documents([doc]) if n.get_content()]
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


def _stop_runs(text: str) -> Iterator[re.Match[str]]:
    """Whitespace-free runs longer than ``MAX_UNBROKEN_RUN`` with more than ``MAX_STOPS_IN_RUN``
    stops: where NLTK's punkt splits off a few characters at a time (see ``run_safe_splitter``)."""
    for run in _LONG_RUN.finditer(text):
        if len(_STOP.findall(text, run.start(), run.end())) > MAX_STOPS_IN_RUN:
            yield run


def run_safe_splitter(splitter: SentenceSplitter) -> SentenceSplitter:
    """``splitter`` whose sentence tokenizer first cuts each run of ``_stop_runs`` into pieces of
    ``MAX_UNBROKEN_RUN`` characters.

    Inside such a run NLTK's punkt (the splitter's sentence tokenizer) splits off only a few
    characters per call, and ``SentenceSplitter._split`` recurses on the rest: once per few
    characters, re-reading the rest each time. 48 KB of "!?.,;:-" took 45 s and ended in a
    ``RecursionError``, 48 KB of "word!?" too; cut first, they chunk in a second or less.
    """
    sentences = getattr(splitter, "_chunking_tokenizer_fn", None) or split_by_sentence_tokenizer()
    return SentenceSplitter(
        separator=splitter.separator,
        chunk_size=splitter.chunk_size,
        chunk_overlap=splitter.chunk_overlap,
        tokenizer=getattr(splitter, "_tokenizer", None),
        paragraph_separator=splitter.paragraph_separator,
        chunking_tokenizer_fn=_runs_cut_first(sentences),
        secondary_chunking_regex=splitter.secondary_chunking_regex,
        callback_manager=splitter.callback_manager,
        include_metadata=splitter.include_metadata,
        include_prev_next_rel=splitter.include_prev_next_rel,
        id_func=splitter.id_func,
    )


def _runs_cut_first(sentences: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A sentence tokenizer that hands ``sentences`` only the text between ``_stop_runs``, cuts
    each of those into ``MAX_UNBROKEN_RUN``-character pieces, and loses no character (punkt drops
    the white space before its first sentence; it is kept here)."""

    def split(text: str) -> list[str]:
        pieces: list[str] = []

        def add(segment: str) -> None:
            parts = [p for p in sentences(segment) if p]
            lost = len(segment) - sum(len(p) for p in parts)
            if lost < 0 or "".join(parts) != segment[lost:]:
                parts = [segment]  # a tokenizer that rewrites text: keep the segment whole
            elif lost:
                if pieces:
                    pieces[-1] += segment[:lost]
                else:
                    parts = [segment[:lost] + parts[0]] + parts[1:] if parts else [segment]
            pieces.extend(parts)

        done = 0
        for run in _stop_runs(text):
            if run.start() > done:
                add(text[done : run.start()])
            pieces.extend(
                text[i : min(i + MAX_UNBROKEN_RUN, run.end())]
                for i in range(run.start(), run.end(), MAX_UNBROKEN_RUN)
            )
            done = run.end()
        if done < len(text):
            add(text[done:])
        return pieces

    return split


# -- concurrency --------------------------------------------------------------------------------
class DocOrders:
    """Story order of documents, handed out atomically so concurrent inserts never share one.

    An order is reserved before extraction starts and recorded by the graph store when the
    document commits; a failed insert releases its reservation. Orders only have to increase
    with insertion, not be contiguous, so an order released after a later one was handed out
    leaves a harmless gap. ``committed`` returns the graph's ``doc_id -> order``.
    """

    def __init__(self, committed: Callable[[], dict[str, int]]) -> None:
        self._committed = committed
        self._lock = threading.Lock()
        self._reserved: dict[str, tuple[int, int]] = {}  # doc_id -> (order, holders)

    def reserve(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """Orders for ``doc_ids``: a known document keeps its place, new ones go to the end."""
        with self._lock:
            known = self._committed()
            taken = [*known.values(), *(order for order, _ in self._reserved.values())]
            next_order = max(taken, default=-1) + 1
            orders: dict[str, int] = {}
            for doc_id in doc_ids:
                if doc_id in orders:
                    continue
                if doc_id in known:
                    order = known[doc_id]
                elif doc_id in self._reserved:
                    order = self._reserved[doc_id][0]
                else:
                    order, next_order = next_order, next_order + 1
                holders = self._reserved.get(doc_id, (order, 0))[1]
                self._reserved[doc_id] = (order, holders + 1)
                orders[doc_id] = order
            return orders

    def release(self, orders: dict[str, int]) -> None:
        """End the reservations of one insert (after its commit, or after it failed)."""
        with self._lock:
            for doc_id in orders:
                order, holders = self._reserved.get(doc_id, (0, 1))
                if holders > 1:
                    self._reserved[doc_id] = (order, holders - 1)
                else:
                    self._reserved.pop(doc_id, None)


class WriteLock:
    """Serialises commits across threads (sync ``insert``) and coroutines (``ainsert``).

    A ``threading.Lock`` cannot be awaited and an ``asyncio.Lock`` belongs to one event loop,
    while every sync call runs its own loop. So a coroutine tries the thread lock without blocking
    and yields to its loop between tries; holding it across awaits then never blocks a loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(_LOCK_POLL_SECONDS)
        try:
            yield
        finally:
            self._lock.release()


# -- phase 1: in memory -------------------------------------------------------------------------
@dataclass
class StagedDoc:
    """One document computed in memory, ready to commit."""

    document: Optional[Document]
    doc_id: str
    order: int
    chunks: list[TextNode]
    graph: NetworkXGraphStore
    failures: list[dict[str, str]]


async def stage_document(
    document: Optional[Document],
    doc_id: str,
    order: int,
    chunks: list[TextNode],
    builders: Sequence[DocumentBuilder],
    llm_runner: Callable[[], Optional["LLMRunner"]],
    passage_words: int = DEFAULT_PASSAGE_WORDS,
) -> StagedDoc:
    """Collect one document's graph in a staging store: chunks, fragments, story edges,
    passages, layers.

    ``llm_runner`` is called only when a builder wants the index's runner, so building without
    LLM-using builders never resolves an LLM.
    """
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
        text, base = document.text, 0
    else:
        text, base = document_text(chunks)
    passages, passage_edges = build_passages(doc_id, order, text, chunks, passage_words, base)
    graph.upsert_nodes(passages)
    graph.upsert_edges(passage_edges)
    if document is not None:
        for builder in builders:
            adopt = getattr(builder, "use_llm_runner", None)
            if adopt is not None:
                adopt(llm_runner())
            new_nodes, new_edges, problems = split_result(
                await builder.abuild(document, order, chunks, graph)
            )
            graph.upsert_nodes(new_nodes)
            graph.upsert_edges(new_edges)
            failures.extend(
                {"doc_id": doc_id, "chunk_id": p.get("chunk_id", ""), "reason": p["reason"]}
                for p in problems
            )
    return StagedDoc(document, doc_id, order, chunks, graph, failures)


#: Texts per call into the embedding model: each call's vectors become float32 at once, so a
#: million-word build never holds hundreds of thousands of vectors as Python float lists.
EMBED_CALL_TEXTS = 2048


@dataclass
class StagedVectors:
    """One float32 row per distinct embedded text."""

    rows: dict[str, int]
    matrix: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def of(self, text: str) -> np.ndarray:
        return self.matrix[self.rows[text]]


async def embed_staged(
    embed_model: BaseEmbedding, graphs: Sequence[GraphStore], show_progress: bool = False
) -> StagedVectors:
    """Embed every text a staged node's vector is made of (``node_vectors.sources``) once,
    shortest texts first (the model pads a batch to its longest text, so similar lengths batch
    together)."""
    from tqdm.auto import tqdm

    distinct = {
        text
        for graph in graphs
        for node in graph.nodes()
        if embeddable(node)
        for text in node_vectors.sources(node, graph)
    }
    texts = sorted(distinct, key=lambda t: (len(t), t))
    parts: list[np.ndarray] = []
    with tqdm(total=len(texts), desc="Embedding", unit="text", disable=not show_progress) as bar:
        for start in range(0, len(texts), EMBED_CALL_TEXTS):
            batch = texts[start : start + EMBED_CALL_TEXTS]
            parts.append(np.asarray(await embed_model.aget_text_embedding_batch(batch), np.float32))
            bar.update(len(batch))
    matrix = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
    return StagedVectors({t: i for i, t in enumerate(texts)}, matrix)


def embeddable(node: GraphNode) -> bool:
    return (
        node.kind in EMBEDDED_KINDS
        and node.attrs.get("embed") is not False
        and bool(node.text.strip())
    )


# -- phase 2: what the stores write ------------------------------------------------------------
def document_write(stage: StagedDoc, vectors: StagedVectors) -> DocumentWrite:
    """The stores' write of one staged document: graph, vector records, chunks, failures.

    Chunk graph nodes carry their ``TextNode`` (``CHUNK_NODE_ATTR``) so results can cite the
    source from the graph alone.
    """
    nodes = stage.graph.nodes()
    chunk_nodes = {c.node_id: c for c in stage.chunks}
    for node in nodes:
        chunk = chunk_nodes.get(node.id) if node.kind == NodeKind.CHUNK else None
        if chunk is not None:
            node.attrs[CHUNK_NODE_ATTR] = chunk.to_dict()
    records = [
        vector_record(n, node_vectors.vector(n, stage.graph, vectors.of))
        for n in nodes
        if embeddable(n)
    ]
    return DocumentWrite(
        doc_id=stage.doc_id,
        order=stage.order,
        nodes=nodes,
        edges=stage.graph.edges(),
        records=records,
        chunks=stage.chunks,
        failures=stage.failures,
        doc_hash=stage.document.hash if stage.document is not None else None,
    )


def vector_record(node: GraphNode, embedding: Sequence[float]) -> VectorRecord:
    """The vector of a graph node: same id, kind and document, flat position metadata."""
    return VectorRecord(
        id=node.id,
        kind=node.kind.value,
        doc_id=node.doc_id,
        text=node.text,
        vector=np.asarray(embedding, dtype=np.float32),  # a row view when already float32
        metadata={
            "chunk_id": node.chunk_id or "",
            "doc_order": node.pos[0],
            "char_offset": node.pos[1],
            "ordinal": node.pos[2],
        },
    )


def add_stats(totals: dict[str, Any], after: dict[str, Any], before: dict[str, Any]) -> None:
    """Add LLM spending since ``before`` (``after - before``) to the running totals."""
    for key, value in after.items():
        if isinstance(value, dict):
            add_stats(totals.setdefault(key, {}), value, before.get(key, {}))
        elif isinstance(value, (int, float)):
            totals[key] = totals.get(key, 0) + value - before.get(key, 0)
