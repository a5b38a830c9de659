"""E²RAG's entity–event layer for LightRAG deployments.

Install with ``pip install 'llama-index-e2rag[lightrag]'``.

``E2LightRAG`` is a drop-in ``LightRAG`` subclass: same constructor, same storages; it adds an
event pass at insert time, the ``"e2rag"`` query mode, ``abuild_event_layer`` to backfill an
existing working directory, and deletes the layer with its document. Importing this package checks
that the installed LightRAG is the supported version.
"""

from lightrag_ext.version import (
    SUPPORTED_LIGHTRAG_VERSION,
    UnsupportedLightRAGVersion,
    check_lightrag_compat,
)

check_lightrag_compat()

from lightrag_ext.backfill import BackfillReport  # noqa: E402
from lightrag_ext.layer import EVENT_CACHE_TYPE, MENTION_CACHE_TYPE  # noqa: E402
from lightrag_ext.query import CUE_CACHE_TYPE, E2RAG_MODE  # noqa: E402
from lightrag_ext.rag import E2LightRAG  # noqa: E402
from lightrag_ext.storage import (  # noqa: E402
    EventLayerStore,
    StorageCollisionError,
    layer_workspace,
)

__all__ = [
    "E2LightRAG",
    "E2RAG_MODE",
    "BackfillReport",
    "EventLayerStore",
    "StorageCollisionError",
    "layer_workspace",
    "EVENT_CACHE_TYPE",
    "MENTION_CACHE_TYPE",
    "CUE_CACHE_TYPE",
    "SUPPORTED_LIGHTRAG_VERSION",
    "UnsupportedLightRAGVersion",
    "check_lightrag_compat",
]
