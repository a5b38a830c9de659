"""extract.passages: sentence-aligned passage nodes and rebuilding a document out of its chunks."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode

from llama_index_e2rag.app.demo import SAMPLE_PATH
from llama_index_e2rag.extract.passages import DEFAULT_PASSAGE_WORDS, build_passages, document_text
from llama_index_e2rag.schema import EdgeKind, NodeKind
from llama_index_e2rag.text import count_words, split_sentences, word_spans

STORY = SAMPLE_PATH.read_text(encoding="utf-8")


def _chunks(text: str, size: int, overlap: int, base: int = 0) -> list[TextNode]:
    """Overlapping character windows of ``text`` placed at ``base + offset``."""
    nodes, start = [], 0
    while True:
        piece = text[start : start + size]
        nodes.append(TextNode(text=piece, id_=f"chunk-{start}", start_char_idx=base + start))
        if start + size >= len(text):
            return nodes
        start += size - overlap


@pytest.fixture(scope="module")
def passages():
    chunks = _chunks(STORY, 800, 200)
    return build_passages("peter", 2, STORY, chunks), chunks


def test_passages_are_the_text_in_order_on_sentence_boundaries(passages):
    (nodes, _), _ = passages
    sentence_starts = {a for a, _ in split_sentences(STORY)}
    sentence_ends = {b for _, b in split_sentences(STORY)}
    words = []
    for node in nodes:
        start, end = node.span
        assert node.kind == NodeKind.PASSAGE and node.doc_id == "peter"
        assert node.text == STORY[start:end]
        assert node.pos == (2, start, 3)
        assert start in sentence_starts and end in sentence_ends
        words += [STORY[a:b] for a, b in word_spans(STORY, start, end)]
    assert words == STORY.split()
    assert [n.pos for n in nodes] == sorted(n.pos for n in nodes)


def test_passages_have_about_the_target_length(passages):
    (nodes, _), _ = passages
    lengths = [count_words(n.text) for n in nodes]
    # a passage closes as soon as it reaches the target (or at a paragraph past half of it),
    # so it never runs more than one sentence beyond the target
    longest_sentence = max(count_words(STORY[a:b]) for a, b in split_sentences(STORY))
    assert max(lengths) < DEFAULT_PASSAGE_WORDS + longest_sentence
    assert min(lengths[:-1]) >= DEFAULT_PASSAGE_WORDS / 2


def test_each_passage_belongs_to_the_chunk_holding_its_start(passages):
    (nodes, _), chunks = passages
    for node in nodes:
        holders = [c for c in chunks if c.start_char_idx <= node.span[0]]
        assert node.chunk_id == holders[-1].node_id


def test_next_edges_chain_the_passages_in_story_order(passages):
    (nodes, edges), _ = passages
    assert [(e.source, e.target) for e in edges] == [
        (a.id, b.id) for a, b in zip(nodes, nodes[1:])
    ]
    assert all(e.kind == EdgeKind.NEXT and e.doc_id == "peter" for e in edges)


def test_ids_are_deterministic_and_differ_between_documents(passages):
    (nodes, _), chunks = passages
    again, _ = build_passages("peter", 2, STORY, chunks)
    assert [n.id for n in again] == [n.id for n in nodes]
    other, _ = build_passages("copy", 2, STORY, chunks)
    assert not {n.id for n in other} & {n.id for n in nodes}
    assert len({n.id for n in nodes}) == len(nodes)


@pytest.mark.parametrize("target", [5, 60])
def test_the_target_length_is_honoured(target):
    nodes, _ = build_passages("peter", 0, STORY, [], target_words=target)
    if target == 60:
        assert len(nodes) < len(build_passages("peter", 0, STORY, [])[0])
    assert all(n.chunk_id is None for n in nodes)  # no chunks given
    assert " ".join(n.text for n in nodes).split() == STORY.split()


def test_a_text_starting_at_base_is_placed_at_absolute_offsets():
    base = 1000
    text = "Peter ran home. His mother was cooking. He went to bed early."
    chunks = [TextNode(text=text, id_="c", start_char_idx=base)]
    nodes, _ = build_passages("d", 0, text, chunks, target_words=3, base=base)
    assert [n.text for n in nodes] == [
        text[a - base : b - base] for a, b in (n.span for n in nodes)
    ]
    assert nodes[0].span[0] == base and nodes[0].pos == (0, base, 3)
    assert all(n.chunk_id == "c" for n in nodes)


def test_an_empty_text_has_no_passages():
    assert build_passages("d", 0, "   ", []) == ([], [])


# -- document_text -------------------------------------------------------------------------------
@pytest.mark.parametrize(("size", "overlap"), [(500, 0), (700, 150), (300, 299)])
def test_overlapping_chunks_rebuild_the_document(size, overlap):
    chunks = _chunks(STORY, size, overlap)
    text, base = document_text(list(reversed(chunks)))  # any order
    assert (text, base) == (STORY, 0)


def test_rebuilt_text_starts_at_the_first_chunk_offset():
    tail = STORY[2000:]
    chunks = _chunks(tail, 600, 100, base=2000)
    text, base = document_text(chunks)
    assert base == 2000 and text == tail


def test_a_gap_between_chunks_becomes_spaces_so_offsets_still_hold():
    chunks = [
        TextNode(text="Peter ran.", id_="a", start_char_idx=0),
        TextNode(text="He hid.", id_="b", start_char_idx=20),
    ]
    text, base = document_text(chunks)
    assert base == 0 and text == "Peter ran." + " " * 10 + "He hid."
    assert text[20:27] == "He hid."


def test_no_chunks_no_text():
    assert document_text([]) == ("", 0)


def test_chunks_without_distinct_offsets_lose_no_text():
    from llama_index.core.schema import TextNode

    from llama_index_e2rag.extract.passages import document_text

    chunks = [TextNode(text="Peter ran home. He was tired."), TextNode(text="The end came.")]
    text, base = document_text(chunks)
    assert base == 0 and all(c.get_content() in text for c in chunks)
