"""What ``e2rag index`` reads: the files users have, one document per file.

Plain text (``.txt``, ``.md``) is decoded here, with ``--encoding``. PDF, EPUB and DOCX are read
by LlamaIndex's own file readers (the ``llama-index-readers-file`` package of the ``[files]``
extra: the readers ``SimpleDirectoryReader`` uses), so the CLI reads a book as a LlamaIndex app
would. HTML is decoded like text and converted by ``html2text``, as LlamaIndex's ``EpubReader``
converts an EPUB's chapters (its ``HTMLTagReader`` runs the paragraphs of a ``<div>`` together
and keeps the code of ``<script>``). A reader's parts (a PDF's pages) are joined in order into one
document, so story positions run through the whole book. Ids are absolute paths.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from llama_index_e2rag.errors import BadDocumentError, MissingExtraError

if TYPE_CHECKING:
    from llama_index.core import Document

#: ``--encoding`` value that detects each file's encoding (``charset-normalizer``).
AUTO_ENCODING = "auto"
#: Plain text, decoded by us (``SimpleDirectoryReader`` too reads these as plain text).
TEXT_SUFFIXES = (".txt", ".text", ".md", ".markdown")
#: suffix -> the kind of file, read by LlamaIndex's reader of that kind
DOCUMENT_SUFFIXES = {
    ".pdf": "PDF",
    ".epub": "EPUB",
    ".docx": "DOCX",
    ".html": "HTML",
    ".htm": "HTML",
    ".xhtml": "HTML",
}
#: What ``e2rag index`` picks up in a folder.
SUPPORTED_SUFFIXES = (*TEXT_SUFFIXES, *DOCUMENT_SUFFIXES)
FILES_EXTRA = 'pip install "llama-index-e2rag[files]"'
#: Bytes looked at to tell text from binary data, and the share of control bytes (not line or
#: tab controls, not ESC) above which a file is binary: text in any 8-bit encoding has none.
_SNIFF_BYTES = 8192
_MAX_CONTROL_SHARE = 0.05
_TEXT_CONTROLS = frozenset(b"\t\n\v\f\r\x1b")
_CONTROLS = bytes(b for b in range(32) if b not in _TEXT_CONTROLS)
_UNICODE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)


def read_documents(paths: Sequence[Path], encoding: str = "utf-8") -> list["Document"]:
    """One document per file (folders: their supported files, recursively), in the order given,
    ids = absolute paths; text files in ``encoding`` (``auto``: detected per file)."""
    from llama_index.core import Document

    if encoding != AUTO_ENCODING:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise BadDocumentError(
                f"unknown encoding --encoding {encoding}; give one such as utf-8, latin-1, "
                f"cp1252, or {AUTO_ENCODING} to detect it"
            ) from None
    documents = []
    for file in _files(paths):
        kind = DOCUMENT_SUFFIXES.get(file.suffix.lower())
        if kind is None:
            text = _decode(file, encoding)
        elif kind == "HTML":
            text = _html_text(file, _decode(file, encoding))
        else:
            text = _read_document(file, kind)
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


def _files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.suffix.lower() in SUPPORTED_SUFFIXES and p.is_file()
            )
            if not found:
                raise BadDocumentError(
                    f"{path} holds no files e2rag index reads ({', '.join(SUPPORTED_SUFFIXES)})"
                )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return files


def _read_document(file: Path, kind: str) -> str:
    """The text LlamaIndex's reader of ``kind`` finds in ``file``, its parts joined in order."""
    reader = _reader(file, kind)
    try:
        parts = reader.load_data(file)
    except ImportError as exc:
        raise _missing(file, kind, exc) from exc
    except Exception as exc:  # the reader's own failure: a damaged file, or not of this kind
        cause = _unwrapped(exc)
        if isinstance(cause, ImportError):
            raise _missing(file, kind, cause) from exc
        raise BadDocumentError(
            f"cannot read {file} as {kind} ({type(cause).__name__}: {_first_line(cause)})"
        ) from exc
    text = "\n".join(part.text for part in parts if part.text)
    if not text.strip():
        hint = " (a scanned PDF has no text layer: run OCR on it first)" if kind == "PDF" else ""
        raise BadDocumentError(f"{file}: the {kind} reader found no text in it{hint}")
    return text


def _reader(file: Path, kind: str) -> Any:
    """LlamaIndex's reader of ``kind``: whole documents, not one per PDF page."""
    factories: dict[str, Callable[[], Any]] = {
        "PDF": lambda: _module("docs").PDFReader(return_full_document=True),
        "EPUB": lambda: _module("epub").EpubReader(),
        "DOCX": lambda: _module("docs").DocxReader(),
    }
    try:
        return factories[kind]()
    except ImportError as exc:
        raise _missing(file, kind, exc) from exc


def _html_text(file: Path, html: str) -> str:
    """The text of an HTML page: headings (``# Chapter 1``) and paragraphs, without markup,
    links, images, scripts or styles."""
    try:
        import html2text
    except ImportError as exc:
        raise _missing(file, "HTML", exc) from exc
    converter = html2text.HTML2Text()
    converter.body_width = 0  # no hard wrapping inside paragraphs
    converter.ignore_links = converter.ignore_images = converter.ignore_emphasis = True
    text = converter.handle(html)
    if not text.strip():
        raise BadDocumentError(f"{file}: the HTML holds no text")
    return text


def _module(name: str) -> Any:
    from importlib import import_module

    return import_module(f"llama_index.readers.file.{name}")


def _missing(file: Path, kind: str, exc: ImportError) -> MissingExtraError:
    missing = f" ({exc.name} is missing)" if exc.name else ""
    return MissingExtraError(
        f"{file} is a {kind} file: reading it needs LlamaIndex's file readers{missing}; "
        f"install them with: {FILES_EXTRA}"
    )


def _unwrapped(exc: BaseException) -> BaseException:
    """The failure inside a retry wrapper (``PDFReader`` retries with tenacity)."""
    last = getattr(exc, "last_attempt", None)
    inner = last.exception() if last is not None and hasattr(last, "exception") else None
    return inner if isinstance(inner, BaseException) else exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _decode(file: Path, encoding: str) -> str:
    """``file``'s text; binary data is refused as such, a decoding failure says which
    ``--encoding`` to pass."""
    data = file.read_bytes()
    if _binary(data):
        raise BadDocumentError(
            f"{file} is not a text or document file e2rag can read (it holds binary data); "
            f"e2rag index reads text ({', '.join(TEXT_SUFFIXES)}) and "
            f"{', '.join(sorted(set(DOCUMENT_SUFFIXES.values())))} files"
        )
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


def _binary(data: bytes) -> bool:
    """Binary data, not text in some encoding: NUL bytes (UTF-16 and UTF-32 text, which has
    them, starts with its byte-order mark), or more control bytes than text ever has."""
    sample = data[:_SNIFF_BYTES]
    if not sample or sample.startswith(_UNICODE_BOMS):
        return False
    if b"\x00" in sample:
        return True
    controls = len(sample) - len(sample.translate(None, _CONTROLS))
    return controls / len(sample) > _MAX_CONTROL_SHARE
