"""``lightrag_ext.host``: the protocols backfill, layer and gaps name instead of ``E2LightRAG``."""

from __future__ import annotations

from pathlib import Path

from lightrag_ext import E2LightRAG
from lightrag_ext.host import LayerHost, LLMHost


def _members(protocol: type) -> set[str]:
    """Every attribute and method a protocol (with its bases) asks for."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (LayerHost, LLMHost):
            names |= set(cls.__annotations__)
            names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("__")}
    return names


async def test_an_e2lightrag_has_everything_the_layer_code_reads(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    wanted = _members(LayerHost)
    assert {"event_layer", "doc_status", "text_chunks", "_build_global_config"} <= wanted
    assert not [name for name in sorted(wanted) if not hasattr(rag, name)]
