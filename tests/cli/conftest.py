"""The command line's tests share the offline set-up with a scripted extraction LLM."""

from __future__ import annotations

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Settings
from scripted_llm import ScriptedLLM
from extract.test_chrono import chrono_llm

#: The calls of one chunk's LLM extraction.
EXTRACTION_KINDS = ("entity_extraction", "event_extraction")


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> ScriptedLLM:
    """ChronoRAG's scripted LLM as the configured one, the hash embedding, no API key."""
    scripted = chrono_llm()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", scripted)
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())
    return scripted


def extractions(llm: ScriptedLLM) -> int:
    """LLM extraction calls made so far."""
    return sum(llm.calls_by_kind[kind] for kind in EXTRACTION_KINDS)
