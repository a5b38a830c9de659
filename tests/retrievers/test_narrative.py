"""NarrativeRetriever (the default mode) on the real offline default: spaCy + MiniLM.

Two stories: the bundled Peter Rabbit, and ``data/greymoor.txt``, an original school story
written for these tests. In it Hermione is a rule-obsessed first-year for its first ~400 words
(she lectures everyone on the rules and says she would never break one); some 1,600 words of
other school life later comes a clearly named event, "the troll incident", after which she lies
to a teacher, sets a fire and brews a forbidden potion in a bathroom. The early facet shares the
question's words ("rules", "break", "Hermione"), so a ranking that ignores *after* can land there.

Every assertion states a rule (story order relative to an anchor found by its own words in the
text, budgets, explanations that add up), not a pinned passage id.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, load_index_from_storage
from llama_index.core.schema import NodeWithScore

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.retrievers.passage_cache import narrative_state
from llama_index_e2rag.ranking.anchor import side_cost
from llama_index_e2rag.ranking.narrative import SIGNALS, NarrativeWeights
from llama_index_e2rag.context.keys import RAW_SCORE_KEY
from llama_index_e2rag.context.keys import ANCHOR_KEY, RANK_KEY, SIGNALS_KEY, STORY_MATCH_KEY
from llama_index_e2rag.retrievers.narrative import NarrativeRetriever
from llama_index_e2rag.schema import GraphNode, NodeKind, sort_by_position
from llama_index_e2rag.text import count_words, split_sentences

GREYMOOR = (Path(__file__).parent / "data" / "greymoor.txt").read_text(encoding="utf-8")
#: The early facet ends where the story turns to lessons.
EARLY_END = GREYMOOR.index("The first weeks of term")
INCIDENT = "called it the troll incident"

LATE_FACET_QUESTIONS = [
    "What rules did Hermione break after the troll incident?",
    "After the troll incident, which school rules did Hermione break?",
]

#: (story, question, words of the anchor event in the text)
AFTER = [
    ("peter", "What did Peter do after he lost his shoes?", "He lost one of his shoes"),
    ("greymoor", "What did Hermione do after Ned said something unkind?",
     "Ned said something unkind"),
    ("greymoor", "What happened after the first match of the season?",
     "The first match of the season was played"),
    ("greymoor", "What did Hermione do after she told Professor Alder a lie?",
     "Hermione told her a lie"),
    ("greymoor", "What did the boys do after the troll crashed to the floor?",
     "the troll crashed to the floor"),
]
BEFORE_FEAST = ("greymoor", "What did Hermione do before the feast?", "The feast had barely begun")
BEFORE_SICK = ("peter", "What did Peter eat before he felt sick?", "feeling rather sick")
BEFORE_TROLL = ("greymoor", "Where was Hermione before the troll incident?", INCIDENT)
BEFORE_SHOES = ("peter", "What did Peter do before he lost his shoes?", "He lost one of his shoes")
BEFORE_MATCH = ("greymoor", "What did Tobias do before the first match of the season?",
                "The first match of the season was played")
BEFORE = [
    BEFORE_FEAST,
    BEFORE_SICK,
    BEFORE_TROLL,
    BEFORE_SHOES,
    BEFORE_MATCH,
]
QUESTIONS = {
    "peter": [
        "What did Peter do after he lost his shoes?",
        "Why did Peter go to bed without supper?",
        "Who helped Peter when he was caught in the net?",
    ],
    "greymoor": [
        LATE_FACET_QUESTIONS[0],
        "Who taught potions in the dungeons?",
        "What did Ned do at the chess club?",
    ],
}


# -- fixtures ------------------------------------------------------------------------------------
def _greymoor_document() -> Document:
    return Document(text=GREYMOOR, id_="greymoor", metadata={"file_name": "greymoor.txt"})


@pytest.fixture(scope="module")
def peter(minilm) -> E2RAGIndex:
    """No extractors given: the offline default (spaCy GroundedExtractor) builds the graph."""
    return E2RAGIndex.from_documents([sample_document()], embed_model=minilm)


@pytest.fixture(scope="module")
def greymoor(minilm) -> E2RAGIndex:
    return E2RAGIndex.from_documents([_greymoor_document()], embed_model=minilm)


@pytest.fixture(scope="module")
def stories(peter, greymoor) -> dict[str, tuple[E2RAGIndex, str]]:
    return {"peter": (peter, sample_document().text), "greymoor": (greymoor, GREYMOOR)}


# -- helpers -------------------------------------------------------------------------------------
def _passages(index: E2RAGIndex) -> list[GraphNode]:
    return sort_by_position(index.graph_store.nodes(NodeKind.PASSAGE))


def _holding(index: E2RAGIndex, text: str, words: str) -> GraphNode:
    """The passage that holds the first occurrence of ``words`` in the story."""
    offset = text.index(words)
    found = [p for p in _passages(index) if p.span[0] <= offset < p.span[1]]
    assert len(found) == 1
    return found[0]


def _everything(index: E2RAGIndex, question: str, **kwargs) -> list[NodeWithScore]:
    """The full ranking: every passage (continuations included)."""
    return index.as_retriever(similarity_top_k=len(_passages(index)), **kwargs).retrieve(question)


def _start(result: NodeWithScore) -> int:
    return result.node.start_char_idx


#: Keys of the signals that record the score's calibration, not a contribution to it.
_CALIBRATION = {"continuation", RAW_SCORE_KEY, STORY_MATCH_KEY, RANK_KEY}


def _signal_sum(result: NodeWithScore) -> float:
    return sum(v for k, v in result.node.metadata[SIGNALS_KEY].items() if k not in _CALIBRATION)


def _raw(result: NodeWithScore) -> float:
    """The fused score before its calibration to 0-1 (``ranking.scores``)."""
    return result.node.metadata[SIGNALS_KEY][RAW_SCORE_KEY]


# -- the default mode ----------------------------------------------------------------------------
def test_the_default_mode_is_narrative(peter):
    retriever = peter.as_retriever()
    assert isinstance(retriever, NarrativeRetriever)
    results = retriever.retrieve("Where did Peter lose his shoes?")
    assert len(results) == retriever.similarity_top_k
    for result in results:
        meta = result.node.metadata
        assert meta["retriever"] == "narrative" and meta["doc_id"] == "peter_rabbit"
        assert meta["file_name"] == "peter_rabbit.txt"  # the source chunk's metadata
        assert SIGNALS_KEY in result.node.excluded_llm_metadata_keys


# -- 1. a later facet of a character -------------------------------------------------------------
@pytest.mark.parametrize("disable", [(), ("continuation",)], ids=["default", "no-continuation"])
@pytest.mark.parametrize("question", LATE_FACET_QUESTIONS)
def test_a_later_facet_question_ranks_a_passage_after_the_incident_first(
    greymoor, question, disable
):
    incident = _holding(greymoor, GREYMOOR, INCIDENT)
    ranking = _everything(greymoor, question, disable=disable)
    # the first result lies at or after the incident, in story order
    assert _start(ranking[0]) >= incident.span[0]
    # and a passage strictly after it outranks every passage of the early facet
    late = next(i for i, r in enumerate(ranking) if _start(r) >= incident.span[1])
    early = [i for i, r in enumerate(ranking) if r.node.end_char_idx <= EARLY_END]
    assert early and late < min(early)


# -- 2. after / before ---------------------------------------------------------------------------
@pytest.mark.parametrize(("story", "question", "anchor_words"), AFTER)
def test_after_puts_the_story_that_follows_the_anchor_first(stories, story, question, anchor_words):
    index, text = stories[story]
    anchor = _holding(index, text, anchor_words)
    results = index.as_retriever().retrieve(question)
    assert _start(results[0]) >= anchor.span[0]
    assert any(_start(r) >= anchor.span[1] for r in results[:2])


@pytest.mark.parametrize(("story", "question", "anchor_words"), BEFORE)
def test_before_puts_the_story_that_precedes_the_anchor_first(
    stories, story, question, anchor_words
):
    index, text = stories[story]
    anchor = _holding(index, text, anchor_words)
    results = index.as_retriever().retrieve(question)
    assert _start(results[0]) <= anchor.span[0]
    assert any(r.node.end_char_idx <= anchor.span[0] for r in results[:2])


# -- 3. budgets ----------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [50, 120, 300])
@pytest.mark.parametrize("story", ["peter", "greymoor"])
def test_a_budget_is_filled_with_whole_sentences_and_no_text_twice(stories, story, budget):
    index, text = stories[story]
    sentences = split_sentences(text)
    starts, ends = {a for a, _ in sentences}, {b for _, b in sentences}
    longest = max(count_words(text[a:b]) for a, b in sentences)
    passages = {p.id: p for p in _passages(index)}
    retriever = index.as_retriever(budget_words=budget)
    for question in QUESTIONS[story]:
        results = retriever.retrieve(question)
        used = sum(count_words(r.node.text) for r in results)
        assert budget - longest <= used <= budget, question
        ids = [r.node.node_id for r in results]
        assert len(ids) == len(set(ids))
        spans = sorted((r.node.start_char_idx, r.node.end_char_idx) for r in results)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
        for result in results:
            start, end = result.node.start_char_idx, result.node.end_char_idx
            assert text[start:end] == result.node.text  # verbatim from the story
            assert start in starts and end in ends  # whole sentences
            assert passages[result.node.node_id].text.startswith(result.node.text)


def test_without_a_budget_similarity_top_k_passages_come_back_whole(peter):
    passages = {p.id: p for p in _passages(peter)}
    for top_k in (1, 4, 7):
        results = peter.as_retriever(similarity_top_k=top_k).retrieve(QUESTIONS["peter"][1])
        assert len(results) == top_k
        assert all(passages[r.node.node_id].text == r.node.text for r in results)


def test_a_budget_beyond_the_story_returns_the_whole_story_once(peter):
    story = sample_document().text
    results = peter.as_retriever(budget_words=10 * count_words(story)).retrieve(
        QUESTIONS["peter"][0]
    )
    assert sorted(r.node.node_id for r in results) == sorted(p.id for p in _passages(peter))
    assert sum(count_words(r.node.text) for r in results) == count_words(story)
    many = peter.as_retriever(similarity_top_k=10 * len(results)).retrieve("shoes")
    assert len(many) == len({r.node.node_id for r in many}) == len(results)


def test_an_empty_index_retrieves_nothing(minilm):
    empty = E2RAGIndex.from_documents([], embed_model=minilm)
    assert empty.as_retriever().retrieve("What did Peter do?") == []
    assert empty.as_retriever(budget_words=50).retrieve("What did Peter do?") == []


def test_bad_arguments_are_refused(peter):
    with pytest.raises(ValueError):
        peter.as_retriever(budget_words=0)
    with pytest.raises(ValueError):
        peter.as_retriever(similarity_top_k=0)
    with pytest.raises(ValueError, match="unknown signal"):
        peter.as_retriever(disable=("recency",))


# -- 4. signals and switching them off -----------------------------------------------------------
@pytest.mark.parametrize("story", ["peter", "greymoor"])
def test_each_score_is_the_sum_of_its_signal_contributions(stories, story):
    index, _ = stories[story]
    for question in QUESTIONS[story] + LATE_FACET_QUESTIONS[1:]:
        results = _everything(index, question)
        by_id = {r.node.node_id: r for r in results}
        for result in results:
            signals = result.node.metadata[SIGNALS_KEY]
            assert set(signals) <= set(SIGNALS) | _CALIBRATION
            assert _raw(result) == pytest.approx(_signal_sum(result), abs=1e-3)
        # a continuation names its parent's raw score; the parent comes right before it, and
        # the scores never rise down the list, a continuation's included
        for before, result in zip(results, results[1:]):
            if "continuation" in result.node.metadata[SIGNALS_KEY]:
                assert result.node.metadata[SIGNALS_KEY]["continuation"] == pytest.approx(
                    _raw(before), abs=1e-3
                )
                assert _start(result) >= before.node.end_char_idx
            assert result.score <= before.score
        assert [r.node.metadata[SIGNALS_KEY][RANK_KEY] for r in results] == list(
            range(1, len(results) + 1)
        )
        assert len(by_id) == len(results)


TEMPORAL = [(*case, "after") for case in AFTER] + [
    (*case, "before") for case in (BEFORE_FEAST, BEFORE_SICK, BEFORE_TROLL, BEFORE_SHOES,
                                   BEFORE_MATCH)
]


@pytest.mark.parametrize(("story", "question", "anchor_words", "relation"), TEMPORAL)
def test_the_anchor_bonus_points_from_the_anchor_event_in_the_cue_direction(
    stories, story, question, anchor_words, relation
):
    index, text = stories[story]
    passages = _passages(index)
    anchor = _holding(index, text, anchor_words)
    at = [p.id for p in passages].index(anchor.id)
    neighbour = passages[at + 1 if relation == "after" else at - 1]
    results = _everything(index, question)
    bonus = {r.node.node_id: r.node.metadata[SIGNALS_KEY].get("anchor", 0.0) for r in results}
    weights = NarrativeWeights.fitted()
    record = results[0].node.metadata[ANCHOR_KEY]
    assert record["passage_id"] == anchor.id and record["used"] is True
    # the anchor itself gets its anchor_self share; on the cue's side the bonus is largest next
    # to it and falls with the distance in the story
    assert bonus[anchor.id] == pytest.approx(weights.anchor * weights.anchor_self, abs=1e-3)
    side = passages[at + 1 :] if relation == "after" else passages[:at][::-1]
    along = [bonus[p.id] for p in side]
    assert along[0] > 0 and along == sorted(along, reverse=True)
    assert neighbour.id == side[0].id
    # the other side: no bonus, only the cost, which grows with the anchor's confidence
    other = passages[:at] if relation == "after" else passages[at + 1 :]
    cost = weights.anchor_side * side_cost(record["confidence"])
    assert cost > 0
    assert all(bonus[p.id] == pytest.approx(-cost, rel=0.02) for p in other)


@pytest.mark.parametrize(("story", "question", "anchor_words", "relation"), TEMPORAL)
def test_switching_the_anchor_off_takes_its_contribution_away(
    stories, story, question, anchor_words, relation
):
    index, _ = stories[story]
    with_anchor = _everything(index, question)
    without = _everything(index, question, disable=("anchor",))
    assert not any("anchor" in r.node.metadata[SIGNALS_KEY] for r in without)
    ids_with = [r.node.node_id for r in with_anchor]
    ids_without = [r.node.node_id for r in without]
    for boosted in with_anchor:
        bonus = boosted.node.metadata[SIGNALS_KEY].get("anchor", 0.0)
        same = without[ids_without.index(boosted.node.node_id)]
        assert _raw(same) == pytest.approx(_raw(boosted) - bonus, abs=1e-3)
        for name in ("lexical", "dense", "mention", "event", "co_event"):
            assert same.node.metadata[SIGNALS_KEY].get(name) == boosted.node.metadata[
                SIGNALS_KEY
            ].get(name)
    # the most boosted passage ranks no better without its bonus
    top = max(with_anchor, key=lambda r: r.node.metadata[SIGNALS_KEY].get("anchor", 0.0))
    assert ids_without.index(top.node.node_id) >= ids_with.index(top.node.node_id)


@pytest.mark.parametrize("signal", ["continuation", "lexical", "dense"])
def test_a_disabled_signal_never_explains_a_result(stories, signal):
    for index, _ in stories.values():
        question = LATE_FACET_QUESTIONS[0] if index is stories["greymoor"][0] else AFTER[0][1]
        default = _everything(index, question)
        assert any(signal in r.node.metadata[SIGNALS_KEY] for r in default)
        switched = _everything(index, question, disable=(signal,))
        assert not any(signal in r.node.metadata[SIGNALS_KEY] for r in switched)
        for result in switched:
            assert _raw(result) == pytest.approx(_signal_sum(result), abs=1e-3)


def test_lexical_weight_alone_ranks_by_bm25(peter):
    question = "Where did Peter lose his shoes among the cabbages?"
    weights = NarrativeWeights(lexical=1.0).without(*(s for s in SIGNALS if s != "lexical"))
    results = _everything(peter, question, weights=weights.without("continuation"))
    scores = peter.stores.lexical().scores(question)
    ids = peter.stores.lexical().ids
    matched = int(np.count_nonzero(scores))
    expected = [ids[i] for i in np.argsort(-scores, kind="stable")[:matched]]
    assert [r.node.node_id for r in results[:matched]] == expected


def test_dense_weight_alone_ranks_by_cosine(peter, minilm):
    question = "a frightened rabbit hiding from the gardener"
    weights = NarrativeWeights(dense=1.0).without(
        *(s for s in SIGNALS if s != "dense"), "continuation"
    )
    results = _everything(peter, question, weights=weights)
    passages = _passages(peter)
    query = np.asarray(minilm.get_query_embedding(question))
    cosine = []
    for passage in passages:
        vector = np.asarray(minilm.get_text_embedding(passage.text))
        cosine.append(float(vector @ query / np.linalg.norm(vector) / np.linalg.norm(query)))
    order = [passages[i].id for i in np.argsort(-np.asarray(cosine), kind="stable")]
    assert [r.node.node_id for r in results[:5]] == order[:5]


def test_graph_signals_come_from_the_question_parse(peter):
    """mention / co_event switched on: the explanation is exactly the weighted table signal."""
    weights = NarrativeWeights(mention=2.0, co_event=1.0, event=1.0)
    retriever = peter.as_retriever(weights=weights, similarity_top_k=len(_passages(peter)))
    question = "What did Mr. McGregor and Peter do when they met?"
    state, sig = retriever.signals(question)
    assert sig.mention.any() and sig.co_event.any()
    rows = {pid: row for row, pid in enumerate(state.table.ids)}
    results = retriever.retrieve(question)
    for result in results:
        row = rows[result.node.node_id]
        signals = result.node.metadata[SIGNALS_KEY]
        for name, weight in (("mention", 2.0), ("co_event", 1.0), ("event", 1.0)):
            value = weight * float(getattr(sig, name)[row])
            assert signals.get(name, 0.0) == pytest.approx(value, abs=1e-3)
    # every passage where both characters act together carries the co_event bonus
    assert all(
        "co_event" in r.node.metadata[SIGNALS_KEY]
        for r in results
        if sig.co_event[rows[r.node.node_id]] > 0
    )
    off = peter.as_retriever(weights=weights, disable=("mention", "co_event")).retrieve(question)
    assert not any(
        {"mention", "co_event"} & set(r.node.metadata[SIGNALS_KEY]) for r in off
    )


@pytest.mark.parametrize(("question", "direction"), [
    ("What happened first?", 1), ("What happened at the end?", -1)
])
def test_edge_weight_leans_to_the_start_or_the_end_of_the_story(peter, question, direction):
    weights = NarrativeWeights(edge=1.0).without(
        *(s for s in SIGNALS if s != "edge"), "continuation"
    )
    results = peter.as_retriever(weights=weights, similarity_top_k=5).retrieve(question)
    starts = [_start(r) for r in results]
    assert starts == sorted(starts, reverse=direction < 0)
    passages = _passages(peter)
    assert results[0].node.node_id == (passages[0] if direction > 0 else passages[-1]).id
    assert all(r.node.metadata[SIGNALS_KEY]["edge"] > 0 for r in results)


# -- 5. persistence ------------------------------------------------------------------------------
def test_persist_and_load_give_the_same_results_from_the_stored_lexical_index(
    greymoor, minilm, tmp_path, monkeypatch
):
    greymoor.storage_context.persist(persist_dir=str(tmp_path))
    first = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)), embed_model=minilm
    )
    first.as_retriever().retrieve(AFTER[1][1])  # the first query after the write derives BM25
    assert (tmp_path / "e2rag" / "readmodels" / "bm25.jsonl").is_file()
    loaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)), embed_model=minilm
    )
    assert [p.id for p in _passages(loaded)] == [p.id for p in _passages(greymoor)]

    import llama_index_e2rag.retrievers.passage_cache as passage_cache
    import llama_index_e2rag.stores.port as stores_module

    def refuse(*args, **kwargs):
        raise AssertionError("the lexical index was rebuilt instead of loaded")

    monkeypatch.setattr(passage_cache.LexicalIndex, "build", refuse)
    monkeypatch.setattr(stores_module.LexicalIndex, "build", refuse)
    assert loaded.stores.lexical().ids == [p.id for p in _passages(loaded)]
    for question in LATE_FACET_QUESTIONS + [AFTER[1][1], BEFORE[0][1]]:
        for kwargs in ({}, {"budget_words": 150}):
            before = greymoor.as_retriever(**kwargs).retrieve(question)
            after = loaded.as_retriever(**kwargs).retrieve(question)
            assert [r.node.node_id for r in after] == [r.node.node_id for r in before]
            assert [r.node.text for r in after] == [r.node.text for r in before]
            assert [r.score for r in after] == pytest.approx([r.score for r in before], abs=1e-4)


def test_a_store_without_a_lexical_index_rebuilds_it_from_the_passages(peter, minilm, tmp_path):
    import shutil

    peter.storage_context.persist(persist_dir=str(tmp_path))
    shutil.rmtree(tmp_path / "e2rag" / "readmodels", ignore_errors=True)  # derived: rebuilt
    loaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)), embed_model=minilm
    )
    state = narrative_state(loaded.stores)
    assert state.lexical.ids == state.table.ids == [p.id for p in _passages(peter)]
    question = AFTER[0][1]
    assert [r.node.node_id for r in loaded.as_retriever().retrieve(question)] == [
        r.node.node_id for r in peter.as_retriever().retrieve(question)
    ]


# -- 6. async ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"budget_words": 120}, {"disable": ("anchor",)}])
async def test_aretrieve_gives_the_same_as_retrieve(greymoor, kwargs):
    retriever = greymoor.as_retriever(**kwargs)
    for question in LATE_FACET_QUESTIONS + QUESTIONS["greymoor"][1:]:
        sync = retriever.retrieve(question)
        asynchronous = await retriever.aretrieve(question)
        assert [r.node.node_id for r in asynchronous] == [r.node.node_id for r in sync]
        assert [r.node.text for r in asynchronous] == [r.node.text for r in sync]
        assert [r.score for r in asynchronous] == pytest.approx([r.score for r in sync], abs=1e-5)
        assert [r.node.metadata[SIGNALS_KEY] for r in asynchronous] == [
            r.node.metadata[SIGNALS_KEY] for r in sync
        ]


# -- 7. insert and delete ------------------------------------------------------------------------
LIGHTHOUSE = (
    "The lighthouse keeper Maren lived alone on the rock at Skerry Point. Every evening she "
    "climbed the iron stairs, trimmed the wick and polished the great brass lens until it shone. "
    "One winter night a fishing boat ran onto the reef below the lighthouse. Maren rowed out "
    "through the storm in her small grey dinghy and brought the three fishermen back to the rock, "
    "where she dried their clothes by the stove and made them hot soup with barley.\n\n"
    "In the spring the fishermen came back with a new lantern for the lighthouse and a basket of "
    "smoked herring, and after that Maren was never quite so alone on Skerry Point."
)


def test_a_deleted_document_never_comes_back(minilm):
    index = E2RAGIndex.from_documents([sample_document()], embed_model=minilm)
    state = narrative_state(index.stores)
    assert narrative_state(index.stores) is state  # cached while nothing changes
    index.insert(Document(text=LIGHTHOUSE, id_="lighthouse"))
    assert narrative_state(index.stores) is not state
    questions = [
        "Who rescued the fishermen from the reef near the lighthouse?",
        "What did the fishermen bring Maren after the storm?",
        "What did Peter do after he lost his shoes?",
    ]
    lighthouse_ids = {p.id for p in _passages(index) if p.doc_id == "lighthouse"}
    assert lighthouse_ids
    found = index.as_retriever().retrieve(questions[0])
    assert found[0].node.metadata["doc_id"] == "lighthouse"  # it was retrievable
    # the anchor and continuation stay inside the lighthouse story
    after = index.as_retriever().retrieve(questions[1])
    assert after[0].node.metadata["doc_id"] == "lighthouse"

    index.delete_ref_doc("lighthouse")
    assert not {p.id for p in _passages(index)} & lighthouse_ids
    assert index.stores.lexical().ids == [p.id for p in _passages(index)]
    everything = len(_passages(index))
    for question in questions:
        for kwargs in ({"similarity_top_k": everything}, {"budget_words": 2000}):
            results = index.as_retriever(**kwargs).retrieve(question)
            assert results
            assert not any(r.node.node_id in lighthouse_ids for r in results)
            assert all(r.node.metadata["doc_id"] == "peter_rabbit" for r in results)
            assert not any("Maren" in r.node.text for r in results)


def test_a_documents_new_metadata_is_cited_once_it_is_updated(minilm):
    """The passages and their chunks' metadata are read once per index state: an update of the
    document is a new state, so its results cite the new metadata, never the cached one; and a
    result's metadata is its own (a caller editing it edits no other result)."""
    metadata = {"file_name": "draft.txt", "tags": ["sea"]}
    index = E2RAGIndex.from_documents(
        [Document(text=LIGHTHOUSE, id_="lighthouse", metadata=metadata)], embed_model=minilm
    )
    question = "Who rescued the fishermen from the reef near the lighthouse?"
    before = index.as_retriever().retrieve(question)
    assert before and {r.node.metadata["file_name"] for r in before} == {"draft.txt"}
    before[0].node.metadata["tags"].append("edited by a caller")  # not the cached metadata
    again = index.as_retriever().retrieve(question)
    assert all(r.node.metadata["tags"] == ["sea"] for r in again)
    index.update_ref_doc(
        Document(text=LIGHTHOUSE, id_="lighthouse", metadata={"file_name": "final.txt"})
    )
    after = index.as_retriever().retrieve(question)
    assert [r.node.text for r in after] == [r.node.text for r in before]
    assert {r.node.metadata["file_name"] for r in after} == {"final.txt"}


#: An original story: the same knock told twice, once by "somebody", once by a shepherd, far
#: enough apart to be separate passages.
MILL = (
    "Late that night somebody knocked three times on the door of the mill, and the dog began "
    "to bark. Nobody opened. The wind blew over the hills and the river ran fast under the "
    "wheel, and the sacks of flour stood in rows along the wall. The cat slept by the stove. "
    "Late that night the shepherd knocked three times on the door of the mill, and the dog "
    "began to bark. The kettle sang on the fire. Snow lay thick on the roof and the lamp in "
    "the window burned low until the grey dawn came over the hills."
)


def test_a_who_question_ranks_the_passage_naming_a_new_person_above_its_twin(minilm):
    index = E2RAGIndex.from_documents([Document(text=MILL, id_="mill")], embed_model=minilm)
    somebody = _holding(index, MILL, "somebody knocked")
    shepherd = _holding(index, MILL, "the shepherd knocked")
    assert somebody.id != shepherd.id
    question = "Who knocked three times on the door of the mill?"
    weights = replace(NarrativeWeights.fitted(), answer_type=1.0, continuation=-1.0)
    on = {r.node.node_id: r for r in _everything(index, question, weights=weights)}
    off = {r.node.node_id: r for r in _everything(index, question, weights=weights,
                                                  disable=("answer_type",))}
    assert on[shepherd.id].node.metadata[SIGNALS_KEY]["answer_type"] == pytest.approx(1.0)
    assert "answer_type" not in on[somebody.id].node.metadata[SIGNALS_KEY]
    gap_on = _raw(on[shepherd.id]) - _raw(on[somebody.id])
    gap_off = _raw(off[shepherd.id]) - _raw(off[somebody.id])
    assert gap_on == pytest.approx(gap_off + 1.0, abs=1e-3)
    assert gap_on > 0  # the twin offering an answer comes first
    # a question that asks for no person, place or time gets no answer-type part at all
    why = _everything(index, "Why did the dog bark at the door of the mill?", weights=weights)
    assert not any("answer_type" in r.node.metadata[SIGNALS_KEY] for r in why)
