"""E²RAG's entity–event layer for LightRAG deployments.

Install from a checkout with ``pip install -e ".[lightrag]"`` (no package index has it yet).

``E2LightRAG`` is a drop-in ``LightRAG`` subclass: same constructor, same storages; it adds an
event pass at insert time, the ``"e2rag"`` query mode, ``abuild_event_layer`` to backfill an
existing working directory, and deletes the layer with its document.

Exports are lazy (PEP 562), as LightRAG's own are: ``import lightrag_ext`` loads neither LightRAG
nor llama-index. Loading the layer (``from lightrag_ext import E2LightRAG``, or any module of it
that calls into LightRAG's internals) first checks that the installed LightRAG is the supported
version (``check_lightrag_compat``, run by ``cached_llm``).
"""

from __future__ import annotations

from llama_index_e2rag.lazy import lazy_exports

from lightrag_ext.version import (
    SUPPORTED_LIGHTRAG_VERSION,
    UnsupportedLightRAGVersion,
    check_lightrag_compat,
)

_LAZY = {
    "E2LightRAG": "lightrag_ext.rag",
    "E2RAG_MODE": "lightrag_ext.query",
    "BackfillReport": "lightrag_ext.backfill",
    "EventLayerStore": "lightrag_ext.storage",
    "StorageCollisionError": "lightrag_ext.storage",
    "layer_workspace": "lightrag_ext.storage",
    "EVENT_CACHE_TYPE": "lightrag_ext.layer",
    "MENTION_CACHE_TYPE": "lightrag_ext.layer",
    "CUE_CACHE_TYPE": "lightrag_ext.query",
}

__all__ = [
    *_LAZY,
    "SUPPORTED_LIGHTRAG_VERSION",
    "UnsupportedLightRAGVersion",
    "check_lightrag_compat",
]

# an export (and LightRAG with it) is loaded only when it is asked for
__getattr__ = lazy_exports(globals(), _LAZY)
