"""``IndexWriter`` writes into stores with models, without an index."""

from __future__ import annotations

import asyncio

from hash_embedding import HashEmbedding
from llama_index.core import Document
from llama_index.core.storage.storage_context import StorageContext

from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.ingest.writer import IndexWriter
from llama_index_e2rag.persist.storage import open_stores
from llama_index_e2rag.persist.struct import E2RAGIndexStruct


def test_a_write_commits_documents_records_settings_and_deletes() -> None:
    context = StorageContext.from_defaults()
    stores, label = open_stores(context, None, None, None, None, None)
    struct = E2RAGIndexStruct()
    writer = IndexWriter(stores, IndexModels(embed_model=HashEmbedding(), chunk_size=200),
                         [], 30, label, struct=lambda: struct,
                         index_store=lambda: context.index_store)
    docs = [Document(text="Ann rowed. Bob slept.", id_="a"),
            Document(text="Ann rowed. Bob slept.", id_="b")]  # the same text twice: one kept
    asyncio.run(writer.ainsert_documents(docs, allow_duplicates=False))
    assert list(stores.graph.doc_orders()) == ["a"]
    assert struct.config["chunk_size"] == 200 and struct.config["dim"] > 0
    assert context.index_store.get_index_struct(struct.index_id) is not None
    asyncio.run(writer.adelete_document("a", delete_from_docstore=True))
    assert stores.graph.doc_orders() == {}
