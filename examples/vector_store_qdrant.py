"""Keep E²RAG's vectors in a third-party vector store: Qdrant here (any llama-index vector store
works the same way: Chroma, LanceDB, FAISS, Milvus Lite are tested; docs/storage.md).

    pip install "llama-index-e2rag[stores]"      # or just llama-index-vector-stores-qdrant
    python examples/vector_store_qdrant.py                      # the bundled Peter Rabbit story
    python examples/vector_store_qdrant.py book.txt "Who helped Peter?"

Offline as written: Qdrant runs in local mode (a folder, no server) and, without
``OPENAI_API_KEY``, the index uses the offline default (spaCy graph, MiniLM embeddings). The graph
and the index's own files go to the persist folder, the vectors to Qdrant; loading passes the
same vector store again. Everything is written to a fresh temporary folder and removed at the end.
"""
# tested-by: tests/integration/test_examples_app.py


from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llama_index.core import SimpleDirectoryReader, StorageContext, load_index_from_storage
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

import llama_index_e2rag
from llama_index_e2rag import E2RAGIndex

STORY = Path(llama_index_e2rag.__file__).parent / "data" / "peter_rabbit.txt"
COLLECTION = "novel"


def main(book: Path, question: str) -> None:
    documents = SimpleDirectoryReader(input_files=[book]).load_data()
    with tempfile.TemporaryDirectory() as folder:
        client = QdrantClient(path=f"{folder}/qdrant")  # with a server: QdrantClient(url=...)
        vector_store = QdrantVectorStore(COLLECTION, client=client)
        index = E2RAGIndex.from_documents(documents, vector_store=vector_store)
        index.storage_context.persist(f"{folder}/store")
        points = client.count(COLLECTION).count
        print(f"built: {points} vectors in Qdrant collection {COLLECTION!r} "
              "(chunks, sentences, mentions, events, passages: node kinds are metadata)")

        # a later run: load the graph from the folder, the vectors from the same Qdrant store
        index = load_index_from_storage(
            StorageContext.from_defaults(persist_dir=f"{folder}/store", vector_store=vector_store)
        )
        for mode in ("narrative", "entity_event", "vector"):
            results = index.as_retriever(mode=mode, similarity_top_k=3).retrieve(question)
            best = " ".join(results[0].node.get_content().split())[:100] if results else "-"
            print(f"{mode:>12}: {len(results)} result(s); best: {best}")
        print(index.as_query_engine().query(question))
        client.close()


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else STORY
    main(path, sys.argv[2] if len(sys.argv) > 2 else "What did Peter lose in the garden?")
