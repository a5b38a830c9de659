"""The tiny LitBank folder (``litbank_tiny``), written where a test asks for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from litbank_tiny import write_tiny_litbank


@pytest.fixture
def tiny_litbank(tmp_path: Path) -> Path:
    return write_tiny_litbank(tmp_path / "litbank")
