"""Guard against LightRAG releases whose internals moved under our overrides.

``E2LightRAG`` overrides private LightRAG methods and calls a few private helpers (LightRAG has no
plugin API). A silent signature change would make the event layer quietly stop being built or
deleted, so at import we compare parameter names with what this package was written against and
refuse to load otherwise, naming the supported version.
"""

from __future__ import annotations

import inspect
from typing import Callable

SUPPORTED_LIGHTRAG_VERSION = "1.5.7"

#: (owner, attribute) -> parameter names, in order, that our code relies on.
EXPECTED_SIGNATURES: dict[tuple[str, str], tuple[str, ...]] = {
    ("LightRAG", "_process_extract_entities"): (
        "self",
        "chunk",
        "pipeline_status",
        "pipeline_status_lock",
        "truncation_tally",
    ),
    ("LightRAG", "_index_storages"): ("self",),
    ("LightRAG", "_upsert_doc_status_transition"): (
        "self",
        "doc_id",
        "status",
        "status_doc",
        "file_path",
        "ctx",
        "extra_fields",
        "metadata_extra",
        "metadata_drop",
    ),
    ("LightRAG", "initialize_storages"): ("self",),
    ("LightRAG", "finalize_storages"): ("self",),
    ("LightRAG", "adelete_by_doc_id"): ("self", "doc_id", "delete_llm_cache"),
    ("LightRAG", "aquery_llm"): ("self", "query", "param", "system_prompt", "progress_callback"),
    ("LightRAG", "aquery_data"): ("self", "query", "param"),
    ("LightRAG", "_build_global_config"): ("self",),
    ("operate", "_get_cached_extraction_results"): (
        "llm_response_cache",
        "chunk_ids",
        "text_chunks_storage",
    ),
    ("operate", "_rebuild_from_extraction_result"): (
        "text_chunks_storage",
        "extraction_result",
        "chunk_id",
        "timestamp",
        "chunk_data",
    ),
    ("utils", "handle_cache"): ("hashing_kv", "args_hash", "prompt", "mode", "cache_type"),
    ("utils", "save_to_cache"): ("hashing_kv", "cache_data"),
    ("utils", "get_llm_cache_identity"): ("global_config", "role"),
    ("lightrag.lightrag", "_run_sync"): ("coro_factory", "sync_name", "async_name", "owning_loop"),
}


class UnsupportedLightRAGVersion(ImportError):
    """The installed LightRAG is not the one ``lightrag_ext`` was written against."""


def _owners() -> dict[str, object]:
    import lightrag
    import lightrag.lightrag as lightrag_module
    from lightrag import operate, utils

    return {
        "LightRAG": lightrag.LightRAG,
        "operate": operate,
        "utils": utils,
        "lightrag.lightrag": lightrag_module,
    }


def check_lightrag_compat() -> None:
    """Raise ``UnsupportedLightRAGVersion`` when an overridden/used member changed shape."""
    import lightrag

    installed = getattr(lightrag, "__version__", "unknown")
    owners = _owners()
    problems: list[str] = []
    for (owner_name, attr), expected in EXPECTED_SIGNATURES.items():
        member: Callable | None = getattr(owners[owner_name], attr, None)
        if member is None:
            problems.append(f"{owner_name}.{attr} is missing")
            continue
        found = tuple(inspect.signature(member).parameters)
        if found != expected:
            problems.append(f"{owner_name}.{attr}{found} (expected {expected})")
    if problems:
        raise UnsupportedLightRAGVersion(
            f"lightrag_ext supports lightrag-hku=={SUPPORTED_LIGHTRAG_VERSION}, but the installed "
            f"lightrag-hku {installed} differs where E2LightRAG hooks in: "
            + "; ".join(problems)
            + f". Install it with: pip install 'lightrag-hku=={SUPPORTED_LIGHTRAG_VERSION}'"
        )
