"""A persistent cache of each book's offline-default index, built once and never reused stale.

A cached index lives in ``ROOT/<settings key>/<doc_id>-<text sha256[:12]>/``: the store as
``storage_context.persist`` writes it, then ``bench.json`` (what was built, how long it took),
written last, so a folder without it is a build that was killed and is built again. The settings
key is a hash of everything that changes what a build writes: the embedding, the passage length,
the spaCy model and its version, the document builders and their settings, the store format and
a fingerprint of the library's build-time source (every file of the package except the
query-time parts listed in ``QUERY_TIME``: a change to the ranking or the retrievers keeps the
cache, any other change makes a new key and so a new build). Each book is built by
``systems.build_index`` exactly as ``benchmarks.speed.MeasuredIndex`` builds it (document = text
and id, no metadata), in a fresh child process (clean memory, one book's peak RSS).

The root is ``$E2RAG_BENCH_CACHE`` or ``~/.cache/e2rag-bench``, under ``literaryqa/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.loaders import Narrative
from llama_index_e2rag.disk.files import atomic_write_text

_REPO = Path(__file__).resolve().parents[2]
LIBRARY = _REPO / "llama_index_e2rag"
DEFAULT_ROOT = Path(os.environ.get("E2RAG_BENCH_CACHE")
                    or Path.home() / ".cache" / "e2rag-bench") / "literaryqa"
#: Written last into a book's folder: the build finished.
BOOK_MANIFEST = "bench.json"
SETTINGS_FILE = "settings.json"
#: Library paths (relative to the package) that only run at query time.
QUERY_TIME = ("ranking/", "retrievers/", "answer/", "cli/", "app/", "visualize/",
              "data/narrative_weights.json")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_code_fingerprint(library: Path = LIBRARY) -> str:
    """sha256 over the library's build-time files (paths and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(library.rglob("*")):
        relative = path.relative_to(library).as_posix()
        if (not path.is_file() or "__pycache__" in relative or relative.endswith(".orig")
                or relative.startswith(QUERY_TIME)):
            continue
        digest.update(relative.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _simple(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool)) or (
        isinstance(value, tuple) and all(_simple(v) for v in value))


def build_settings() -> dict[str, Any]:
    """Everything that changes what a book's build writes (the cache key's content)."""
    from importlib.metadata import PackageNotFoundError, version

    from benchmarks.systems import EMBED_MODEL_NAME, doc_builders
    from llama_index_e2rag.extract.spacy_model import SPACY_MODEL
    from llama_index_e2rag.extract.passages import DEFAULT_PASSAGE_WORDS
    from llama_index_e2rag.persist.storage import STORE_VERSION

    try:
        spacy_version = version(SPACY_MODEL.replace("_", "-"))
    except PackageNotFoundError:
        spacy_version = "not installed"
    builders = [{"class": type(b).__name__,
                 "settings": {k: v for k, v in sorted(vars(b).items())
                              if not k.startswith("_") and _simple(v)}}
                for b in doc_builders()]
    return {"embed_model": EMBED_MODEL_NAME, "passage_words": DEFAULT_PASSAGE_WORDS,
            "spacy_model": f"{SPACY_MODEL} {spacy_version}", "llm": None,
            "document": "text and doc_id, no metadata (as MeasuredIndex)",
            "builders": builders, "store_version": STORE_VERSION,
            "build_code": build_code_fingerprint()}


def settings_key(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Stale:
    """A finished build of the same book text under other settings (never used)."""

    path: Path
    differs: tuple[str, ...]


class BookCache:
    """The cached indexes of one settings key."""

    def __init__(self, root: Path = DEFAULT_ROOT,
                 settings: dict[str, Any] | None = None) -> None:
        self.root = Path(root)
        # as JSON stores them (tuples become lists), so saved and current settings compare
        self.settings = json.loads(json.dumps(build_settings() if settings is None else settings))
        self.key = settings_key(self.settings)
        self.folder = self.root / self.key

    def book_dir(self, book: Narrative) -> Path:
        return self.folder / f"{book.doc_id}-{text_sha256(book.text)[:12]}"

    def cached(self, book: Narrative) -> Path | None:
        """The book's finished build under these settings, if any."""
        folder = self.book_dir(book)
        return folder if (folder / BOOK_MANIFEST).is_file() else None

    def manifest(self, book: Narrative) -> dict[str, Any] | None:
        folder = self.cached(book)
        return json.loads((folder / BOOK_MANIFEST).read_text()) if folder else None

    def stale(self, book: Narrative) -> list[Stale]:
        """Finished builds of this book text under other settings, and what differs."""
        found = []
        name = self.book_dir(book).name
        for other in sorted(self.root.glob(f"*/{name}/{BOOK_MANIFEST}")):
            folder = other.parent
            if folder.parent == self.folder:
                continue
            try:
                theirs = json.loads((folder.parent / SETTINGS_FILE).read_text())
            except (OSError, ValueError):
                theirs = {}
            differs = tuple(k for k in sorted(set(theirs) | set(self.settings))
                            if theirs.get(k) != self.settings.get(k))
            found.append(Stale(folder, differs))
        return found

    def build(self, books: Sequence[Narrative], data_root: Path,
              log: Callable[[str], None] = print) -> list[dict[str, Any]]:
        """Build every book not yet cached, in the given order, one child process each.

        Resumable: a killed run leaves the earlier books finished; the book it was building has
        no ``bench.json`` and is built again from scratch by the next run.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_json(self.folder / SETTINGS_FILE, self.settings)
        built = []
        for number, book in enumerate(books, start=1):
            if self.cached(book):
                log(f"[{number}/{len(books)}] {book.doc_id}: cached")
                continue
            folder = self.book_dir(book)
            if folder.exists():  # a build of ours that was killed before it finished
                shutil.rmtree(folder)
            log(f"[{number}/{len(books)}] {book.doc_id} ({book.words:,} words): building")
            started = time.perf_counter()
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)}
            env.pop("OPENAI_API_KEY", None)
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.novels.cache", str(data_root), book.doc_id,
                 str(folder), self.key], cwd=_REPO, env=env, capture_output=True, text=True)
            if proc.returncode != 0 or not self.cached(book):
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
                raise RuntimeError(f"build of {book.doc_id} failed: " + " / ".join(tail))
            manifest = self.manifest(book) or {}
            built.append(manifest)
            log(f"[{number}/{len(books)}] {book.doc_id}: built in "
                f"{manifest.get('build_seconds', 0):.0f} s (child {time.perf_counter() - started:.0f} s), "
                f"peak RSS {manifest.get('peak_rss_mb', 0):.0f} MiB")
        return built


def build_one(data_root: Path, doc_id: str, folder: Path, key: str) -> None:
    """Child entry point: build, persist, then write ``bench.json`` (the completion mark)."""
    from llama_index.core import Document

    from benchmarks.loaders import load_literaryqa
    from benchmarks.speed import _dir_bytes, _rss_mb
    from benchmarks.systems import build_index, make_embed_model

    settings = build_settings()
    if settings_key(settings) != key:
        raise SystemExit(f"build settings changed since the build started (key {key} -> "
                         f"{settings_key(settings)}): run the build again")
    book = next(b for b in load_literaryqa(data_root) if b.doc_id == doc_id)
    embed = make_embed_model()
    embed.get_text_embedding("warm-up")
    started = time.perf_counter()
    index = build_index([Document(text=book.text, id_=book.doc_id)], embed)
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    index.storage_context.persist(persist_dir=str(folder))
    from benchmarks.report import machine_info

    _write_json(folder / BOOK_MANIFEST, {
        "doc_id": doc_id, "title": book.title, "words": book.words,
        "text_sha256": text_sha256(book.text), "settings_key": key,
        "build_seconds": build_seconds, "persist_seconds": time.perf_counter() - started,
        "peak_rss_mb": _rss_mb(), "disk_bytes": _dir_bytes(folder),
        "built_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info()})


if __name__ == "__main__":
    build_one(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4])
