"""What lightrag_ext may touch in a user's working directory, and what it must leave alone.

Every delete, replace and truncate a working directory can reach through ``E2LightRAG`` goes
through LightRAG's file storages of the layer's workspace (``<working_dir>/e2rag``: writes,
deletes, drops, forgetting at start-up) or our lock file. Each test puts a file of the user's
where it could be struck and checks it survives; a workspace folder that is not our layer is
refused before anything is written; a second process is refused while an instance holds the
workspace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lightrag import LightRAG

from lightrag_ext import E2LightRAG, StorageCollisionError
from lightrag_ext.workspace_lock import LOCK_MARKER, LOCK_NAME
from lightrag_story import INSERT_KWARGS, SECOND_STORY, STORY

HERE = Path(__file__).resolve().parent

# A second process opening the same working dir (offline stand-ins for the models). The checkout
# comes first on its path: tests/ holds a lightrag_ext/ folder of tests, which would otherwise be
# imported as an empty namespace package before an editable install's finder is asked.
_OTHER_PROCESS = """
import asyncio, sys
sys.path[:0] = [{repo!r}, {here!r}, {tests!r}]
from lightrag_fakes import hash_embedding_func, offline_tokenizer
from lightrag_ext import E2LightRAG

async def llm(prompt, **kwargs):
    return ""

async def main():
    rag = E2LightRAG(working_dir={working_dir!r}, llm_model_func=llm,
                     embedding_func=hash_embedding_func(), tokenizer=offline_tokenizer())
    try:
        await rag.initialize_storages()
    except Exception as exc:
        print(type(exc).__name__, exc)
        return
    await rag.finalize_storages()
    print("opened")

asyncio.run(main())
"""


def _other_process(working_dir: Path) -> str:
    code = _OTHER_PROCESS.format(
        repo=str(HERE.parents[1]), here=str(HERE), tests=str(HERE.parent),
        working_dir=str(working_dir),
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=HERE
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _plant(working_dir: Path) -> dict[Path, str]:
    """Files of the user's in the working dir, in the layer's folder and below it."""
    files = {
        working_dir / "notes.txt": "my notes",
        working_dir / "e2rag" / "notes.txt": "notes beside the layer",
        working_dir / "e2rag" / "sub" / "draft.md": "draft",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


async def test_user_files_survive_every_layer_write_and_delete(rag_factory, tmp_path: Path):
    working_dir = tmp_path / "rag"
    planted = _plant(working_dir)

    rag = await rag_factory(E2LightRAG, working_dir)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    assert (await rag.event_layer.get_record("neville")) is not None
    await rag.adelete_by_doc_id("neville", delete_llm_cache=True)
    assert (await rag.abuild_event_layer(rebuild=True)).built == ["story"]
    await rag.doc_status.drop()  # the clear path: the layer is dropped with it
    assert await rag.event_layer.doc_ids() == []
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag_factory.close(rag)

    stock = await rag_factory(LightRAG, working_dir)  # a stock deletion while we are away
    await stock.adelete_by_doc_id("story")
    await rag_factory.close(stock)
    rag = await rag_factory(E2LightRAG, working_dir)  # start-up forgets the whole layer
    assert await rag.event_layer.doc_ids() == []
    await rag_factory.close(rag)

    assert {path: path.read_text() for path in planted} == planted


async def test_a_lightrag_workspace_named_like_the_layer_is_refused_untouched(
    rag_factory, tmp_path: Path
):
    working_dir = tmp_path / "rag"
    other = await rag_factory(LightRAG, working_dir, workspace="e2rag")
    await other.ainsert(STORY, ids=["theirs"], **INSERT_KWARGS)
    await rag_factory.close(other)
    before = _snapshot(working_dir / "e2rag")

    with pytest.raises(StorageCollisionError, match="holds a LightRAG workspace"):
        await rag_factory(E2LightRAG, working_dir)

    assert _snapshot(working_dir / "e2rag") == before  # not even a lock file was added


async def test_lightrag_documents_in_the_layer_workspace_are_refused_untouched(
    rag_factory, tmp_path: Path
):
    """Any backend: a layer workspace whose doc-status records are LightRAG's is refused (here
    a folder with only that file, which the file check alone would let through)."""
    working_dir = tmp_path / "rag"
    other = await rag_factory(LightRAG, tmp_path / "elsewhere")
    await other.ainsert(STORY, ids=["theirs"], **INSERT_KWARGS)
    await rag_factory.close(other)
    status = (tmp_path / "elsewhere" / "kv_store_doc_status.json").read_bytes()
    (working_dir / "e2rag").mkdir(parents=True)
    (working_dir / "e2rag" / "kv_store_doc_status.json").write_bytes(status)

    with pytest.raises(StorageCollisionError, match="holds LightRAG documents"):
        await rag_factory(E2LightRAG, working_dir)

    assert (working_dir / "e2rag" / "kv_store_doc_status.json").read_bytes() == status
    assert json.loads(status)["theirs"]["status"] == "processed"


async def test_a_user_file_at_the_lock_path_keeps_its_contents(rag_factory, tmp_path: Path):
    working_dir = tmp_path / "rag"
    lock = working_dir / "e2rag" / LOCK_NAME
    lock.parent.mkdir(parents=True)
    lock.write_text("not a lock: my notes")

    rag = await rag_factory(E2LightRAG, working_dir)
    assert lock.read_text() == "not a lock: my notes"
    assert _other_process(working_dir).startswith("WorkspaceBusyError")  # still locked
    await rag_factory.close(rag)
    assert lock.read_text() == "not a lock: my notes"


async def test_a_second_process_is_refused_while_an_instance_holds_the_workspace(
    rag_factory, tmp_path: Path
):
    working_dir = tmp_path / "rag"
    rag = await rag_factory(E2LightRAG, working_dir)
    same_process = await rag_factory(E2LightRAG, working_dir)  # shares this process's hold
    lock_text = (working_dir / "e2rag" / LOCK_NAME).read_text()
    assert lock_text.startswith(LOCK_MARKER) and "pid " in lock_text

    refused = _other_process(working_dir)
    assert refused.startswith("WorkspaceBusyError") and "in use by another process" in refused

    await rag_factory.close(same_process)
    assert _other_process(working_dir).startswith("WorkspaceBusyError")  # one hold left
    await rag_factory.close(rag)
    assert _other_process(working_dir) == "opened"
