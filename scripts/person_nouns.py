"""Writes llama_index_e2rag/data/person_nouns.tsv: English nouns that name a person, with gender.

Read from Princeton WordNet 3.0's database files (Debian's ``wordnet-base`` installs them in
/usr/share/wordnet; any WordNet 3.0 ``dict`` folder works). A noun is a person noun when its most
frequent sense (WordNet lists senses by frequency) is in the ``noun.person`` lexicographer file
and is no instance (a proper name such as "Lincoln"). Its gender is female or male when that
sense descends from "female person" or "male person", else when the sense's definition names one
gender first and not as one of a pair ("the sister of your father or mother" is female; "a
father or mother" is neither).

    python scripts/person_nouns.py [WORDNET_DICT_DIR]

The output is committed (package data), so users need no WordNet; this script makes it again.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

NOUN_PERSON = 18  # lexicographer file number of noun.person
OUT = Path(__file__).resolve().parents[1] / "llama_index_e2rag" / "data" / "person_nouns.tsv"
_FEMALE = "woman women female girl wife daughter mother lady sister".split()
_MALE = "man men male boy husband son father gentleman brother".split()
_GENDER_WORD = re.compile(r"\b(" + "|".join(_FEMALE + _MALE) + r")\b(?: (or|and) (\w+))?")
HEADER = (
    "# English nouns naming a person, with gender (f, m, or empty): made by"
    " scripts/person_nouns.py\n"
    "# from WordNet 3.0, Copyright 2006 by Princeton University. All rights reserved."
    " See NOTICE-wordnet.txt.\n"
)


def read_synsets(folder: Path) -> dict[str, tuple[int, list[str], bool, str]]:
    """offset -> (lexicographer file, hypernym offsets, is an instance, first gloss part)."""
    synsets = {}
    for line in (folder / "data.noun").read_text("latin-1").splitlines():
        if line.startswith("  "):
            continue  # the licence header
        head, _, gloss = line.partition(" | ")
        fields = head.split(" ")
        words = int(fields[3], 16)
        at = 4 + 2 * words
        hypernyms, instance = [], False
        for k in range(int(fields[at])):
            symbol, offset, pos = fields[at + 1 + 4 * k : at + 4 + 4 * k]
            hypernyms += [offset] if symbol == "@" and pos == "n" else []
            instance = instance or symbol == "@i"
        synsets[fields[0]] = (int(fields[1]), hypernyms, instance, gloss.split(";")[0])
    return synsets


def first_senses(folder: Path) -> dict[str, list[str]]:
    """lemma -> its synset offsets, most frequent sense first."""
    senses = {}
    for line in (folder / "index.noun").read_text("latin-1").splitlines():
        if line.startswith("  "):
            continue
        fields = line.split(" ")
        count, pointers = int(fields[2]), int(fields[3])
        senses[fields[0]] = fields[6 + pointers : 6 + pointers + count]
    return senses


def gloss_gender(gloss: str) -> str:
    """The gender the definition names first, unless it names it as one of a pair."""
    found = _GENDER_WORD.search(gloss.lower())
    if found is None:
        return ""
    word, joined, other = found.groups()
    gender = "f" if word in _FEMALE else "m"
    if joined and other in (_MALE if gender == "f" else _FEMALE):
        return ""
    return gender


def person_nouns(folder: Path) -> dict[str, str]:
    synsets, senses = read_synsets(folder), first_senses(folder)
    female, male = senses["female_person"][0], senses["male_person"][0]

    def ancestors(offset: str) -> set[str]:
        seen, todo = {offset}, [offset]
        while todo:
            for up in synsets[todo.pop()][1]:
                if up not in seen:
                    seen.add(up)
                    todo.append(up)
        return seen

    nouns = {}
    for lemma, offsets in senses.items():
        lexfile, _, instance, gloss = synsets[offsets[0]]
        if not lemma.isalpha() or len(lemma) < 3 or lexfile != NOUN_PERSON or instance:
            continue
        above = ancestors(offsets[0])
        nouns[lemma] = "f" if female in above else "m" if male in above else gloss_gender(gloss)
    return nouns


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/wordnet")
    nouns = person_nouns(folder)
    OUT.write_text(HEADER + "".join(f"{w}\t{g}\n" for w, g in sorted(nouns.items())), "utf-8")
    print(f"wrote {OUT}: {len(nouns)} person nouns")


if __name__ == "__main__":
    main()
