"""What a document must be before any work starts: readable text with words, JSON metadata, an
id used once per call. Checked whole (linear, C-speed scans), so a bad document in a batch
refuses the batch before an LLM call, an embedding or a write.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any, Iterable, Optional, Sequence

from llama_index.core.schema import BaseNode, Document

from llama_index_e2rag.errors import BadDocumentError

#: Share of non-text characters above which a document is refused as binary/undecodable.
_MAX_NON_TEXT_SHARE = 0.05
#: The control characters plain text is made of (line and tab controls): never "non-text".
_ALLOWED_CONTROLS = re.compile(r"[\n\r\t\f\v]+")
#: A letter or a digit of any script: a text without one has no words to index.
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


def validate_documents(documents: Sequence[Document]) -> None:
    """Refuse a batch before any work: a document id given twice (the later one would silently
    replace the earlier), or any document ``validate_document`` refuses."""
    _refuse_duplicate_ids((doc.id_ for doc in documents), "document")
    for doc in documents:
        validate_document(doc)


def validate_document(doc: Document) -> None:
    """Refuse what cannot be indexed or saved, before anything is written: empty text, binary or
    undecodable text, text without a single word, metadata that is not JSON.

    Every check reads the whole text at C speed (a 6 MB text: about 0.1 s).
    """
    text = doc.text or ""
    if not text.strip():
        raise BadDocumentError(f"document {doc.id_!r} is empty: there is no text to index")
    if "\x00" in text:
        raise BadDocumentError(
            f"document {doc.id_!r} contains NUL bytes, so it looks binary; "
            "convert it to plain text first (e.g. extract the text of a PDF)"
        )
    non_text = _non_text_count(text)
    if non_text / len(text) > _MAX_NON_TEXT_SHARE:
        raise BadDocumentError(
            f"document {doc.id_!r} is not readable text ({non_text / len(text):.0%} of its "
            "characters are control or undecodable characters); check its encoding"
        )
    if _LETTER_OR_DIGIT.search(text) is None:
        raise BadDocumentError(
            f"document {doc.id_!r} has no words (not one letter or digit in its {len(text):,} "
            "characters): there is nothing to index"
        )
    _refuse_unsaveable_metadata(doc, "document")


def validate_nodes(nodes: Sequence[BaseNode]) -> None:
    """The checks of pre-chunked nodes (``insert_nodes``, ``E2RAGIndex(nodes=...)``) before any
    work: no node id twice in one call, metadata that JSON can save."""
    _refuse_duplicate_ids((node.node_id for node in nodes), "node")
    for node in nodes:
        _refuse_unsaveable_metadata(node, "node")


def _refuse_duplicate_ids(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for node_id in ids:
        if node_id in seen:
            raise BadDocumentError(
                f"{what} id {node_id!r} is given twice in one call (the later {what} would "
                f"silently replace the earlier); give each {what} its own id_"
            )
        seen.add(node_id)


def _non_text_count(text: str) -> int:
    """Undecodable (U+FFFD) and non-printable characters other than line and tab controls.

    Lines are checked with ``str.isprintable`` and only the lines that fail are counted
    character by character (``Counter``, in C), so plain text costs one pass.
    """
    count = text.count("\ufffd")
    odd = [line for line in _ALLOWED_CONTROLS.split(text) if not line.isprintable()]
    if odd:
        counts = Counter("".join(odd))
        count += sum(n for ch, n in counts.items() if not ch.isprintable())
    return count


def _refuse_unsaveable_metadata(node: BaseNode, what: str) -> None:
    """llama-index saves metadata with ``json.dumps`` (docstore, our graph store, vector stores):
    a ``datetime``, a set or any other object fails there, after work was done, and NaN or an
    infinity is not JSON (``json.dumps`` writes it, PostgreSQL's jsonb refuses it). Refuse it here,
    naming the key (dotted for nested ones: ``meta.published``, ``tags[2]``)."""
    metadata = node.metadata
    try:
        json.dumps(metadata, allow_nan=False)
        return
    except (TypeError, ValueError, RecursionError) as exc:
        error: BaseException = exc
    found = _unsaveable_value(metadata)
    if found is None:  # a reference cycle or nesting too deep for the encoder
        raise BadDocumentError(
            f"{what} {node.node_id!r}: its metadata cannot be saved as JSON "
            f"({type(error).__name__}: {error}); give plain, acyclic values"
        )
    path, problem = found
    raise BadDocumentError(
        f"{what} {node.node_id!r}: metadata key {path!r} {problem}, which is not JSON (metadata "
        "is saved as JSON: docstore, graph store, vector stores); convert it first, e.g. a date "
        "to an ISO string, a set to a list, NaN to None"
    )


def _unsaveable_value(metadata: Any) -> Optional[tuple[str, str]]:
    """``(path, problem)`` of the first value or key ``json.dumps(allow_nan=False)`` refuses.

    Walked with a stack, not recursion, so deep nesting cannot overflow; a container met twice is
    walked once (a shared value is fine in JSON; a cycle is left to the caller's message).
    """
    stack: list[tuple[str, Any]] = [("", metadata)]
    walked: set[int] = set()
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path, f"holds {value!r}"
        if value is None or isinstance(value, (str, int, float)):
            continue
        if id(value) in walked:
            continue
        if isinstance(value, dict):
            walked.add(id(value))
            items = []
            for key, item in value.items():
                bad_key = not (key is None or isinstance(key, (str, int, float)))
                if bad_key or (isinstance(key, float) and not math.isfinite(key)):
                    return path, f"has the key {key!r} (a {type(key).__name__})"
                items.append((_key_path(path, str(key)), item))
            stack.extend(reversed(items))
        elif isinstance(value, (list, tuple)):
            walked.add(id(value))
            stack.extend(reversed([(f"{path}[{i}]", item) for i, item in enumerate(value)]))
        else:
            name = type(value).__name__
            article = "an" if name[:1].lower() in "aeiou" else "a"
            return path, f"holds {article} {name} ({_short_repr(value)})"
    return None


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
