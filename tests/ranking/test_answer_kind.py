"""ranking.answer_kind: typed mention names and the ``answer_type`` signal (pure, synthetic)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_e2rag.ranking.answer_kind import answer_type_signal, name_kind
from llama_index_e2rag.ranking.narrative import (
    NarrativeWeights,
    QueryGraph,
    Signals,
    build_table,
    fuse,
    signals,
)
from llama_index_e2rag.schema import GraphNode, NodeKind

#: One passage per sentence; each mention below is written where its offsets say.
TEXTS = [
    "Peter ran down the lane.",          # 0: Peter
    "The old woman shouted at him.",   # 1: a person noun
    "Then he hid under the bridge.",    # 2: "he" resolved to Peter; a place
    "Next morning the rain stopped.",   # 3: a time
    "Anna laughed at the rain.",        # 4: a PERSON entity
    "The rain fell on the roofs.",      # 5: nothing typed
]


def _passages() -> list[GraphNode]:
    out, start = [], 0
    for i, text in enumerate(TEXTS):
        out.append(GraphNode(id=f"p{i}", kind=NodeKind.PASSAGE, text=text, doc_id="d",
                             pos=(0, start, 3), span=(start, start + len(text))))
        start += len(text) + 1
    return out


def _mention(passages: list[GraphNode], name: str, entity_type: str,
             *written: tuple[int, str]) -> GraphNode:
    """A parser mention whose occurrences are ``words`` in passage ``row`` (first occurrence)."""
    spans = []
    for row, words in written:
        at = passages[row].span[0] + passages[row].text.index(words)
        spans.append([at, at + len(words)])
    return GraphNode(id=f"m-{name}", kind=NodeKind.MENTION, text=name, name=name, doc_id="d",
                     pos=(0, spans[0][0], 2), span=tuple(spans[0]),
                     attrs={"entity_type": entity_type, "spans": spans})


def _table():
    passages = _passages()
    mentions = [
        _mention(passages, "Peter", "PERSON", (0, "Peter"), (2, "he")),
        _mention(passages, "old woman", "concept", (1, "old woman")),
        _mention(passages, "bridge", "concept", (2, "bridge")),
        _mention(passages, "Next morning", "concept", (3, "Next morning")),
        _mention(passages, "Anna", "PERSON", (4, "Anna")),
        _mention(passages, "rain", "concept", (3, "rain"), (4, "rain"), (5, "rain")),
    ]
    vectors = np.eye(len(passages), 8, dtype=np.float32) + 0.1
    return build_table(passages, vectors, mentions, [])


@pytest.mark.parametrize(
    ("name", "entity_type", "kind"),
    [
        ("peter", "PERSON", "who"),
        ("old woman", "concept", "who"),     # a people noun at the head
        ("the kings men", "concept", "who"),
        ("paris", "GPE", "where"),
        ("dark forest", "concept", "where"),
        ("camelot", "location", "where"),    # an LLM's entity type
        ("next morning", "concept", "when"),
        ("1812", "DATE", "when"),
        ("apple", "concept", None),
        ("morning star", "concept", None),   # the head word decides, not any word
    ],
)
def test_a_name_offers_the_kind_of_its_entity_type_or_head_word(name, entity_type, kind):
    assert name_kind(name, entity_type) == kind


def test_a_typed_name_counts_only_where_it_is_written_not_where_a_pronoun_stands_for_it():
    table = _table()
    assert table.names["peter"].tolist() == [0, 2]  # the mention signal keeps the pronoun
    assert table.typed["who"]["peter"].tolist() == [0]
    assert not any("rain" in by_name for by_name in table.typed.values())


def _answer_rows(table, kind, names=()) -> list[int]:
    sig = signals(table, np.zeros(len(table)), np.ones(8), QueryGraph(tuple(names)), kind=kind)
    return np.flatnonzero(sig.answer_type).tolist()


def test_a_who_question_flags_passages_naming_a_person_the_question_does_not():
    table = _table()
    assert _answer_rows(table, "who") == [0, 1, 4]
    # "Who shouted at Peter?": Peter is the question's, not an answer
    assert _answer_rows(table, "who", ["peter"]) == [1, 4]
    # a question name reaches the mention names it refers to ("woman" ~ "old woman")
    assert _answer_rows(table, "who", ["peter", "woman"]) == [4]


def test_where_and_when_questions_flag_places_and_times_and_other_questions_nothing():
    table = _table()
    assert _answer_rows(table, "where") == [2]
    assert _answer_rows(table, "when") == [3]
    for kind in ("why", "other", None):
        assert _answer_rows(table, kind) == []


def test_the_signal_is_a_flag_whatever_the_share_of_passages_flagged():
    typed = {"who": {"a": np.array([0, 1, 2]), "b": np.array([2])},
             "where": {"c": np.array([3])}}
    out = answer_type_signal(typed, 5, "who", ())
    assert out.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_fusion_adds_the_weighted_flag_and_disable_takes_it_away():
    table = _table()
    zero = np.zeros(len(table), dtype=np.float32)
    flag = np.array([0, 1, 0, 0, 1, 0], dtype=np.float32)
    sig = Signals(lexical=zero, dense=zero, mention=zero, event=zero, co_event=zero,
                  answer_type=flag)
    w = NarrativeWeights(lexical=0.0, dense=0.0, anchor=0.0, answer_type=0.7)
    total, parts = fuse(table, sig, w)
    assert parts["answer_type"].tolist() == pytest.approx((0.7 * flag).tolist())
    assert total.tolist() == pytest.approx((0.7 * flag).tolist())
    total, parts = fuse(table, sig, w.without("answer_type"))
    assert "answer_type" not in parts and not total.any()
