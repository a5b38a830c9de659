"""The same text twice: a new document whose text the index already holds is skipped.

A copy of a book under another path (another id, other ``file_name`` metadata) would become a
second document, and every evidence line would then come twice. So documents are compared by
the hash of their text alone (``text_hash``; llama-index's ``Document.hash`` covers the metadata
too), kept in each document's record in the graph. The rule, as llama-index's
``DocstoreStrategy`` puts it: a known id is an upsert (``UPSERTS``: a changed text replaces the
old one, it is never a duplicate); a new id is skipped when its text is already stored or came
earlier in the same call (``DUPLICATES_ONLY``). ``allow_duplicates=True`` (``e2rag index
--allow-duplicates``) indexes it anyway.

Documents indexed before text hashes were recorded have none, so a copy of one is not found until
that document is indexed again (the CLI counts the unchanged files it is given, whose text it
has read).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from llama_index.core.schema import Document

#: Key of the text hash in a document's record (``GraphStore.doc_records()``).
TEXT_HASH_KEY = "text"


def text_hash(document: "Document") -> str:
    """SHA-256 of the document's text, as the reader gave it (metadata left out)."""
    return hashlib.sha256((document.text or "").encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Duplicate:
    """A document skipped because ``same_as`` holds its text."""

    doc_id: str
    same_as: str
    stored: bool  # ``same_as`` is in the index (else: earlier in the same call)

    def notice(self, hint: str = "allow_duplicates=True") -> str:
        where = "already indexed" if self.stored else "given earlier"
        return (
            f"skipped {self.doc_id}: same text as {self.same_as} ({where}); pass {hint} to "
            "index it anyway"
        )


def find_duplicates(
    documents: Sequence["Document"],
    records: Mapping[str, Mapping[str, Any]],
    pending: Optional[Mapping[str, str]] = None,
) -> list[Duplicate]:
    """The documents of ``documents`` to skip: new ids (not in ``records``) whose text is that of
    a stored document, of a document of ``pending`` (``text hash -> id``, inserts in flight), or
    of an earlier document of the call. A stored document the call replaces counts with its new
    text."""
    given = {doc.id_ for doc in documents}
    holder = {digest: (doc_id, True) for digest, doc_id in (pending or {}).items()}
    for doc_id, record in records.items():
        stored = record.get(TEXT_HASH_KEY)
        if stored and doc_id not in given:
            holder.setdefault(stored, (doc_id, True))
    known = [doc for doc in documents if doc.id_ in records]
    for doc in known:  # updates first: a new document cannot take the text an update brings
        holder.setdefault(text_hash(doc), (doc.id_, True))
    duplicates = []
    for doc in documents:
        if doc.id_ in records:
            continue
        found = holder.setdefault(text_hash(doc), (doc.id_, False))
        if found[0] != doc.id_:
            duplicates.append(Duplicate(doc.id_, *found))
    return duplicates


class TextClaims:
    """The texts of inserts in flight, so that two concurrent inserts (tasks or threads of one
    index) of the same text under two ids do not both pass; other processes take turns through
    the store's writer lock, and see the first one's record."""

    def __init__(self, records: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        self._records = records
        self._lock = threading.Lock()
        self._claimed: dict[str, str] = {}  # text hash -> doc id

    def claim(
        self, documents: Sequence["Document"], allow_duplicates: bool
    ) -> tuple[list["Document"], list[Duplicate], list[str]]:
        """The documents to index, the duplicates skipped, and the claimed hashes (to
        ``release`` when the insert ends)."""
        with self._lock:
            duplicates = (
                [] if allow_duplicates
                else find_duplicates(documents, self._records(), self._claimed)
            )
            skipped = {d.doc_id for d in duplicates}
            kept = [doc for doc in documents if doc.id_ not in skipped]
            claimed = []
            for doc in kept:
                digest = text_hash(doc)
                if digest not in self._claimed:
                    self._claimed[digest] = doc.id_
                    claimed.append(digest)
            return kept, duplicates, claimed

    def release(self, claimed: Sequence[str]) -> None:
        with self._lock:
            for digest in claimed:
                self._claimed.pop(digest, None)
