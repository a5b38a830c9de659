"""Story positions as readers use them: chapter headings and labelled shares of the story."""

from __future__ import annotations

import re

from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import GraphNode, NodeKind
from llama_index_e2rag.context.story_position import StoryPositions, document_chunks, story_map
from llama_index_e2rag.context.story_text import (
    StoryMap,
    describe_position,
    headings,
    source_name,
    without_contents,
)

BOOK = (
    "THE GARDEN\n\nCHAPTER I.\n\nPeter lived with his mother under a fir tree.\n\n"
    "Part of the garden was locked.\n\n"
    "Chapter 2: The Net\n\nHe ran into a gooseberry net.\n\n"
    "BOOK THREE\n\nHe came home at last."
)


def test_headings_are_whole_heading_lines_with_their_number():
    found = headings(BOOK, base=100)
    assert [label for _, label in found] == ["Chapter I", "Chapter 2", "Book Three"]
    assert [offset - 100 for offset, _ in found] == [
        BOOK.index("CHAPTER I."), BOOK.index("Chapter 2"), BOOK.index("BOOK THREE")
    ]
    # Prose starting with a heading word is no heading.
    assert "Part" not in " ".join(label for _, label in found)


def test_headings_are_found_whatever_the_line_endings():
    # every Project Gutenberg file ends its lines in CRLF; old Mac files in CR alone are rare
    for ending in ("\r\n", "\n"):
        book = BOOK.replace("\n", ending)
        found = headings(book)
        assert [label for _, label in found] == ["Chapter I", "Chapter 2", "Book Three"], ending
        assert [offset for offset, _ in found] == [
            book.index("CHAPTER I."), book.index("Chapter 2"), book.index("BOOK THREE")
        ]


def test_markdown_headings_are_headings_and_hashes_in_prose_are_not():
    # .md books, and HTML or EPUB as LlamaIndex's readers (html2text) give them
    book = "# Chapter 1\n\nPeter ran.\n\n## CHAPTER II. The Net\n\nHe hid.\n\n#Chapter 3\nissue #4"
    assert [label for _, label in headings(book)] == ["Chapter 1", "Chapter II"]
    assert [offset for offset, _ in headings(book)] == [
        book.index("Chapter 1"), book.index("CHAPTER II")
    ]


def test_chapter_at_is_the_last_heading_before_the_offset():
    story = StoryMap(length=len(BOOK), headings=tuple(headings(BOOK)))
    assert story.chapter_at(BOOK.index("THE GARDEN")) is None
    assert story.chapter_at(BOOK.index("Peter lived")) == "Chapter I"
    assert story.chapter_at(BOOK.index("gooseberry")) == "Chapter 2"
    assert story.chapter_at(BOOK.index("came home")) == "Book Three"
    assert story.percent_at(0) == 0.0 and story.percent_at(len(BOOK)) == 100.0


def _chunked(book: str, cut: int) -> NetworkXGraphStore:
    """A graph holding ``book`` as two indexed chunks, split at ``cut``."""
    graph = NetworkXGraphStore()
    graph.upsert_nodes(
        [
            GraphNode(id=f"c{i}", kind=NodeKind.CHUNK, text=book[a:b], doc_id="book",
                      pos=(0, a, 0), span=(a, b))
            for i, (a, b) in enumerate([(0, cut), (cut, len(book))])
        ]
    )
    return graph


def test_story_map_reads_headings_from_the_indexed_chunks():
    graph = _chunked(BOOK, BOOK.index("Chapter 2"))
    story = story_map(graph, "book")
    assert story is not None and story.length == len(BOOK)
    assert story.headings == tuple(headings(BOOK))
    assert story_map(graph, "another book") is None


def test_a_story_map_is_read_once_per_content_state():
    """The answer and the lines placing its evidence share one read of a document's chunks; a
    write to the graph makes the next map a new read."""
    graph = _chunked(BOOK, BOOK.index("Chapter 2"))
    reads = []
    nodes = graph.nodes
    graph.nodes = lambda *a, **kw: reads.append(a or kw) or nodes(*a, **kw)  # type: ignore
    first = story_map(graph, "book")
    assert StoryPositions(graph).story("book") is first and story_map(graph, "book") is first
    assert document_chunks(graph, "book").first_chunk == "c0"
    assert len(reads) == 1
    graph.upsert_nodes([GraphNode(id="c9", kind=NodeKind.CHUNK, text="CHAPTER 9\nThe end.",
                                  doc_id="book", pos=(0, len(BOOK), 0),
                                  span=(len(BOOK), len(BOOK) + 18))])
    after = story_map(graph, "book")
    assert len(reads) == 2 and after is not None and after.headings[-1][1] == "Chapter 9"


def test_a_documents_first_chunk_is_one_of_source_text():
    """The chunk whose metadata names the document: ChronoRAG's layer-0 chunks, derived text
    without the source's metadata, are passed over even where they come first."""
    graph = _chunked(BOOK, BOOK.index("Chapter 2"))
    graph.upsert_nodes([GraphNode(id="chrono-0", kind=NodeKind.CHUNK, text=BOOK[:50],
                                  doc_id="book", pos=(0, 0, -1), attrs={"layer": 0})])
    assert document_chunks(graph, "book").first_chunk == "c0"
    assert document_chunks(graph, "another book").first_chunk is None


def test_a_share_of_the_story_is_never_shown_bare():
    label = describe_position("novel.txt", 93.4, "Chapter 3", 12345)
    assert label == "novel.txt · Chapter 3 · 93% through the story"
    assert not re.search(r"\d+%(?! through the story)", label)
    # Without a share the character offset is the position; without either, the document only.
    assert describe_position("novel.txt", None, None, 12345) == "novel.txt · character 12,345"
    assert describe_position("novel.txt") == "novel.txt"


def test_story_positions_name_the_document_its_chapter_and_share():
    """One implementation for every reader of positions: the document's name from its chunks'
    metadata (or the name the caller has), the chapter before the offset, the share."""
    cut = BOOK.index("Chapter 2")
    graph = NetworkXGraphStore()
    graph.upsert_nodes(
        [
            GraphNode(id=f"c{i}", kind=NodeKind.CHUNK, text=BOOK[a:b], doc_id="/books/garden.txt",
                      pos=(0, a, 0), span=(a, b),
                      attrs={"node": {"metadata": {"file_name": "garden.txt"}}})
            for i, (a, b) in enumerate([(0, cut), (cut, len(BOOK))])
        ]
    )
    positions = StoryPositions(graph)
    offset = BOOK.index("gooseberry")
    percent = 100 * offset / len(BOOK)
    assert positions.place("/books/garden.txt", offset) == ("Chapter 2", percent)
    assert positions.describe("/books/garden.txt", offset) == (
        f"garden.txt · Chapter 2 · {percent:.0f}% through the story"
    )
    assert positions.describe("/books/garden.txt", offset, "The Garden").startswith(
        "The Garden · Chapter 2 · "
    )
    # a document the graph does not hold: its id and the offset, the only position there is
    assert positions.place("elsewhere", 7) == (None, None)
    assert positions.describe("elsewhere", 1234) == "elsewhere · character 1,234"


def test_source_name_prefers_the_file_name_then_the_id_then_the_order():
    assert source_name({"file_path": "/a/b/c.txt"}, "id") == "c.txt"
    assert source_name({"file_name": "x.txt", "title": "X"}, "id") == "x.txt"
    assert source_name({}, "id") == "id"
    assert source_name({}, None, 2) == "document 2"


def _contents_book(titles: list[str], between: str) -> str:
    """A book opening with a table of contents of ``titles``, ``between`` before its text."""
    listed = "".join(f"CHAPTER {n}. {t.upper()}\n\n" for n, t in zip(("I", "II", "III"), titles))
    text = "".join(
        f"CHAPTER {n}. {t.upper()}\n\n" + f"{t} happened, and the day went on. " * 20 + "\n\n"
        for n, t in zip(("I", "II", "III"), titles)
    )
    return "CONTENTS\n\n" + listed + between + text


def test_a_table_of_contents_lists_chapters_without_beginning_them():
    for between in ("", "PREFACE\n\n" + "A word before the story. " * 30 + "\n\n"):
        book = _contents_book(["The Letter", "Visitors", "Rain"], between)
        story = StoryMap(length=len(book), headings=tuple(without_contents(headings(book))))
        starts = [book.index(f"CHAPTER {n}.", book.index("happened") - 40) for n in ("I",)]
        assert [label for _, label in story.headings] == ["Chapter I", "Chapter II", "Chapter III"]
        assert story.headings[0][0] >= starts[0]  # the text's chapter, not the contents' line
        assert story.chapter_at(book.index("CONTENTS") + 20) is None  # contents, preface: none


def test_repeated_labels_far_apart_are_chapters_of_different_books():
    part = "CHAPTER I.\n\n" + "They walked to the mill. " * 20 + "\n\n"
    book = "BOOK ONE\n\n" + part + "BOOK TWO\n\n" + part
    assert without_contents(headings(book)) == headings(book)


def test_a_gutenberg_licence_after_the_story_begins_no_chapter():
    book = (BOOK + "\n\n*** END OF THE PROJECT GUTENBERG EBOOK THE GARDEN ***\n\n"
            "Section 1. General Terms of Use\n\nSection 2. Information about the Mission\n")
    # the marker in the second chunk, as a long book has it
    story = story_map(_chunked(book, book.index("END OF") - 10), "book")
    assert story is not None and story.headings == tuple(headings(BOOK))
    assert story.chapter_at(len(book) - 5) == headings(BOOK)[-1][1]
