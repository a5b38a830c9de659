"""``extract.nominals`` on the real parser: noun phrases that name a person, and whom they name."""

from __future__ import annotations

import random
from typing import Any

import pytest

from llama_index_e2rag.extract.frames import DocFrames
from llama_index_e2rag.extract.grounded import GroundedExtractor
from llama_index_e2rag.extract.nominals import PERSON_NOUNS_PATH, person_noun
from llama_index_e2rag.extract.spacy_model import load_spacy
from llama_index_e2rag.schema import NodeKind, name_type

from extract.test_grounded import extract, make_chunk

pytestmark = pytest.mark.spacy

#: Kinds of people and things a novel names, none of them on both lists.
PEOPLE = ["sister", "captain", "servant", "clergyman", "widow", "stranger", "doctor", "nephew",
          "landlady", "soldier", "girl", "gentleman"]
THINGS = ["table", "letter", "garden", "carriage", "window", "umbrella", "basket", "road"]
DETERMINERS = ["the", "his", "her", "their", "an old", "the young", "a"]


@pytest.fixture(scope="module")
def nlp() -> Any:
    return load_spacy()


def _nominals(nlp: Any, text: str) -> dict[str, str]:
    """Each person noun phrase's text -> whom it names (the person's name, or itself)."""
    refs = DocFrames(nlp(text), resolve_pronouns=True).nominal_refs()
    return {text[r.start:r.end]: r.name for r in refs}


def test_the_list_holds_people_with_their_gender_and_no_things() -> None:
    assert all(person_noun(word) is not None for word in PEOPLE)
    assert all(person_noun(word) is None for word in THINGS)
    assert {person_noun(w) for w in ("sister", "widow", "landlady", "girl")} == {"f"}
    assert {person_noun(w) for w in ("nephew", "gentleman")} == {"m"}
    assert person_noun("captain") == person_noun("servant") == ""  # either
    assert "WordNet" in PERSON_NOUNS_PATH.read_text("utf-8").splitlines()[1]


@pytest.mark.parametrize("seed", range(4))
def test_every_person_phrase_is_found_with_its_words_and_no_thing_is(nlp: Any, seed: int) -> None:
    rng = random.Random(seed)
    people = rng.sample(PEOPLE, 3)
    things = rng.sample(THINGS, 3)
    phrases = [f"{rng.choice(DETERMINERS)} {word}" for word in people]
    text = (f"{phrases[0].capitalize()} put {things[0]} by the {things[1]}. Then {phrases[1]} "
            f"walked down the {things[2]} with {phrases[2]}.")
    found = _nominals(nlp, text)
    for phrase in phrases:  # the whole phrase, its article or possessive too, as LitBank marks it
        assert any(key.lower() == phrase for key in found), (phrase, found)
    assert not any(key.split()[-1] in THINGS for key in found)


def test_a_nominal_names_a_person_only_where_the_text_says_so(nlp: Any) -> None:
    text = ("Captain Harville came in with Mr. Pell, the clergyman, and an old soldier. "
            "The captain bowed. The doctor sat down.")
    found = _nominals(nlp, text)
    assert found["the clergyman"] == "Mr. Pell"  # apposition
    assert found["The captain"] == "Captain Harville"  # a title alone: the person named so
    assert found["an old soldier"] == "old soldier"  # nobody named so: a person of its own
    assert found["The doctor"] == "doctor"  # no Doctor named before


@pytest.mark.parametrize("noun", ["clergyman", "stranger", "widow", "doctor"])
def test_the_same_definite_phrase_again_is_the_person_it_was_said_of(nlp: Any, noun: str) -> None:
    text = (f"Mr. Pell, the {noun}, came in with Captain Harville. Captain Harville bowed. "
            f"The {noun} sat down. A {noun} was at the door.")
    found = _nominals(nlp, text)
    assert found[f"The {noun}"] == "Mr. Pell"
    assert found[f"A {noun}"] == noun  # an indefinite one is somebody new


def test_a_named_persons_phrase_is_a_person_and_its_name_still_a_name(nlp: Any) -> None:
    text = "Mrs. Hale's sister wrote to the widow. Mrs. Hale read the letter."
    found = _nominals(nlp, text)
    assert set(found) == {"Mrs. Hale's sister", "the widow"}


def test_nominal_mentions_are_people_with_no_name_to_match(nlp: Any) -> None:
    """In the grounded graph a nominal is a person mention (LitBank's NOM) whose words are not a
    name: retrieval and linking read it as any noun phrase."""
    text = "The old servant opened the door. Margaret Hale thanked the servant."
    nodes, _ = extract(GroundedExtractor(), make_chunk(text))
    mentions = {n.name: n for n in nodes if n.kind == NodeKind.MENTION}
    nominal = mentions["old servant"]
    assert nominal.attrs["entity_type"] == "PERSON" and nominal.attrs.get("nominal") is True
    assert name_type(nominal) == "concept"
    assert mentions["Margaret Hale"].attrs.get("nominal") is None
    assert name_type(mentions["Margaret Hale"]) == "PERSON"


# -- the list's making (scripts/person_nouns.py) on a small WordNet of the same format ------------

_SYNSETS = {  # offset: (lexicographer file, words, hypernyms, instance of, gloss)
    "00000001": (18, ["female_person"], [], [], "a person who belongs to the sex that bears young"),
    "00000002": (18, ["male_person"], [], [], "a person who belongs to the sex that begets young"),
    "00000003": (18, ["woman"], ["00000001"], [], "an adult person"),
    "00000004": (18, ["sister"], ["00000009"], [], "a female person who has the same parents"),
    "00000005": (18, ["uncle"], ["00000011"], [], "the brother of your father or mother"),
    "00000006": (18, ["parent"], [], [], "a father or mother"),
    "00000007": (6, ["table"], [], [], "a piece of furniture"),
    "00000008": (18, ["lincoln"], [], ["00000010"], "16th President of the United States"),
    "00000009": (18, ["sibling"], [], [], "a person's brother or sister"),
    "00000010": (18, ["president"], [], [], "the chief executive of a republic"),
    "00000011": (18, ["relative"], [], [], "a person related by blood or marriage"),
    "00000012": (5, ["queen"], [], [], "the only fertile female in a colony of bees"),
    "00000013": (18, ["queen"], ["00000003"], [], "the wife or widow of a king"),
}
_SENSES = {"female_person": ["00000001"], "male_person": ["00000002"], "woman": ["00000003"],
           "sister": ["00000004"], "uncle": ["00000005"], "parent": ["00000006"],
           "table": ["00000007"], "lincoln": ["00000008"], "sibling": ["00000009"],
           "president": ["00000010"], "relative": ["00000011"],
           "queen": ["00000012", "00000013"]}


def _wordnet(folder: Any) -> None:
    licence = "  1 This software and database is provided under Princeton's licence.  \n"
    rows = []
    for offset, (lexfile, words, up, instance, gloss) in _SYNSETS.items():
        pointers = [("@", o) for o in up] + [("@i", o) for o in instance]
        rows.append(" ".join(
            [offset, f"{lexfile:02d}", "n", f"{len(words):02x}"]
            + [part for w in words for part in (w, "0")] + [f"{len(pointers):03d}"]
            + [part for sym, o in pointers for part in (sym, o, "n", "0000")]
        ) + f" | {gloss}  ")
    (folder / "data.noun").write_text(licence + "\n".join(rows) + "\n", "latin-1")
    index = [f"{lemma} n {len(offs)} 0 {len(offs)} 0 {' '.join(offs)}  "
             for lemma, offs in sorted(_SENSES.items())]
    (folder / "index.noun").write_text(licence + "\n".join(index) + "\n", "latin-1")


def test_the_list_is_the_nouns_whose_commonest_sense_is_a_person(tmp_path: Any) -> None:
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "person_nouns.py"
    spec = importlib.util.spec_from_file_location("person_nouns_script", script)
    assert spec is not None and spec.loader is not None
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    _wordnet(tmp_path)
    nouns = made.person_nouns(tmp_path)
    # gender from the female/male ancestor, else from the definition unless it names a pair
    assert nouns == {"woman": "f", "sister": "f", "uncle": "m", "parent": "", "sibling": "",
                     "president": "", "relative": ""}
    # not: a thing, an instance (a proper name), a word whose commonest sense is no person,
    # and the two roots, whose names hold an underscore
