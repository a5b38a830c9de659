"""How ``store_0_1_0/`` was made: the test story indexed by llama-index-e2rag 0.1.0.

Run from a checkout of the 0.1.0 release (commit 8b750a7) as
``python make_store_0_1_0.py OUT_DIR`` with that checkout and its ``tests/`` on ``sys.path``.
The migration tests load the result with today's code.
"""

import sys

from hash_embedding import HashEmbedding
from llama_index.core import Document
from scripted_llm import ScriptedLLM
from test_index import NAMES, SEQUEL, STORY

from llama_index_e2rag import E2RAGIndex

index = E2RAGIndex.from_documents(
    [
        Document(text=STORY, id_="book1", metadata={"file_name": "book1.txt"}),
        Document(text=SEQUEL, id_="book2", metadata={"file_name": "book2.txt"}),
    ],
    llm=ScriptedLLM(names=NAMES),
    embed_model=HashEmbedding(dim=32),
    chunk_size=40,
    chunk_overlap=0,
)
index.storage_context.persist(sys.argv[1])
