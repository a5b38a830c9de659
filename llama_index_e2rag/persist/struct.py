"""``E2RAGIndexStruct``: what llama-index's index store keeps of an ``E2RAGIndex``.

It lives with the persist layer because the files are its concern: ``repair`` writes a lost
``index_store.json`` back from it and ``legacy`` reads the 0.1.0 fields; the index only fills it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from llama_index.core.data_structs.data_structs import IndexStruct

from llama_index_e2rag.persist.index_store import E2RAG_STRUCT_TYPE


@dataclass
class E2RAGIndexStruct(IndexStruct):
    """What the index store keeps: the build configuration and the LLM spending.

    ``config`` holds the chunking and passage length, the embedding model's name, where the
    vectors live (``vectors``) and ``doc_builders`` (``{name: params}`` of restorable builders).
    The graph, vectors and BM25 index live in the stores. ``graph_json``, ``doc_order`` and
    ``failures`` are only read, from stores written by 0.1.0, which kept the graph in the struct
    (``legacy``).
    """

    graph_json: str = ""
    doc_order: Dict[str, int] = field(default_factory=dict)
    failures: List[Dict[str, str]] = field(default_factory=list)
    llm_stats: Dict[str, Any] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return E2RAG_STRUCT_TYPE
