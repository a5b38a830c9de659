"""Swap E²RAG's retriever into LlamaIndex's ``RetrieverQueryEngine`` — offline, as written.

    python examples/retriever_query_engine.py ["your question"]

Indexes the bundled *Tale of Peter Rabbit* with the offline default (MiniLM embeddings, spaCy
parsing, no LLM) and answers through a ``RetrieverQueryEngine`` you assemble yourself, as you
would around any LlamaIndex retriever: our retriever, a stock ``SimilarityPostprocessor`` (our
scores are on a 0-1 scale in every mode) and our extractive synthesizer, which answers with
evidence sentences and their places in the story without an LLM.

With an LLM, keep the retriever and let LlamaIndex build the synthesizer:
``RetrieverQueryEngine.from_args(retriever, llm=your_llm)``.
"""

from __future__ import annotations

import sys

from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine

from llama_index_e2rag import E2RAGIndex, ExtractiveSynthesizer, NoLLM
from llama_index_e2rag.app.demo import sample_document

QUESTION = "Where did Peter lose his shoes?"


def main(question: str) -> None:
    index = E2RAGIndex.from_documents([sample_document()])  # offline default models
    retriever = index.as_retriever(mode="narrative", similarity_top_k=6)
    synthesizer = ExtractiveSynthesizer.from_index(index, top_n=3)

    # The constructor takes the synthesizer as it is: no LLM is looked up.
    engine = RetrieverQueryEngine(
        retriever,
        response_synthesizer=synthesizer,
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.2)],
    )
    response = engine.query(question)
    print(response)
    print("\nRetrieved (score 0-1, raw score of the mode):")
    for node in response.source_nodes:
        raw = node.node.metadata["signals"]["raw_score"]
        text = " ".join(node.node.get_content().split())[:70]
        print(f"  {node.score:.3f} (raw {raw:+.2f})  {text}")

    # ``from_args`` resolves an LLM even when the synthesizer is given: without one configured
    # that would be OpenAI's. ``NoLLM()`` says "none" for this engine only.
    same = RetrieverQueryEngine.from_args(
        retriever, llm=NoLLM(), response_synthesizer=synthesizer
    )
    print("\nfrom_args gives the same first answer line:",
          str(same.query(question)).splitlines()[1] == str(response).splitlines()[1])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else QUESTION)
