"""The words that tell a person's gender in a name: titles and a few common given names.

Shared by the frames (a pronoun resolves to a name of its gender), entity fusion and the
characters (two names titled with different genders are never one person).
"""

from __future__ import annotations

from typing import Iterable, Optional

MALE_TITLES = frozenset(
    """mr mister master monsieur sir lord king prince father brother uncle signor signore herr
    senor""".split()
)
FEMALE_TITLES = frozenset(
    """mrs ms miss madam madame mme mlle mademoiselle demoiselle dame lady queen princess mother
    sister aunt auntie signora signorina frau fraulein senora senorita""".split()
)
#: A few common given names, so "Mary ... he" does not resolve to Mary; others fit either gender.
MALE_NAMES = frozenset(
    """john james william george charles henry thomas arthur robert edward richard harry peter tom
    jack joseph samuel frederick albert alfred francis hugh walter ralph david michael paul mark
    sherlock jim ron hercule""".split()
)
FEMALE_NAMES = frozenset(
    """mary elizabeth anne anna jane alice emma margaret catherine kate sarah lucy irene helen
    helena violet grace rose julia laura susan ellen edith hermione ginny dorothy wendy emily
    charlotte nancy""".split()
)


def title_gender(titles: Iterable[str]) -> Optional[str]:
    """'m' / 'f' from normalised titles ("mrs"), ``None`` when they say nothing or disagree."""
    found = {"m" for t in titles if t in MALE_TITLES} | {"f" for t in titles if t in FEMALE_TITLES}
    return next(iter(found)) if len(found) == 1 else None


def name_gender(first: str) -> Optional[str]:
    """'m' / 'f' from a normalised given name on the short lists, else ``None``."""
    if first in MALE_NAMES:
        return "m"
    return "f" if first in FEMALE_NAMES else None
