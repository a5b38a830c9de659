"""Nominal person mentions: noun phrases that name a person by what they are ("his sister").

A reader follows a character through "the captain" as well as "Wentworth", and LitBank
annotates such phrases as person mentions (NOM). Which nouns name a person is read from WordNet
3.0 (``data/person_nouns.tsv``, made by ``scripts/person_nouns.py``): a noun whose most frequent
sense is a person, with the gender that sense has ("sister" f, "captain" either). A nominal
stands for a named person only where the text says so, never by a guess:

- an appositive to the name ("Mr. Hale, the clergyman, ...");
- a title used alone for the person last named with it ("Captain Wentworth ... the captain");
- the same definite phrase again, for the person it was first said of ("Mr. Hale, the
  clergyman, ... The clergyman sighed").

Any other nominal is a person mention of its own ("the old man"), kept apart from the
characters (whose names come from capitalised words, extract/characters.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from llama_index_e2rag.extract.pronouns import Antecedents, Person
from llama_index_e2rag.schema import normalize_text

#: Entity labels a person noun phrase may hold ("the two girls", "the first visitor").
COUNTS = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "DATE", "TIME"})
#: A noun in these relations modifies another ("the servant girl"): the phrase is the other's.
_MODIFIER_DEPS = frozenset({"compound", "amod", "nmod"})
PERSON_NOUNS_PATH = Path(__file__).resolve().parent.parent / "data" / "person_nouns.tsv"


@lru_cache(maxsize=1)
def _person_nouns() -> dict[str, str]:
    rows = PERSON_NOUNS_PATH.read_text("utf-8").splitlines()
    return dict(row.split("\t") for row in rows if row and not row.startswith("#"))


def person_noun(lemma: str) -> Optional[str]:
    """The gender of a noun that names a person ("f", "m", or "" for either), else None."""
    return _person_nouns().get(lemma.lower())


@dataclass(frozen=True)
class Nominal:
    """A noun phrase naming a person: its token range, head, gender and whom it stands for."""

    start: int
    end: int
    head: int
    gender: str
    person: Optional[Person]


def nominals(doc: Any, people: Antecedents) -> list[Nominal]:
    """The person noun phrases of ``doc`` in text order: each noun naming a person with the
    words before it that it governs ("the two girls", "Mrs. Hale's sister"; the small model's
    noun chunks miss heads parsed as appositions of a name or as adverbials)."""
    in_name = {i for e in doc.ents if e.label_ not in COUNTS for i in range(e.start, e.end)}
    found = []
    said: dict[str, Person] = {}  # "the clergyman" -> the person a definite one was said of
    for tok in doc:
        if tok.pos_ != "NOUN" or tok.dep_ in _MODIFIER_DEPS or tok.i in in_name:
            continue  # "Mrs. Hale's sister" is one: its head is no name's
        gender = person_noun(tok.lemma_)
        if gender is None:
            continue
        definite = tok.tag_ == "NN" and any(
            c.dep_ == "det" and c.lower_ == "the" for c in tok.children
        )
        person = _named(tok, people) or (said.get(tok.lemma_.lower()) if definite else None)
        if person is not None and definite:
            said[tok.lemma_.lower()] = person
        found.append(Nominal(tok.left_edge.i, tok.i + 1, tok.i, gender, person))
    return found


def _named(root: Any, people: Antecedents) -> Optional[Person]:
    """The named person the phrase at ``root`` stands for, where the text says so."""
    if root.dep_ == "appos" and people.at(root.head.i) is not None:
        return people.at(root.head.i)
    title = normalize_text(root.lemma_)
    titled = [
        p for p in people.people
        if p.start < root.i and normalize_text(p.name).split()[:1] == [title]
    ]
    return titled[-1] if titled and root.tag_ == "NN" else None
