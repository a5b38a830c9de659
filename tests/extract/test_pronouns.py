"""``extract.pronouns`` on the real parser: what each he/she/I of a text stands for."""

from __future__ import annotations

from typing import Any

import pytest

from llama_index_e2rag.extract.frames import DocFrames
from llama_index_e2rag.extract.pronouns import NARRATOR_NAME, narrator_tokens
from llama_index_e2rag.extract.spacy_model import load_spacy


@pytest.fixture(scope="module")
def nlp() -> Any:
    return load_spacy()


def read(nlp: Any, text: str) -> list[tuple[str, str]]:
    """(the pronoun's text, the name it stands for), in text order."""
    refs = DocFrames(nlp(text), resolve_pronouns=True).pronoun_refs()
    return sorted(((text[r.start:r.end], r.name) for r in refs), key=lambda p: text.index(p[0]))


def test_a_resolved_pronoun_carries_forward_and_the_sentence_subject_wins(nlp: Any) -> None:
    text = ("Eleanor Marsh came home late. She lied to Aunt Judith about where she spent her "
            "evenings.")
    found = dict(read(nlp, text))
    assert found == {"She": "Eleanor Marsh", "she": "Eleanor Marsh", "her": "Eleanor Marsh"}


@pytest.mark.parametrize(
    ("text", "pronoun", "name"),
    [
        ("Tom Greaves sat down. Mary Hale took his coat.", "his", "Tom Greaves"),
        ("Mr. Pell met Miss Lane. He bowed to her.", "He", "Mr. Pell"),
        ("Mr. Pell met Miss Lane. He bowed to her.", "her", "Miss Lane"),
    ],
)
def test_gender_from_titles_and_given_names_picks_the_person(
    nlp: Any, text: str, pronoun: str, name: str
) -> None:
    assert (pronoun, name) in read(nlp, text)


def test_an_object_pronoun_is_never_its_own_verbs_subject(nlp: Any) -> None:
    found = read(nlp, "Tom Greaves saw Peter Hale. Tom Greaves told him the truth.")
    assert ("him", "Peter Hale") in found and ("him", "Tom Greaves") not in found


def test_no_person_of_the_pronouns_gender_no_reading(nlp: Any) -> None:
    assert read(nlp, "Mary Hale smiled. He left the room.") == []


def test_the_first_person_outside_dialogue_is_the_narrator(nlp: Any) -> None:
    text = "I met Mary at the gate. “I am tired,” she told me. My feet ached."
    doc = nlp(text)
    spoken = [doc[i].text for i in narrator_tokens(doc)]
    assert spoken == ["I", "me", "My"]  # not the "I" inside the quotation marks
    assert ("me", NARRATOR_NAME) in read(nlp, text)


def test_a_title_inside_another_entity_stays_there(nlp: Any) -> None:
    """Entities never overlap: a title that ends another entity is not taken into a name."""
    from spacy.tokens import Span

    from llama_index_e2rag.extract.frames import titled_names

    doc = nlp("They saw the Queen Mary Lady Anne sail.")
    doc.ents = [Span(doc, 2, 4, label="ORG"), Span(doc, 4, 6, label="PERSON")]  # "the Queen"
    titled_names(doc)
    assert [(e.text, e.label_) for e in doc.ents] == [("the Queen", "ORG"), ("Mary Lady", "PERSON")]
    doc = nlp("They saw Queen Anne sail.")
    doc.ents = [Span(doc, 3, 4, label="PERSON")]
    titled_names(doc)
    assert [(e.text, e.label_) for e in doc.ents] == [("Queen Anne", "PERSON")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The two girls ran down the lane. They laughed at their mother.",
         {("They", "two girls"), ("their", "two girls")}),
        ("Mr. Hale met the soldiers at the gate, and they saluted him.",
         {("they", "soldiers"), ("him", "Mr. Hale")}),
        ("The girls wrote the letters. They were long.", set()),  # a nearer plural thing
        ("The girls sat down. Then the dog barked for a long time at the birds in the big old "
         "trees behind the house, and the cat, too, ran up and down the garden wall for a "
         "while, until at last they slept.", set()),  # the birds: no person phrase near
    ],
)
def test_they_stand_for_the_group_a_plural_person_phrase_just_named(
    nlp: Any, text: str, expected: set[tuple[str, str]]
) -> None:
    found = {(p, n) for p, n in read(nlp, text) if p.lower() in ("they", "them", "their")}
    assert found == {e for e in expected if e[0].lower() in ("they", "them", "their")}
    assert {e for e in expected if e[0] == "him"} <= set(read(nlp, text))
