"""Fuse E²RAG's retriever with a plain ``VectorStoreIndex`` in ``QueryFusionRetriever`` — offline.

    python examples/query_fusion.py ["your question"]

Both indexes hold the bundled *Tale of Peter Rabbit* and embed with the same offline MiniLM
model. ``QueryFusionRetriever`` asks its LLM only for extra queries; with ``num_queries=1``
there are none, and ``llm=NoLLM()`` fills the LLM slot it insists on (without it, its
constructor resolves ``Settings.llm``, i.e. OpenAI). Every fusion mode works: our scores are on
a 0-1 scale (a cosine, or in ``narrative`` the cosine of equal relevance, fitted), so
even ``simple`` — which keeps the higher score — mixes both retrievers instead of letting one
bury the other. An extractive answer over the fused evidence closes the example.
"""

from __future__ import annotations

import sys

from llama_index.core import VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever

from llama_index_e2rag import E2RAGIndex, ExtractiveSynthesizer, MiniLMEmbedding, NoLLM
from llama_index_e2rag.app.demo import sample_document

QUESTION = "Who chased Peter round the garden?"
MODES = ("simple", "reciprocal_rerank", "relative_score", "dist_based_score")


def main(question: str) -> None:
    embed = MiniLMEmbedding()
    ours = E2RAGIndex.from_documents([sample_document()], embed_model=embed)
    # chunked as ours is: cosines depend on the length of what is embedded, and our narrative
    # score is calibrated against chunks of this size (docs/llamaindex.md, "Scores")
    splitter = SentenceSplitter(chunk_size=ours.chunk_size, chunk_overlap=ours.chunk_overlap)
    plain = VectorStoreIndex.from_documents(
        [sample_document()], embed_model=embed, transformations=[splitter]
    )
    retrievers = [ours.as_retriever(similarity_top_k=5), plain.as_retriever(similarity_top_k=5)]
    for mode in MODES:
        fusion = QueryFusionRetriever(
            retrievers, llm=NoLLM(), mode=mode, num_queries=1, similarity_top_k=6,
            use_async=False,
        )
        print(f"\n{mode}:")
        for result in fusion.retrieve(question):
            source = result.node.metadata.get("retriever", "VectorStoreIndex")
            text = " ".join(result.node.get_content().split())[:60]
            print(f"  {result.score:.3f}  {source:<16} {text}")

    fusion = QueryFusionRetriever(
        retrievers, llm=NoLLM(), mode="reciprocal_rerank", num_queries=1, use_async=False
    )
    engine = RetrieverQueryEngine(
        fusion, response_synthesizer=ExtractiveSynthesizer.from_index(ours, top_n=3)
    )
    print()
    print(engine.query(question))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else QUESTION)
