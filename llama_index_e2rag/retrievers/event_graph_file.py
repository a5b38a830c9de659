"""The ``event_graph`` mode's read model on disk, so a new process does not derive it again.

Deriving the view reads every ``participates``, ``co_mention`` and ``instance_of`` edge of the
graph and every entity and event node (at 150k words ~200k edges, ~12 s of a cold first query).
What it keeps is small: the entities' and events' ids and documents in row order, who takes part
in each event, the entity graph's links in the order they were first made (so tied paths are
listed as before) and each entity's name forms. It is persisted per content state
(``stores.read_model_file``: ``e2rag index`` writes it after indexing; otherwise the first query
after a write does) and read back in milliseconds; vectors come from the vector store and the
nodes themselves from the graph, by id, when a query uses them (``graph.node_rows``). A store
with ``ANN_MIN_ROWS`` entities or events or more also keeps an HNSW graph of each such matrix
beside the model (``vectors.nearest_graph``), updated by a write.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from llama_index_e2rag.extract.event_graph.entities import NameForms, name_forms
from llama_index_e2rag.graph.node_rows import ids_of
from llama_index_e2rag.ranking.event_graph import EventGraphView, Link
from llama_index_e2rag.schema import GraphNode
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.nearest import NearestRows
from llama_index_e2rag.vectors.nearest_graph import open_nearest

#: Two JSON lines: the content key and the SHA-256 of the second line, then the model.
EVENT_GRAPH_FILE = "event_graph.jsonl"
#: Bumped when the encoding or what the model holds changes: an older file is rebuilt.
FORMAT = 1
MODEL = read_model_file.ReadModel(EVENT_GRAPH_FILE, FORMAT)
content_key, write = MODEL.content_key, MODEL.write


def encode(
    entities: Sequence[GraphNode],
    events: Sequence[tuple[str, str]],
    participants: dict[str, list[str]],
    links: list[Link],
) -> dict[str, Any]:
    """The model as JSON values: the entities (row order) with their name forms, the events'
    ``(id, doc id)`` in row order, who takes part in each event, the entity links in order."""
    return {
        "entities": [e.id for e in entities],
        "entity_docs": [e.doc_id for e in entities],
        "events": [event_id for event_id, _ in events],
        "event_docs": [doc_id for _, doc_id in events],
        "participants": participants,
        "links": [list(link) for link in links],
        "forms": [
            [f.entity_type, sorted(f.exact), sorted(f.short)] for f in map(name_forms, entities)
        ],
    }


def decode_links(data: dict[str, Any]) -> list[Link]:
    """The entity graph's links of an encoded model, in their order."""
    return [(str(a), str(b), float(cost), str(hop)) for a, b, cost, hop in data["links"]]


def decode_forms(data: dict[str, Any]) -> list[NameForms]:
    """The entities' name forms of an encoded model, in row order."""
    return [NameForms(kind, frozenset(exact), frozenset(short))
            for kind, exact, short in data["forms"]]


def read(stores: Stores, key: str) -> Optional[dict[str, Any]]:
    """The persisted model of content ``key``, else None (missing, older, damaged)."""
    data = MODEL.read(stores, key)
    fields = ("entities", "entity_docs", "events", "event_docs", "participants", "links", "forms")
    if not isinstance(data, dict) or any(name not in data for name in fields):
        return None
    if not len(data["entities"]) == len(data["entity_docs"]) == len(data["forms"]):
        return None
    return data if len(data["events"]) == len(data["event_docs"]) else None


def searches(stores: Stores, view: EventGraphView) -> tuple[NearestRows, NearestRows]:
    """The view's entity and event searches: exact for a small matrix, else through the HNSW
    graph saved beside the model (updated to the view's rows, built when missing)."""
    return (
        open_nearest(view.entity_vectors, ids_of(view.entities),
                     read_model_file.model_path(stores, "event_graph-entities.hnsw")),
        open_nearest(view.event_vectors, ids_of(view.events),
                     read_model_file.model_path(stores, "event_graph-events.hnsw")),
    )
