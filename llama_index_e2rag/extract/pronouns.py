"""Pronoun antecedents of one parsed text: he/him/she/her(self) -> the person they stand for.

Read once, in text order, so a resolved pronoun is itself an antecedent for the next one
("Eleanor lied. She lied to Aunt Judith about where she spent her evenings": both "she" are
Eleanor). The rules, in the spirit of Hobbs' algorithm and the pronoun pass of Stanford's
multi-pass sieve, without a trained model:

* candidates are earlier persons whose gender agrees: named PERSON entities, capitalised
  proper-noun subjects the small model left untyped ("Eleanor lied"), and resolved pronouns;
  a person's gender comes from titles and given names, and from the pronouns already resolved
  to them;
* an object pronoun never stands for its own verb's subject ("Holmes told him": not Holmes);
* a subject of the pronoun's own sentence is preferred to a nearer non-subject, else the
  nearest candidate wins;
* the persons last named in the chunk before (``earlier``) are candidates too: a chunk that
  opens with "She" goes on with the woman the last one ended with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from llama_index_e2rag.extract.characters import TITLE_WORDS
from llama_index_e2rag.extract.gender import name_gender
from llama_index_e2rag.extract.realis import quoted_tokens
from llama_index_e2rag.schema import normalize_text

MASCULINE = frozenset("he him his himself".split())
FEMININE = frozenset("she her hers herself".split())
REFLEXIVE = frozenset("himself herself".split())
#: The first person outside dialogue: a first-person novel's narrator.
NARRATOR_WORDS = frozenset("i me my mine myself".split())
NARRATOR_KEY, NARRATOR_NAME = "narrator", "the narrator"
#: They/them: a group of people where a plural person phrase just named them.
PLURAL_WORDS = frozenset("they them their theirs themselves".split())
GROUP_REACH = 40
#: Persons a chunk hands to the next one for its opening pronouns.
CARRIED = 6
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
_OBJECT_DEPS = frozenset({"dobj", "dative", "iobj", "pobj"})


@dataclass(frozen=True)
class Person:
    """One occurrence of a person in the text: a name, or a pronoun resolved to one."""

    start: int
    key: str
    name: str
    gender: Optional[str]
    subject: bool


def pronoun_gender(tok: Any) -> Optional[str]:
    word = tok.lower_
    return "m" if word in MASCULINE else "f" if word in FEMININE else None


class Antecedents:
    """Every person of a parsed text in order, and what each he/she pronoun resolves to."""

    def __init__(
        self,
        doc: Any,
        named: Callable[[Any], Optional[tuple[str, str]]],
        gender_of: Callable[[Any], Optional[str]],
        earlier: Sequence[Person] = (),
    ) -> None:
        """``named(span)`` gives a PERSON entity's (key, name); ``gender_of(span)`` its gender;
        ``earlier``: the previous chunk's ``last_people()``, before every token of this one."""
        self.people: list[Person] = [
            Person(n - len(earlier), p.key, p.name, p.gender, False)
            for n, p in enumerate(earlier)
        ]
        self._resolved: dict[int, Person] = {}
        self._genders: dict[str, str] = {p.key: p.gender for p in earlier if p.gender}
        self._at: dict[int, Person] = {}
        person_at = {ent.start: ent for ent in doc.ents if ent.label_ == "PERSON"}
        for tok in doc:
            ent = person_at.get(tok.i)
            gender = pronoun_gender(tok)
            if ent is not None:
                found = named(ent)
                if found is not None:
                    self._add(Person(ent.start, *found, gender_of(ent), _is_subject(ent.root)),
                              ent.root.i)
            elif _bare_name(tok):
                key = normalize_text(tok.text)
                self._add(Person(tok.i, key, tok.text, name_gender(key), True), tok.i)
            elif gender is not None and tok.lower_ not in REFLEXIVE:
                person = self.pick(tok, gender, self._bound(tok))
                if person is not None:
                    here = Person(tok.i, person.key, person.name, gender, _is_subject(tok))
                    self._resolved[tok.i] = here
                    self._genders.setdefault(person.key, gender)
                    self._add(here, tok.i)

    def _add(self, person: Person, head: int) -> None:
        self.people.append(person)
        self._at[head] = person

    def _bound(self, tok: Any) -> set[str]:
        """Keys an object pronoun cannot stand for: its own verb's subject."""
        if tok.dep_ not in _OBJECT_DEPS:
            return set()
        verb = tok.head.head if tok.dep_ == "pobj" else tok.head
        return {
            self._at[child.i].key
            for child in verb.children
            if child.dep_ in _SUBJECT_DEPS and child.i in self._at
        }

    def at(self, head: int) -> Optional[Person]:
        """The person whose name (or resolved pronoun) is headed by token ``head``."""
        return self._at.get(head)

    def gender(self, person: Person) -> Optional[str]:
        return person.gender or self._genders.get(person.key)

    def pick(self, tok: Any, gender: str, excluded: set[str]) -> Optional[Person]:
        """The person a pronoun at ``tok`` stands for, ``excluded`` keys aside."""
        candidates = [
            p for p in self.people
            if p.start < tok.i and p.key not in excluded and self.gender(p) in (None, gender)
        ]
        if not candidates:
            return None
        start = tok.sent.start
        subjects = [p for p in candidates if p.start >= start and p.subject]
        return (subjects or candidates)[-1]

    def resolved(self, tok: Any) -> Optional[Person]:
        """What the pronoun at ``tok`` was read as, in text order (``None``: nobody)."""
        return self._resolved.get(tok.i)

    def last_people(self, count: int = CARRIED) -> list[Person]:
        """The ``count`` persons named or resolved last, each once, oldest first, with the
        gender read for them: what the next chunk's pronouns may stand for."""
        latest: dict[str, Person] = {}
        for person in reversed(self.people):
            if person.key not in latest and len(latest) < count:
                latest[person.key] = Person(0, person.key, person.name, self.gender(person),
                                            False)
        return list(reversed(latest.values()))

    def occurrences(self) -> list[tuple[int, Person]]:
        """Every he/his/she/her… the text resolves (token index, person), in text order: each
        is an occurrence of that person, verb argument or not ("his hat" names him too)."""
        return sorted(self._resolved.items())


def narrator_tokens(doc: Any, spoken: Optional[set[int]] = None) -> list[int]:
    """Indices of I/me/my/mine/myself outside quotation marks (``spoken``: the quoted tokens,
    when the caller has them): the narrator speaking."""
    spoken = quoted_tokens(doc) if spoken is None else spoken
    return [tok.i for tok in doc if tok.lower_ in NARRATOR_WORDS and tok.i not in spoken]


def group_pronouns(doc: Any, phrases: Mapping[int, tuple[str, str]]) -> dict[int, tuple[str, str]]:
    """they/them/their -> the (key, name) of the people a plural person noun phrase names
    (``phrases``: head token -> its person phrase; "The two girls ran. They laughed."), where
    that phrase is the nearest plural noun before the pronoun, at most ``GROUP_REACH`` tokens
    back: a nearer plural thing ("the letters") takes it."""
    found: dict[int, tuple[str, str]] = {}
    plural: Optional[Any] = None
    for tok in doc:
        if tok.tag_ in ("NNS", "NNPS") and tok.dep_ not in ("compound", "amod", "nmod"):
            plural = tok
        elif (tok.lower_ in PLURAL_WORDS and tok.pos_ == "PRON" and plural is not None
              and tok.i - plural.i <= GROUP_REACH and plural.i in phrases):
            found[tok.i] = phrases[plural.i]
    return found


def _is_subject(tok: Any) -> bool:
    return tok.dep_ in _SUBJECT_DEPS


def _bare_name(tok: Any) -> bool:
    """A capitalised proper-noun subject no entity covers ("Eleanor lied")."""
    return (
        tok.pos_ == "PROPN"
        and tok.dep_ in _SUBJECT_DEPS
        and not tok.ent_type_
        and tok.text[:1].isupper()
        and normalize_text(tok.text) not in TITLE_WORDS
    )
