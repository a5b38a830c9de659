"""The examples for LlamaIndex users run offline as written (a fresh interpreter, an empty
folder, no API key) and print what they promise; none leaves a file behind in the folder it ran
in. (``test_examples.py`` runs the other examples.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from integration.test_readme import REPO_DIR, offline_env

#: they run the offline default: spaCy parses, MiniLM embeds
pytestmark = [pytest.mark.spacy, pytest.mark.minilm]

EXAMPLES = REPO_DIR / "examples"
ANSWER_LINE = re.compile(r"^1\. \[peter_rabbit\.txt · \d+% through the story\] \S", re.MULTILINE)


def run_example(name: str, cwd: Path, *args: str) -> str:
    """``python examples/<name> args`` in ``cwd`` (the user's home beside it); its stdout
    (fails with its stderr)."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], cwd=cwd, env=offline_env(cwd.parent),
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    return run.stdout


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_existing_app_swaps_the_index_class_and_answers_with_sources(folder: Path) -> None:
    out = run_example("existing_app.py", folder)
    assert out.startswith("Q: Who chased Peter in the garden?\n") and ANSWER_LINE.search(out)
    sources = re.findall(r"^  \d+\. peter_rabbit\.txt score -?\d+\.\d+ \[(.*?)\]", out, re.M)
    assert sources and all("lexical" in signals for signals in sources)
    assert not list(folder.iterdir())


@pytest.mark.qdrant
def test_vector_store_example_keeps_the_vectors_in_qdrant(folder: Path) -> None:
    out = run_example("vector_store_qdrant.py", folder)
    built = re.search(r"^built: (\d+) vectors in Qdrant collection 'novel'", out, re.M)
    assert built and int(built.group(1)) > 0
    for mode in ("narrative", "entity_event", "vector"):  # after loading with the same store
        found = re.search(rf"^ *{mode}: (\d+) result\(s\); best: \S", out, re.M)
        assert found and int(found.group(1)) > 0
    assert ANSWER_LINE.search(out)
    assert not list(folder.iterdir())


def test_character_timeline_prints_it_in_story_order_and_draws_the_page(
    folder: Path, tmp_path: Path
) -> None:
    page = tmp_path / "page" / "story.html"
    page.parent.mkdir()
    question = "What happened to Peter after he lost his shoes?"
    out = run_example("character_timeline.py", folder, "--question", question, "--page", str(page))
    header = re.search(r"^Peter \(fused entity .+\): (\d+) mentions and (\d+) events", out, re.M)
    assert header and int(header.group(1)) > 0 and int(header.group(2)) > 0
    shares = [int(s) for s in re.findall(r"^  peter_rabbit\.txt · (\d+)% through the story +"
                                         r"(?:mention|event) ", out, re.M)]
    assert shares and shares == sorted(shares)  # story order
    html = page.read_text(encoding="utf-8")
    assert 'id="timeline"' in html and 'id="evidence"' in html and question in html
    assert f"wrote {page} (" in out
    assert not list(folder.iterdir())
