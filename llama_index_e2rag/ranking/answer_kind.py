"""The ``answer_type`` signal: a passage that names the kind of thing the question asks for.

A *who* question's answer passage names a person the question does not, a *where* question's a
place, a *when* question's a time (``answer_types.answer_type`` reads the wh-word). The extractive
answer finds such words by parsing each sentence; a ranking over a whole book cannot parse every
passage per question, so the index's own mentions are typed once, when the ``PassageTable`` is
built: by their entity type (the parser's PERSON, GPE, DATE …; an LLM's "person", "location")
or, for the parser's plain nouns, by their head word ("the old woman", "the forest", "next
morning"). Only occurrences where the name is written count: a pronoun the parser resolved to a
person ("he") shows no answer.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from llama_index_e2rag.ranking.answer_types import PERSON_NOUNS, TEMPORAL_NOUNS

#: The answer kinds this signal knows (``answer_types.AnswerType`` values).
KINDS = ("who", "where", "when")
_PERSON_TYPES = frozenset({"PERSON", "NORP", "CHARACTER", "PEOPLE"})
_PLACE_TYPES = frozenset({"GPE", "LOC", "FAC", "LOCATION", "PLACE", "GEO"})
_TIME_TYPES = frozenset({"DATE", "TIME"})
#: Head nouns of places in stories, so "the forest" offers a *where* answer (spaCy's small
#: model labels few of them GPE/LOC/FAC).
PLACE_NOUNS = frozenset(
    """house home hut cottage cabin castle palace tower hall room kitchen chamber cellar garden
    forest wood woods field meadow farm village town city kingdom country land island mountain
    hill valley cave river lake sea shore beach well spring road path bridge church temple
    market inn shop mill stable barn door gate window bed fire sky heaven earth world ground
    tree bush rock stone pond stream ocean court yard street camp tent nest hole lodge""".split()
)


def name_kind(name: str, entity_type: Optional[str]) -> Optional[str]:
    """The answer kind a mention name offers (``KINDS``), or None."""
    label = (entity_type or "").strip().upper()
    words = name.split()
    head = words[-1] if words else ""
    if label in _PERSON_TYPES or head in PERSON_NOUNS:
        return "who"
    if label in _PLACE_TYPES or head in PLACE_NOUNS:
        return "where"
    if label in _TIME_TYPES or head in TEMPORAL_NOUNS:
        return "when"
    return None


def answer_type_signal(
    typed: dict[str, dict[str, np.ndarray]],
    size: int,
    kind: Optional[str],
    excluded: Sequence[str],
) -> np.ndarray:
    """1 where a passage writes a name of ``kind`` other than the question's own (``excluded``,
    the question's names with their aliases), else 0. ``typed``: kind -> name -> rows.

    A flag, not z-scored: like ``co_event`` it says the passage offers what the question asks
    for, however many passages do (z-scoring would reward a kind for being rare in the story).
    """
    out = np.zeros(size, dtype=np.float32)
    skip = set(excluded)
    rows = [found for name, found in typed.get(kind or "", {}).items() if name not in skip]
    if rows:
        out[np.concatenate(rows)] = 1.0
    return out
