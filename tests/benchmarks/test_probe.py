"""Probes of the novel protocol (``benchmarks/novels/probe.py``) on the real offline default:
each ranks the shipped mode's signals its own way, and only that way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document

from benchmarks.novels.evaluate import Config
from benchmarks.novels.probe import Probe, ProbeRetriever
from llama_index_e2rag import E2RAGIndex
from llama_index_e2rag.retrievers.passage_cache import narrative_state
from llama_index_e2rag.ranking.narrative import NarrativeWeights

from novel_stories import VARIANTS, build

QUESTIONS = (VARIANTS[2].plain_question, VARIANTS[2].after_question,
             "Who wrote a long letter and then tore it up?")


@pytest.fixture(scope="module")
def index():
    pytest.importorskip("spacy")
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    try:
        embed = MiniLMEmbedding()
    except Exception as exc:  # the offline model package is not installed
        pytest.skip(f"no offline MiniLM: {exc}")
    story = build(VARIANTS[2])
    return E2RAGIndex.from_documents([Document(text=story.text, id_="story")], embed_model=embed)


def _rows(index, nodes) -> list[int]:
    table = narrative_state(index.stores).table
    by_text = {n.text: i for i, n in enumerate(
        index.stores.graph.get_nodes(list(table.ids)))}
    return [by_text[n.node.get_content()] for n in nodes]


def test_probes_parse_and_refuse_what_they_do_not_know():
    assert Probe.parse("units:3") == Probe("units", 3.0)
    assert Probe.parse("pronouns") == Probe("pronouns", 0.0)
    with pytest.raises(ValueError, match="unknown probe"):
        Probe.parse("tree")
    with pytest.raises(ValueError, match="needs a value"):
        Probe.parse("mmr")
    with pytest.raises(ValueError, match="unknown probe"):
        Config.parse({"name": "x", "probe": "trees:2"})


@pytest.mark.parametrize("size", [2, 3])
def test_units_are_whole_blocks_of_consecutive_passages(index, size):
    probe = ProbeRetriever(index, Probe("units", size), 300, NarrativeWeights.fitted())
    for question in QUESTIONS:
        rows = _rows(index, probe.retrieve(question))
        blocks = [rows[i:i + size] for i in range(0, len(rows), size)]
        for block in blocks[:-1]:  # the last block may be a document's short tail
            assert block == list(range(block[0], block[0] + size)) and block[0] % size == 0


def test_diversity_trades_score_for_passages_unlike_those_taken(index):
    table = narrative_state(index.stores).table
    spread = {}
    for penalty in (0.0, 50.0):
        probe = ProbeRetriever(index, Probe("mmr", penalty), 300, NarrativeWeights.fitted())
        rows = _rows(index, probe.retrieve(QUESTIONS[2]))
        vectors = table.vectors[rows]
        sims = vectors @ vectors.T
        spread[penalty] = float(sims[np.triu_indices(len(rows), 1)].mean())
        if penalty == 0.0:
            scores = [n.score for n in probe.retrieve(QUESTIONS[2])]
            assert scores == sorted(scores, reverse=True)  # no penalty: the fused order
    assert spread[50.0] < spread[0.0]


def test_chapters_give_every_passage_of_a_chapter_the_same_lift(index):
    table = narrative_state(index.stores).table
    probe = ProbeRetriever(index, Probe("chapters"), 300, NarrativeWeights.fitted())
    _, sig = probe._inner.signals(QUESTIONS[0])
    lift = probe._chapter_signal(sig)
    assert np.unique(table.chapters).size > 2
    for chapter in np.unique(table.chapters):
        assert np.unique(lift[table.chapters == chapter]).size == 1
    assert np.unique(lift).size > 1


PRONOUN_STORY = (
    "Clara Vane walked to the mill on a grey morning, carrying a basket of apples for the "
    "miller's children. The path was wet, and the hedges dripped on either side of the lane.\n\n"
    "She stopped at the bridge and looked down at the brown water for a long time. Then she "
    "went on, slower than before, and sang an old song under her breath as she walked.\n\n"
    "The miller met her at the gate. He took the basket, thanked her twice, and asked whether "
    "the rain would hold off until the harvest was in.\n\n"
    "Mr. Quill kept the accounts at the mill and counted the money twice every evening. He "
    "found it a shilling short again and said nothing to anyone about it."
)


def test_resolved_pronouns_put_the_name_into_the_passage_text(index):
    embed = index.embed_model
    small = E2RAGIndex.from_documents([Document(text=PRONOUN_STORY, id_="pronouns")],
                                      embed_model=embed)
    table = narrative_state(small.stores).table
    texts = [n.text for n in small.stores.graph.get_nodes(list(table.ids))]
    probe = ProbeRetriever(small, Probe("pronouns"), 300, NarrativeWeights.fitted())
    _, plain = probe._inner.signals("Clara")
    augmented = probe._with_pronouns(plain, "Clara").lexical
    resolved = sorted({int(r) for name, rows in table.names.items()
                       if "clara" in name.split() and name in table.named
                       for r in rows if "clara" not in texts[r].lower()})
    assert resolved, "the parser resolved no pronoun to Clara"
    others = [r for r in range(len(table)) if r not in resolved and "clara" not in texts[r].lower()]
    assert np.all(augmented[resolved] > plain.lexical[resolved])
    assert np.all(augmented[resolved] > augmented[others].max())
