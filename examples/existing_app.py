"""Drop ``E2RAGIndex`` into an existing LlamaIndex app: the reader, the persist/load calls and the
query engine stay as they are; only the index class changes.

    python examples/existing_app.py                      # the bundled Peter Rabbit story
    python examples/existing_app.py ./my_books "Who betrayed the captain?"

Offline as written: no model is passed and, without ``OPENAI_API_KEY``, the index uses the
offline default (spaCy graph, MiniLM embeddings) and answers extractively, citing where in the
story each sentence sits. With a key set (and ``pip install "llama-index-e2rag[openai]"``), the
same code extracts with gpt-4o-mini and writes answers with it.
"""
# tested-by: tests/integration/test_examples_app.py


from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llama_index.core import SimpleDirectoryReader, StorageContext, load_index_from_storage

import llama_index_e2rag
from llama_index_e2rag import E2RAGIndex

STORY = Path(llama_index_e2rag.__file__).parent / "data" / "peter_rabbit.txt"


def read(source: str | None) -> list:
    """The app's reader, unchanged: a folder of .txt/.md files, or the bundled story."""
    if source is None:
        return SimpleDirectoryReader(input_files=[STORY]).load_data()
    return SimpleDirectoryReader(source, recursive=True, required_exts=[".txt", ".md"]).load_data()


def main(source: str | None, question: str) -> None:
    documents = read(source)
    # was: index = VectorStoreIndex.from_documents(documents)
    index = E2RAGIndex.from_documents(documents)
    with tempfile.TemporaryDirectory() as persist_dir:  # the app's own folder in real life
        index.storage_context.persist(persist_dir)
        index = load_index_from_storage(StorageContext.from_defaults(persist_dir=persist_dir))

        engine = index.as_query_engine(similarity_top_k=5)  # the app's engine call, unchanged
        response = engine.query(question)
    print(f"Q: {question}\n{response}\n")
    print("Sources (retrieval rank, score, what brought each):")
    for rank, source_node in enumerate(response.source_nodes, 1):
        meta = source_node.node.metadata
        signals = ", ".join(f"{k} {v:+.2f}" for k, v in (meta.get("signals") or {}).items())
        text = " ".join(source_node.node.get_content().split())[:90]
        score = source_node.score
        print(f"  {rank}. {meta.get('file_name')} score {score:.3f} [{signals}] {text}…")


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else None
    main(folder, sys.argv[2] if len(sys.argv) > 2 else "Who chased Peter in the garden?")
