"""README's quick start runs as written: its first Python block, copied out of README.md, in a
fresh interpreter in an empty folder, offline (no API key, no network)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: they run the offline default: spaCy parses, MiniLM embeds
pytestmark = [pytest.mark.spacy, pytest.mark.minilm]

REPO_DIR = Path(__file__).resolve().parents[2]
README = REPO_DIR / "README.md"


def quick_start_block() -> str:
    """The first ```python block under README's "Quick start" heading."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "README's quick start has no python block"
    return found.group(1)


def offline_env(home: Path) -> dict[str, str]:
    """The user's shell without an API key: the package importable, model hubs off."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "PYTHONPATH": str(REPO_DIR),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def test_the_quick_start_runs_as_written_offline(tmp_path: Path) -> None:
    script = tmp_path / "quick_start.py"
    script.write_text(quick_start_block(), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=offline_env(tmp_path),
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    # it persisted where it said, and printed answers with their place in the story
    assert (tmp_path / "e2rag_store").is_dir()
    answers = [line for line in run.stdout.splitlines() if line.startswith("1. [")]
    assert len(answers) == 2  # the two query engines' extractive answers
    assert all(re.match(r"1\. \[peter_rabbit\.txt · \d+% through the story\] ", a)
               for a in answers)
