"""Exceptions users can catch; each message says what went wrong and what to do."""


class E2RAGError(Exception):
    """Base class of every error this library raises on purpose."""


class GraphStoreError(E2RAGError):
    """A persisted graph is corrupt, truncated or written by a newer version."""


class BadDocumentError(E2RAGError, ValueError):
    """A document is empty, binary or otherwise not indexable text."""


class LLMOutputError(E2RAGError):
    """An LLM answer could not be parsed into the expected structure, even after repair."""


class MissingModelError(E2RAGError):
    """A step needs a model (LLM, embedding, spaCy pipeline) that is not configured or installed."""


class VectorStoreError(E2RAGError):
    """A vector store cannot serve this index (refused before extraction starts) or failed."""
