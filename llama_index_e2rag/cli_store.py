"""What the ``e2rag`` commands read: text files into documents, and stores (checked first)."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from llama_index_e2rag.errors import BadDocumentError

if TYPE_CHECKING:
    from llama_index.core import Document

    from llama_index_e2rag.index import E2RAGIndex

#: ``--encoding`` value that detects each file's encoding (``charset-normalizer``).
AUTO_ENCODING = "auto"
#: File types picked up when a folder is given to ``e2rag index``.
TEXT_SUFFIXES = (".txt", ".md", ".text", ".markdown")


def read_documents(paths: Sequence[Path], encoding: str = "utf-8") -> list["Document"]:
    """Text files (folders: their text files, recursively) in ``encoding`` (``auto``: detected
    per file), ids = absolute paths."""
    from llama_index.core import Document

    if encoding != AUTO_ENCODING:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise BadDocumentError(
                f"unknown encoding --encoding {encoding}; give one such as utf-8, latin-1, "
                f"cp1252, or {AUTO_ENCODING} to detect it"
            ) from None

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES)
            if not found:
                raise BadDocumentError(f"{path} holds no text files ({', '.join(TEXT_SUFFIXES)})")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    documents = []
    for file in files:
        text = _decode(file, encoding)
        resolved = file.resolve()
        documents.append(
            Document(
                text=text,
                id_=str(resolved),
                metadata={"file_name": resolved.name, "file_path": str(resolved)},
                excluded_embed_metadata_keys=["file_path"],
                excluded_llm_metadata_keys=["file_path"],
            )
        )
    return documents


def _decode(file: Path, encoding: str) -> str:
    """``file``'s text; a failure says which ``--encoding`` to pass."""
    data = file.read_bytes()
    if encoding == AUTO_ENCODING:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is None:
            raise BadDocumentError(
                f"cannot tell the encoding of {file} (binary, or mixed encodings); pass "
                "--encoding NAME if it is text"
            )
        return str(best)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = codecs.lookup(encoding).name
        hint = "--encoding latin-1 (or the file's encoding)" if name == "utf-8" else (
            "the file's encoding with --encoding NAME"
        )
        label = "UTF-8" if name == "utf-8" else name
        raise BadDocumentError(
            f"{file} is not {label} text (byte {exc.start}: {exc.reason}); pass {hint}, or "
            f"--encoding {AUTO_ENCODING} to detect it"
        ) from exc


def has_store(store: Path) -> bool:
    """A store to add to: one of ours (``ownership``; what a killed first save left is not one:
    ``index`` writes over it)."""
    from llama_index_e2rag.ownership import Kind, inspect

    return inspect(store).kind is Kind.STORE


def load_store(store: Path, progress: bool = False, **kwargs: object) -> "E2RAGIndex":
    """Load the e2rag index persisted in ``store``, its files checked first (``load_index``)."""
    from llama_index_e2rag.loading import load_index, no_store

    if not has_store(store):
        raise no_store(store, "create one with: e2rag index FILES --store")
    from tqdm.auto import tqdm

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with tqdm(total=1, desc="Loading store", unit="step", disable=not progress) as bar:
        index = load_index(store, **kwargs)
        bar.update()
    return index
