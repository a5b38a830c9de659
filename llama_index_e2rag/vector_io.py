"""Fast (de)serialisation for llama-index's ``SimpleVectorStore`` files.

``SimpleVectorStoreData`` is a ``dataclasses_json`` dataclass: ``from_dict`` type-checks every float
of every vector in Python, which made loading a novel's index (~12M floats) take minutes, and
``to_dict`` walks them the same way on persist. The data is three plain JSON dicts, so both can be
direct copies with the same result. ``StorageContext.from_defaults(persist_dir=...)`` calls
``SimpleVectorStoreData.from_dict`` itself, so the fast path has to live on that class; we install
it only if the class still has exactly the three fields we know, and never change the file format.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dataclasses_json import DataClassJsonMixin
from llama_index.core.vector_stores.simple import SimpleVectorStoreData

_FIELDS = ("embedding_dict", "text_id_to_ref_doc_id", "metadata_dict")


def _fast_from_dict(cls: type, kvs: Any, *, infer_missing: bool = False) -> SimpleVectorStoreData:
    if not isinstance(kvs, dict) or any(
        not isinstance(kvs.get(name, {}), dict) for name in _FIELDS
    ):
        return DataClassJsonMixin.from_dict.__func__(cls, kvs, infer_missing=infer_missing)
    return cls(**{name: dict(kvs.get(name) or {}) for name in _FIELDS})


def _fast_to_dict(self: SimpleVectorStoreData, encode_json: bool = False) -> dict[str, Any]:
    return {name: dict(getattr(self, name)) for name in _FIELDS}


def install() -> bool:
    """Install the fast path once; returns whether it is active."""
    names = tuple(f.name for f in dataclasses.fields(SimpleVectorStoreData))
    if names != _FIELDS:
        return False
    if "from_dict" in SimpleVectorStoreData.__dict__:
        return True
    SimpleVectorStoreData.from_dict = classmethod(_fast_from_dict)  # type: ignore[assignment]
    SimpleVectorStoreData.to_dict = _fast_to_dict  # type: ignore[assignment]
    return True
