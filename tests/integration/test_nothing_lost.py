"""Nothing a user owns is ever deleted, moved or overwritten (issue 29, part 1).

Every place where a user-given path reaches a delete, rename or overwrite gets a foreign file put
where it could strike; the file must survive byte for byte. The CLI runs as the real ``e2rag``
command in a subprocess with its real offline default (MiniLM, spaCy) on the bundled story; the
Python API runs in process with the scripted LLM and the hash embedding (fast, deterministic).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.graph_stores.simple import SimpleGraphStore
from scripted_llm import ScriptedLLM

import llama_index_e2rag
from llama_index_e2rag.errors import E2RAGError, ForeignFolderError, StoreDamagedError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.persist.ownership import Kind, inspect, mark

ROOT = Path(__file__).resolve().parents[2]
STORY = Path(llama_index_e2rag.__file__).parent / "data" / "peter_rabbit.txt"
TEXT = (
    "Peter ran into the garden of Mr. McGregor. Mr. McGregor chased Peter with a rake. "
    "Peter lost his jacket near the gooseberry net and ran home to his mother."
)


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder`` (links not followed): its bytes, 'dir' or the link target."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_dir():
            found[key] = "dir"
        else:
            found[key] = path.read_bytes()
    return found


# -- the foreign layouts ---------------------------------------------------------------------
def user_files(folder: Path) -> None:
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "sub" / "draft.md").write_text("draft\n")


def vector_store_index(folder: Path) -> None:
    """A plain llama-index VectorStoreIndex persisted there: llama-index's own file names."""
    index = VectorStoreIndex.from_documents([Document(text=TEXT)], embed_model=HashEmbedding())
    index.storage_context.persist(str(folder))


def stray_e2rag_folder(folder: Path) -> None:
    (folder / "e2rag").mkdir(parents=True)
    (folder / "e2rag" / "notes.txt").write_text("not ours\n")


def plain_graph_store(folder: Path) -> None:
    store = SimpleGraphStore()
    store.upsert_triplet("Peter", "fears", "McGregor")
    folder.mkdir(parents=True)
    store.persist(str(folder / "graph_store.json"))


def other_manifest(folder: Path) -> None:
    (folder / "e2rag").mkdir(parents=True)
    (folder / "e2rag" / "manifest.json").write_text('{"format": "someone-else/store"}')
    (folder / "docstore.json").write_text('{"docstore/data": {}}')


FOREIGN: dict[str, Callable[[Path], None]] = {
    "user files": user_files,
    "VectorStoreIndex": vector_store_index,
    "stray e2rag/": stray_e2rag_folder,
    "plain graph_store.json": plain_graph_store,
    "another manifest": other_manifest,
}


# -- the CLI ---------------------------------------------------------------------------------
def e2rag(args: list[str], cwd: Path, state: Path, **popen: object) -> subprocess.Popen:
    """The real ``e2rag`` command (this checkout first on the path), offline, no API key."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", XDG_STATE_HOME=str(state),
    )
    command = shutil.which("e2rag")
    argv = [command] if command else [sys.executable, "-m", "llama_index_e2rag.cli"]
    return subprocess.Popen(argv + args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)  # type: ignore[arg-type]


def run(args: list[str], cwd: Path, state: Path) -> tuple[int, str, str]:
    proc = e2rag(args, cwd, state)
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def index_argv(store: str) -> list[str]:
    return ["index", str(STORY), "--store", store, "--quiet"]


def assert_refused(code: int, err: str, folder: Path) -> None:
    assert code == 1, err
    (line,) = err.strip().splitlines()
    assert line.startswith("e2rag: error: --store ") and str(folder.name) in line
    assert "not an e2rag store" in line and "give an empty or new folder" in line


@pytest.mark.parametrize("layout", sorted(FOREIGN))
def test_cli_index_refuses_a_foreign_folder_and_leaves_it_as_it_was(
    layout: str, tmp_path: Path
) -> None:
    folder = tmp_path / "mynotes"
    FOREIGN[layout](folder)
    before = snapshot(folder)
    code, _, err = run(index_argv(str(folder)), tmp_path, tmp_path / "state")
    assert_refused(code, err, folder)
    assert snapshot(folder) == before
    assert {p.name for p in tmp_path.iterdir()} <= {"mynotes", "state"}  # nothing beside it


@pytest.mark.parametrize("form", [".", "$PWD", "link", "relative"])
def test_cli_index_refuses_the_user_folder_however_it_is_named(form: str, tmp_path: Path) -> None:
    folder = tmp_path / "work" / "mynotes"
    user_files(folder)
    cwd = {"link": tmp_path, "relative": tmp_path / "work"}.get(form, folder)
    store = {".": ".", "$PWD": str(folder), "relative": "mynotes", "link": "notes-link"}[form]
    if form == "link":
        (tmp_path / "notes-link").symlink_to(folder, target_is_directory=True)
    before = snapshot(tmp_path / "work")
    code, _, err = run(index_argv(store), cwd, tmp_path / "state")
    assert code == 1 and "holds files that are not an e2rag store (notes.txt, sub/)" in err, err
    assert snapshot(tmp_path / "work") == before


@pytest.mark.parametrize("command", [["migrate"], ["repair", "--quiet"], ["query", "Who?"],
                                     ["show"]], ids=lambda command: command[0])
def test_other_cli_commands_leave_a_foreign_folder_as_it_was(
    command: list[str], tmp_path: Path
) -> None:
    folder = tmp_path / "mynotes"
    user_files(folder)
    (folder / "e2rag_notes__vector_store.json").write_text(
        '{"embedding_dict": {}, "text_id_to_ref_doc_id": {}, "metadata_dict": {}}'
    )  # the name of 0.1.0's vector files
    before = snapshot(folder)
    code, _, err = run([command[0], "--store", str(folder), *command[1:]], tmp_path,
                       tmp_path / "state")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert snapshot(folder) == before


@pytest.mark.parametrize("form", [".", "link"])  # a relative new path: ``cli_store`` below
def test_cli_index_builds_in_an_empty_or_new_folder_however_it_is_named(
    form: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "target" if form == "link" else work
    if form == "link":
        target.mkdir()
        (work / "link").symlink_to(target, target_is_directory=True)
    code, out, err = run(index_argv(form), work, tmp_path / "state")
    assert code == 0, err
    assert out.startswith(f"indexed 1 document(s) into {form}:")
    assert inspect(target).kind is Kind.STORE
    if form == "link":
        assert (work / "link").is_symlink()  # written through, not replaced
    assert not [p for p in (work, target.parent) for p in p.iterdir()
                if p.name.startswith(".")]  # nothing built aside
    assert isinstance(load_index(target, embed_model=HashEmbedding()), E2RAGIndex)


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store built by the real CLI into a new folder named relative to the current one
    (copied by the tests that change it)."""
    folder = tmp_path_factory.mktemp("cli_store")
    code, _, err = run(index_argv("store"), folder, folder / "state")
    assert code == 0, err
    return folder / "store"


def test_cli_index_on_a_store_keeps_the_users_files_beside_it(
    cli_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(cli_store, store)
    user_files(store)
    (store / "e2rag_notes__vector_store.json").write_text("mine")  # 0.1.0's name, not 0.1.0's
    (store / "vectors-mine.npy").write_bytes(b"mine")  # a segment's name, outside e2rag/
    ours = {k: v for k, v in snapshot(store).items() if not k.startswith("e2rag")}
    second = tmp_path / "second.txt"
    second.write_text(TEXT)
    code, out, err = run(["index", str(second), "--store", "store", "--quiet"], tmp_path,
                         tmp_path / "state")
    assert code == 0 and out.startswith("indexed 1 document(s)"), err
    after = snapshot(store)
    assert all(after[k] == v for k, v in ours.items() if k not in _written_by_us())
    assert len(load_index(store, embed_model=HashEmbedding()).graph_store.doc_orders()) == 2


def _written_by_us() -> set[str]:
    return {"docstore.json", "index_store.json", "graph_store.json",
            "default__vector_store.json", "image__vector_store.json", "llm_cache.json"}


@pytest.mark.parametrize("reached", ["e2rag/owner.json", "docstore.json"])
def test_cli_index_killed_during_a_first_save_leaves_a_folder_recognisably_ours(
    reached: str, tmp_path: Path
) -> None:
    """Killed once the save reached ``reached`` (or, if it was faster, after it finished): the
    folder is ours, never foreign, and ``index`` again finishes it."""
    proc = e2rag(index_argv("store"), tmp_path, tmp_path / "state", start_new_session=True)
    store = tmp_path / "store"
    while proc.poll() is None and not (store / reached).exists():
        time.sleep(0.005)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert inspect(store).kind in (Kind.UNFINISHED, Kind.STORE)
    code, _, err = run(index_argv("store"), tmp_path, tmp_path / "state")
    assert code == 0, err
    assert inspect(store).kind is Kind.STORE
    assert {p.name for p in tmp_path.iterdir()} <= {"store", "state"}


# -- the Python API --------------------------------------------------------------------------
def build(**kwargs: object) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        [Document(text=TEXT, id_="peter")], llm=ScriptedLLM(names=["Peter", "McGregor"]),
        embed_model=HashEmbedding(), **kwargs,
    )


def reload(folder: Path) -> E2RAGIndex:
    return load_index(folder, llm=ScriptedLLM(names=["Peter"]), embed_model=HashEmbedding())


@pytest.fixture(scope="module")
def index() -> E2RAGIndex:
    return build()


@pytest.mark.parametrize("layout", sorted(FOREIGN))
@pytest.mark.parametrize("through_link", [False, True])
def test_persist_into_a_foreign_folder_raises_and_writes_nothing(
    layout: str, through_link: bool, index: E2RAGIndex, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    FOREIGN[layout](folder)
    target = folder
    if through_link:
        target = tmp_path / "link"
        target.symlink_to(folder, target_is_directory=True)
    before = snapshot(tmp_path)
    with pytest.raises(ForeignFolderError, match="not an e2rag store") as raised:
        index.storage_context.persist(str(target))
    assert "\n" not in str(raised.value)
    assert snapshot(tmp_path) == before


def test_persist_to_a_remote_file_system_is_refused_before_any_file(index: E2RAGIndex) -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    fs = MemoryFileSystem()
    fs.mkdir("/bucket")
    fs.pipe("/bucket/docstore.json", b"theirs")
    with pytest.raises(E2RAGError, match="local directory only"):
        index.storage_context.persist("/bucket", fs=fs)
    assert fs.find("/bucket") == ["/bucket/docstore.json"]
    assert fs.cat("/bucket/docstore.json") == b"theirs"


@pytest.mark.parametrize("layout", sorted(FOREIGN))
def test_loading_a_foreign_folder_changes_nothing(layout: str, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    FOREIGN[layout](folder)
    before = snapshot(folder)
    with pytest.raises(E2RAGError, match="no e2rag store"):
        reload(folder)
    try:  # llama-index's own loader: whatever it makes of the folder, it writes nothing
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(folder)),
                                embed_model=HashEmbedding())
    except Exception:  # noqa: BLE001 - refusing is fine; changing the folder is not
        pass
    assert snapshot(folder) == before


@pytest.mark.parametrize("state", ["missing", "empty", "unfinished", "store"])
def test_persist_into_a_missing_empty_unfinished_or_own_folder_works(
    state: str, index: E2RAGIndex, tmp_path: Path
) -> None:
    folder = tmp_path / "store"
    if state == "empty":
        folder.mkdir()
    elif state == "unfinished":  # what a first save killed after its first files left
        mark(folder)
        (folder / "docstore.json").write_text('{"docstore/data": {}}')
        with pytest.raises(StoreDamagedError, match="first save did not finish"):
            reload(folder)
    elif state == "store":
        build().storage_context.persist(str(folder))
    index.storage_context.persist(str(folder))
    assert inspect(folder).kind is Kind.STORE
    assert set(reload(folder).graph_store.doc_orders()) == {"peter"}


def test_persist_keeps_foreign_files_beside_and_under_fixed_temp_names(tmp_path: Path) -> None:
    """The names the old code deleted by pattern or fixed name: 0.1.0's vector files, the BM25
    folder's ``.lexical.old`` and repair's ``vectors.old`` / ``vectors.new``."""
    folder = tmp_path / "store"
    index = build()
    index.storage_context.persist(str(folder))
    planted = {
        "e2rag_notes__vector_store.json": b"mine",
        "notes.txt": b"mine",
        "e2rag/.lexical.old/keep.txt": b"mine",
        "e2rag/vectors.old/keep.txt": b"mine",
        "e2rag/vectors.new/keep.txt": b"mine",
    }
    for name, data in planted.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    index.insert(Document(text="Benjamin Bunny found the jacket.", id_="ben"))
    index.storage_context.persist(str(folder))
    assert all((folder / name).read_bytes() == data for name, data in planted.items())
    assert not list((folder / "e2rag").glob(".lexical.old.*"))  # its own temp folders: gone


def test_repair_keeps_foreign_names_where_it_swaps_and_sets_folders_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llama_index_e2rag.maintenance import repair
    from llama_index_e2rag.persist import repair as store_repair  # sets the folder aside

    folder = tmp_path / "store"
    build().storage_context.persist(str(folder))
    for segment in (folder / "e2rag" / "vectors").glob("vectors-*.npy"):
        segment.write_bytes(b"cut")  # re-embedding swaps the vectors folder
    planted = ["e2rag/vectors.old/keep.txt", "e2rag/vectors.new/keep.txt"]
    for name in planted:
        (folder / name).parent.mkdir(parents=True)
        (folder / name).write_text("mine")
    report = repair.repair_store(folder, embed_model=HashEmbedding())
    assert any("re-embedded" in a for a in report.actions) and not report.after.problems
    assert all((folder / name).read_text() == "mine" for name in planted)

    monkeypatch.setattr(store_repair.time, "strftime", lambda *_: "STAMP")
    taken = folder / "e2rag.damaged-STAMP"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    (folder / "e2rag" / "graph.sqlite").write_bytes(b"not a database" * 100)  # graph lost
    report = repair.repair_store(folder, embed_model=HashEmbedding(),
                                 llm=ScriptedLLM(names=["Peter"]))
    assert (taken / "keep.txt").read_text() == "mine" and sorted(os.listdir(taken)) == ["keep.txt"]
    assert (folder / "e2rag.damaged-STAMP-1" / "graph.sqlite").is_file()
    assert not report.after.problems


def test_the_llm_cache_never_rewrites_a_file_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "llm_cache.json").write_text("my own llm_cache.json\n")
    before = snapshot(tmp_path)
    with pytest.raises(E2RAGError, match="not an LLM answer cache"):
        build(cache_dir=str(tmp_path))
    assert snapshot(tmp_path) == before


def test_traceback_logs_prune_only_their_own_files(tmp_path: Path) -> None:
    from llama_index_e2rag.cli import errors as cli_errors

    logs = tmp_path / "state" / "e2rag" / "logs"  # XDG_STATE_HOME is tmp_path/state (conftest)
    logs.mkdir(parents=True)
    mine = {"notes.txt": "mine", "e2rag-notes.txt": "mine", "my.log": "mine"}
    for name, text in mine.items():
        (logs / name).write_text(text)
    for _ in range(cli_errors.KEEP_LOGS + 2):
        assert cli_errors.write_log(RuntimeError("boom"), ["query"]) is not None
    assert all((logs / name).read_text() == text for name, text in mine.items())
    assert len(list(logs.glob("e2rag-*.log"))) == cli_errors.KEEP_LOGS



def test_a_migration_removes_only_the_0_1_0_files_it_converted_and_unchanged_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversion killed after its commit leaves 0.1.0's vector files, which the next
    ``e2rag migrate`` removes: only those its record names, as they were when converted."""
    from llama_index_e2rag.cli.entry import main
    from llama_index_e2rag.maintenance.migrate import migrate_store
    from llama_index_e2rag.persist import legacy

    store = tmp_path / "store"
    shutil.copytree(ROOT / "tests" / "data" / "store_0_1_0", store)
    user_files(store)
    monkeypatch.setattr(legacy, "finish_conversion", lambda folder: None)  # "killed" after it
    migrate_store(store)
    monkeypatch.undo()
    old = sorted(p.name for p in store.glob("e2rag_*__vector_store.json"))
    assert len(old) == 6 and (store / "e2rag" / legacy.RECORD_FILE).is_file()
    (store / "e2rag_chunk__vector_store.json").write_text("mine")  # changed since: the user's
    mine = {k: v for k, v in snapshot(store).items() if not k.startswith(("e2rag", "."))
            and k.endswith((".txt", ".md", "sub"))}
    assert main(["migrate", "--store", str(store)]) == 0
    assert (store / "e2rag_chunk__vector_store.json").read_text() == "mine"
    assert sorted(p.name for p in store.glob("e2rag_*__vector_store.json")) == [
        "e2rag_chunk__vector_store.json"
    ]
    assert not (store / "e2rag" / legacy.RECORD_FILE).exists()
    assert all(snapshot(store)[k] == v for k, v in mine.items()) and len(mine) == 3
