"""A set's pooled features (``SetConflicts``) say exactly what checking every cross pair with
``fusion.in_conflict`` says, before and after sets are pooled."""

from __future__ import annotations

import random
from typing import Sequence

import pytest

from llama_index_e2rag.extract.event_graph.conflicts import SetConflicts
from llama_index_e2rag.extract.event_graph.fusion import (
    Group,
    ambiguous_tokens,
    in_conflict,
    mention_groups,
)
from llama_index_e2rag.schema import GraphNode, NodeKind

TITLES = ["", "Mr.", "Mrs.", "Miss", "Dr.", "Lady", "Sir"]
FIRST = ["Vernon", "Petunia", "Harry", "Hermione", "Dudley", "Albus"]
LAST = ["Dursley", "Potter", "Granger", "Dumbledore"]
THINGS = ["the wand", "the old wand", "the door", "his sister", "the boy", "the old man"]
TYPES = ["person", "person", "person", "concept", "location", None]


def random_groups(rng: random.Random, n: int) -> list[Group]:
    """Names with titles, shared surnames, lone surnames, noun phrases, mixed types."""
    mentions = []
    for k in range(n):
        shape = rng.random()
        if shape < 0.5:
            name = " ".join(
                p for p in (rng.choice(TITLES), rng.choice(FIRST), rng.choice(LAST)) if p
            )
        elif shape < 0.75:
            name = " ".join(p for p in (rng.choice(TITLES), rng.choice(FIRST + LAST)) if p)
        else:
            name = rng.choice(THINGS)
        entity_type = rng.choice(TYPES)
        attrs: dict[str, object] = {"entity_type": entity_type} if entity_type else {}
        if rng.random() < 0.2:
            attrs["nominal"] = True
        mentions.append(
            GraphNode(
                id=f"m{k}", kind=NodeKind.MENTION, text=name, doc_id="d", pos=(0, k, 2),
                chunk_id="c0", name=name, attrs=attrs,
            )
        )
    return mention_groups(mentions)


def pooled(groups: Sequence[Group], ambiguous: frozenset[str]) -> SetConflicts:
    summary = SetConflicts.of(groups[0], ambiguous)
    for group in groups[1:]:
        summary.absorb(SetConflicts.of(group, ambiguous))
    return summary


@pytest.mark.parametrize("seed", range(30))
def test_pooled_sets_clash_exactly_when_some_cross_pair_is_in_conflict(seed: int) -> None:
    rng = random.Random(seed)
    groups = random_groups(rng, 40)
    ambiguous = ambiguous_tokens(groups)
    clashes = 0
    for _ in range(60):
        a = rng.sample(groups, rng.randint(1, 4))
        b = rng.sample(groups, rng.randint(1, 4))
        pairwise = any(in_conflict(x, y, ambiguous) for x in a for y in b)
        assert pooled(a, ambiguous).clashes(pooled(b, ambiguous)) == pairwise, (
            [g.name for g in a], [g.name for g in b]
        )
        clashes += pairwise
    assert 0 < clashes < 60  # both answers were exercised
