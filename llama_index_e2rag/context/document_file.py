"""The documents' story maps on disk, so a new process does not read every chunk to place evidence.

Placing a result in its story ("Chapter IV · 9% through the story"), naming its source and
finding the chunk a derived passage was read from all need a document's reading
(``story_text.read_document``): one read of every chunk of the document, decoding each stored
chunk (a 1M-word store's 20k chunks: ~3 s, a tenth of that at 100k words), on the first query of
every process. What it derives depends only on the graph's content, so it is a read model like
the passage table (``stores.read_model_file``): ``e2rag index`` writes it after indexing,
otherwise the first query after a write does, and the next process reads one small file. A file
built for other content (or damaged) is not used. Readers never call this module:
``story_position.document_chunks`` consults it for any persisted stores it is given.
"""

from __future__ import annotations

from typing import Any, Hashable

from llama_index_e2rag.context.story_text import DocumentChunks, StoryMap, read_document
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.state_cache import StateCache

#: The file in ``e2rag/readmodels/``: two JSON lines, the content key and checksum, then the
#: documents' readings.
DOCUMENTS_FILE = "documents.jsonl"
#: Bumped when the encoding or what a reading holds changes: an older file is rebuilt.
FORMAT = 1
MODEL = read_model_file.ReadModel(DOCUMENTS_FILE, FORMAT)


def encode(found: DocumentChunks) -> dict[str, Any]:
    story = found.story
    return {
        "story": None if story is None else {
            "length": story.length,
            "headings": [list(h) for h in story.headings],
            "source": story.source,
        },
        "first_chunk": found.first_chunk,
        "source_spans": [list(s) for s in found.source_spans],
    }


def decode(data: dict[str, Any]) -> DocumentChunks:
    story = data["story"]
    return DocumentChunks(
        story=None if story is None else StoryMap(
            length=int(story["length"]),
            headings=tuple((int(at), str(label)) for at, label in story["headings"]),
            source=story["source"],
        ),
        first_chunk=data["first_chunk"],
        source_spans=tuple((int(s), int(e), str(c)) for s, e, c in data["source_spans"]),
    )


def _load(stores: read_model_file.Stores, state: Hashable) -> dict[str, DocumentChunks]:
    """Every document's reading for content ``state``: from the file when it was built for
    it, else read from the chunks and saved."""
    graph = stores.graph
    doc_ids = sorted(graph.doc_ids())
    key = MODEL.content_key(stores, state)
    data = MODEL.read(stores, key)
    if isinstance(data, dict) and sorted(data) == doc_ids:
        return {doc_id: decode(item) for doc_id, item in data.items()}
    readings = {doc_id: read_document(graph, doc_id) for doc_id in doc_ids}
    if graph.version == state:  # not a mix of two states
        MODEL.write(stores, key, {doc_id: encode(r) for doc_id, r in readings.items()})
    return readings


_LOADED: StateCache[dict[str, DocumentChunks]] = StateCache(_load)


def readings(stores: read_model_file.Stores) -> dict[str, DocumentChunks]:
    """Every document's reading of the persisted stores' current content, from the read model
    (``story_position.document_chunks`` asks; once per content state)."""
    return _LOADED.get(stores)


def save_read_model(stores: read_model_file.Stores) -> None:
    """Derive and persist the documents' readings now (``e2rag index`` after its write)."""
    read_model_file.save_now(stores, _LOADED)
