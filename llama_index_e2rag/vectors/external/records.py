"""How an e2rag ``VectorRecord`` is written into any llama-index store.

The same shape for every store, so no store's quirk leaks into another's: the node id is
``uuid5(E2RAG_NAMESPACE, graph_id)`` (Qdrant accepts nothing else), the graph id is kept in
metadata ``e2rag_id`` and mapped back, the record's ``doc_id`` is the node's SOURCE relationship
(so ``store.delete(doc_id)`` removes a document, for users too), and the metadata keys never vary
(LanceDB types its metadata column from the first write). Vectors are stored unit-normalised, so
cosine, dot and L2 stores all rank by cosine.
"""

from __future__ import annotations

import json
import re
import uuid
from enum import Enum
from typing import Any

import numpy as np
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_e2rag.vectors.base import VectorRecord

#: namespace of the stored node ids: ``uuid5(E2RAG_NAMESPACE, graph_node_id)``
E2RAG_NAMESPACE = uuid.UUID("6f1c1d52-3f4e-5b8a-9a43-2b7e0c9d4e11")
ID_KEY = "e2rag_id"
KIND_KEY = "kind"
META_KEY = "e2rag_meta"
#: kinds go into SQL and Milvus filter strings, so they must be plain names
KIND_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
BATCH = 512  # ids per delete/get request


def stored_id(graph_id: str) -> str:
    """The node id a graph node is stored under in every llama-index store."""
    return str(uuid.uuid5(E2RAG_NAMESPACE, graph_id))


def kind_name(kind: Any) -> str:
    return str(kind.value) if isinstance(kind, Enum) else str(kind)


def unit(vector: Any) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def cosine(query: np.ndarray, vector: Any) -> float:
    """Cosine of a unit ``query`` with any ``vector``."""
    return float(np.dot(query, unit(vector)))


def to_node(record: VectorRecord, vector: np.ndarray, text: str) -> TextNode:
    meta = {
        ID_KEY: record.id,
        KIND_KEY: kind_name(record.kind),
        META_KEY: json.dumps(record.metadata or {}, sort_keys=True, default=str),
    }
    return TextNode(
        id_=stored_id(record.id),
        text=text,
        embedding=[float(x) for x in vector],
        metadata=meta,
        excluded_embed_metadata_keys=list(meta),
        excluded_llm_metadata_keys=list(meta),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=record.doc_id)},
    )
