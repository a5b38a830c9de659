"""SentGraph's LLM-free discourse rules on the real spaCy pipeline: connectives type relations,
subordinating ones demote a sentence, satellites attach to a nucleus."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from llama_index_e2rag.extract.sentence_graph.discourse import (
    attach,
    core_scores,
    opening_cue,
    parser_relations,
    split_core,
)
from llama_index_e2rag.extract.sentence_graph.relations import (
    NN_TYPES,
    NS_TYPES,
    normalise_type,
    rst_edge,
)
from llama_index_e2rag.extract.sentence_graph.segments import ner_entities, sentence_nodes
from llama_index_e2rag.schema import EdgeKind

#: (class, type, cue) of the rst edge between two sentence numbers.
Relations = dict[tuple[int, int], tuple[str, str, Optional[str]]]


def analyse(
    text: str, nlp: Any, ratio: float = 0.5
) -> tuple[list[bool], dict[int, int], Relations]:
    """Core flags, attachments and rst edges of ``text`` taken as one segment."""
    nodes = sentence_nodes(text, "doc", 0, [])
    entities = ner_entities(nodes, lambda texts: list(nlp.pipe(texts)))
    for node, found in zip(nodes, entities):
        node.attrs["entities"] = sorted(found)
    cues = [opening_cue(node.text, nlp) for node in nodes]
    texts = [node.text for node in nodes]
    is_core = split_core(core_scores(texts, entities), cues, ratio)
    nucleus = attach(texts, is_core, cues)
    number = {node.id: i for i, node in enumerate(nodes)}
    relations = {}
    for edge in parser_relations(nodes, is_core, nucleus, cues):
        assert edge.kind == EdgeKind.RST and edge.doc_id == "doc"
        key = (number[edge.source], number[edge.target])
        relations[key] = (edge.attrs["class"], edge.role, edge.attrs["cue"])
    return is_core, nucleus, relations


def test_story_with_clear_connectives(nlp: Any) -> None:
    text = (
        "Tom missed the train. Because the road was closed, he walked. But the rain kept "
        "falling. Then he reached the river. After that, he crossed the bridge. So he arrived late."
    )
    is_core, nucleus, relations = analyse(text, nlp)
    assert is_core == [True, False, True, True, True, False]
    assert nucleus == {1: 0, 5: 4}
    assert relations == {
        (0, 1): ("N-S", "cause", "because"),
        (0, 2): ("N-N", "contrast", "but"),
        (2, 3): ("N-N", "sequence", "then"),
        (3, 4): ("N-N", "sequence", "after that"),
        (4, 5): ("N-S", "result", "so"),
    }


# Each connective over several two-sentence texts: (sentence B's role, relation) must hold for
# every one of them, so the rule is the connective, not one sentence.
CONNECTIVE_CASES = {
    "because": (
        ("N-S", "cause"),
        [
            "Ann Lee stayed home. Because she was sick, she missed the party.",
            "The Elm Street bridge closed. Because the river flooded, traffic stopped.",
            "Mark Hale sold his car. Because fuel was expensive, he took the bus.",
        ],
    ),
    "but": (
        ("N-N", "contrast"),
        [
            "Ann Lee wanted to sing. But the choir in Boston had no room.",
            "The team trained hard all winter. But they lost the final in Madrid.",
            "Mark Hale loved Paris. But his wife preferred the quiet of Lyon.",
        ],
    ),
    "then": (
        ("N-N", "sequence"),
        [
            "Ann Lee opened the letter. Then she called her brother in Dublin.",
            "The army crossed the Rhine. Then it marched north for ten days.",
            "Mark Hale finished the novel. Then he sent it to a publisher in London.",
        ],
    ),
    "after": (
        ("N-N", "sequence"),
        [
            "Ann Lee packed her bags. After that, she drove to Chicago.",
            "The storm hit the coast of Maine. After it passed, the village counted the damage.",
            "Mark Hale won the election. After he took office, taxes rose.",
        ],
    ),
    "so": (
        ("N-S", "result"),
        [
            "Ann Lee missed the last bus. So she walked home through the park.",
            "The mill in Leeds closed in 1920. So many families left the town.",
            "Mark Hale forgot his keys. So he slept at his sister's flat.",
        ],
    ),
}


@pytest.mark.parametrize("connective", sorted(CONNECTIVE_CASES))
def test_connective_types_the_relation_to_the_sentence_before(nlp: Any, connective: str) -> None:
    (cls, type_), texts = CONNECTIVE_CASES[connective]
    for text in texts:
        is_core, nucleus, relations = analyse(text, nlp)
        assert list(relations) == [(0, 1)], text
        got_cls, got_type, cue = relations[(0, 1)]
        assert (got_cls, got_type) == (cls, type_), text
        assert cue is not None and cue.split()[0] == connective, text
        # N-N joins two core sentences; an N-S satellite is demoted and hangs from sentence 0
        assert is_core == [True, cls == "N-N"], text
        assert nucleus == ({} if cls == "N-N" else {1: 0}), text


def test_ambiguous_openers_need_the_parse(nlp: Any) -> None:
    assert opening_cue("Since 1990, he has lived in Paris.", nlp)[1].ns == "circumstance"
    assert opening_cue("Since he was ill, he stayed home.", nlp)[1].ns == "cause"
    assert opening_cue("After the war, she moved to Rome.", nlp)[1].ns == "circumstance"
    assert opening_cue("After he left, she cried.", nlp)[1].nn == "sequence"
    assert opening_cue("As a child, he sang in a choir.", nlp)[1].ns == "circumstance"
    assert opening_cue("As he was tired, he slept.", nlp)[1].ns == "cause"
    assert opening_cue("In Paris, they met again.", nlp)[1].ns == "circumstance"
    assert opening_cue("In my opinion, it failed.", nlp) is None
    # without a parser a number after the opener marks a phrase, anything else a clause
    assert opening_cue("Since 1990, he has lived in Paris.")[1].ns == "circumstance"
    assert opening_cue("Since he was ill, he stayed home.")[1].ns == "cause"


def test_lexicon_matches_whole_words_and_comma_only_phrases() -> None:
    assert opening_cue("Andrew came home.") is None  # "and" is not a prefix match
    assert opening_cue("Sofia sang.") is None
    assert opening_cue("That is the house.") is None
    assert opening_cue("That is, he lied.")[0] == "that is"
    assert opening_cue("Still water runs deep.") is None
    assert opening_cue("Still, he went.")[1].ns == "opposition"
    assert opening_cue('"However, nobody came," she said.')[1].nn == "contrast"
    assert opening_cue("As a result, prices fell.")[0] == "as a result"


def test_example_is_supplementary_and_attached_to_the_most_similar_core(nlp: Any) -> None:
    text = (
        "Lanternfield records albums in an old barn near Oslo. "
        "Tomas Reyes joined the group in 2004. "
        "For example, the band recorded three albums in the barn."
    )
    is_core, nucleus, relations = analyse(text, nlp, ratio=1.0)
    assert is_core == [True, True, False]
    # the similar sentence 0 wins over the adjacent sentence 1
    assert nucleus == {2: 0}
    assert relations[(0, 2)] == ("N-S", "elaboration", "for example")
    assert relations[(0, 1)] == ("N-N", "conjunction", None)  # adjacent cores, default link


def test_entity_bearing_first_sentence_is_core_and_uncued_satellites_elaborate(nlp: Any) -> None:
    text = (
        "Ada Finch painted the harbour of Genoa. The light there was soft. "
        "The boats were small and painted blue."
    )
    is_core, nucleus, relations = analyse(text, nlp)
    assert is_core[0] and sum(is_core) == 2
    for satellite, head in nucleus.items():
        assert relations[(head, satellite)] == ("N-S", "elaboration", None)


def test_split_core_keeps_a_nucleus_and_never_promotes_demoted_sentences() -> None:
    because = opening_cue("Because it rained.")
    but = opening_cue("But it stopped.")
    assert split_core([0.1, 0.9], [because, because], 0.5) == [False, True]
    assert split_core([2.0, 0.0, 1.0, 0.5], [None, because, None, None], 0.5) == [
        True,
        False,
        True,
        False,
    ]
    # a multinuclear connective after the first sentence joins the core as an equal
    assert split_core([2.0, 0.0], [None, but], 0.5) == [True, True]


def test_given_core_split_types_non_demoting_satellites_by_their_n_s_column(nlp: Any) -> None:
    """``parser_relations`` takes any core split (the LLM path passes its own)."""
    nodes = sentence_nodes("Ann Lee sang. But nobody listened.", "doc", 0, [])
    for node in nodes:
        node.attrs["entities"] = []
    cues = [opening_cue(node.text, nlp) for node in nodes]
    (edge,) = parser_relations(nodes, [True, False], {1: 0}, cues)
    assert (edge.attrs["class"], edge.role, edge.attrs["source"]) == ("N-S", "opposition", "parser")
    assert edge.attrs["description"] == "cue 'but'"


def test_relation_names_and_edges() -> None:
    assert normalise_type("Multinuclear Restatement") == "restatement"
    assert normalise_type("cause") == "cause"
    assert normalise_type("friendship") is None
    assert set(NN_TYPES).isdisjoint(NS_TYPES)
    with pytest.raises(ValueError, match="not an N-N relation type"):
        rst_edge("a", "b", "N-N", "cause", "doc", "parser")
