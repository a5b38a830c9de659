"""Random name groups for the fusion tests: names with titles, shared surnames, lone surnames,
noun phrases and mixed types, the cases E²GraphRAG's conflict rules tell apart."""

from __future__ import annotations

import random

from llama_index_e2rag.extract.event_graph.fusion import Group, mention_groups
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
