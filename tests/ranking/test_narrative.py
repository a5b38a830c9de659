"""ranking.narrative: the passage table, each signal, fusion and continuation (pure, synthetic)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

import llama_index_e2rag.ranking.narrative as narrative
from llama_index_e2rag.ranking.anchor import side_cost
from llama_index_e2rag.ranking.narrative import (
    SIGNALS,
    NarrativeWeights,
    QueryGraph,
    Signals,
    build_table,
    co_event_signal,
    event_signal,
    fuse,
    locate_anchor,
    match_names,
    mention_signal,
    rank,
    signals,
    zscore,
)
from llama_index_e2rag.ranking.temporal import TemporalCue
from llama_index_e2rag.schema import GraphNode, NodeKind

PASSAGE_LEN = 100


def _passage(doc: int, index: int) -> GraphNode:
    start = index * PASSAGE_LEN
    return GraphNode(
        id=f"p{doc}-{index}",
        kind=NodeKind.PASSAGE,
        text=f"passage {index} of document {doc}",
        doc_id=f"d{doc}",
        pos=(doc, start, 3),
        span=(start, start + PASSAGE_LEN - 1),
    )


def _mention(name: str, doc: int, *offsets: int, spans: bool = True) -> GraphNode:
    node = GraphNode(
        id=f"m-{name}-{doc}-{offsets[0]}",
        kind=NodeKind.MENTION,
        text=name,
        name=name,
        doc_id=f"d{doc}",
        pos=(doc, offsets[0], 0),
    )
    if spans:
        node.attrs["spans"] = [[o, o + len(name)] for o in offsets]
    return node


def _event(lemma: str, doc: int, offset: int, *participants: str, span: bool = True) -> GraphNode:
    return GraphNode(
        id=f"e-{lemma}-{doc}-{offset}",
        kind=NodeKind.EVENT,
        text=f"{' '.join(participants)} {lemma}",
        doc_id=f"d{doc}",
        pos=(doc, offset, 1),
        span=(offset, offset + 5) if span else None,
        attrs={"lemma": lemma, "participants": list(participants)},
    )


def _table(passages_per_doc=(6,), mentions=(), events=(), vectors=None):
    passages = [_passage(d, i) for d, n in enumerate(passages_per_doc) for i in range(n)]
    if vectors is None:
        vectors = np.eye(len(passages), 4, dtype=np.float32) + 0.1
    return build_table(passages, vectors, list(mentions), list(events))


def _signals(n: int, lexical=None, dense=None, **arrays) -> Signals:
    zero = np.zeros(n, dtype=np.float32)
    return Signals(
        lexical=np.asarray(lexical if lexical is not None else zero, dtype=np.float32),
        dense=np.asarray(dense if dense is not None else zero, dtype=np.float32),
        mention=np.asarray(arrays.get("mention", zero), dtype=np.float32),
        event=np.asarray(arrays.get("event", zero), dtype=np.float32),
        co_event=np.asarray(arrays.get("co_event", zero), dtype=np.float32),
        cue=arrays.get("cue"),
        clause=arrays.get("clause"),
    )


LEXICAL_ONLY = NarrativeWeights(lexical=1.0, dense=0.0, anchor=0.0, continuation=-1.0)


# -- the table -----------------------------------------------------------------------------------
def test_mentions_are_placed_in_every_passage_holding_one_of_their_spans():
    table = _table(
        (4,),
        mentions=[
            _mention("Peter", 0, 5, 150, 320),  # a name and two pronouns resolved to it
            _mention("Mr. McGregor", 0, 210),
        ],
    )
    assert table.names["peter"].tolist() == [0, 1, 3]
    assert table.names["mr mcgregor"].tolist() == [2]
    assert table.name_words["mcgregor"] == {"mr mcgregor"}
    assert table.name_words["peter"] == {"peter"}


def test_a_mention_without_offsets_is_placed_in_the_passages_of_its_chunk_that_name_it():
    texts = [
        "Benjamin sat on the wall.",  # names him, but in another chunk
        "Peter waited.",
        "Then Benjamin Bunny came.",  # chunk c1, names him
        "Nobody else came.",  # chunk c1, does not
        "Benjamins everywhere.",  # chunk c1, only a longer word
    ]
    chunks = ["c0", "c0", "c1", "c1", "c1"]
    passages = []
    for i, (text, chunk) in enumerate(zip(texts, chunks)):
        node = _passage(0, i)
        node.text, node.chunk_id = text, chunk
        passages.append(node)
    llm_mention = GraphNode(
        id="m-llm", kind=NodeKind.MENTION, text="Benjamin", name="Benjamin", doc_id="d0",
        pos=(0, 200, 0), chunk_id="c1",
    )
    table = build_table(passages, np.ones((5, 2)), [llm_mention], [])
    assert table.names["benjamin"].tolist() == [2]


def test_mentions_and_events_stay_in_their_own_document():
    table = _table(
        (3, 3),
        mentions=[_mention("Anna", 1, 20), _mention("Anna", 0, 250)],
        events=[_event("open", 1, 120, "Anna"), _event("close", 0, 10, "Anna", span=False)],
    )
    assert table.names["anna"].tolist() == [2, 3]
    assert table.events["open"] == [(4, frozenset({"anna"}))]
    assert table.events["close"] == [(0, frozenset({"anna"}))]
    assert table.doc_of.tolist() == [0, 0, 0, 1, 1, 1]


def test_row_of_finds_the_passage_holding_an_offset_and_nothing_outside_a_document():
    table = _table((3, 2))
    assert table.row_of(0, 0) == 0
    assert table.row_of(0, 99) == 0 and table.row_of(0, 100) == 1
    assert table.row_of(1, 150) == 4
    assert table.row_of(2, 5) is None  # no such document
    late = build_table([_passage(0, 1)], np.ones((1, 2)), [], [])
    assert late.row_of(0, 10) is None  # before the document's first passage


def test_vectors_are_unit_rows():
    table = _table((3,), vectors=np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]]))
    assert np.allclose(np.linalg.norm(table.vectors, axis=1), [1.0, 0.0, 1.0])


def test_query_graph_reads_names_and_events_normalised():
    nodes = [
        _mention("Mr. McGregor", 0, 0),
        _mention("Peter", 0, 9),
        _mention("peter", 0, 30),
        _event("CHASE", 0, 0, "Mr. McGregor", "Peter"),
        GraphNode(id="x", kind=NodeKind.EVENT, text="bare", doc_id="q", pos=(0, 0, 0)),
    ]
    graph = QueryGraph.from_nodes(nodes)
    assert graph.names == ("mr mcgregor", "peter")
    assert graph.events == (("chase", frozenset({"mr mcgregor", "peter"})),)


# -- names ---------------------------------------------------------------------------------------
NAMED = _table(
    (6,),
    mentions=[
        _mention("Peter Rabbit", 0, 10),
        _mention("Peter", 0, 110),
        _mention("Mr. McGregor", 0, 210),
        _mention("Mrs. Rabbit", 0, 310),
        _mention("Mr. Rabbit", 0, 410),
        _mention("the King", 0, 510),
    ],
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("peter", ["peter", "peter rabbit"]),
        # and a shorter name without a title, all of whose words the question name holds
        ("peter rabbit", ["peter", "peter rabbit"]),
        ("mcgregor", ["mr mcgregor"]),
        ("mr mcgregor", ["mr mcgregor"]),
        # the documented rule: a mention without a title matches a question name with one
        ("mrs rabbit", ["mrs rabbit", "peter rabbit"]),
        ("mr rabbit", ["mr rabbit", "peter rabbit"]),
        ("the king", ["the king"]),
        ("the queen", []),
        ("benjamin", []),
    ],
)
def test_a_question_name_matches_mentions_holding_its_proper_words(name, expected):
    assert match_names(NAMED, name) == expected


def test_different_titles_never_match():
    assert "mr rabbit" not in match_names(NAMED, "mrs rabbit")
    assert "mrs rabbit" not in match_names(NAMED, "mr rabbit")


# -- mention signal ------------------------------------------------------------------------------
def test_mention_signal_is_the_idf_weighted_share_of_the_question_characters():
    table = _table(
        (4,),
        mentions=[_mention("Peter", 0, 5, 105, 205, 305), _mention("Flopsy", 0, 110)],
    )
    idf_peter = math.log(1 + 4 / 4)
    idf_flopsy = math.log(1 + 4 / 1)
    out = mention_signal(table, ["peter", "flopsy"])
    total = idf_peter + idf_flopsy
    assert np.allclose(out, [idf_peter / total, 1.0, idf_peter / total, idf_peter / total])
    # the rare character counts for more than the one everywhere
    only_flopsy = mention_signal(table, ["flopsy", "cottontail"])
    assert only_flopsy.tolist() == [0.0, 1.0, 0.0, 0.0]  # unknown names do not dilute
    assert not mention_signal(table, []).any() and not mention_signal(table, ["nobody"]).any()


def test_mention_signal_follows_the_alias_chain():
    out = mention_signal(NAMED, ["peter"])
    assert out[0] > 0 and out[1] > 0 and not out[2:].any()


# -- event signal --------------------------------------------------------------------------------
def _events_table():
    return _table(
        (5,),
        mentions=[_mention("Peter Rabbit", 0, 10), _mention("Mr. McGregor", 0, 120)],
        events=[
            _event("lose", 0, 20, "Peter Rabbit", "his shoes"),
            _event("lose", 0, 220, "Mr. McGregor"),
            _event("be", 0, 30, "Peter Rabbit"),
            _event("be", 0, 130),
            _event("be", 0, 230),
            _event("be", 0, 330),
            _event("run", 0, 430, "Peter Rabbit"),
        ],
    )


def test_event_signal_matches_predicate_lemmas_with_a_participant_bonus():
    table = _events_table()
    total = 7
    graph = QueryGraph(names=("peter",), events=(("lose", frozenset({"peter"})),))
    out = event_signal(table, graph)
    weight = math.log(1 + total / 2) / math.log(1 + total)
    # row 0: Peter loses (shared participant through "peter" ~ "peter rabbit"); row 2: McGregor
    assert np.allclose(out, [weight, 0.0, weight * 2 / 3, 0.0, 0.0])
    assert out[0] == pytest.approx(1.5 * out[2])


def test_a_common_predicate_weighs_less_than_a_rare_one():
    table = _events_table()
    be = event_signal(table, QueryGraph(events=(("be", frozenset()),)))
    run = event_signal(table, QueryGraph(events=(("run", frozenset()),)))
    assert 0 < be.max() < run.max()
    assert be.nonzero()[0].tolist() == [0, 1, 2, 3] and run.nonzero()[0].tolist() == [4]


def test_event_signal_is_zero_without_a_matching_event():
    table = _events_table()
    assert not event_signal(table, QueryGraph(events=(("fly", frozenset({"peter"})),))).any()
    assert not event_signal(table, QueryGraph(names=("peter",))).any()
    assert not event_signal(_table((3,)), QueryGraph(events=(("lose", frozenset()),))).any()


def test_co_event_needs_two_question_characters_in_one_event():
    table = _table(
        (3,),
        mentions=[_mention("Peter", 0, 1), _mention("Mr. McGregor", 0, 2)],
        events=[
            _event("chase", 0, 10, "Mr. McGregor", "Peter"),
            _event("chase", 0, 110, "Mr. McGregor"),
            _event("see", 0, 210, "Peter", "a cat"),
        ],
    )
    two = QueryGraph(names=("mcgregor", "peter"))
    assert co_event_signal(table, two).tolist() == [1.0, 0.0, 0.0]
    assert not co_event_signal(table, QueryGraph(names=("peter",))).any()


# -- z-scores and signal arrays ------------------------------------------------------------------
def test_zscore_standardises_and_is_zero_for_flat_scores():
    z = zscore(np.array([1.0, 2.0, 3.0, 6.0]))
    assert z.mean() == pytest.approx(0.0, abs=1e-6) and z.std() == pytest.approx(1.0)
    assert np.argsort(z).tolist() == [0, 1, 2, 3]
    assert not zscore(np.full(5, 7.0)).any()
    assert zscore(np.zeros(0)).shape == (0,)


def test_signals_standardise_lexical_and_dense_and_read_the_clause():
    table = _table((4,))
    query = np.array([0.0, 1.0, 0.0, 0.0])  # closest to passage 1
    sig = signals(
        table,
        np.array([0.0, 0.0, 5.0, 1.0]),
        query,
        QueryGraph(),
        TemporalCue("after", "x y", "after"),
        (np.array([9.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]), QueryGraph()),
    )
    assert int(np.argmax(sig.lexical)) == 2 and int(np.argmax(sig.dense)) == 1
    assert sig.lexical.mean() == pytest.approx(0.0, abs=1e-6)
    c_lex, c_dense, c_event = sig.clause
    assert int(np.argmax(c_lex)) == 0 and int(np.argmax(c_dense)) == 3 and not c_event.any()
    assert signals(table, np.zeros(4), query, QueryGraph()).clause is None


# -- fusion --------------------------------------------------------------------------------------
def test_fused_score_is_the_sum_of_weighted_parts():
    table = _table((5,))
    sig = _signals(5, lexical=[0, 1, 2, 3, 4], dense=[4, 0, 0, 0, 0], mention=[0, 1, 0, 0, 0])
    w = NarrativeWeights(lexical=0.5, dense=2.0, mention=3.0, anchor=0.0)
    total, parts = fuse(table, sig, w)
    assert np.allclose(total, sum(parts.values()))
    assert np.allclose(parts["dense"], [8, 0, 0, 0, 0]) and np.allclose(parts["mention"][1], 3.0)
    assert "anchor" not in parts and "edge" not in parts


def test_the_anchor_part_rewards_passages_after_the_best_clause_passage():
    table = _table((6,))
    clause = (np.array([0, 30.0, 0, 0, 0, 0]), np.zeros(6), np.zeros(6))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=2.0, anchor_reach=0.2,
                         anchor_self=0.25, anchor_side=0.0, anchor_confidence=0.5,
                         anchor_calibration=(0.0, 1.0, 0.0))
    after = _signals(6, cue=TemporalCue("after", "x y", "after"), clause=clause)
    part = fuse(table, after, w)[1]["anchor"]
    assert part[1] == pytest.approx(0.5) and part[0] == 0
    assert part[2] > part[3] > part[4] > part[5] > 0  # falling with the story distance
    before = _signals(6, cue=TemporalCue("before", "x y", "before"), clause=clause)
    part = fuse(table, before, w)[1]["anchor"]
    assert part[0] > 0 and part[1] == pytest.approx(0.5) and not part[2:].any()
    # switched off: no anchor part at all
    assert "anchor" not in fuse(table, after, w.without("anchor"))[1]


def test_an_unsure_anchor_gives_no_anchor_part():
    table = _table((8,))
    # two equally good places for the clause: no margin over the rival
    clause = (np.array([0, 3.0, 0, 0, 0, 3.0, 0, 0]), np.zeros(8), np.zeros(8))
    sig = _signals(8, cue=TemporalCue("after", "x y", "after"), clause=clause)
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=1.0, anchor_confidence=0.6,
                         anchor_calibration=(0.0, 1.0, 0.0))
    assert "anchor" not in fuse(table, sig, w)[1]
    assert "anchor" in fuse(table, sig, NarrativeWeights(**{**asdict(w), "anchor_confidence": 0.4}))[1]


def test_edge_leans_to_the_start_for_first_and_the_end_for_last():
    table = _table((5,))
    w = NarrativeWeights(lexical=0.0, dense=0.0, anchor=0.0, edge=1.0, continuation=-1.0)
    first = rank(table, _signals(5, cue=TemporalCue("first", "", "first")), w, 5)
    last = rank(table, _signals(5, cue=TemporalCue("last", "", "last")), w, 5)
    assert [r.row for r in first] == [0, 1, 2, 3, 4]
    assert [r.row for r in last] == [4, 3, 2, 1, 0]
    assert "edge" not in fuse(table, _signals(5, cue=TemporalCue("first", "", "first")),
                              w.without("edge"))[1]


# -- rank and continuation -----------------------------------------------------------------------
def test_rank_orders_by_fused_score_and_explains_it():
    table = _table((5,))
    ranked = rank(table, _signals(5, lexical=[0.1, 0.9, -1.0, 0.5, 0.0]), LEXICAL_ONLY, 5)
    assert [r.row for r in ranked] == [1, 3, 0, 4, 2]
    for r in ranked:
        assert r.continued_from is None
        assert r.score == pytest.approx(sum(r.contributions.values()), abs=1e-4)
        assert 0.0 not in r.contributions.values()
    assert len(rank(table, _signals(5, lexical=[0, 1, 2, 3, 4]), LEXICAL_ONLY, 2)) == 2
    assert rank(_table((0,), vectors=np.zeros((0, 4))), _signals(0), LEXICAL_ONLY, 3) == []


def test_a_strong_hit_brings_the_passage_that_follows_it():
    table = _table((7,))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=0.0, continuation=0.5)
    # rows 3 and 5 are within 0.5 of the best; row 0 is not, so row 1 is not brought by it
    ranked = rank(table, _signals(7, lexical=[2.0, -2.5, -1, 3.0, -2, 2.6, -3]), w, 7)
    assert [(r.row, r.continued_from) for r in ranked] == [
        (3, None), (4, 3), (5, None), (6, 5), (0, None), (2, None), (1, None)
    ]
    assert ranked[1].score == pytest.approx(-2.0)  # a continuation keeps its own score


def test_continuation_never_crosses_a_document_and_never_repeats_a_passage():
    table = _table((3, 3))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=0.0, continuation=10.0)
    # the best passage is the last of document 0: what follows it is another story
    ranked = rank(table, _signals(6, lexical=[0, 1, 5, 4.5, 0, 0]), w, 6)
    assert ranked[0].row == 2 and ranked[1].continued_from is None and ranked[1].row == 3
    assert [r.continued_from for r in ranked].count(2) == 0
    rows = [r.row for r in ranked]
    assert len(rows) == len(set(rows))
    # every continuation is the next passage of the same document as its parent
    for r in ranked:
        if r.continued_from is not None:
            assert r.row == r.continued_from + 1
            assert table.doc_of[r.row] == table.doc_of[r.continued_from]


def test_continuations_count_toward_the_limit():
    table = _table((6,))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=0.0, continuation=10.0)
    ranked = rank(table, _signals(6, lexical=[5, 0, 4, 0, 3, 0]), w, 3)
    assert [(r.row, r.continued_from) for r in ranked] == [(0, None), (1, 0), (2, None)]


def test_negative_continuation_never_continues():
    table = _table((6,))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=0.0).without("continuation")
    ranked = rank(table, _signals(6, lexical=[5, 0, 5, 0, 5, 0]), w, 6)
    assert all(r.continued_from is None for r in ranked)
    assert [r.row for r in ranked] == [0, 2, 4, 1, 3, 5]


# -- weights -------------------------------------------------------------------------------------
def test_without_switches_signals_off_and_keeps_the_rest():
    w = NarrativeWeights(lexical=0.7, dense=0.3, mention=0.2, anchor=2.0, continuation=0.4)
    off = w.without("lexical", "anchor", "continuation")
    assert (off.lexical, off.anchor, off.continuation) == (0.0, 0.0, -1.0)
    assert asdict(off) | {"lexical": 0.7, "anchor": 2.0, "continuation": 0.4} == asdict(w)
    assert w.lexical == 0.7  # the original is untouched
    assert w.without() == w
    for name in SIGNALS:
        assert getattr(w.without(name), name) == 0.0
    with pytest.raises(ValueError, match="unknown signal"):
        w.without("bogus")


def test_fitted_weights_come_from_the_shipped_file_and_ignore_unknown_keys(tmp_path, monkeypatch):
    path = tmp_path / "weights.json"
    monkeypatch.setattr(narrative, "WEIGHTS_PATH", path)
    assert NarrativeWeights.fitted() == NarrativeWeights()  # no file: the class defaults
    path.write_text(json.dumps({"weights": {"lexical": 0.9, "anchor_reach": 0.1, "future": 1,
                                            "anchor_calibration": [1.0, 2.0, 3.0]}}))
    fitted = NarrativeWeights.fitted()
    assert (fitted.lexical, fitted.anchor_reach) == (0.9, 0.1)
    assert fitted.anchor_calibration == (1.0, 2.0, 3.0)
    assert fitted.dense == NarrativeWeights().dense


# -- direction of a before / after question ------------------------------------------------------
def _clause_at(n: int, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clause signals that make ``row`` the anchor passage."""
    peak = np.zeros(n, dtype=np.float32)
    peak[row] = 30.0
    return peak, peak, np.zeros(n, dtype=np.float32)


def test_a_before_question_continues_toward_the_story_before_a_hit():
    table = _table((6,))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=0.0, continuation=0.0)
    before = _signals(6, lexical=[0, 0, 0, 5, 0, 0], cue=TemporalCue("before", "x", "before"))
    after = _signals(6, lexical=[0, 0, 0, 5, 0, 0], cue=TemporalCue("after", "x", "after"))
    assert [(r.row, r.continued_from) for r in rank(table, before, w, 2)] == [(3, None), (2, 3)]
    assert [(r.row, r.continued_from) for r in rank(table, after, w, 2)] == [(3, None), (4, 3)]


@pytest.mark.parametrize("relation", ["after", "before"])
def test_anchor_side_costs_the_side_the_question_does_not_look_at(relation):
    table = _table((7, 3))
    w = NarrativeWeights(lexical=1.0, dense=0.0, anchor=1.0, anchor_side=0.5, anchor_reach=0.05,
                         continuation=-1.0, anchor_confidence=0.5,
                         anchor_calibration=(0.0, 1.0, 0.0))
    sig = _signals(10, cue=TemporalCue(relation, "x", relation), clause=_clause_at(10, 3))
    _, parts = fuse(table, sig, w)
    anchor = parts["anchor"]
    located = locate_anchor(table, sig.cue, sig.clause, w)
    assert located is not None and located.used
    for row in range(7):  # document 0 holds the anchor (row 3)
        wrong = row < 3 if relation == "after" else row > 3
        if wrong:  # the side cost, scaled by how sure the anchor is
            assert anchor[row] == pytest.approx(-0.5 * side_cost(located.confidence))
        else:
            assert anchor[row] >= 0.0
    assert np.all(anchor[7:] == 0.0), "another document is on no side of the anchor"
    off = fuse(table, sig, NarrativeWeights(**{**asdict(w), "anchor_side": 0.0}))[1]["anchor"]
    assert np.all(off >= 0.0)


def test_the_question_light_verbs_name_no_event():
    nodes = [
        GraphNode(id="e1", kind=NodeKind.EVENT, text="did Peter do", doc_id="q", pos=(0, 0, 1),
                  attrs={"lemma": "do", "participants": ["Peter"]}),
        GraphNode(id="e2", kind=NodeKind.EVENT, text="what happened", doc_id="q", pos=(0, 0, 1),
                  attrs={"lemma": "happen", "participants": []}),
        GraphNode(id="e3", kind=NodeKind.EVENT, text="he lost his shoes", doc_id="q",
                  pos=(0, 0, 1), attrs={"lemma": "lose", "participants": ["Peter"]}),
    ]
    graph = QueryGraph.from_nodes(nodes)
    assert [lemma for lemma, _ in graph.events] == ["lose"]
    assert all(verb not in [lemma for lemma, _ in graph.events] for verb in narrative.LIGHT_VERBS)


def test_the_class_defaults_are_the_shipped_fitted_weights():
    from dataclasses import fields

    shipped = json.loads(narrative.WEIGHTS_PATH.read_text(encoding="utf-8"))["weights"]
    assert set(shipped) == {f.name for f in fields(NarrativeWeights)}
    assert NarrativeWeights.fitted() == NarrativeWeights()
