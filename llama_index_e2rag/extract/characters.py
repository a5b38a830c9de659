"""Characters: a document's person-name mentions grouped into the people of the story, offline.

Embeddings of bare names cannot tell "John Cavendish" from "Lawrence Cavendish", and a noun
phrase that holds a name ("Mary Cavendish's concern") is not the person. So people are grouped by
the names themselves, as a reader does (the deterministic name rules of Stanford's multi-pass
sieve and BookNLP's name clustering):

1. A name is read from a person mention: titles, then capitalised words ("Captain Wentworth",
   "My dear Hastings, I don't mind" -> "Hastings"); a mention whose text holds no such run is
   not a person ("perfectly spontaneous, untaught feeling"). A leading title also makes a
   mention typed otherwise a person ("Sir Walter" read as an ORG).
2. Every full name (given name and surname) is a character; its titled and untitled forms join
   it ("Mr. John Cavendish").
3. A short form ("Cavendish", "Mr. Inglethorp", "Monsieur John", "Captain Wentworth") joins the
   one character whose given name or surname it is and whose gender and rank do not conflict;
   rank titles (Captain, Dr, Admiral, ...) must agree when both carry one.
4. A short form several characters could own is resolved per chunk: to the one candidate named
   in the same chunk, else it stays apart, marked with its candidates, so it never merges two
   people who share a surname or a title.
5. Short forms with no full name group among themselves by the same rules ("Poirot" and
   "Monsieur Poirot"; "Mr. Inglethorp" and "Mrs. Inglethorp" stay two).

A character is named by the fullest proper name used for it (most words, then most mentions).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from llama_index_e2rag.extract.gender import name_gender, title_gender
from llama_index_e2rag.extract.linking import HONORIFICS, PERSON_TYPES
from llama_index_e2rag.schema import (
    APART_ATTR,
    GraphNode,
    NodeKind,
    make_id,
    normalize_text,
    sort_by_position,
)

#: Titles that name a rank or office: two forms carrying different ones are different people
#: ("Captain Wentworth" is not "Mr. Wentworth", his brother the curate).
RANK_TITLES = frozenset(
    """captain capt admiral colonel col major general lieutenant sergeant inspector dr doctor
    professor prof rev reverend judge squire""".split()
)
#: Forms of address that are not names ("Papa Poirot", "Mademoiselle Cynthia").
_ADDRESS = frozenset(
    """papa mama mamma mademoiselle demoiselle signor signore signora signorina herr frau
    fraulein senor senora senorita nurse cousin grandmother grandfather granny grandpapa
    grandmamma count countess duke duchess baron baroness marquis marchioness superintendent
    constable""".split()
)
#: Titles of a married and of an unmarried woman: one person never carries both.
MARRIED = frozenset("mrs madame mme dame signora frau senora".split())
UNMARRIED = frozenset("miss mademoiselle mlle demoiselle signorina fraulein senorita".split())
#: Lower-case particles inside a name ("Madame de Merret", "Ludwig van Beethoven").
_PARTICLES = frozenset("de du des d von van der den di da del della".split())
#: Every word read as a title in front of a name.
TITLE_WORDS = HONORIFICS | RANK_TITLES | _ADDRESS
_TITLES = TITLE_WORDS
#: Last words that make a capitalised run a place or a thing ("Styles Court", "Baker Street").
_NOT_PERSON_ENDS = frozenset(
    """court hall house street square park manor abbey castle church road lane place inn hotel
    cottage farm lodge station bridge river hill wood woods town city murder""".split()
)
#: Capitalised words that start sentences or address people but are never a name.
_NOT_NAMES = frozenset(
    """i my our your his her their the a an one oh ah yes no well but and so then now there here
    this that these those what who why how when where o dear darling dearest poor old young little
    good""".split()
)
_WORD = re.compile(r"[^\W\d_][\w'’.-]*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s?$")
_MAX_CORE = 4


@dataclass(frozen=True)
class PersonName:
    """A person's name as a mention writes it: its surface, titles and core words (normalised)."""

    surface: str
    titles: tuple[str, ...]
    core: tuple[str, ...]

    @property
    def gender(self) -> Optional[str]:
        """From a title, else from a given name on the short lists (only for a full name or a
        titled given name, since a lone surname like "Thomas" says nothing)."""
        return title_gender(self.titles) or (
            name_gender(self.core[0]) if len(self.core) > 1 else None
        )

    @property
    def ranks(self) -> frozenset[str]:
        return frozenset(t for t in self.titles if t in RANK_TITLES)

    @property
    def full(self) -> bool:
        return len(self.core) > 1


def person_name(text: str) -> Optional[PersonName]:
    """The name a person mention's text holds: the first run of titles and capitalised words
    with at least one word that is not a title; ``None`` when there is none."""
    words = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]
    k = 0
    while k < len(words):
        titles: list[str] = []
        core: list[str] = []
        start = words[k][1]
        end = start
        j = k
        while j < len(words):
            word, _, stop = words[j]
            key = normalize_text(_POSSESSIVE.sub("", word))
            if not core and key in _TITLES and (word[0].isupper() or titles):
                titles.append(key)
            elif word[0].isupper() and key and key not in _NOT_NAMES and key not in _TITLES:
                core.append(key)
            elif key in _PARTICLES and (titles or core) and j + 1 < len(words) and words[
                    j + 1][0][0].isupper():
                pass  # "Madame de Merret": the particle is part of the name, not its end
            else:
                break
            end = stop
            j += 1
            if _POSSESSIVE.search(word):
                break  # "John Cavendish's concern": the name ends at the possessive
        if core:
            if len(core) > _MAX_CORE or core[-1] in _NOT_PERSON_ENDS or len(core[-1]) < 2:
                return None  # too long, a place, or an initial alone
            if not _ends_name(text, words, k, j):
                return None
            surface = _POSSESSIVE.sub("", text[start:end].rstrip(".,;:!?"))
            return PersonName(" ".join(surface.split()), tuple(titles), tuple(core))
        k = max(j, k + 1)
    return None


def _ends_name(text: str, words: list[tuple[str, int, int]], first: int, stop: int) -> bool:
    """A run is a name unless an article leads it ("the Musgroves": a family) or a lower-case
    word follows it directly ("Kellynch property": it modifies a noun), or words follow its
    possessive."""
    if first > 0 and normalize_text(words[first - 1][0]) in ("the", "a", "an"):
        return False
    if stop < len(words):
        if _POSSESSIVE.search(words[stop - 1][0]):
            return False  # "Mary Cavendish's concern" is the concern, not Mary
        gap = text[words[stop - 1][2] : words[stop][1]]
        if not gap.strip() and words[stop][0][0].islower():
            return False
    return True


def is_person_type(entity_type: Optional[str]) -> bool:
    """spaCy's PERSON and the LLM prompt's person-like types."""
    return normalize_text(entity_type or "") in PERSON_TYPES


@dataclass
class Character:
    """One person of the story: the mentions that name them and the forms of their name."""

    forms: list[PersonName] = field(default_factory=list)
    mentions: list[GraphNode] = field(default_factory=list)
    #: For a short form left apart: the names of the characters it could be.
    candidates: tuple[str, ...] = ()
    #: Occurrences per surface form (a chunk's mention node lists each in ``attrs["spans"]``).
    counts: Counter[str] = field(default_factory=Counter)
    #: The surface form each of ``mentions`` was read as.
    _form_of: list[str] = field(default_factory=list)

    @property
    def gender(self) -> Optional[str]:
        found = {f.gender for f in self.forms} - {None}
        return next(iter(found)) if len(found) == 1 else None

    @property
    def ranks(self) -> frozenset[str]:
        return frozenset(r for f in self.forms for r in f.ranks)

    @property
    def status(self) -> Optional[str]:
        """"married" / "unmarried" from the titles of the character's forms, else None."""
        return _status(t for f in self.forms for t in f.titles)

    @property
    def name(self) -> str:
        """The fullest proper name used: most core words, then most mentions, then earliest."""
        order = {f.surface: k for k, f in enumerate(self.forms)}
        best = max(
            self.forms, key=lambda f: (len(f.core), self.counts[f.surface], -order[f.surface])
        )
        return best.surface

    @property
    def aliases(self) -> list[str]:
        """Every form of the name once, in order of first mention."""
        first: dict[str, tuple] = {}
        for form, mention in zip(self._form_of, self.mentions):
            first[form] = min(first.get(form, mention.pos), mention.pos)
        return sorted(first, key=lambda surface: first[surface])

    def owns(self, form: PersonName) -> bool:
        """Whether ``form`` can name this character (rules 3 and 5)."""
        cores = {f.core for f in self.forms}
        full = [c for c in cores if len(c) > 1]
        if form.full:
            if not any(c[0] == form.core[0] and c[-1] == form.core[-1] for c in full):
                return False
        else:
            word = form.core[0]
            names = {w for c in full for w in (c[0], c[-1])} or {c[0] for c in cores}
            if word not in names:
                return False
        gender = self.gender
        if form.gender and gender and form.gender != gender:
            return False
        ranks = self.ranks
        if form.ranks and ranks and not form.ranks & ranks:
            return False
        status = _status(form.titles)
        return not (status and self.status and status != self.status)

    def told_apart(self, mentions: Sequence[GraphNode]) -> bool:
        """Whether the text names ``mentions`` beside a mention of this character as another
        person: two arguments of one verb ("Mrs. Hale asked Margaret Hale")."""
        def names(group: Iterable[GraphNode]) -> set[str]:
            return {normalize_text(m.name or m.text) for m in group}

        def apart(group: Iterable[GraphNode]) -> set[str]:
            return {normalize_text(n) for m in group for n in m.attrs.get(APART_ATTR, ())}

        mine = names(self.mentions)
        return bool(apart(mentions) & mine or apart(self.mentions) & names(mentions))

    def absorb(self, form: PersonName, mentions: Iterable[GraphNode]) -> "Character":
        if form not in self.forms:
            self.forms.append(form)
        for mention in mentions:
            self.mentions.append(mention)
            self._form_of.append(form.surface)
            self.counts[form.surface] += len(mention.attrs.get("spans") or [None])
        return self


def characters(
    mentions: Sequence[GraphNode],
) -> tuple[list[Character], list[GraphNode]]:
    """The document's characters (story order of first mention) and the mentions that are no
    person's name (left to the other entity rules)."""
    forms: dict[tuple, tuple[PersonName, list[GraphNode]]] = {}
    rest: list[GraphNode] = []
    unsure: list[tuple[GraphNode, PersonName]] = []
    for mention in sort_by_position(mentions):
        text = (mention.name or mention.text or "").strip()
        name = person_name(text)
        if name is None:
            rest.append(mention)
        elif _may_be_person(mention, text):
            forms.setdefault(_form_key(name), (name, []))[1].append(mention)
        else:
            unsure.append((mention, name))
    # the parser types some mentions of a person otherwise ("Inglethorp's" as an ORG, "Cavendish"
    # as a NORP): a name that is a person's form elsewhere in the document is that person's
    known = {name.core for name, _ in forms.values()}
    known |= {w for name, _ in forms.values() if name.full for w in (name.core[0], name.core[-1])}
    for mention, name in unsure:
        if name.core in known or (not name.full and name.core[0] in known):
            forms.setdefault(_form_key(name), (name, []))[1].append(mention)
        else:
            rest.append(mention)
    found: list[Character] = []
    by_full: dict[tuple[str, str], Character] = {}
    # full names spelled out before those with an initial ("L. Cavendish" finds Lawrence)
    ordered = sorted(forms.values(), key=lambda pair: (-len(pair[0].core), _initial(pair[0])))
    # rule 2: full names first, one character per given name + surname
    for form, members in ordered:
        if not form.full:
            continue
        key = (form.core[0], form.core[-1])
        owner = by_full.get(key)
        if owner is None and _initial(form):
            spelled = [c for (first, last), c in by_full.items()
                       if last == key[1] and first.startswith(key[0])]
            owner = spelled[0] if len(spelled) == 1 else None
        if owner is None or (form.gender and owner.gender and form.gender != owner.gender):
            owner = Character()
            found.append(owner)
            by_full.setdefault(key, owner)
        owner.absorb(form, members)
    # rules 3-5: titled short forms before bare ones, so "Poirot" finds "Monsieur Poirot"
    shorts = [pair for pair in ordered if not pair[0].full]
    shorts.sort(key=lambda pair: (not pair[0].titles, sort_by_position(pair[1])[0].pos))
    genders, statuses = _titled_kinds(form for form, _ in shorts)
    for form, members in shorts:
        owners = [c for c in found if not c.candidates and c.owns(form)
                  and not c.told_apart(members)]
        if form.gender and len(genders[form.core]) > 1:
            # "Monsieur" and "Madame Vervelle" both named: a gendered form joins only a
            # character known to be of its gender ("Virginie" is on no list of given names)
            owners = [c for c in owners if c.gender == form.gender]
        status = _status(form.titles)
        if status and len(statuses[form.core]) > 1:
            # "Madame" and "Mademoiselle Vervelle" both named: mother and daughter, and the
            # name alone does not tell which one "Virginie Vervelle" is; join only the form's own
            owners = [c for c in owners if c.status == status]
        if len(owners) == 1:
            owners[0].absorb(form, members)
        elif not owners:
            found.append(Character().absorb(form, members))
        else:
            ranked = [c for c in owners if form.ranks & c.ranks]
            if len(ranked) == 1:
                ranked[0].absorb(form, members)
            else:
                found.extend(_by_chunk(form, members, owners))
    found = [c for c in found if c.mentions]
    found.sort(key=lambda c: min(m.pos for m in c.mentions))
    return found, rest


def _status(titles: Iterable[str]) -> Optional[str]:
    """"married" / "unmarried" from a woman's titles, else None."""
    found = set(titles)
    return "married" if found & MARRIED else "unmarried" if found & UNMARRIED else None


def _titled_kinds(
    forms: Iterable[PersonName],
) -> tuple[dict[tuple[str, ...], set[str]], dict[tuple[str, ...], set[str]]]:
    """Surname (core) -> the genders, and the marital titles, its short forms carry (a married
    woman's title never joins an unmarried one's: Madame Vervelle is not Mademoiselle Vervelle,
    her daughter, while Mrs. Cavendish may be Mary Cavendish)."""
    genders: dict[tuple[str, ...], set[str]] = defaultdict(set)
    statuses: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for form in forms:
        genders[form.core].update({form.gender} - {None})
        statuses[form.core].update({_status(form.titles)} - {None})
    return genders, statuses


def _initial(name: PersonName) -> bool:
    return len(name.core[0].rstrip(".")) == 1


def _form_key(name: PersonName) -> tuple:
    """Forms read alike are one form ("Mrs. Smith" and "Mrs Smith"; not "Miss Smith")."""
    return (name.core, name.gender, name.ranks, frozenset(name.titles) & (MARRIED | UNMARRIED))


def _may_be_person(mention: GraphNode, text: str) -> bool:
    """Typed a person, or led by a title ("Sir Walter" read as an ORG)."""
    if is_person_type(mention.attrs.get("entity_type")):
        return True
    first = text.split()[0] if text.split() else ""
    return bool(first[:1].isupper()) and normalize_text(first) in _TITLES


def _by_chunk(
    form: PersonName, members: Sequence[GraphNode], owners: Sequence[Character]
) -> list[Character]:
    """Rule 4: each mention of an ambiguous form joins the one candidate named in its chunk;
    the others stay together as a character of their own, marked with the candidates."""
    chunks: dict[Optional[str], set[int]] = defaultdict(set)
    for k, owner in enumerate(owners):
        for mention in owner.mentions:
            chunks[mention.chunk_id].add(k)
    left: list[GraphNode] = []
    for mention in members:
        present = chunks.get(mention.chunk_id, set())
        if len(present) == 1:
            owners[next(iter(present))].absorb(form, [mention])
        else:
            left.append(mention)
    if not left:
        return []
    apart = Character(candidates=tuple(o.name for o in owners))
    return [apart.absorb(form, left)]


def character_node(doc_id: str, person: Character) -> GraphNode:
    """A character (``characters``) as an entity: named by its fullest name, typed a person,
    with every form of its name as an alias (and, for a form left apart, its candidates)."""
    ordered = sort_by_position(person.mentions)
    first = ordered[0]
    descriptions = list(dict.fromkeys(
        text for m in ordered if (text := str(m.attrs.get("description") or "").strip())
    ))
    description = " ".join(descriptions)
    types = [m.attrs.get("entity_type") for m in ordered]
    attrs: dict[str, object] = {
        "event_graph": "entity",
        "entity_type": next((t for t in types if is_person_type(t)), "PERSON"),
        "aliases": person.aliases,
        "mentions": sum(person.counts.values()),
        "description": description,
    }
    if person.candidates:
        attrs["candidates"] = list(person.candidates)
    return entity_node(doc_id, person.name, first, attrs)


def entity_node(doc_id: str, name: str, first: GraphNode, attrs: dict[str, object]) -> GraphNode:
    """An entity of E²GraphRAG's layer (a character or a fused set of other names): text
    "name: description", placed at its first mention ``first``."""
    description = str(attrs.get("description") or "")
    return GraphNode(
        id=make_id(doc_id, "eventgraph_entity", first.pos, name),
        kind=NodeKind.ENTITY,
        text=f"{name}: {description}" if description else name,
        doc_id=doc_id,
        pos=first.pos,
        span=first.span,
        chunk_id=first.chunk_id,
        name=name,
        attrs=attrs,
    )
