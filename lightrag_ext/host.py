"""What the event layer's code reads of the LightRAG it runs on, as ``typing.Protocol``s.

``backfill``, ``layer`` and ``gaps`` work on a LightRAG that has an event layer, and ``rag.py``'s
``E2LightRAG`` (which imports them) is that LightRAG; naming the few attributes they use here,
instead of the whole class, keeps them below ``rag.py`` and usable with any object that has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lightrag.base import BaseKVStorage, DocStatusStorage

    from lightrag_ext.storage import EventLayerStore


class LLMHost(Protocol):
    """A LightRAG's role LLM functions and response cache (``cached_llm.CachedStructuredLLM``)."""

    llm_response_cache: BaseKVStorage
    enable_llm_cache: bool
    enable_llm_cache_for_entity_extract: bool

    def _build_global_config(self) -> dict[str, Any]: ...


class LayerHost(LLMHost, Protocol):
    """A LightRAG with an event layer: its documents, chunks and statuses, and the layer."""

    full_docs: BaseKVStorage
    text_chunks: BaseKVStorage
    doc_status: DocStatusStorage
    event_layer: EventLayerStore
