"""GroundedExtractor on the real spaCy pipeline: frames, roles, grounding, mentions, queries."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.base import DOC_ORDER_KEY, pop_graph
from llama_index_e2rag.extract.grounded import GroundedExtractor, load_spacy, parse_query
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.extract.pronouns import FEMININE, MASCULINE
from llama_index_e2rag.schema import APART_ATTR, EdgeKind, GraphEdge, GraphNode, NodeKind

ROLES = {"A0", "A1", "A2", "AM-TMP", "AM-LOC"}


@pytest.fixture(scope="module")
def extractor() -> GroundedExtractor:
    return GroundedExtractor()


def make_chunk(text: str, start: int = 0, doc_id: str = "doc", order: int = 0) -> TextNode:
    node = TextNode(
        text=text,
        id_=f"{doc_id}-chunk-{start}",
        start_char_idx=start,
        end_char_idx=start + len(text),
        metadata={DOC_ORDER_KEY: order},
    )
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc_id)
    return node


def extract(
    extractor: GroundedExtractor, *chunks: TextNode
) -> tuple[list[GraphNode], list[GraphEdge]]:
    extractor(list(chunks))
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    for chunk in chunks:
        found_nodes, found_edges, error = pop_graph(chunk)
        assert error is None
        nodes += found_nodes
        edges += found_edges
    return nodes, edges


def frames(nodes: list[GraphNode], edges: list[GraphEdge]) -> dict[str, dict[str, set[str]]]:
    """{event lemma: {role: {mention names}}} for assertions that read like the sentence."""
    by_id = {n.id: n for n in nodes}
    out: dict[str, dict[str, set[str]]] = {}
    for event in (n for n in nodes if n.kind == NodeKind.EVENT):
        roles: dict[str, set[str]] = {}
        for edge in edges:
            if edge.kind == EdgeKind.PARTICIPATES and edge.target == event.id:
                roles.setdefault(edge.role, set()).add(by_id[edge.source].name)
        out[event.attrs["lemma"]] = roles
    return out


def events_by_lemma(nodes: list[GraphNode]) -> dict[str, GraphNode]:
    return {n.attrs["lemma"]: n for n in nodes if n.kind == NodeKind.EVENT}


def test_passive_agent_is_a0_and_subject_is_a1(extractor):
    nodes, edges = extract(extractor, make_chunk("The door was opened by Harry."))
    assert frames(nodes, edges)["open"] == {"A0": {"Harry"}, "A1": {"door"}}
    event = events_by_lemma(nodes)["open"]
    assert event.attrs["voice"] == "passive"
    assert event.name == "Harry open door"
    (sentence,) = [n for n in nodes if n.kind == NodeKind.SENTENCE]
    assert event.text == sentence.text  # a one-clause sentence is its own grounded text


def test_negation_is_recorded(extractor):
    nodes, edges = extract(
        extractor, make_chunk("Harry did not eat the bread. Ron ate the cake.")
    )
    eat = [n for n in nodes if n.kind == NodeKind.EVENT]
    negated = {n.attrs["participants"][0]: n.attrs["negated"] for n in eat}
    assert negated == {"Harry": True, "Ron": False}
    assert [n.name for n in eat] == ["Harry not eat bread", "Ron eat cake"]


def test_modality_is_recorded(extractor):
    nodes, _ = extract(extractor, make_chunk("Watson could open the window."))
    assert events_by_lemma(nodes)["open"].attrs["modality"] == "could"


def test_coordinated_verbs_share_subject_and_coordinated_objects_share_role(extractor):
    nodes, edges = extract(extractor, make_chunk("Mary bought and ate apples and pears."))
    found = frames(nodes, edges)
    assert found["buy"] == {"A0": {"Mary"}, "A1": {"apples", "pears"}}
    assert found["eat"] == {"A0": {"Mary"}, "A1": {"apples", "pears"}}


def test_relative_clause_head_fills_the_pronoun_role(extractor):
    nodes, edges = extract(
        extractor,
        make_chunk("The woman who lived in Paris wrote the book that Harry read."),
    )
    found = frames(nodes, edges)
    assert found["live"] == {"A0": {"woman"}, "AM-LOC": {"Paris"}}
    assert found["write"] == {"A0": {"woman"}, "A1": {"book"}}
    assert found["read"] == {"A0": {"Harry"}, "A1": {"book"}}
    nodes, edges = extract(extractor, make_chunk("Holmes found the house where Watson lived."))
    assert frames(nodes, edges)["live"] == {"A0": {"Watson"}, "AM-LOC": {"house"}}


def test_copula_subject_is_a1_and_complement_a2(extractor):
    nodes, edges = extract(extractor, make_chunk("Holmes was a detective."))
    assert frames(nodes, edges)["be"] == {"A1": {"Holmes"}, "A2": {"detective"}}
    assert events_by_lemma(nodes)["be"].name == "Holmes be detective"


def test_event_text_is_its_own_clause_not_the_sentence(extractor):
    text = "Holmes lit his pipe, and Watson opened the window."
    nodes, _ = extract(extractor, make_chunk(text))
    events = events_by_lemma(nodes)
    assert events["light"].text == "Holmes lit his pipe"
    assert events["open"].text == "Watson opened the window"


def test_spans_are_absolute_and_point_at_the_grounded_text(extractor):
    prefix = "Chapter one.\n\n"
    body = (
        "Holmes lit his pipe in Baker Street. The letter was stolen by the King.\n"
        "Watson, who had waited, opened the window on Monday."
    )
    document = prefix + body
    nodes, edges = extract(extractor, make_chunk(body, start=len(prefix)))
    by_id = {n.id: n for n in nodes}
    sentences = [n for n in nodes if n.kind == NodeKind.SENTENCE]
    assert len(sentences) == 3
    for node in nodes:
        start, end = node.span
        assert node.pos[1] >= len(prefix)
        if node.kind == NodeKind.MENTION:
            told = [" ".join(document[a:b].split()) for a, b in node.attrs["spans"]]
            # the name, or a pronoun standing for it ("Holmes lit his pipe")
            assert all(t == node.name or t.lower() in MASCULINE | FEMININE for t in told)
            assert document[start:end] == node.name
            assert by_id[node.attrs["sentence_id"]].text == node.attrs["sentence_text"]
        else:
            assert document[start:end] == node.text
    grounded = [e for e in edges if e.kind == EdgeKind.GROUNDED_IN]
    assert {by_id[e.source].kind for e in grounded} == {NodeKind.EVENT, NodeKind.MENTION}
    for edge in grounded:
        source, sentence = by_id[edge.source], by_id[edge.target]
        assert sentence.kind == NodeKind.SENTENCE
        if source.kind == NodeKind.EVENT:
            assert sentence.span[0] <= source.span[0] and source.span[1] <= sentence.span[1]
            assert source.attrs["sentence_text"] == sentence.text


def test_one_mention_per_name_per_chunk_and_separate_across_chunks(extractor):
    first = "Holmes opened the door. Later Holmes closed the door."
    second = "Holmes read the letter."
    nodes, edges = extract(
        extractor, make_chunk(first, 0), make_chunk(second, len(first) + 1)
    )
    holmes = [n for n in nodes if n.kind == NodeKind.MENTION and n.name == "Holmes"]
    assert len(holmes) == 2
    assert len({n.id for n in holmes}) == 2 and len({n.chunk_id for n in holmes}) == 2
    in_first = next(n for n in holmes if n.span[0] < len(first))
    assert len(in_first.attrs["spans"]) == 2
    events_of_first = {
        e.target for e in edges if e.kind == EdgeKind.PARTICIPATES and e.source == in_first.id
    }
    assert len(events_of_first) == 2


def test_date_attaches_to_the_event(extractor):
    nodes, edges = extract(extractor, make_chunk("On Monday, Holmes visited the bank in London."))
    visit = events_by_lemma(nodes)["visit"]
    assert visit.attrs["date"] == "Monday"
    assert frames(nodes, edges)["visit"] == {
        "A0": {"Holmes"},
        "A1": {"bank"},
        "AM-TMP": {"Monday"},
        "AM-LOC": {"London"},
    }
    types = {n.name: n.attrs["entity_type"] for n in nodes if n.kind == NodeKind.MENTION}
    assert types == {"Monday": "DATE", "Holmes": "PERSON", "bank": "concept", "London": "GPE"}


def test_pronouns_resolve_to_latest_person_of_matching_gender(extractor):
    nodes, edges = extract(
        extractor, make_chunk("Mary met Mr. Smith at the station. He gave her a letter.")
    )
    assert frames(nodes, edges)["give"] == {
        "A0": {"Mr. Smith"}, "A1": {"letter"}, "A2": {"Mary"}
    }
    mary = next(n for n in nodes if n.kind == NodeKind.MENTION and n.name == "Mary")
    assert len(mary.attrs["spans"]) == 2  # "Mary" and the "her" that stands for her


def test_a_title_belongs_to_the_name_so_mr_and_mrs_stay_two_people(extractor):
    text = "Mrs. Smith thanked Mr. Smith. Captain Brown bowed to Sir Walter."
    nodes, _ = extract(extractor, make_chunk(text))
    people = {n.name: n.attrs["entity_type"] for n in nodes if n.kind == NodeKind.MENTION}
    for name in ("Mrs. Smith", "Mr. Smith", "Captain Brown", "Sir Walter"):
        assert people.get(name) == "PERSON", (name, people)


def test_mention_is_anchored_at_its_first_name_occurrence(extractor):
    text = "Watson, Holmes said nothing. Mary smiled at him. Then Holmes left."
    nodes, edges = extract(extractor, make_chunk(text))
    holmes = next(n for n in nodes if n.kind == NodeKind.MENTION and n.name == "Holmes")
    assert holmes.span == (8, 14) and text[8:14] == "Holmes"
    assert holmes.attrs["sentence_text"] == "Watson, Holmes said nothing."
    assert [text[a:b] for a, b in holmes.attrs["spans"]] == ["Holmes", "him", "Holmes"]
    grounded = [e for e in edges if e.kind == EdgeKind.GROUNDED_IN and e.source == holmes.id]
    assert len(grounded) == 3


def test_object_pronoun_never_binds_to_its_own_subject(extractor):
    nodes, edges = extract(extractor, make_chunk("Holmes told him the truth."))
    assert frames(nodes, edges)["tell"] == {"A0": {"Holmes"}, "A1": {"truth"}}


def test_unresolvable_pronouns_make_no_mention(extractor):
    nodes, _ = extract(extractor, make_chunk("They would laugh."))
    assert [n for n in nodes if n.kind in (NodeKind.MENTION, NodeKind.EVENT)] == []
    kept, _ = extract(GroundedExtractor(keep_bare_events=True), make_chunk("They would laugh."))
    (event,) = [n for n in kept if n.kind == NodeKind.EVENT]
    assert event.attrs["participants"] == [] and event.text == "They would laugh."


def test_what_happens_is_an_event_even_with_no_participant_named(extractor):
    text = "They laughed. It was late. They would not stay. Then they ran home."
    nodes, _ = extract(extractor, make_chunk(text))
    events = {n.attrs["lemma"]: n for n in nodes if n.kind == NodeKind.EVENT}
    assert set(events) == {"laugh", "run"}  # not the copula, not the negated modal
    assert all(e.attrs["realis"] and e.attrs["participants"] == [] for e in events.values())
    assert [n for n in nodes if n.kind == NodeKind.MENTION and n.name == "They"] == []


def test_next_edges_follow_story_order_within_the_chunk(extractor):
    nodes, edges = extract(
        extractor,
        make_chunk("Holmes knocked. Watson opened the door. Holmes entered the room."),
    )
    by_id = {n.id: n for n in nodes}
    chain = [(by_id[e.source], by_id[e.target]) for e in edges if e.kind == EdgeKind.NEXT]
    assert [(a.attrs["lemma"], b.attrs["lemma"]) for a, b in chain] == [
        ("knock", "open"),
        ("open", "enter"),
    ]
    assert all(a.pos < b.pos for a, b in chain)


def test_fragment_loads_into_a_graph_store_and_ids_are_deterministic(extractor):
    text = "Holmes lit his pipe. Watson opened the window and Holmes smiled."
    nodes, edges = extract(extractor, make_chunk(text))
    again, _ = extract(extractor, make_chunk(text))
    assert [n.id for n in nodes] == [n.id for n in again]
    assert len({n.id for n in nodes}) == len(nodes)
    store = NetworkXGraphStore()
    store.upsert_nodes(nodes)
    store.upsert_edges(edges)  # raises if an edge end is missing
    assert {e.role for e in edges if e.kind == EdgeKind.PARTICIPATES} <= ROLES


async def test_acall_matches_call(extractor):
    text = "The door was opened by Harry."
    sync_nodes, _ = extract(extractor, make_chunk(text))
    chunk = make_chunk(text)
    await extractor.acall([chunk])
    async_nodes, _, error = pop_graph(chunk)
    assert error is None
    assert [n.id for n in async_nodes] == [n.id for n in sync_nodes]
    assert asyncio.iscoroutinefunction(extractor.acall)


def test_query_is_parsed_into_nodes_and_cues(extractor):
    nodes = extractor.query_nodes("Who opened the door of the house in London?")
    assert {n.doc_id for n in nodes} == {"query"}
    assert {n.kind for n in nodes} == {NodeKind.MENTION, NodeKind.EVENT}
    entities, events = parse_query("Why did Holmes visit Irene Adler?")
    assert entities == ["Holmes", "Irene Adler"]
    assert events == ["Why did Holmes visit Irene Adler"]
    assert extractor.parse_query("Irene Adler?") == (["Irene Adler"], ["Irene Adler?"])


def test_missing_spacy_model_names_the_package():
    with pytest.raises(MissingModelError, match="pip install"):
        load_spacy("no_such_spacy_model_e2rag")


@pytest.mark.shared_data
def test_real_book_excerpt_is_fully_grounded(extractor, shared_data):
    path = shared_data / "literaryqa" / "books" / "pg1661_the_adventures_of_sherlock_holmes.txt"
    if not path.exists():
        pytest.skip("Sherlock Holmes text not in the shared data")
    document = path.read_text(encoding="utf-8")[20_000:32_000]
    half = document.rfind("\n\n", 0, len(document) // 2)
    chunks = [make_chunk(document[:half], 0), make_chunk(document[half:], half)]
    nodes, edges = extract(extractor, *chunks)
    kinds = {kind: [n for n in nodes if n.kind == kind] for kind in NodeKind}
    assert len(kinds[NodeKind.EVENT]) > 50 and len(kinds[NodeKind.MENTION]) > 30
    for node in kinds[NodeKind.SENTENCE] + kinds[NodeKind.EVENT]:
        assert document[node.span[0] : node.span[1]] == node.text
    assert any(n.name == "Holmes" for n in kinds[NodeKind.MENTION])
    store = NetworkXGraphStore()
    store.upsert_nodes(nodes)
    store.upsert_edges(edges)
    assert store.counts()


#: Split with an overlap, the Snitch sentence ends chunk 1 and starts chunk 2.
OVERLAPPING_STORY = "\n\n".join(
    [
        "It rained all morning over the quiet hills. The wind howled across the empty grounds.",
        "Harry caught the Snitch at the match. Snape glared at Harry while Ron cheered loudly.",
        "Hermione stole the ingredients for the potion. Snape never noticed the theft at all.",
    ]
)


def test_overlapping_chunks_each_own_their_nodes_and_links(extractor):
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    from llama_index_e2rag.extract.linking import story_order_edges

    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=15)
    chunks = splitter.get_nodes_from_documents([Document(text=OVERLAPPING_STORY, id_="book")])
    for chunk in chunks:
        chunk.metadata[DOC_ORDER_KEY] = 0
    assert chunks[1].start_char_idx < chunks[0].end_char_idx  # they do overlap
    nodes, edges = extract(extractor, *chunks)
    store = NetworkXGraphStore()
    store.upsert_nodes(nodes)
    store.upsert_edges(edges)
    in_chunk = {EdgeKind.PARTICIPATES, EdgeKind.GROUNDED_IN, EdgeKind.CO_MENTION, EdgeKind.CO_EVENT}
    for edge in store.edges():
        if edge.kind in in_chunk:
            source, target = store.get_node(edge.source), store.get_node(edge.target)
            assert source.chunk_id == target.chunk_id, (edge.kind, source.text, target.text)
    assert len(store.nodes()) == len(nodes)  # no id shared between chunks
    snitch = [n for n in store.nodes(NodeKind.SENTENCE) if n.text.startswith("Harry caught")]
    assert len({n.chunk_id for n in snitch}) == len(snitch) == 2  # one per chunk reading it
    assert len({n.span for n in snitch}) == 1

    store.upsert_edges(story_order_edges(store, "book"))
    events = store.nodes(NodeKind.EVENT, "book")
    ids = {n.id for n in events}
    chained = {(e.source, e.target) for e in store.edges(EdgeKind.NEXT) if e.source in ids}
    story = {(a.id, b.id) for a, b in zip(events, events[1:])}
    assert story <= chained  # the document's chain, in story order
    assert all(store.get_node(a).pos <= store.get_node(b).pos for a, b in chained)


def test_worker_processes_parse_exactly_as_one_process() -> None:
    sentences = [
        "Holmes read the letter twice before he spoke.",
        "Watson lit the lamp and waited for his friend.",
        "The inspector arrived at nine and asked about the stolen jewel.",
    ]
    texts = [" ".join(sentences[i % 3:] + sentences[: i % 3]) for i in range(6)]
    one = [make_chunk(t, start=i * 1000) for i, t in enumerate(texts)]
    two = [make_chunk(t, start=i * 1000) for i, t in enumerate(texts)]
    assert extract(GroundedExtractor(n_process=1), *one) == extract(
        GroundedExtractor(n_process=2), *two
    )


def test_worker_processes_start_only_for_many_chunks(monkeypatch) -> None:
    import llama_index_e2rag.extract.grounded as grounded
    from llama_index_e2rag.extract.grounded import PARALLEL_PARSE_CHUNKS

    monkeypatch.setattr(grounded, "available_cores", lambda: 4)
    auto = GroundedExtractor()
    assert auto._workers(["a text"] * (PARALLEL_PARSE_CHUNKS - 1)) == 1
    assert auto._workers(["a text"] * PARALLEL_PARSE_CHUNKS) == 4
    assert GroundedExtractor(n_process=1)._workers(["a text"] * 1000) == 1
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_start_method", lambda: "spawn")
    assert auto._workers(["a text"] * 1000) == 1  # the caller's script may lack a main guard


def test_two_people_named_as_arguments_of_one_verb_are_told_apart(extractor):
    """Each person mention lists the names it shares a predicate with (extract/characters.py
    never joins them); a pronoun argument tells nothing (a misread one would part a person from
    herself)."""
    text = ("Mrs. Hale asked Margaret Hale for the key. Margaret Hale and Dixon walked home. "
            "She thanked Mr. Hale. Mary was Mrs. Cavendish.")
    nodes, _ = extract(extractor, make_chunk(text))
    apart = {n.name: set(n.attrs.get(APART_ATTR, ())) for n in nodes if n.kind == NodeKind.MENTION}
    assert apart["Mrs. Hale"] == {"Margaret Hale"}
    assert apart["Margaret Hale"] == {"Mrs. Hale", "Dixon"}
    assert apart["Dixon"] == {"Margaret Hale"}
    assert apart["Mr. Hale"] == set()  # "She" is no name
    assert apart["Mary"] == apart["Mrs. Cavendish"] == set()  # a copula: one person, two names


def test_a_chunk_opening_with_a_pronoun_goes_on_with_the_person_the_last_one_ended_with(
    extractor,
):
    first = "Mr. Hale read by the fire. Margaret Hale came home late."
    second = "She took off her bonnet. He did not look up."
    nodes, edges = extract(
        extractor,
        make_chunk(first, 0),
        make_chunk(second, len(first) + 1),
        make_chunk(second, 0, doc_id="other", order=1),  # another book: nobody before
    )
    people = {
        (n.chunk_id, n.name): [second[a - len(first) - 1 : b - len(first) - 1]
                               for a, b in n.attrs["spans"]]
        for n in nodes if n.kind == NodeKind.MENTION and n.doc_id == "doc"
    }
    chunk = f"doc-chunk-{len(first) + 1}"
    assert people[(chunk, "Margaret Hale")] == ["She", "her"]
    assert people[(chunk, "Mr. Hale")] == ["He"]
    ours = [n for n in nodes if n.doc_id == "doc"]
    assert frames(ours, edges)["take"]["A0"] == {"Margaret Hale"}
    other = [n for n in nodes if n.doc_id == "other" and n.kind == NodeKind.MENTION]
    assert [n.attrs["entity_type"] for n in other] == ["concept"]  # "her bonnet", nobody's
