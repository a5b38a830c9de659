"""Coarse-to-fine on the real default (spaCy + MiniLM): in a novel, a passage inside the stretch
of story a question paraphrases outranks the same words elsewhere; a short story is unchanged."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.schema import NodeWithScore

from llama_index_e2rag import E2RAGIndex
from llama_index_e2rag.ranking.narrative import NarrativeWeights
from llama_index_e2rag.context.keys import SIGNALS_KEY

from novel_stories import VARIANTS, build

#: said once inside the regatta and once in an ordinary chapter, word for word
TWIN = "Old Mr. Pruett stood by the railings with his hat in his hand and shouted himself hoarse."
QUESTION = "Who shouted when the boats raced on the river for the silver cup at the regatta?"
_SCENE = (
    "The {boat} pulled away from the bank with {crew} at the oars.",
    "Along the towpath the crowd pressed forward to watch the {boat} race the {other}.",
    "The umpire's launch followed the boats down the river, its flag snapping.",
    "{crew} feathered the oars badly at the bend, and the {other} drew level.",
    "The silver cup stood on a table under the awning, polished for the regatta.",
    "A gun fired from the boathouse, and the second heat of the regatta began.",
    "Spray flew from the blades as the {boat} came past the willows.",
    "On the landing stage the stewards argued about whether the {other} had fouled.",
    "The river was crowded with punts and skiffs whose owners had come to see the race.",
    "{crew} rested on the oars and looked back at the {other}, two lengths behind.",
)
_BOATS = ("Kingfisher", "Heron", "Swallow", "Otter", "Dabchick")
_CREWS = ("the Fenwick brothers", "the college four", "the ferryman's sons", "the bank clerks")


def _scene(rng: random.Random, sentences: int) -> str:
    lines = []
    for _ in range(sentences):
        boat, other = rng.sample(_BOATS, 2)
        lines.append(rng.choice(_SCENE).format(boat=boat, other=other, crew=rng.choice(_CREWS)))
    return " ".join(lines)


def _novel() -> tuple[str, int, int]:
    """A novel-length story (over ``long_chars``) with a regatta chapter near its end and the
    twin sentence in an early ordinary chapter and inside the regatta: (text, early, inside)."""
    story = build(VARIANTS[1])
    rng = random.Random("regatta")
    paragraphs = story.text.split("\n\n")
    early = len(paragraphs) // 5
    regatta = ["CHAPTER XX. The Regatta", _scene(rng, 14), _scene(rng, 10), TWIN,
               _scene(rng, 12), _scene(rng, 14)]
    paragraphs = paragraphs[:early] + [TWIN] + paragraphs[early:-2] + regatta + paragraphs[-2:]
    text = "\n\n".join(paragraphs)
    first = text.index(TWIN)
    return text, first, text.index(TWIN, first + 1)


@pytest.fixture(scope="module")
def embed(offline):
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    return MiniLMEmbedding()


def _rank_of(results: list[NodeWithScore], at: int) -> int:
    for rank, r in enumerate(results):
        if r.node.start_char_idx <= at < r.node.end_char_idx:
            return rank
    return len(results)


def _retrieve(index: E2RAGIndex, question: str = QUESTION, **kwargs) -> list[NodeWithScore]:
    return index.as_retriever(mode="narrative", similarity_top_k=200, **kwargs).retrieve(question)


def test_the_twin_inside_the_paraphrased_stretch_outranks_the_one_elsewhere(embed):
    text, early, inside = _novel()
    assert len(text) > NarrativeWeights.fitted().long_chars
    index = E2RAGIndex.from_documents([Document(text=text, id_="regatta")], embed_model=embed)
    on = _retrieve(index)
    off = _retrieve(index, disable=("section",))
    lift = {r.node.node_id: r.node.metadata[SIGNALS_KEY].get("section", 0.0) for r in on}
    at_inside, at_early = on[_rank_of(on, inside)], on[_rank_of(on, early)]
    assert lift[at_inside.node.node_id] > 0 > lift[at_early.node.node_id]
    assert _rank_of(on, inside) < _rank_of(on, early)
    # the section moved them apart: the inside twin gained on the early one
    gap_on = at_inside.score - at_early.score
    gap_off = off[_rank_of(off, inside)].score - off[_rank_of(off, early)].score
    assert gap_on > gap_off
    assert not any("section" in r.node.metadata[SIGNALS_KEY] for r in off)


def test_a_story_shorter_than_a_novel_ranks_the_same_with_sections_on_or_off(embed):
    story = build(VARIANTS[2])
    assert len(story.text) < NarrativeWeights.fitted().long_chars
    index = E2RAGIndex.from_documents([Document(text=story.text, id_="short")], embed_model=embed)
    for question in (QUESTION, VARIANTS[2].plain_question, VARIANTS[2].after_question):
        on = _retrieve(index, question)
        off = _retrieve(index, question, disable=("section",))
        assert [(r.node.node_id, r.score) for r in on] == [(r.node.node_id, r.score) for r in off]
