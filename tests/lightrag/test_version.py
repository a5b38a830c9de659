"""Version guard: a LightRAG whose hooks moved is refused with the supported version named."""

from __future__ import annotations

import pytest

from lightrag_ext import version


def test_installed_lightrag_is_supported():
    version.check_lightrag_compat()


def test_changed_signature_is_refused(monkeypatch):
    import lightrag

    async def moved(self, chunks, status=None):  # a future LightRAG renamed the parameters
        return []

    monkeypatch.setattr(lightrag.LightRAG, "_process_extract_entities", moved)
    with pytest.raises(version.UnsupportedLightRAGVersion) as info:
        version.check_lightrag_compat()
    message = str(info.value)
    assert "lightrag-hku==1.5.7" in message and "_process_extract_entities" in message


def test_missing_hook_is_refused(monkeypatch):
    from lightrag import operate

    monkeypatch.delattr(operate, "_get_cached_extraction_results")
    with pytest.raises(version.UnsupportedLightRAGVersion, match="is missing"):
        version.check_lightrag_compat()
