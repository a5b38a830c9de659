"""Shared fixtures: offline guards, the deterministic embedding, the shared data folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hash_embedding import HashEmbedding  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch):
    """No test may reach OpenAI or a model hub, whatever the machine's environment says."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def hash_embed() -> HashEmbedding:
    return HashEmbedding()


@pytest.fixture
def shared_data() -> Path:
    """The evaluation data beside the checkout; tests using it skip cleanly without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
