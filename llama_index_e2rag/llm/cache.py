"""The LLM answer cache: an interrupted build resumes without paying twice for an answer.

Kept apart from the runner (``llm.LLMRunner``) because it is plain persistence: a JSON snapshot
plus an append-only journal, keyed by model, prompt kind and prompt text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Optional, Union

from llama_index_e2rag.errors import E2RAGError

CACHE_VERSION = 1


class ResponseCache:
    """Persistent answer cache: a JSON snapshot plus an append-only journal beside it.

    Each ``put`` appends one line to ``<path>.journal`` (so an interrupted build loses at most the
    calls in flight, without rewriting a large file per call); every ``compact_every`` entries, and
    on ``flush()``, the snapshot is rewritten atomically (temp file + rename) and the journal
    dropped. Loading replays the journal over the snapshot and skips a torn last line. One
    process per cache file.
    """

    def __init__(self, path: Union[str, os.PathLike, None] = None, *, compact_every: int = 256):
        self.path = Path(path) if path is not None else None
        self.compact_every = max(1, compact_every)
        self._entries: dict[str, str] = {}
        self._journal_entries = 0
        self._lock = threading.Lock()
        if self.path is not None:
            self._load()

    @property
    def journal_path(self) -> Optional[Path]:
        return None if self.path is None else self.path.with_name(self.path.name + ".journal")

    @staticmethod
    def make_key(model: str, kind: str, prompt: str) -> str:
        """sha256 of model name, prompt kind and the full prompt text."""
        return hashlib.sha256("\x1f".join([model, kind, prompt]).encode("utf-8")).hexdigest()

    def get(self, key: str) -> Optional[str]:
        return self._entries.get(key)

    def put(self, key: str, value: str) -> None:
        with self._lock:
            self._entries[key] = value
            if self.journal_path is None:
                return
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.journal_path, "a", encoding="utf-8") as journal:
                journal.write(json.dumps({"k": key, "v": value}, ensure_ascii=False) + "\n")
            self._journal_entries += 1
            if self._journal_entries >= self.compact_every:
                self._write_snapshot()

    def flush(self) -> None:
        """Write the snapshot and drop the journal (call at the end of a build)."""
        with self._lock:
            if self.path is not None and (self._journal_entries or not self.path.exists()):
                self._write_snapshot()

    def entries(self) -> dict[str, str]:
        """A copy of every answer (what a Ray worker starts from, ``ingest.ray_workers``)."""
        with self._lock:
            return dict(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def _write_snapshot(self) -> None:
        assert self.path is not None and self.journal_path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"version": CACHE_VERSION, "entries": self._entries}
        fd, tmp = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(payload, out, ensure_ascii=False)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(FileNotFoundError):
            self.journal_path.unlink()
        self._journal_entries = 0

    def _load(self) -> None:
        """Read the snapshot and replay the journal; a file there that is not ours (or that we
        cannot read) is refused, never rewritten: it may be someone else's."""
        assert self.path is not None and self.journal_path is not None
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if data.get("version") != CACHE_VERSION:
                    raise ValueError(f"unsupported cache version {data.get('version')!r}")
                self._entries.update(
                    {str(k): str(v) for k, v in dict(data.get("entries", {})).items()}
                )
            except (ValueError, AttributeError, TypeError) as exc:
                raise self._not_ours(self.path, str(exc)) from exc
        if self.journal_path.exists():
            try:
                text = self.journal_path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise self._not_ours(self.journal_path, "not text") from exc
            lines = text.split("\n")  # each append ends with a newline: only the last may be torn
            for number, line in enumerate(lines):
                try:
                    record = json.loads(line)
                    self._entries[str(record["k"])] = str(record["v"])
                    self._journal_entries += 1
                except (ValueError, KeyError, TypeError) as exc:
                    if number < len(lines) - 1:
                        raise self._not_ours(self.journal_path, f"line {number + 1}") from exc

    @staticmethod
    def _not_ours(path: Path, why: str) -> E2RAGError:
        return E2RAGError(
            f"{path} is not an LLM answer cache e2rag can read ({why}); it is left as it is: "
            "move it away (or delete it if it is e2rag's own: it only saves LLM calls) or give "
            "another cache folder"
        )
