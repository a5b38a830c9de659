"""Story positions as readers ask for them: a document's map read once per content state, its
first chunk of source text, positions named by document, chapter and share."""

from __future__ import annotations

from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import GraphNode, NodeKind
from llama_index_e2rag.context.story_position import StoryPositions, document_chunks, story_map
from llama_index_e2rag.context.story_text import headings

BOOK = (
    "THE GARDEN\n\nCHAPTER I.\n\nPeter lived with his mother under a fir tree.\n\n"
    "Part of the garden was locked.\n\n"
    "Chapter 2: The Net\n\nHe ran into a gooseberry net.\n\n"
    "BOOK THREE\n\nHe came home at last."
)


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


def test_a_gutenberg_licence_after_the_story_begins_no_chapter():
    book = (BOOK + "\n\n*** END OF THE PROJECT GUTENBERG EBOOK THE GARDEN ***\n\n"
            "Section 1. General Terms of Use\n\nSection 2. Information about the Mission\n")
    # the marker in the second chunk, as a long book has it
    story = story_map(_chunked(book, book.index("END OF") - 10), "book")
    assert story is not None and story.headings == tuple(headings(BOOK))
    assert story.chapter_at(len(book) - 5) == headings(BOOK)[-1][1]
