"""A set's pooled features (``SetConflicts``) say exactly what checking every cross pair with
``fusion.in_conflict`` says, before and after sets are pooled."""

from __future__ import annotations

import random
from typing import Sequence

import pytest

from llama_index_e2rag.extract.event_graph.conflicts import SetConflicts
from llama_index_e2rag.extract.event_graph.fusion import Group, ambiguous_tokens, in_conflict

from .name_groups import random_groups

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
