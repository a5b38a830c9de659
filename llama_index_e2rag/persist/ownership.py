"""Which folders are ours to write: the one rule every save, load and ``e2rag`` command applies,
so that nothing a user owns is ever deleted, moved or overwritten.

A folder is ours when it holds one of our stores (the manifest in ``e2rag/`` or its checksum
entry, our pointer in ``graph_store.json``, or 0.1.0's layout) or our marker
``e2rag/owner.json``, which a save into a folder that is not yet ours writes before anything
else: a save killed at any moment leaves nothing of ours, or a folder recognisably ours. A
missing or empty folder is made ours; any other folder is refused, even one holding
llama-index's file names (a ``VectorStoreIndex`` persisted there, a stray ``e2rag/`` folder):
those files are someone else's.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path

from llama_index_e2rag.disk.checksums import CHECKSUMS_FILE, E2RAG_DIR
from llama_index_e2rag.errors import E2RAGError, ForeignFolderError, StoreDamagedError
from llama_index_e2rag.persist import legacy

#: Written first into a folder that becomes ours (inside ``e2rag/``).
MARKER_FILE = "owner.json"
MARKER_TEXT = (
    '{"format": "llama-index-e2rag/owner", "note": "this folder holds an e2rag store; '
    'llama-index-e2rag writes only its own files here"}\n'
)
#: The manifest every completed save writes (inside ``e2rag/``), and its format.
MANIFEST_FILE = "manifest.json"
STORE_FORMAT = "llama-index-e2rag/store"
#: Subject of the pointer triple in ``graph_store.json`` (a ``SimpleGraphStore`` file).
POINTER = "__llama_index_e2rag__"
POINTER_FILE = "graph_store.json"
#: How many foreign names a refusal lists.
SHOWN = 3


class Kind(enum.Enum):
    MISSING = "missing"
    EMPTY = "empty"
    #: one of our stores: a save finished once (since damaged, maybe: ``e2rag repair``)
    STORE = "store"
    #: ours, but no save finished its stores yet (a first save was killed): written over
    UNFINISHED = "unfinished"
    #: not a folder, or a folder holding files that are not ours
    FOREIGN = "foreign"


@dataclass
class Folder:
    path: Path
    kind: Kind
    #: for FOREIGN: why, in words (the names found, or "is a file")
    why: str = ""


def inspect(folder: Path) -> Folder:
    """What ``folder`` is, by the rule above (reads only; follows symlinks)."""
    folder = Path(folder)
    if not folder.exists():
        if folder.is_symlink():
            return Folder(folder, Kind.FOREIGN, f"is a link to {os.readlink(folder)}, which is "
                          "missing")
        return Folder(folder, Kind.MISSING)
    if not folder.is_dir():
        return Folder(folder, Kind.FOREIGN, "is a file, not a folder")
    entries = sorted(os.listdir(folder))
    ours = folder / E2RAG_DIR
    if not entries or (entries == [E2RAG_DIR] and ours.is_dir() and not any(ours.iterdir())):
        return Folder(folder, Kind.EMPTY)  # (a save killed before its marker)
    if _saved(folder) or legacy.is_legacy(folder):
        return Folder(folder, Kind.STORE)
    if has_marker(folder):
        return Folder(folder, Kind.UNFINISHED)
    shown = [f"{name}/" if (folder / name).is_dir() else name for name in entries[:SHOWN]]
    more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
    return Folder(folder, Kind.FOREIGN, f"holds files that are not an e2rag store "
                  f"({', '.join(shown)}{more})")


def has_marker(folder: Path) -> bool:
    """Our marker: its exact text, or empty (a save killed between creating and writing it)."""
    try:
        text = (Path(folder) / E2RAG_DIR / MARKER_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return text in ("", MARKER_TEXT)


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _saved(folder: Path) -> bool:
    """A save of ours finished its stores once: the manifest it writes last, or its entry in
    the checksums registry (made before the file), or the pointer written after it (any one of
    them may be what damage left)."""
    data = _read_json(folder / E2RAG_DIR / MANIFEST_FILE)
    if isinstance(data, dict) and data.get("format") == STORE_FORMAT:
        return True
    sums = _read_json(folder / E2RAG_DIR / CHECKSUMS_FILE)
    if isinstance(sums, dict) and f"{E2RAG_DIR}/{MANIFEST_FILE}" in (sums.get("files") or {}):
        return True
    return _has_pointer(folder)


def _has_pointer(folder: Path) -> bool:
    data = _read_json(folder / POINTER_FILE)
    try:
        triples = data["graph_dict"][POINTER]  # type: ignore[index]
        return ["format", STORE_FORMAT] in triples
    except (KeyError, TypeError):
        return False


def refusal(found: Folder, label: str) -> ForeignFolderError:
    """The one-line refusal of a foreign folder (``label``: how the user named it)."""
    return ForeignFolderError(
        f"{label} {found.path} {found.why}; give an empty or new folder (e2rag writes only "
        "into its own stores, and never over files it did not write)"
    )


def claim(folder: Path, label: str = "persist directory") -> Folder:
    """Make ``folder`` ours before anything is written there, or refuse it (nothing written).

    Returns what it was: MISSING and EMPTY folders are created, STORE and UNFINISHED ones are
    ours already (all carry the marker after); anything else raises ``ForeignFolderError``."""
    folder = Path(folder)
    found = inspect(folder)
    if found.kind is Kind.FOREIGN:
        raise refusal(found, label)
    if not has_marker(folder):  # also a store saved before the marker existed: the save may
        mark(folder)  # rewrite what showed it ours (0.1.0's index_store.json, say)
    return found


def mark(folder: Path) -> None:
    """Write the marker (the first write into a folder that becomes ours)."""
    home = Path(folder) / E2RAG_DIR
    home.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(home / MARKER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # another process claimed it meanwhile (has_marker decides whose it is)
    try:
        os.write(fd, MARKER_TEXT.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def release(folder: Path, was: Kind) -> None:
    """Undo ``claim`` of a folder that was MISSING or EMPTY when a first build stopped before
    its save began (an error, a Ctrl-C): only the marker and the folders it made go, so the
    user finds what was there before. Anything else of ours in it (an LLM cache worth keeping
    for the next run) keeps the folder, which then reads as unfinished."""
    if was not in (Kind.MISSING, Kind.EMPTY) or not has_marker(folder):
        return
    home = Path(folder) / E2RAG_DIR
    if os.listdir(home) != [MARKER_FILE] or os.listdir(folder) != [E2RAG_DIR]:
        return
    (home / MARKER_FILE).unlink()
    home.rmdir()
    if was is Kind.MISSING:
        Path(folder).rmdir()


def no_store(folder: Path, fix: str) -> E2RAGError:
    """Why ``folder`` cannot be loaded, in one line (``fix``: how to make a store there)."""
    found = inspect(folder)
    if found.kind is Kind.UNFINISHED:
        return StoreDamagedError(
            f"{folder} holds an e2rag store whose first save did not finish (interrupted?); "
            f"index the documents into it again"
        )
    if found.kind is Kind.FOREIGN:
        return ForeignFolderError(f"no e2rag store at {folder}: it {found.why}")
    return E2RAGError(f"no e2rag store at {folder} ({fix})")
