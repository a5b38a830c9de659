"""``e2rag serve``'s HTTP API: one loaded index answering many queries.

Loading a store (checks, vectors, the BM25 index, the parser) costs seconds that a one-shot
``e2rag query`` pays every time; a process keeping the index answers in the time of the query
alone. The app is FastAPI's, so ``/docs`` is its OpenAPI page. Endpoints are plain functions,
which FastAPI runs in its thread pool: concurrent requests are concurrent readers of the index,
which its stores allow (``stores.locks``). Answers are the same data ``e2rag query`` prints
(``app.query``), and errors carry the same one-line, command-line advice. Nothing is built at
import: ``create_app`` makes the app around an index the caller loaded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, Field

from llama_index_e2rag.app.query import QueryOptions, run_query, run_retrieve
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.modes import HYDE_VARIANTS, RETRIEVER_MODES

if TYPE_CHECKING:
    from fastapi import FastAPI

    from llama_index_e2rag.index import E2RAGIndex

logger = logging.getLogger(__name__)


class QueryRequest(BaseModel):
    """A question and how to retrieve its evidence (each field as ``e2rag query``'s flag)."""

    query: str = Field(description="the question")
    mode: Optional[str] = Field(
        None, description=f"retrieval mode, one of {', '.join(RETRIEVER_MODES)}"
    )
    hyde: Optional[str] = Field(
        None, description=f"entity_event HyDE variant ({', '.join(HYDE_VARIANTS)}); needs an LLM"
    )
    top_k: Optional[int] = Field(None, ge=1, description="results retrieved")
    budget_words: Optional[int] = Field(None, ge=1, description="words of evidence to fill")

    def options(self) -> QueryOptions:
        return QueryOptions(self.query, self.mode, self.hyde, self.top_k, self.budget_words)


class Source(BaseModel):
    """One piece of evidence with its place in the story."""

    rank: int
    doc_id: Optional[str] = Field(description="the document (a file's absolute path)")
    file_name: Optional[str] = None
    position: Optional[list[int]] = Field(
        description="(document order, character offset, ordinal) in the story"
    )
    char_offset: Optional[int] = Field(None, description="where the text starts in its document")
    chapter: Optional[str] = Field(
        None, description="the chapter (book, part, ...) heading before it, when the text has them"
    )
    percent: Optional[float] = Field(None, description="share of its document before it (0-100)")
    where: str = Field(
        description='the position as e2rag query says it: "book.txt · Chapter 3 · 93% through '
        'the story" (the character offset when the share is unknown)'
    )
    score: Optional[float] = None
    text: str
    relation_path: Optional[Any] = Field(None, description="sentence_graph: how it was reached")
    explain: str = Field(description="what brought this result")
    metadata: dict[str, Any] = Field(default_factory=dict)


class RetrieveResponse(BaseModel):
    mode: str
    sources: list[Source]


class QueryResponse(RetrieveResponse):
    answer: str


class Health(BaseModel):
    status: str
    store: str
    documents: int


def create_app(index: "E2RAGIndex", store: str) -> "FastAPI":
    """The API over ``index`` (loaded from ``store``, the name its messages use)."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI(
        title="e2rag",
        summary="Narrative retrieval over one loaded e2rag store",
        description=f"Answers questions from the store {store}, with evidence in story order.",
    )

    def failure(exc: Exception) -> HTTPException:
        """Bad input and what the store lacks: 400 with the reason; anything else: 500, its
        traceback in the server's log."""
        if isinstance(exc, (E2RAGError, ValueError)):
            return HTTPException(status_code=400, detail=" ".join(str(exc).split()))
        logger.exception("query failed")
        return HTTPException(status_code=500, detail=f"unexpected {type(exc).__name__}: {exc}")

    @app.get("/health", response_model=Health)
    def health() -> dict[str, Any]:
        """The server is up and holds the store."""
        return {"status": "ok", "store": store, "documents": len(index.graph_store.doc_orders())}

    @app.post("/query", response_model=QueryResponse)
    def query(request: QueryRequest) -> dict[str, Any]:
        """The answer (an LLM's, or extractive without one) and its evidence."""
        try:
            return run_query(index, store, request.options().checked())
        except Exception as exc:
            raise failure(exc) from exc

    @app.post("/retrieve", response_model=RetrieveResponse)
    def retrieve(request: QueryRequest) -> dict[str, Any]:
        """The evidence alone, ranked by the mode."""
        try:
            return run_retrieve(index, store, request.options().checked())
        except Exception as exc:
            raise failure(exc) from exc

    return app
