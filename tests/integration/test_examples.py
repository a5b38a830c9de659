"""Every example in ``examples/`` runs as written and prints something.

Each ``examples/*.py`` runs in its own process from a scratch folder, offline: no
``OPENAI_API_KEY``, and the OpenAI packages cannot be imported (``offline_guard.py``), so an
example that silently needed a key fails here. An example that does need something the test
machine lacks says so on a line of its own, ``# requires-env: NAME [NAME ...]`` (environment
variables), and is skipped unless they are all set. An example with a test of its own, which
checks more than this one does, says so with ``# tested-by: PATH`` and is left to that test (which
must name it); a module examples import says ``# not-an-example``. Add an example and it is run:
no list to keep in step.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from offline_guard import PYTHON, REACH_MARKER, REPO, guarded_env

EXAMPLES = sorted((REPO / "examples").glob("*.py"))
REQUIRES = re.compile(r"^# requires-env:(.*)$", re.MULTILINE)
TESTED_BY = re.compile(r"^# tested-by: (\S+)$", re.MULTILINE)
NOT_AN_EXAMPLE = re.compile(r"^# not-an-example", re.MULTILINE)


def _required_env(path: Path) -> list[str]:
    return [name for line in REQUIRES.findall(path.read_text(encoding="utf-8"))
            for name in line.split()]


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) >= 2, EXAMPLES


@pytest.mark.spacy  # the examples build on the offline default
@pytest.mark.minilm
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_the_example_runs_as_written(example: Path, tmp_path: Path) -> None:
    text = example.read_text(encoding="utf-8")
    if NOT_AN_EXAMPLE.search(text):
        pytest.skip(f"{example.name} is a module the examples import")
    tested_by = TESTED_BY.search(text)
    if tested_by:
        test_file = REPO / tested_by.group(1)
        assert example.name in test_file.read_text(encoding="utf-8"), (
            f"{example.name} says {tested_by.group(1)} runs it, which does not name it"
        )
        pytest.skip(f"{example.name} runs in {tested_by.group(1)}")
    missing = [name for name in _required_env(example) if not os.environ.get(name)]
    if missing:
        pytest.skip(f"{example.name} needs {', '.join(missing)}")
    env = guarded_env(tmp_path / "guard")
    done = subprocess.run([PYTHON, str(example)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=1200)
    assert REACH_MARKER not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), f"{example.name} printed nothing"
