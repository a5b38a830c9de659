"""The narrative mode over a graph an LLM built (scripted LLM, hash embedding).

LLM-extracted mentions carry one span at most (their first occurrence); the passage table also
finds them by name in the passages of their chunk, so the mention signal works for LLM graphs too.
"""

from __future__ import annotations

import pytest
from test_index import make_index

from llama_index_e2rag.retrievers.passage_cache import narrative_state
from llama_index_e2rag.context.keys import RAW_SCORE_KEY
from llama_index_e2rag.context.keys import RANK_KEY, STORY_MATCH_KEY
from llama_index_e2rag.ranking.narrative import NarrativeWeights, mention_signal
from llama_index_e2rag.schema import NodeKind, normalize_text


def test_llm_mentions_are_placed_in_the_passages_that_name_them() -> None:
    index = make_index()
    mentions = index.graph_store.nodes(NodeKind.MENTION)
    assert mentions and not any(m.attrs.get("spans") for m in mentions)
    table = narrative_state(index.stores).table
    passages = {p.id: p for p in index.graph_store.nodes(NodeKind.PASSAGE)}
    for name, rows in table.names.items():
        for row in rows:
            text = f" {normalize_text(passages[table.ids[row]].text)} "
            assert f" {name} " in text
    assert len(table.names.get("neville", ())) > 0
    signal = mention_signal(table, ["neville"])
    named = {table.ids[r] for r in table.names["neville"]}
    for row, value in enumerate(signal):
        assert (value > 0) == (table.ids[row] in named)


@pytest.mark.spacy  # the question's answer type is parsed by spaCy (ranking/answer_types)
def test_narrative_retrieval_works_on_an_llm_graph_and_uses_the_mention_signal() -> None:
    index = make_index()
    weights = NarrativeWeights(lexical=0.0, dense=0.0, mention=1.0, event=0.0, co_event=0.0,
                               anchor=0.0, edge=0.0, continuation=-1.0)
    nodes = index.as_retriever(weights=weights, similarity_top_k=3).retrieve(
        "Where did Neville search?"
    )
    assert "neville" in normalize_text(nodes[0].node.text)
    for node in nodes:  # only the mention signal speaks, and only where Neville is named
        named = "neville" in normalize_text(node.node.text)
        signals = dict(node.node.metadata["signals"])
        raw = signals.pop(RAW_SCORE_KEY)
        signals.pop(STORY_MATCH_KEY)  # these two calibrate the score; not signals of the passage
        signals.pop(RANK_KEY)
        assert signals == ({"mention": raw} if named else {})
