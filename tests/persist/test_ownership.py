"""The ownership rule on hand-made folders: what is recognised as ours, and only that."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from llama_index_e2rag.errors import ForeignFolderError
from llama_index_e2rag.disk.files import swap_folder
from llama_index_e2rag.persist.ownership import (
    has_marker,
    release,
    MARKER_FILE,
    MARKER_TEXT,
    POINTER,
    STORE_FORMAT,
    Kind,
    claim,
    inspect,
    mark,
)


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


MANIFEST = json.dumps({"format": STORE_FORMAT, "version": 1})
POINTER_FILE = json.dumps(
    {"graph_dict": {POINTER: [["home", "/x/e2rag"], ["format", STORE_FORMAT]]}}
)
LAYOUTS: dict[str, tuple[Callable[[Path], object], Kind]] = {
    "missing": (lambda d: None, Kind.MISSING),
    "empty": (lambda d: d.mkdir(), Kind.EMPTY),
    "only an empty e2rag/": (lambda d: (d / "e2rag").mkdir(parents=True), Kind.EMPTY),
    "our manifest": (lambda d: write(d, {"e2rag/manifest.json": MANIFEST}), Kind.STORE),
    "our pointer": (lambda d: write(d, {"graph_store.json": POINTER_FILE}), Kind.STORE),
    "manifest registered, file lost": (
        lambda d: write(d, {f"e2rag/{MARKER_FILE}": MARKER_TEXT, "e2rag/checksums.json":
                            json.dumps({"files": {"e2rag/manifest.json": [[1, 2]]}})}),
        Kind.STORE,
    ),
    "marker": (lambda d: write(d, {f"e2rag/{MARKER_FILE}": MARKER_TEXT}), Kind.UNFINISHED),
    "marker cut before its text": (
        lambda d: write(d, {f"e2rag/{MARKER_FILE}": "", "docstore.json": "{}"}), Kind.UNFINISHED
    ),
    "marker and a graph, no save finished": (
        lambda d: write(d, {f"e2rag/{MARKER_FILE}": MARKER_TEXT, "e2rag/graph.sqlite": "x"}),
        Kind.UNFINISHED,
    ),
    "a file": (lambda d: d.write_text("x"), Kind.FOREIGN),
    "user files": (lambda d: write(d, {"notes.txt": "x"}), Kind.FOREIGN),
    "a hidden file": (lambda d: write(d, {".DS_Store": "x"}), Kind.FOREIGN),
    "someone's owner.json": (lambda d: write(d, {f"e2rag/{MARKER_FILE}": "{}"}), Kind.FOREIGN),
    "another manifest": (
        lambda d: write(d, {"e2rag/manifest.json": '{"format": "x"}'}), Kind.FOREIGN
    ),
    "llama-index files": (
        lambda d: write(d, {"docstore.json": "{}", "index_store.json": "{}",
                            "graph_store.json": '{"graph_dict": {}}'}),
        Kind.FOREIGN,
    ),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_inspect_recognises_only_what_is_ours(layout: str, tmp_path: Path) -> None:
    make, kind = LAYOUTS[layout]
    make(tmp_path / "d")
    assert inspect(tmp_path / "d").kind is kind


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_claim_refuses_foreign_folders_and_marks_the_others(layout: str, tmp_path: Path) -> None:
    make, kind = LAYOUTS[layout]
    folder = tmp_path / "d"
    make(folder)
    if kind is Kind.FOREIGN:
        before = sorted(p.name for p in tmp_path.rglob("*"))
        with pytest.raises(ForeignFolderError, match="give an empty or new folder"):
            claim(folder, "--store")
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    else:
        assert claim(folder).kind is kind
        assert (folder / "e2rag" / MARKER_FILE).read_text() in ("", MARKER_TEXT)
        assert inspect(folder).kind is not Kind.FOREIGN


def test_a_refusal_names_the_folder_and_a_few_of_its_files(tmp_path: Path) -> None:
    folder = write(tmp_path / "notes", {f"f{i}.txt": "x" for i in range(5)})
    (folder / "sub").mkdir()
    with pytest.raises(ForeignFolderError) as raised:
        claim(folder, "--store")
    assert str(raised.value).startswith(
        f"--store {folder} holds files that are not an e2rag store (f0.txt, f1.txt, f2.txt and "
        "3 more)"
    )


def test_a_link_is_followed_and_a_link_to_nothing_refused(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert claim(tmp_path / "link").kind is Kind.EMPTY
    assert (tmp_path / "target" / "e2rag" / MARKER_FILE).is_file()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ForeignFolderError, match="missing"):
        claim(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()


def test_mark_never_replaces_a_marker_file(tmp_path: Path) -> None:
    write(tmp_path, {f"e2rag/{MARKER_FILE}": "theirs"})
    mark(tmp_path)
    assert (tmp_path / "e2rag" / MARKER_FILE).read_text() == "theirs"


def test_swap_folder_deletes_only_the_folder_it_replaced(tmp_path: Path) -> None:
    write(tmp_path, {"lexical/old.txt": "old", "fresh/new.txt": "new",
                     ".lexical.old/theirs.txt": "theirs"})
    swap_folder(tmp_path / "fresh", tmp_path / "lexical")
    assert [p.name for p in (tmp_path / "lexical").iterdir()] == ["new.txt"]
    assert (tmp_path / ".lexical.old" / "theirs.txt").read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lexical.old", "lexical"]


@pytest.mark.parametrize("start", ["missing", "empty"])
def test_release_leaves_a_folder_as_it_was_before_the_claim(start: str, tmp_path: Path) -> None:
    folder = tmp_path / "store"
    if start == "empty":
        folder.mkdir()
    was = claim(folder).kind
    release(folder, was)
    assert (folder.exists(), list(folder.iterdir()) if folder.exists() else []) == (
        (start == "empty"), []
    )


def test_release_keeps_what_else_of_ours_the_folder_holds_and_any_store(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    was = claim(folder).kind
    (folder / "llm_cache.json").write_text("{}")  # answers paid for: kept for the next run
    release(folder, was)
    assert inspect(folder).kind is Kind.UNFINISHED
    stored = write(tmp_path / "stored", {"e2rag/manifest.json": json.dumps(
        {"format": "llama-index-e2rag/store"})})
    was = claim(stored).kind
    release(stored, was)  # a store is never released
    assert inspect(stored).kind is Kind.STORE and has_marker(stored)
