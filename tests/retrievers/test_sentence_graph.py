"""SentenceGraphRetriever on sentence graphs written by hand in the builder's layout (plan §3.2).

Two documents: "The Silver Harp" (a song by the band Lanternfield) and "Lanternfield" (its
drummer), joined by a directed shared-entity bridge, plus a distractor. The question asks for
the drummer of the song's band: the anchor is the song's sentence and only the bridge reaches the
drummer's. Most tests give the sentences hand-made vectors on four axes (song, band, drums,
weather) so every ranking step follows from the numbers; the last one uses the real offline
embedding (MiniLM) end to end.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import pytest
from hash_embedding import HashEmbedding
from llama_index.core.schema import QueryBundle
from scripted_llm import ScriptedLLM

from llama_index_e2rag.context.keys import POS_KEY
from llama_index_e2rag.context.evidence import bundle_from_retrieved
from llama_index_e2rag.errors import LLMOutputError, MissingModelError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest.pipeline import vector_record
from llama_index_e2rag.ranking.sentence_graph import Refinement, expand
from llama_index_e2rag.retrievers.sentence_graph import (
    _VIEW,
    SentenceGraphMissingError,
    SentenceGraphRetriever,
)
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id
from llama_index_e2rag.stores.port import DocumentWrite, Stores


@dataclass
class Doc:
    """One document of a fixture graph: title (its topic) and (sentence, role, vector) rows;
    ``rst`` lists (from, to, type, class) by sentence number."""

    doc_id: str
    title: str
    sentences: list[tuple[str, str, Optional[list[float]]]]
    rst: list[tuple[int, int, str, str]] = field(default_factory=list)


SONG = Doc(
    "song",
    "The Silver Harp",
    [
        ("The Silver Harp is a song by the band Lanternfield.", "core", [1.0, 0.4, 0.0, 0.0]),
        ("It was released in 1998 on a small label.", "supplementary", [0.5, 0.0, 0.0, 0.9]),
        ("Critics praised its quiet melody.", "supplementary", [0.4, 0.0, 0.0, 0.9]),
    ],
    rst=[(0, 1, "elaboration", "N-S"), (0, 2, "evaluation", "N-S")],
)
BAND = Doc(
    "band",
    "Lanternfield",
    [
        ("Lanternfield is a folk band from Galway.", "core", [0.0, 1.0, 0.0, 0.0]),
        ("Tomas Reyes plays drums in Lanternfield.", "core", [0.0, 0.5, 0.9, 0.0]),
    ],
    rst=[(0, 1, "conjunction", "N-N")],
)
WEATHER = Doc(
    "weather",
    "Galway weather",
    [
        ("Galway gets rain on most days of the year.", "core", [0.0, 0.0, 0.0, 1.0]),
        ("Storms roll in from the Atlantic.", "supplementary", [0.0, 0.0, 0.1, 1.0]),
    ],
    rst=[(0, 1, "elaboration", "N-S")],
)
QUESTION = "Who is the drummer of the band behind The Silver Harp?"
Q_VEC = [1.0, 0.5, 0.8, 0.0]


def sentence_id(doc: Doc, i: int) -> str:
    return make_id(doc.doc_id, "sentgraph_sentence", (i, _start(doc, i)), doc.sentences[i][0])


def _start(doc: Doc, i: int) -> int:
    return sum(len(text) + 1 for text, _, _ in doc.sentences[:i])


def topic_id(doc: Doc) -> str:
    return make_id(doc.doc_id, "sentgraph_topic", (0, 0), doc.title)


def write_graph(
    stores: Stores,
    docs: Sequence[Doc],
    bridges: Sequence[tuple[Doc, Doc, str]],
    embed: Optional[Callable[[str], list[float]]] = None,
) -> None:
    """Commit ``docs`` in the SentGraph layout: sentences, topics, child/core and rst edges, and
    ``bridges`` as (from, to, entity) shared-entity links owned by the first document."""
    writes = []
    for order, doc in enumerate(docs):
        topic = topic_id(doc)
        end = _start(doc, len(doc.sentences))
        nodes = [
            GraphNode(
                id=topic, kind=NodeKind.TOPIC, text=doc.title, name=doc.title, doc_id=doc.doc_id,
                pos=(order, 0, 0), span=(0, end),
                attrs={"sentgraph": "topic", "embed": False, "segment": 0, "source": "title"},
            )
        ]
        edges, records = [], []
        for i, (text, role, vector) in enumerate(doc.sentences):
            start = _start(doc, i)
            node = GraphNode(
                id=sentence_id(doc, i), kind=NodeKind.SENTENCE, text=text, doc_id=doc.doc_id,
                pos=(order, start, 0), span=(start, start + len(text)),
                attrs={"sentgraph": role, "index": i, "segment": 0, "topic_id": topic},
            )
            nodes.append(node)
            records.append(vector_record(node, embed(text) if embed else vector))
            if role == "core":
                edges.append(GraphEdge(source=topic, target=node.id, kind=EdgeKind.CHILD,
                                       doc_id=doc.doc_id, role="core"))
        for a, b, type_, cls in doc.rst:
            edges.append(GraphEdge(
                source=sentence_id(doc, a), target=sentence_id(doc, b), kind=EdgeKind.RST,
                doc_id=doc.doc_id, role=type_,
                attrs={"class": cls, "source": "parser", "cue": None,
                       "description": f"parser {type_}"},
            ))
        links = [
            GraphEdge(source=topic, target=topic_id(other), kind=EdgeKind.BRIDGE,
                      doc_id=doc.doc_id, role="shared_entity",
                      attrs={"entities": [entity], "weight": 1.0, "source": "entities",
                             "description": f"mentions {entity}"})
            for first, other, entity in bridges
            if first is doc
        ]
        writes.append(DocumentWrite(doc.doc_id, order, nodes, edges, records, links=links))
    asyncio.run(stores.areplace_documents(writes))


@pytest.fixture
def index() -> E2RAGIndex:
    index = E2RAGIndex(nodes=[], embed_model=HashEmbedding(), llm=None)
    write_graph(index.stores, [SONG, BAND, WEATHER], [(SONG, BAND, "Lanternfield")])
    return index


def ask(retriever: SentenceGraphRetriever, question: str = QUESTION, vec=Q_VEC):
    return retriever.retrieve(QueryBundle(question, embedding=vec))


def ids(nodes) -> list[str]:
    return [n.node.node_id for n in nodes]


DRUMMER = sentence_id(BAND, 1)
ANCHOR = sentence_id(SONG, 0)


def test_the_bridge_reaches_the_second_hop_the_anchor_alone_misses(index) -> None:
    stores = index.stores
    alone = SentenceGraphRetriever(
        stores, HashEmbedding(), max_anchors=1, max_path_length=1, fill=False, order="path"
    )
    assert ids(ask(alone)) == [ANCHOR]
    paths = SentenceGraphRetriever(stores, HashEmbedding(), max_anchors=1, fill=False,
                                   order="path")
    nodes = ask(paths)
    assert ids(nodes)[:2] == [ANCHOR, DRUMMER]
    drummer = nodes[1].node.metadata
    assert (drummer["hop"], drummer["via"], drummer["anchor_id"]) == (1, "bridge", ANCHOR)
    assert drummer["path"] == [ANCHOR, DRUMMER]
    assert drummer["relation_path"] == (
        "anchor [The Silver Harp] -> bridge:shared_entity(mentions Lanternfield) -> [Lanternfield]"
    )
    assert nodes[1].score == pytest.approx(nodes[0].score * 0.9)
    # the bridge picks the bridged topic's sentence nearest the query, not its first core
    assert sentence_id(BAND, 0) not in ids(nodes)[:2]


def test_bridges_are_directed_unless_both_directions_are_asked(index) -> None:
    stores = index.stores
    band_query = [0.0, 0.5, 0.9, 0.0]  # the drummer's sentence is the anchor

    def expansions(direction: str) -> list[str]:
        retriever = SentenceGraphRetriever(
            stores, HashEmbedding(), max_anchors=1, fill=False, refine="none",
            bridge_direction=direction,
        )
        return [n.node.metadata["via"] for n in ask(retriever, "drums", band_query)]

    assert "bridge" not in expansions("out")
    assert "bridge" in expansions("both")


def test_a_bridge_never_leads_back_to_a_topic_on_the_path() -> None:
    """Song and band name each other: from the song's anchor, the path may cross to the band but
    not bridge back into the song (its other sentences are reachable only past the rst gate)."""
    index = E2RAGIndex(nodes=[], embed_model=HashEmbedding(), llm=None)
    write_graph(
        index.stores,
        [SONG, BAND, WEATHER],
        [(SONG, BAND, "Lanternfield"), (BAND, SONG, "The Silver Harp")],
    )
    for direction in ("out", "both"):
        retriever = SentenceGraphRetriever(
            index.stores, HashEmbedding(), max_anchors=1, fill=False, refine="none",
            max_path_length=3, bridge_direction=direction,
        )
        nodes = ask(retriever)
        assert ids(nodes)[0] == ANCHOR and DRUMMER in ids(nodes)
        back = [
            n for n in nodes
            if n.node.metadata["via"] == "bridge" and n.node.metadata["topic_id"] == topic_id(SONG)
        ]
        assert back == [], direction


def test_anchors_fuse_bm25_with_the_dense_cosine(index) -> None:
    stores = index.stores
    # "Atlantic" is a word of one sentence only; the query vector points at the song
    word_query = ("Atlantic", [1.0, 0.0, 0.0, 0.0])
    storms = sentence_id(WEATHER, 1)

    def anchors(kind: str) -> list[str]:
        retriever = SentenceGraphRetriever(
            stores, HashEmbedding(), anchor_k=2, refine="none", max_anchors=2,
            max_path_length=1, fill=False, order="path", anchor_retriever=kind,
        )
        return ids(ask(retriever, *word_query))

    assert storms not in anchors("dense")
    assert anchors("bm25") == [storms]  # only one sentence has the word
    assert storms in anchors("hybrid") and ANCHOR in anchors("hybrid")


def test_rule_refinement_drops_weak_anchors_and_answers_when_covered(index) -> None:
    stores = index.stores
    rule = SentenceGraphRetriever(stores, HashEmbedding(), fill=False, order="path")
    nodes = ask(rule)
    assert {n.node.metadata["refinement"] for n in nodes} == {"rule:expand"}
    # the weather sentences are far below the best cosine: never anchors
    anchors = {n.node.metadata["anchor_id"] for n in nodes}
    assert not anchors & {sentence_id(WEATHER, 0), sentence_id(WEATHER, 1)}
    # every content word of this question is in the anchor and its topic: no expansion
    covered = ask(rule, "Silver Harp song band Lanternfield", [1.0, 0.4, 0.0, 0.0])
    assert {n.node.metadata["refinement"] for n in covered} == {"rule:answer"}
    assert all(n.node.metadata["hop"] == 0 for n in covered)


def test_an_rst_neighbour_must_beat_the_best_unused_candidate(index) -> None:
    state = _VIEW.get(index.stores)
    view = state.view
    row = {node_id: i for i, node_id in enumerate(view.ids)}
    cosines = view.cosines(Q_VEC)
    anchor, released = row[ANCHOR], row[sentence_id(SONG, 1)]
    gated = expand(view, [anchor], cosines, rst_gate=float(cosines[row[DRUMMER]]))
    assert released not in {p.last for p in gated}
    open_paths = expand(view, [anchor], cosines, max_len=2, beam=3)
    steps = {view.ids[p.last]: p.steps for p in open_paths}
    assert steps[sentence_id(SONG, 1)] == ["rst:elaboration"]
    # the retriever's default gate leaves the weakly related elaboration out of the paths
    retriever = SentenceGraphRetriever(index.stores, HashEmbedding(), fill=False)
    assert sentence_id(SONG, 1) not in ids(ask(retriever))


def test_budget_is_filled_in_rank_order_without_repeats(index) -> None:
    stores = index.stores
    full = ask(SentenceGraphRetriever(stores, HashEmbedding(), order="path"))
    assert len(set(ids(full))) == len(full) == 7  # every sentence once: paths, then the fill
    assert [n.node.metadata["via"] for n in full][:2] == ["anchor", "bridge"]
    assert full[-1].node.metadata["via"] == "fill"
    assert full[-1].node.metadata["relation_path"].startswith("match [")
    for budget in (12, 25):
        cut = ask(SentenceGraphRetriever(stores, HashEmbedding(), order="path",
                                         budget_words=budget))
        words = sum(len(n.node.get_content().split()) for n in cut)
        assert budget - 9 < words <= budget
        assert ids(cut) == ids(full)[: len(cut)] or cut[-1].node.metadata.get("budget_trimmed")
        story = ask(SentenceGraphRetriever(stores, HashEmbedding(), budget_words=budget))
        assert sorted(ids(story)) == sorted(ids(cut))
        positions = [tuple(n.node.metadata[POS_KEY]) for n in story]
        assert positions == sorted(positions)


def test_positions_and_relation_paths_reach_the_metadata_and_the_context(index) -> None:
    retriever = index.as_retriever(mode="sentence_graph", max_anchors=1, fill=False)
    nodes = ask(retriever)
    drummer = next(n for n in nodes if n.node.node_id == DRUMMER)
    text = BAND.sentences[1][0]
    assert drummer.node.get_content() == text
    start = _start(BAND, 1)
    assert (drummer.node.start_char_idx, drummer.node.end_char_idx) == (start, start + len(text))
    assert drummer.node.metadata[POS_KEY] == [1, start, 0]
    shown = drummer.node.get_content(metadata_mode="llm")
    assert "bridge:shared_entity(mentions Lanternfield)" in shown
    assert "document 1, character" in shown and "anchor_id" not in shown
    context = bundle_from_retrieved(index.graph_store, nodes).render()
    assert "-[bridge shared_entity]->" in context and "mentions Lanternfield" in context
    assert "Lanternfield" in context and "The Silver Harp" in context


def test_aretrieve_matches_retrieve(index) -> None:
    retriever = SentenceGraphRetriever(index.stores, HashEmbedding(), budget_words=30)
    bundle = QueryBundle(QUESTION, embedding=Q_VEC)
    sync = retriever.retrieve(bundle)
    async_ = asyncio.run(retriever.aretrieve(bundle))
    assert [(n.node.node_id, n.score) for n in sync] == [(n.node.node_id, n.score) for n in async_]


def test_an_llm_refiner_can_answer_at_once_and_falls_back_to_the_rule(index) -> None:
    stores = index.stores
    seen: list[list[tuple[str, str]]] = []

    async def answer(question: str, candidates):
        seen.append(list(candidates))
        return Refinement((0,), "answer")

    nodes = ask(SentenceGraphRetriever(stores, HashEmbedding(), refiner=answer, fill=False))
    assert ids(nodes) == [ANCHOR] and nodes[0].node.metadata["refinement"] == "llm:answer"
    assert seen[0][0] == ("The Silver Harp", SONG.sentences[0][0])

    async def broken(question: str, candidates):
        raise LLMOutputError("not JSON")

    fallback = ask(SentenceGraphRetriever(stores, HashEmbedding(), refiner=broken, fill=False))
    assert {n.node.metadata["refinement"] for n in fallback} == {"rule:expand"}
    assert DRUMMER in ids(fallback)
    with pytest.raises(MissingModelError):
        SentenceGraphRetriever(stores, HashEmbedding(), refine="llm")
    with pytest.raises(MissingModelError):
        SentenceGraphRetriever(stores, HashEmbedding(), faithful=True)


def scripted_index(llm: ScriptedLLM) -> E2RAGIndex:
    index = E2RAGIndex(nodes=[], embed_model=HashEmbedding(), llm=llm)
    write_graph(index.stores, [SONG, BAND, WEATHER], [(SONG, BAND, "Lanternfield")])
    return index


@pytest.mark.parametrize("action", ["expand", "answer"])
def test_the_paper_prompt_refines_through_the_index_llm(action: str) -> None:
    index = scripted_index(ScriptedLLM(refine_action=action))
    retriever = index.as_retriever(mode="sentence_graph", fill=False, order="path")
    assert "refine_prompt" in retriever.get_prompts()
    nodes = ask(retriever)
    assert {n.node.metadata["refinement"] for n in nodes} == {f"llm:{action}"}
    assert (DRUMMER in ids(nodes)) == (action == "expand")  # "answer" skips the expansion
    assert index.llm_runner.stats.calls_by_kind.get("sentgraph_refine") == 1
    faithful = index.as_retriever(mode="sentence_graph", faithful=True)
    assert (faithful.refine, faithful.fill, faithful.context_order) == ("llm", False, "retrieval")


def test_malformed_refinement_output_falls_back_to_the_rule() -> None:
    index = scripted_index(ScriptedLLM(refine_action="answer", malformed_marker="Silver Harp"))
    nodes = ask(index.as_retriever(mode="sentence_graph", fill=False))
    assert {n.node.metadata["refinement"] for n in nodes} == {"rule:expand"}
    assert DRUMMER in ids(nodes)


def test_an_index_without_the_sentence_graph_is_refused() -> None:
    empty = E2RAGIndex(nodes=[], embed_model=HashEmbedding(), llm=None)
    with pytest.raises(SentenceGraphMissingError, match="SentenceGraphBuilder"):
        empty.as_retriever(mode="sentence_graph")


# -- the real offline default -------------------------------------------------------------------
SONG_TEXT = Doc(
    "song",
    "The Silver Harp",
    [
        ("The Silver Harp is a song by the band Lanternfield.", "core", None),
        ("The Silver Harp was released as a single in 1998.", "core", None),
        ("The song reached number four in the Irish charts.", "supplementary", None),
        ("Its lyrics describe a harp found on a beach.", "supplementary", None),
    ],
    rst=[(0, 1, "sequence", "N-N"), (1, 2, "result", "N-S"), (0, 3, "elaboration", "N-S")],
)
BAND_TEXT = Doc(
    "band",
    "Lanternfield",
    [
        ("Lanternfield formed in Galway in 1991.", "core", None),
        ("Tomas Reyes plays drums in Lanternfield.", "core", None),
    ],
    rst=[(0, 1, "conjunction", "N-N")],
)
DISTRACTORS = [
    Doc("inn", "The Silver Harp Inn", [
        ("The Silver Harp Inn is a pub in Cork with live music.", "core", None),
        ("The band that plays there on Fridays is different every week.", "core", None),
    ]),
    Doc("harps", "Harp", [
        ("A harp is a string instrument played by plucking.", "core", None),
        ("Silver strings give a harp a bright sound.", "supplementary", None),
    ]),
    Doc("charts", "Irish Singles Chart", [
        ("The Irish Singles Chart ranks the best-selling songs in Ireland.", "core", None),
        ("Many bands released singles in 1998.", "core", None),
    ]),
]


def test_path_expansion_reaches_the_second_hop_with_minilm() -> None:
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    embed = MiniLMEmbedding()
    index = E2RAGIndex(nodes=[], embed_model=embed, llm=None)
    write_graph(index.stores, [SONG_TEXT, BAND_TEXT, *DISTRACTORS],
                [(SONG_TEXT, BAND_TEXT, "Lanternfield")], embed=embed.get_text_embedding)
    question = "Who is the drummer of the band that recorded The Silver Harp?"
    drummer = sentence_id(BAND_TEXT, 1)
    alone = index.as_retriever(mode="sentence_graph", max_path_length=1, fill=False)
    assert drummer not in ids(alone.retrieve(question))
    nodes = index.as_retriever(mode="sentence_graph").retrieve(question)
    found = next(n for n in nodes if n.node.node_id == drummer)
    assert found.node.metadata["hop"] == 1
    assert "bridge" in found.node.metadata["relation_path"]
    # the song's second anchor does not cross the same bridge for the band's weaker sentence
    assert [n.node.metadata["via"] for n in nodes].count("bridge") == 1
    budgeted = index.as_retriever(mode="sentence_graph", budget_words=40).retrieve(question)
    assert drummer in ids(budgeted)
    assert sum(len(n.node.get_content().split()) for n in budgeted) <= 40
