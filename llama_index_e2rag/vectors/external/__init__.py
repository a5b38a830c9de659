"""Vectors in any llama-index vector store (Qdrant, Chroma, LanceDB, FAISS, Milvus, ...).

``LlamaIndexVectors`` (``adapter``) implements the ``VectorStorage`` port; ``base.Backend`` drives
a store through llama-index's generic API, and one ``*_store`` module per store family handles
what that store gets wrong. ``records`` fixes how a record is stored, ``id_table`` what the
adapter remembers for stores that cannot tell it, ``aio`` how sync and async calls are run.
"""

from llama_index_e2rag.vectors.external.adapter import LlamaIndexVectors
from llama_index_e2rag.vectors.external.records import E2RAG_NAMESPACE, stored_id

__all__ = ["E2RAG_NAMESPACE", "LlamaIndexVectors", "stored_id"]
