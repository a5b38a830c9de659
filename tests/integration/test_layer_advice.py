"""A missing layer's error names the exact fix, and following it works: the ``e2rag index`` run
on the store as the user named it (command line), the ``index.add_layers`` call (Python) — never
a rebuild that would extract every document again."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, Settings
from cli.test_entry import _e2rag

import llama_index_e2rag
from llama_index_e2rag import E2RAGIndex
from llama_index_e2rag.errors import E2RAGError, EntityLookupError

STORY = (
    "Peter Rabbit ran into the garden of Mr. McGregor. Mr. McGregor chased Peter with a rake. "
    "Peter lost his shoes among the cabbages, so he hid in the tool-shed. Later, Peter "
    "squeezed under the gate and ran home to his mother. His mother gave Peter camomile tea."
)
QUESTION = "What did Peter lose in the garden?"
#: mode -> (the index flag, the builder class) the fix names
LAYERS = {
    "chrono": ("--chrono", "ChronoLayerBuilder"),
    "sentence_graph": ("--sentence-graph", "SentenceGraphBuilder"),
    "event_graph": ("--event-graph", "EventGraphBuilder"),
}
#: what the user ran that needs a layer, and the layer
CLI_CASES = [
    (["query", QUESTION, "--quiet", "--mode", "chrono"], "chrono"),
    (["query", QUESTION, "--quiet", "--mode", "sentence_graph"], "sentence_graph"),
    (["query", QUESTION, "--quiet", "--mode", "event_graph"], "event_graph"),
    (["timeline", "Peter"], "event_graph"),
    (["show", "--html", "page.html", "--query", QUESTION, "--mode", "chrono"], "chrono"),
]


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store built by ``e2rag index`` without any layer flag (offline parse)."""
    home = tmp_path_factory.mktemp("plain")
    (home / "home").mkdir()
    (home / "story.txt").write_text(STORY, encoding="utf-8")
    built = _e2rag(["index", "story.txt", "--store", "store", "--quiet"], home)
    assert built.returncode == 0, built.stderr
    return home


@pytest.mark.spacy  # the store is built by the CLI's offline default
@pytest.mark.minilm
@pytest.mark.parametrize(("argv", "mode"), CLI_CASES, ids=lambda v: v if isinstance(v, str)
                         else " ".join(v[:1] + v[-1:]))
def test_the_cli_names_the_index_run_that_adds_the_layer_and_it_works(
    plain_store: Path, tmp_path: Path, argv: list[str], mode: str
) -> None:
    home = tmp_path / "work"
    shutil.copytree(plain_store, home)
    failed = _e2rag([*argv, "--store", "store"], home)
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1, failed.stderr
    assert failed.stderr.startswith("e2rag: error: store has no ")
    command = failed.stderr.rstrip().rsplit(": ", 1)[1]
    assert command == f"e2rag index --store store {LAYERS[mode][0]}"  # the path as typed

    fixed = _e2rag(shlex.split(command)[1:] + ["--quiet"], home)
    assert fixed.returncode == 0, fixed.stderr
    assert "without extracting them again" in fixed.stdout
    again = _e2rag([*argv, "--store", "store"], home)
    assert again.returncode == 0, again.stderr


def test_index_without_files_or_layer_flag_says_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    for argv in (["--store", "store"], ["--store", "store", "--chrono"]):  # no store yet
        failed = _e2rag(["index", *argv], tmp_path)
        assert failed.returncode == 1 and failed.stderr.count("\n") == 1
        assert "name the files or folders to index" in failed.stderr
    assert not (tmp_path / "store").exists()


@pytest.fixture
def plain_index(monkeypatch: pytest.MonkeyPatch) -> E2RAGIndex:
    """An index built in Python without any layer (offline parse, no LLM)."""
    monkeypatch.setattr(Settings, "_llm", None)
    return E2RAGIndex.from_documents(
        [Document(text=STORY, id_="story.txt")], embed_model=HashEmbedding()
    )


def _follow_python_advice(message: str, index: E2RAGIndex, mode: str) -> None:
    """Run the ``index.add_layers([...])`` call the message names, as it is written."""
    assert "from_documents" not in message and "doc_builders" not in message  # no rebuild
    call = re.search(r"index\.add_layers\(\[(\w+)\(\)\]\)", message)
    assert call is not None and call.group(1) == LAYERS[mode][1], message
    assert f"from llama_index_e2rag import {call.group(1)}" in message
    assert f"e2rag index --store DIR {LAYERS[mode][0]}" in message
    exec(call.group(0), {"index": index, call.group(1): getattr(llama_index_e2rag, call.group(1))})


@pytest.mark.parametrize("mode", list(LAYERS))
def test_python_names_the_add_layers_call_and_it_works(plain_index: E2RAGIndex, mode: str) -> None:
    with pytest.raises(E2RAGError) as caught:
        plain_index.as_retriever(mode=mode)
    assert "\n" not in str(caught.value)
    _follow_python_advice(str(caught.value), plain_index, mode)
    assert plain_index.as_retriever(mode=mode).retrieve(QUESTION)


def test_a_timeline_without_the_event_graph_names_the_add_layers_call(
    plain_index: E2RAGIndex,
) -> None:
    with pytest.raises(EntityLookupError) as caught:
        plain_index.entity_timeline("Peter")
    _follow_python_advice(str(caught.value), plain_index, "event_graph")
    assert plain_index.entity_timeline("Peter").entries
