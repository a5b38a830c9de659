"""Which of an index's mention names a question's name refers to.

Shared by the narrative signals and the anchor's region (which follows the anchor's
characters), so both read one name the same way; a module of its own so neither imports the
other for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_index_e2rag.ranking.passages import PassageTable

#: Words of a name that never identify a character on their own.
_TITLES = frozenset(
    "mr mrs ms miss dr sir lady lord king queen prince princess the a an of old young little "
    "st saint master mistress madame monsieur".split()
)


def match_names(table: PassageTable, name: str) -> list[str]:
    """Mention names a question name refers to (a name/alias chain).

    A mention name matches when it holds every proper word of the question name ("Peter" ~
    "Peter Rabbit", "McGregor" ~ "Mr. McGregor") and the two do not carry different titles
    ("Mrs. Rabbit" is not "Mr. Rabbit"), or when, carrying no title, all its words are in the
    question name ("Peter Rabbit" ~ "Peter").
    """
    if name not in table.matches:
        table.matches[name] = _match_names(table, name)
    return list(table.matches[name])


def _match_names(table: PassageTable, name: str) -> tuple[str, ...]:
    words = [w for w in name.split() if w not in _TITLES]
    if not words:
        return (name,) if name in table.names else ()
    found = set.intersection(*(table.name_words.get(w, set()) for w in words))
    titles = set(name.split()) & _TITLES
    if titles:
        found = {n for n in found if not (set(n.split()) & _TITLES) or set(n.split()) & titles}
    shorter = set().union(*(table.name_words.get(w, set()) for w in words))
    found |= {n for n in shorter if not set(n.split()) & _TITLES and set(n.split()) <= set(words)}
    return tuple(sorted(found))
