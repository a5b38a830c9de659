"""Importing the package is enough for ``load_index_from_storage``, in any import order, and the
import stays cheap: each case runs in a new interpreter, as a user's script would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core import Document

ROOT = Path(__file__).resolve().parents[1]
STORY = "Peter squeezed under the gate. Mr. McGregor chased Peter across the garden."
LOAD = (
    "from llama_index.core import StorageContext, load_index_from_storage\n"
    "index = load_index_from_storage(StorageContext.from_defaults(persist_dir={store!r}))\n"
    "print(type(index).__name__, sorted(index.ref_doc_info))\n"
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hash_embedding import HashEmbedding

    from llama_index_e2rag.index import E2RAGIndex

    folder = tmp_path_factory.mktemp("registered") / "e2rag_store"
    index = E2RAGIndex.from_documents([Document(text=STORY, id_="peter")], embed_model=HashEmbedding())
    index.storage_context.persist(str(folder))
    return folder


def _run(script: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def _loads(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "E2RAGIndex ['peter']"


@pytest.mark.parametrize(
    "first",
    [
        "import llama_index_e2rag",
        "import llama_index_e2rag.schema",
        "import llama_index_e2rag.graph.sql_store",
        "import llama_index.indices.e2rag",
    ],
)
def test_importing_the_package_or_a_module_of_it_first_is_enough(store: Path, first: str) -> None:
    cheap = (
        "import sys\n"
        "assert not [m for m in sys.modules if m.startswith('llama_index.core')], 'loaded core'\n"
        "assert 'llama_index_e2rag.index' not in sys.modules, 'loaded the index module'\n"
    )
    after = "assert not [f for f in sys.meta_path if 'Registry' in type(f).__name__], 'finder left'\n"
    _loads(_run(first + "\n" + cheap + LOAD.format(store=str(store)) + after))


def test_importing_the_package_after_llama_index_is_enough(store: Path) -> None:
    script = (
        "import llama_index.core, sys\n"
        "import llama_index_e2rag\n"
        "assert 'llama_index_e2rag.index' not in sys.modules, 'loaded the index module'\n"
        "assert not [f for f in sys.meta_path if 'Registry' in type(f).__name__], 'finder added'\n"
    )
    _loads(_run(script + LOAD.format(store=str(store))))


def test_the_lazy_entries_give_way_to_the_real_classes(store: Path) -> None:
    script = (
        "import llama_index_e2rag\n"
        "from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS as S\n"
        "from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS as I\n"
        "keys = ('llama_index_e2rag.E2RAGIndex', 'e2rag')\n"
        "print([isinstance(r[k], type) for r in (S, I) for k in keys])\n"
        + LOAD.format(store=str(store))
        + "from llama_index_e2rag.index import E2RAGIndex, E2RAGIndexStruct\n"
        "assert all(I[k] is E2RAGIndex and S[k] is E2RAGIndexStruct for k in keys)\n"
    )
    done = _run(script)
    _loads(done)
    assert done.stdout.splitlines()[0] == "[False, False, False, False]"


def test_a_process_that_never_imports_the_package_is_told_the_key(store: Path) -> None:
    done = _run(LOAD.format(store=str(store)))
    assert done.returncode != 0 and "KeyError: 'llama_index_e2rag.E2RAGIndex'" in done.stderr


def test_the_docs_snippet_runs_as_written(store: Path) -> None:
    text = (ROOT / "docs" / "llamaindex.md").read_text(encoding="utf-8")
    section = text.split("## Opening a saved index", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S)
    assert snippet is not None and 'persist_dir="./e2rag_store"' in snippet.group(1)
    check = "print(type(index).__name__, sorted(index.ref_doc_info))\n"
    _loads(_run(snippet.group(1) + check, cwd=store.parent))
