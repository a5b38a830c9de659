"""``e2rag index`` reads the files users have: text, Markdown, PDF, EPUB, DOCX and HTML (the
last four with the ``[files]`` extra), one document per file; without a reader it names the extra,
and binary data is refused as such. Every file here is written by the test with a real library."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.cli.files import FILES_EXTRA, read_documents
from llama_index_e2rag.errors import BadDocumentError, MissingExtraError

REPO = Path(__file__).resolve().parents[2]
#: format -> (file name, the question, a word of the answer only that file holds)
BOOKS = {
    "pdf": ("voyage.pdf", "Who sailed at dawn?", "Wexley"),
    "epub": ("lantern.epub", "Who kept the brass lantern?", "Ondine"),
    "docx": ("map.docx", "Who found the map?", "Fenwick"),
    "html": ("bell.html", "Who rang the bell?", "Marlow"),
    "md": ("orchard.md", "Who planted the orchard?", "Tamsin"),
}


def write_pdf(path: Path, pages: list[list[str]]) -> None:
    """A PDF of real text pages (Helvetica, one line per string), written with pypdf."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"),
        NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"),
    }))
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        shown = [f"({line}) Tj T*" for line in lines]
        stream = DecodedStreamObject()
        stream.set_data("\n".join(["BT", "/F1 12 Tf", "14 TL", "72 720 Td", *shown, "ET"]).encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
    with open(path, "wb") as fh:
        writer.write(fh)


def write_epub(path: Path, chapters: list[str]) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("test-book")
    book.set_title("The Lantern")
    book.set_language("en")
    items = []
    for number, text in enumerate(chapters, 1):
        item = epub.EpubHtml(title=f"Chapter {number}", file_name=f"c{number}.xhtml", lang="en")
        item.content = f"<h1>Chapter {number}</h1><p>{text}</p>"
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)


def write_docx(path: Path, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))


def write_books(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_pdf(folder / "voyage.pdf", [
        ["Captain Wexley sailed at dawn from the harbour.", "A storm broke the mast at sea."],
        ["Wexley mended the mast by noon and sailed home."],
    ])
    write_epub(folder / "lantern.epub", [
        "Miss Ondine kept the brass lantern in the tower.", "Ondine lit the lantern at midnight."
    ])
    write_docx(folder / "map.docx", ["Doctor Fenwick found the map in the attic.",
                                     "Fenwick hid the map inside the clock."])
    (folder / "bell.html").write_text(
        "<html><head><title>Bell</title><style>p { margin: 0 }</style>"
        "<script>var chime = 1;</script></head><body><div><p>Old Marlow rang the bell at the "
        "chapel.</p><p>Marlow waited for the echo.</p></div></body></html>", encoding="utf-8"
    )
    (folder / "orchard.md").write_text(
        "# Chapter 1\n\nTamsin planted the orchard in spring.\n\nTamsin watered the young "
        "trees every morning.\n", encoding="utf-8"
    )
    return folder


def test_each_format_is_one_document_with_its_text_in_order(tmp_path: Path) -> None:
    folder = write_books(tmp_path / "books")
    docs = {Path(d.id_).name: d for d in read_documents([folder])}
    assert sorted(docs) == sorted(name for name, _, _ in BOOKS.values())
    pdf = docs["voyage.pdf"].text
    assert pdf.index("sailed at dawn") < pdf.index("broke the mast") < pdf.index("mended the mast")
    epub = docs["lantern.epub"].text
    assert epub.index("brass lantern") < epub.index("at midnight")
    assert "Fenwick hid the map" in docs["map.docx"].text
    html = docs["bell.html"].text
    assert "Old Marlow rang the bell" in html and "<p>" not in html and "chime" not in html
    assert "chapel.Marlow" not in html  # paragraphs of one <div> stay apart
    assert all(d.id_ == str((folder / name).resolve()) for name, d in docs.items())
    assert all(d.metadata["file_name"] == name for name, d in docs.items())


def test_a_folder_picks_up_the_supported_files_only(tmp_path: Path) -> None:
    folder = write_books(tmp_path / "books")
    (folder / "notes.json").write_text("{}", encoding="utf-8")
    (folder / "cover.png").write_bytes(PNG)
    (folder / "sub").mkdir()
    (folder / "sub" / "more.TXT").write_text("Tamsin sold apples.", encoding="utf-8")
    names = [Path(d.id_).name for d in read_documents([folder])]
    assert "notes.json" not in names and "cover.png" not in names and "more.TXT" in names


#: a real 1x1 PNG
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@pytest.mark.parametrize(
    "name, data",
    [
        ("cover.png", PNG),
        ("noise.bin", random.Random(29).randbytes(4096)),
        # no NUL at all: told by its share of control bytes
        ("table.dat", random.Random(29).randbytes(300).replace(b"\x00", b"\x01")),
    ],
)
@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "auto"])
def test_binary_data_is_refused_as_not_a_file_we_read(
    tmp_path: Path, name: str, data: bytes, encoding: str
) -> None:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(BadDocumentError, match="not a text or document file") as info:
        read_documents([tmp_path / name], encoding=encoding)
    assert "--encoding" not in str(info.value) and "\n" not in str(info.value)


def test_text_in_8_bit_and_utf_16_encodings_is_not_taken_for_binary(tmp_path: Path) -> None:
    text = "Tamsin's café\tsold\fapples.\r\n" * 50
    (tmp_path / "latin.txt").write_bytes(text.encode("latin-1"))
    (tmp_path / "wide.txt").write_bytes(text.encode("utf-16"))  # with its byte-order mark
    assert read_documents([tmp_path / "latin.txt"], encoding="latin-1")[0].text == text
    assert read_documents([tmp_path / "wide.txt"], encoding="utf-16")[0].text == text


def test_a_damaged_document_is_named_with_its_kind(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n" * 20)
    with pytest.raises(BadDocumentError, match=r"cannot read .*broken\.pdf as PDF"):
        read_documents([tmp_path / "broken.pdf"])


def test_a_pdf_without_text_says_so(tmp_path: Path) -> None:
    write_pdf(tmp_path / "scan.pdf", [[]])
    with pytest.raises(BadDocumentError, match="found no text.*OCR"):
        read_documents([tmp_path / "scan.pdf"])


@pytest.mark.parametrize(
    "kind, missing",
    [
        ("pdf", "llama_index.readers.file"),
        ("epub", "ebooklib"),
        ("docx", "docx2txt"),
        ("html", "html2text"),
    ],
)
def test_a_missing_reader_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, missing: str
) -> None:
    write_books(tmp_path)
    for name in [m for m in sys.modules if m == missing or m.startswith(missing + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    with pytest.raises(MissingExtraError) as info:
        read_documents([tmp_path / BOOKS[kind][0]])
    message = str(info.value)
    assert FILES_EXTRA in message and BOOKS[kind][0] in message and "\n" not in message


# -- through the real command ------------------------------------------------------------------
def _cli(args: list[str], cwd: Path, patch: str = "") -> subprocess.CompletedProcess[str]:
    """``e2rag args`` in a new interpreter (``patch`` run first), real models."""
    script = f"import sys\n{patch}\nfrom llama_index_e2rag.cli.entry import main\nsys.exit(main())\n"
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_STATE_HOME": str(cwd / "state"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("formats")
    write_books(home / "books")
    done = _cli(["index", "books", "--store", "store", "--quiet"], home)
    assert done.returncode == 0, done.stderr
    assert "indexed 5 document(s)" in done.stdout
    return home


@pytest.mark.parametrize("kind", sorted(BOOKS))
def test_each_format_is_indexed_and_found_by_the_command(
    indexed: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, question, word = BOOKS[kind]
    # the store was written by the command's process; the query runs here (models load once)
    assert main(["query", question, "--store", str(indexed / "store"), "--quiet"]) == 0
    evidence = capsys.readouterr().out.split("Evidence:", 1)[1]
    first = evidence.strip().splitlines()[0]
    assert name in first and word in evidence


def test_the_command_names_the_extra_and_refuses_binary_in_one_line(tmp_path: Path) -> None:
    write_books(tmp_path / "books")
    (tmp_path / "cover.png").write_bytes(PNG)
    hidden = "sys.modules['llama_index.readers.file'] = None"
    for args, patch, expected in [
        (["books/voyage.pdf"], hidden, FILES_EXTRA),
        (["books"], hidden, FILES_EXTRA),
        (["cover.png"], "", "is not a text or document file e2rag can read"),
    ]:
        done = _cli(["index", *args, "--store", "store", "--quiet"], tmp_path, patch)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("e2rag: error: ") and expected in done.stderr
        assert not (tmp_path / "store").exists()
