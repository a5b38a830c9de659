"""``extract.characters``: person-name mentions grouped into the people of a story by name rules."""

from __future__ import annotations

from typing import Optional

import pytest

from llama_index_e2rag.extract.characters import Character, characters, person_name
from llama_index_e2rag.schema import APART_ATTR, GraphNode, NodeKind


def mention(name: str, offset: int, chunk: str = "c0", kind: Optional[str] = "PERSON",
            occurrences: int = 1) -> GraphNode:
    spans = [[offset + k, offset + k + 1] for k in range(occurrences)]
    attrs = {"entity_type": kind, "spans": spans}
    return GraphNode(id=f"m{offset}", kind=NodeKind.MENTION, text=name, name=name, doc_id="d",
                     pos=(0, offset, 2), span=(offset, offset + len(name)), chunk_id=chunk,
                     attrs=attrs)


def cast(*mentions: GraphNode) -> dict[str, Character]:
    people, _ = characters(mentions)
    return {person.name: person for person in people}


def ids(person: Character) -> set[str]:
    return {m.id for m in person.mentions}


@pytest.mark.parametrize(
    ("text", "surface", "titles", "core"),
    [
        ("Captain Wentworth", "Captain Wentworth", ("captain",), ("wentworth",)),
        ("Mrs. Inglethorp", "Mrs. Inglethorp", ("mrs",), ("inglethorp",)),
        ("John Cavendish’s", "John Cavendish", (), ("john", "cavendish")),
        ("Anne Elliot's", "Anne Elliot", (), ("anne", "elliot")),
        ("My dear Hastings, I don’t mind", "Hastings", (), ("hastings",)),
        ("Papa Poirot", "Papa Poirot", ("papa",), ("poirot",)),
        ("Madame de Merret", "Madame de Merret", ("madame",), ("merret",)),
        ("Ludwig van Beethoven's", "Ludwig van Beethoven", (), ("ludwig", "beethoven")),
    ],
)
def test_a_name_is_titles_then_capitalised_words(
    text: str, surface: str, titles: tuple[str, ...], core: tuple[str, ...]
) -> None:
    name = person_name(text)
    assert name is not None and (name.surface, name.titles, name.core) == (surface, titles, core)


@pytest.mark.parametrize(
    "text",
    [
        "perfectly spontaneous, untaught feeling",  # no capitalised word
        "One day last spring",  # a capitalised word that is never a name
        "Mary Cavendish’s concern",  # the concern, not Mary
        "Kellynch property",  # a name modifying a noun
        "the Musgroves",  # a family
        "Styles Court",  # a place
        "the Captain",  # a title alone
        "Mr. L.",  # an initial alone
    ],
)
def test_phrases_that_are_no_persons_name_give_none(text: str) -> None:
    assert person_name(text) is None


def test_a_titles_gender_and_rank_are_read() -> None:
    assert person_name("Mrs. Smith").gender == "f" and person_name("Sir Walter").gender == "m"
    assert person_name("John Smith").gender == "m" and person_name("Smith").gender is None
    assert person_name("Dr. Smith").ranks == {"dr"} and not person_name("Mr. Smith").ranks


def test_short_forms_join_the_one_full_name_they_belong_to() -> None:
    people = cast(mention("Monsieur John", 50), mention("John Cavendish", 0),
                  mention("Cavendish", 80), mention("John", 90))
    assert list(people) == ["John Cavendish"]
    assert people["John Cavendish"].aliases == ["John Cavendish", "Monsieur John", "Cavendish",
                                                "John"]


def test_mr_and_mrs_of_one_surname_are_two_people_and_the_bare_surname_is_undecided() -> None:
    people = cast(mention("Alfred Inglethorp", 0, "c0"), mention("Mrs. Inglethorp", 10, "c1"),
                  mention("Mr. Inglethorp", 20, "c2"), mention("Inglethorp", 30, "c3"))
    assert set(people) == {"Alfred Inglethorp", "Mrs. Inglethorp", "Inglethorp"}
    assert ids(people["Alfred Inglethorp"]) == {"m0", "m20"}
    assert people["Inglethorp"].candidates == ("Alfred Inglethorp", "Mrs. Inglethorp")


def test_a_shared_surname_goes_to_the_one_candidate_named_in_its_chunk() -> None:
    people = cast(
        mention("John Cavendish", 0, "c0"), mention("Lawrence Cavendish", 10, "c1"),
        mention("Cavendish", 20, "c0"), mention("Cavendish", 30, "c1"),
        mention("Cavendish", 40, "c2"),
    )
    assert ids(people["John Cavendish"]) == {"m0", "m20"}
    assert ids(people["Lawrence Cavendish"]) == {"m10", "m30"}
    assert ids(people["Cavendish"]) == {"m40"}
    assert people["Cavendish"].candidates == ("John Cavendish", "Lawrence Cavendish")


def test_rank_titles_tell_brothers_apart() -> None:
    people = cast(mention("Captain Frederick Wentworth", 0), mention("Edward Wentworth", 10),
                  mention("Captain Wentworth", 20, occurrences=30), mention("Mr. Wentworth", 40))
    captain = people["Captain Frederick Wentworth"]
    assert ids(captain) == {"m0", "m20"} and "Mr. Wentworth" not in captain.aliases


def test_short_forms_without_a_full_name_group_among_themselves() -> None:
    people = cast(mention("Monsieur Poirot", 0), mention("Poirot", 10), mention("Mr. Howard", 20),
                  mention("Miss Howard", 30))
    assert set(people) == {"Monsieur Poirot", "Mr. Howard", "Miss Howard"}
    assert ids(people["Monsieur Poirot"]) == {"m0", "m10"}


def test_the_name_is_the_fullest_form_then_the_most_used() -> None:
    people = cast(mention("Wentworth", 0, occurrences=50), mention("Frederick Wentworth", 10),
                  mention("Captain Frederick Wentworth", 20, occurrences=3))
    assert list(people) == ["Captain Frederick Wentworth"]
    assert sum(people["Captain Frederick Wentworth"].counts.values()) == 54


def test_mentions_that_name_no_person_are_left_to_the_other_rules() -> None:
    sir = mention("Sir Walter", 0, kind="ORG")  # a title makes a person of any type
    things = [mention("the old door", 10, kind="concept"), mention("Kellynch", 20, kind="GPE"),
              mention("Mary Cavendish’s concern", 30, kind="concept")]
    people, rest = characters([sir, *things])
    assert [p.name for p in people] == ["Sir Walter"]
    assert {m.id for m in rest} == {m.id for m in things}


def test_a_persons_name_typed_otherwise_by_the_parser_is_still_that_person() -> None:
    people, rest = characters([
        mention("Alfred Inglethorp", 0), mention("Inglethorp’s", 10, kind="ORG"),
        mention("Alfred", 20, kind="concept"), mention("Kellynch", 30, kind="GPE"),
    ])
    assert [(p.name, ids(p)) for p in people] == [("Alfred Inglethorp", {"m0", "m10", "m20"})]
    assert [m.id for m in rest] == ["m30"]  # a name no person of the story bears stays a place


def test_an_initial_joins_the_one_full_name_it_abbreviates() -> None:
    people = cast(mention("Lawrence Cavendish", 0), mention("John Cavendish", 10),
                  mention("Mr. L. Cavendish", 20), mention("Mr. T. Cavendish", 30))
    assert ids(people["Lawrence Cavendish"]) == {"m0", "m20"}
    assert "Mr. T. Cavendish" in people  # no Cavendish named with a T: a person of their own


@pytest.mark.parametrize("title", ["Mrs.", "Miss", "Mr."])
def test_a_short_form_told_apart_from_the_one_it_fits_is_another_person(title: str) -> None:
    """Rule 3 joins a short form to the one character it fits ("Mrs. Hale" -> Margaret Hale,
    as "Mrs. Cavendish" is Mary Cavendish), unless the text names the two side by side as two
    people (two arguments of one verb: "Mrs. Hale asked Margaret Hale")."""
    given = "Margaret" if title != "Mr." else "Richard"
    full, short = f"{given} Hale", f"{title} Hale"
    joined = cast(mention(full, 0), mention(short, 50))
    assert set(joined) == {full} and len(joined[full].mentions) == 2
    apart = mention(short, 50)
    apart.attrs[APART_ATTR] = [full]
    other = mention(full, 90)
    other.attrs[APART_ATTR] = [short]
    for people in (cast(mention(full, 0), apart), cast(other, mention(short, 50))):
        assert set(people) == {full, short}  # whichever mention says so


def test_names_told_apart_from_others_still_join_their_own() -> None:
    short = mention("Margaret", 50)
    short.attrs[APART_ATTR] = ["Mr. Hale"]  # "Margaret asked Mr. Hale"
    people = cast(mention("Margaret Hale", 0), short, mention("Mr. Hale", 80))
    assert set(people) == {"Margaret Hale", "Mr. Hale"} and ids(people["Margaret Hale"]) == {
        "m0", "m50"}


@pytest.mark.parametrize(("married", "unmarried"),
                         [("Mrs.", "Miss"), ("Madame", "Mademoiselle"), ("Signora", "Signorina")])
def test_a_married_womans_title_never_joins_an_unmarried_ones(married: str, unmarried: str) -> None:
    """Mother and daughter share the surname and the gender. When both titles are used, neither
    joins the given name by the name alone (which one "Virginie Vervelle" is, the name does not
    say), and each joins its own forms; with one title only, it joins the one full name."""
    for order in ((0, 50, 90, 120), (120, 90, 50, 0)):
        people = cast(mention("Virginie Vervelle", order[0]), mention(f"{unmarried} Vervelle",
                      order[1]), mention(f"{married} Vervelle", order[2]),
                      mention(f"{married} Vervelle", order[3]))
        assert len(people) == 3
        mother = next(p for p in people.values() if f"{married} Vervelle" in p.aliases)
        assert len(mother.mentions) == 2 and f"{unmarried} Vervelle" not in mother.aliases
    for title in (married, unmarried):
        joined = cast(mention("Mary Cavendish", 0), mention(f"{title} Cavendish", 50))
        assert set(joined) == {"Mary Cavendish"}


@pytest.mark.parametrize(("male", "female"), [("Monsieur", "Mademoiselle"), ("Signor", "Signorina"),
                                              ("Herr", "Fraulein"), ("Senor", "Senorita")])
def test_a_foreign_womans_title_gives_her_gender_so_her_father_stays_apart(
    male: str, female: str
) -> None:
    """The trial of Pierre Grassou: "Virginie" is on no given-name list, so only "Mademoiselle
    Virginie" tells that Virginie Vervelle is a woman; "Monsieur Vervelle" (her father) must not
    join her."""
    people = cast(mention("Virginie Vervelle", 0), mention(f"{female} Virginie", 40),
                  mention(f"{male} Vervelle", 80))
    assert set(people) == {"Virginie Vervelle", f"{male} Vervelle"}
    assert people["Virginie Vervelle"].gender == "f"


def test_when_a_surname_is_titled_for_both_sexes_a_titled_form_needs_a_known_gender() -> None:
    """"Monsieur" and "Madame Vervelle" are both named: "Monsieur Vervelle" does not join
    "Virginie Vervelle", whose gender nothing tells; with one sex titled it joins as before."""
    people = cast(mention("Virginie Vervelle", 0), mention("Monsieur Vervelle", 40),
                  mention("Madame Vervelle", 80))
    assert "Monsieur Vervelle" in people and "Monsieur Vervelle" not in people[
        "Virginie Vervelle"].aliases
    known = cast(mention("John Vervelle", 0), mention("Monsieur Vervelle", 40),
                 mention("Madame Vervelle", 80))
    assert "Monsieur Vervelle" in known["John Vervelle"].aliases
    alone = cast(mention("Virginie Vervelle", 0), mention("Monsieur Vervelle", 40))
    assert set(alone) == {"Virginie Vervelle"}
