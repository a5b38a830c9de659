"""Exceptions users can catch; each message says what went wrong and what to do."""


class E2RAGError(Exception):
    """Base class of every error this library raises on purpose."""


class GraphStoreError(E2RAGError):
    """A persisted graph is corrupt, truncated or written by a newer version."""


class BadDocumentError(E2RAGError, ValueError):
    """A document is empty, binary or otherwise not indexable text."""


class LLMOutputError(E2RAGError):
    """An LLM answer could not be parsed into the expected structure, even after repair.

    Every way an answer can be unusable ends here: no JSON, invalid JSON, the wrong shape, an
    answer too large or nested too deeply to parse safely (``llm_parsing``).
    """


class LLMTimeoutError(E2RAGError, TimeoutError):
    """An LLM call gave no answer within ``LLMRunner(timeout=...)`` (after the runner's retries).

    A ``TimeoutError`` too, so code catching the built-in timeout catches it.
    """


class MissingModelError(E2RAGError):
    """A step needs a model (LLM, embedding, spaCy pipeline) that is not configured or installed."""


class MissingExtraError(E2RAGError, ImportError):
    """A step needs an optional dependency (an extra of the package) that is not installed; the
    message names the ``pip install`` that brings it."""


class VectorStoreError(E2RAGError):
    """A vector store cannot serve this index (refused before extraction starts) or failed."""


class EntityLookupError(E2RAGError, LookupError):
    """A timeline's name matches no fused entity, or several different ones; the message lists
    the close names or the candidates, so the user can retry with the full name."""


class StoreDamagedError(E2RAGError):
    """A persisted store's file is missing, unreadable or disagrees with the rest of the store;
    the message names the file and the fix (usually ``e2rag repair --store DIR``)."""


class ForeignFolderError(E2RAGError):
    """A folder given to save into holds files that are not ours (or is not a folder): nothing
    is written there; the message names it, a few of its files, and what to give instead."""


class DamagedFileError(StoreDamagedError):
    """A file is damaged, found by code that reads it without knowing the store around it (a
    graph's JSON or database, a vector file): the message names the file and what is wrong, not
    the store's fix, which whoever knows the store adds (the CLI: ``e2rag repair --store DIR``)."""


class CorruptGraphError(GraphStoreError, DamagedFileError):
    """A persisted graph cannot be parsed (cut short, not JSON, not nodes and edges)."""


class DamagedVectorsError(VectorStoreError, DamagedFileError):
    """A vector file or its manifest does not match what was saved (cut short, changed)."""


class StoreLoadError(E2RAGError):
    """Loading a store failed for a reason its checks did not foresee (the cause is chained:
    llama-index could not parse a file, or a bug); ``store`` is the folder that was loaded."""

    def __init__(self, store: object, cause: BaseException) -> None:
        self.store = store
        self.cause = cause
        super().__init__(f"could not load the store {store} ({type(cause).__name__}: {cause})")


class UsageError(E2RAGError, ValueError):
    """An option is out of range or contradicts another (``e2rag query``'s flags, the fields of
    ``POST /query``); the message says what to change."""
