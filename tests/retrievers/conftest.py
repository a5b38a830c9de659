"""Fixtures shared by the retriever tests that build module-scoped indexes."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def offline():
    """The autouse offline guard is function-scoped; module-scoped indexes need it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield
