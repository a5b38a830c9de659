"""Documents into chunks: llama-index's ``SentenceSplitter`` with deterministic ids, absolute
character offsets, and a guard for text its sentence tokenizer handles in quadratic time
(runs of stops without white space, which make the splitter recurse until ``RecursionError``).
"""

from __future__ import annotations

import re
from typing import Callable, Iterator

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer
from llama_index.core.schema import (
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
)

from llama_index_e2rag.extract.base import DOC_ORDER_KEY, hide_internal_keys
from llama_index_e2rag.schema import NodeKind, make_id

#: LightRAG's defaults, which the E²RAG paper keeps (appendix C); the overlap keeps their ratio.
DEFAULT_CHUNK_SIZE = 1200
DEFAULT_CHUNK_OVERLAP = DEFAULT_CHUNK_SIZE // 12
#: A whitespace-free run longer than this holding more than ``MAX_STOPS_IN_RUN`` stops (. ! ?)
#: is cut into pieces this long before the chunker's sentence tokenizer sees it (see
#: ``run_safe_splitter``). White space is ASCII white space here, the only kind NLTK's punkt
#: splits at (not U+00A0). URLs and CJK text (no ASCII stops) stay whole.
MAX_UNBROKEN_RUN = 100
MAX_STOPS_IN_RUN = 10
_LONG_RUN = re.compile(r"[^ \t\n\r\f\v]{%d,}" % (MAX_UNBROKEN_RUN + 1))
_STOP = re.compile(r"[.!?]")


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
