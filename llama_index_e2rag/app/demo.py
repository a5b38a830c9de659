"""``e2rag demo``: the whole offline job on a bundled public-domain story.

Indexes *The Tale of Peter Rabbit* with the LLM-free defaults (spaCy grounded extraction, MiniLM
embeddings), then answers three questions with the default ``narrative`` retriever and the
extractive synthesizer: the sentence that answers first, then more evidence, ``TOP_N`` sentences in
all, each with its document and place in the story ("peter_rabbit.txt · 29% through the story").
Needs no API key and no network, whatever the environment says: every model is passed
explicitly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

from llama_index.core import Document, StorageContext, load_index_from_storage
from llama_index.core.query_engine import RetrieverQueryEngine

from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.grounded import GroundedExtractor
from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.schema import NodeKind

SAMPLE_PATH = Path(__file__).resolve().parent.parent / "data" / "peter_rabbit.txt"
SAMPLE_DOC_ID = "peter_rabbit"
SAMPLE_METADATA = {
    "file_name": "peter_rabbit.txt",
    "title": "The Tale of Peter Rabbit",
    "author": "Beatrix Potter",
}
#: Evidence sentences printed per question: the answer, then a few lines of context to check it
#: against.
TOP_N = 5
#: Words of evidence the retriever gathers per question (a few places of the story).
BUDGET_WORDS = 150
QUESTIONS = (
    "Where did Peter lose his shoes?",
    "Who helped Peter when he was caught in the net?",
    "What did Peter's mother give him at bed-time?",
)


def sample_document() -> Document:
    """The bundled story as a llama-index ``Document`` (provenance: data/NOTICE-samples.txt)."""
    return Document(
        text=SAMPLE_PATH.read_text(encoding="utf-8"),
        id_=SAMPLE_DOC_ID,
        metadata=dict(SAMPLE_METADATA),
    )


def run_demo(store_dir: Optional[str] = None, echo: Callable[[str], None] = print) -> int:
    """Index the sample offline (or load it from ``store_dir``), answer three questions.

    With ``store_dir`` the index is persisted there on the first run and loaded on later runs.
    Returns a process exit code: 0 on success, 1 when an offline component is not installed.
    """
    try:
        index = _load_or_build(store_dir, echo)
        engine = RetrieverQueryEngine(
            retriever=index.as_retriever(budget_words=BUDGET_WORDS),  # the narrative default
            response_synthesizer=ExtractiveSynthesizer.from_index(index, top_n=TOP_N),
        )
        for question in QUESTIONS:
            started = time.perf_counter()
            response = engine.query(question)
            elapsed = time.perf_counter() - started
            echo("")
            echo(f"Q: {question}")
            echo(str(response))
            echo(f"({len(response.source_nodes)} passages, answered in {elapsed:.2f} s)")
    except MissingModelError as exc:  # spaCy / onnxruntime / MiniLM load lazily, maybe here
        echo(f"The offline demo cannot run: {exc}")
        return 1
    return 0


def _load_or_build(store_dir: Optional[str], echo: Callable[[str], None]) -> E2RAGIndex:
    embed_model = MiniLMEmbedding()
    if store_dir is not None and (Path(store_dir) / "docstore.json").is_file():
        echo(f"Loading the demo index from {store_dir}")
        storage = StorageContext.from_defaults(persist_dir=store_dir)
        loaded = load_index_from_storage(storage, embed_model=embed_model)
        if not isinstance(loaded, E2RAGIndex):
            raise ValueError(
                f"{store_dir} holds a {type(loaded).__name__}, not an E2RAGIndex; "
                "give the demo an empty or demo-made store"
            )
        return loaded
    document = sample_document()
    echo(
        f"Indexing {SAMPLE_METADATA['title']} by {SAMPLE_METADATA['author']} "
        f"({len(document.text.split()):,} words) offline: spaCy grounded extraction + "
        "MiniLM embeddings, no LLM, no network."
    )
    started = time.perf_counter()
    index = E2RAGIndex.from_documents(
        [document], embed_model=embed_model, extractors=[GroundedExtractor()]
    )
    counts = index.graph_store.counts()["nodes"]
    echo(
        f"Indexed in {time.perf_counter() - started:.1f} s: "
        + ", ".join(
            f"{counts.get(kind.value, 0)} {kind.value}s"
            for kind in (NodeKind.CHUNK, NodeKind.SENTENCE, NodeKind.EVENT, NodeKind.MENTION)
        )
    )
    if store_dir is not None:
        index.storage_context.persist(persist_dir=store_dir)
        echo(f"Saved the index to {store_dir}")
    return index
