"""Predicate frames read from a spaCy parse: each verb with its arguments and its own clause.

What the grounded extractor (``grounded``) turns into events and mentions: the arguments of a
verb by syntactic relation (subject, object, passive agent, preposition) with PropBank-style
roles, pronouns resolved to the nearest name of the same gender, conjuncts shared, relative and
inherited arguments filled in, and the clause of each verb cut out of its sentence. The rules
are spelled out in ``docs/offline.md``; nothing here builds graph nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

from llama_index_e2rag.extract.characters import TITLE_WORDS
from llama_index_e2rag.extract.pronouns import (
    NARRATOR_KEY,
    NARRATOR_NAME,
    NARRATOR_WORDS,
    REFLEXIVE,
    Antecedents,
    Person,
    group_pronouns,
    narrator_tokens,
    pronoun_gender,
)
from llama_index_e2rag.extract.nominals import Nominal, nominals
from llama_index_e2rag.extract.realis import is_realis
from llama_index_e2rag.extract.speakers import Who, attribute, quotes, spoken_pronouns
from llama_index_e2rag.extract.gender import FEMALE_NAMES, FEMALE_TITLES, MALE_NAMES, MALE_TITLES
from llama_index_e2rag.schema import normalize_text

#: Named-entity labels that become mentions even when they fill no role.
_NAMED = frozenset(
    {"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART"}
)
_TEMPORAL_ENTS = frozenset({"DATE", "TIME"})
_PLACE_ENTS = frozenset({"GPE", "LOC", "FAC"})
_AGENT_ENTS = frozenset({"PERSON", "ORG", "NORP"})
_NUMERIC_ENTS = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"})
_TEMPORAL_NOUNS = frozenset(
    """morning evening night day week month year hour minute moment time dawn dusk noon midnight
    afternoon yesterday today tomorrow tonight christmas summer winter spring autumn season
    instant while""".split()
)
_TEMPORAL_PREPS = frozenset("before after during until till since".split())
_LOCATIVE_PREPS = frozenset(
    """at in into inside near on onto under behind beside above below across through outside
    towards toward upon within beneath over along around against""".split()
)
_RELATIVE_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_RELATIVE_ADVERB_ROLES = {"where": "AM-LOC", "when": "AM-TMP"}
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
#: Children whose subtrees are clauses of their own, cut from an event's grounded text.
_OWN_CLAUSE_DEPS = frozenset({"conj", "advcl", "parataxis", "relcl"})
_EDGE_TRIM_DEPS = frozenset({"cc", "punct", "mark", "preconj"})


class Ref:
    """An argument after resolution: a mention key, its surface name and where it was found."""

    __slots__ = ("key", "name", "label", "start", "end", "anchor", "nominal")

    def __init__(
        self, key: str, name: str, label: str, start: int, end: int, anchor: int,
        nominal: bool = False,
    ) -> None:
        self.key, self.name, self.label = key, name, label
        self.start, self.end, self.anchor = start, end, anchor
        #: a person named by a noun phrase ("his sister") rather than by a name
        self.nominal = nominal


def _gender_of(span: Any) -> Optional[str]:
    """'m' / 'f' from a title inside or just before a PERSON span, else None (either)."""
    first = span[0].lower_
    words = {t.lower_.rstrip(".") for t in span}
    if span.start > 0:
        words.add(span.doc[span.start - 1].lower_.rstrip("."))
    if words & MALE_TITLES or first in MALE_NAMES:
        return "m"
    if words & FEMALE_TITLES or first in FEMALE_NAMES:
        return "f"
    return None


def _strip_leading(span: Any) -> Any:
    """Drop determiners ('the', 'a') and punctuation from the front of a span."""
    start = span.start
    while start < span.end - 1 and span.doc[start].dep_ in ("det", "predet", "punct"):
        start += 1
    end = span.end
    while end > start + 1 and span.doc[end - 1].dep_ in ("case", "punct"):
        end -= 1  # "Peter's" -> "Peter"
    return span.doc[start:end]


def _trimmable(tok: Any) -> bool:
    return tok.dep_ in _EDGE_TRIM_DEPS or tok.is_punct or tok.is_space


def _name(text: str) -> str:
    """A mention name on one line ("Lady St.\nSimon" -> "Lady St. Simon")."""
    return " ".join(text.split())


def titled_names(doc: Any) -> None:
    """Put the titles in front of a name into its entity, as a PERSON ("Mrs." + "Inglethorp").

    spaCy's small model leaves them out, which loses the one word that tells Mrs. Inglethorp
    from Mr. Inglethorp, and reads some titled names as places or organisations ("Sir Walter").
    """
    changed = []
    for ent in doc.ents:
        start = ent.start
        while start > 0 and _is_title(doc[start - 1]) and not doc[start - 1].ent_type_:
            start -= 1  # a title another entity holds stays there: entities never overlap
        if start < ent.start and (ent.label_ == "PERSON" or ent.label_ in _NAMED):
            ent = doc[start : ent.end]
            ent.label_ = "PERSON"
        elif _is_title(ent[0]) and len(ent) > 1 and ent.label_ in _NAMED:
            ent.label_ = "PERSON"
        changed.append(ent)
    if any(a.start != b.start or a.label_ != b.label_ for a, b in zip(changed, doc.ents)):
        doc.ents = changed


def _is_title(tok: Any) -> bool:
    """A capitalised title word ("Mrs.", "Captain", "Sir"), as the characters read names."""
    return tok.text[:1].isupper() and normalize_text(tok.text) in TITLE_WORDS


@dataclass
class Frame:
    """One predicate with its arguments, before it becomes an event node."""

    verb: Any
    args: list[tuple[str, Ref]] = field(default_factory=list)
    negated: bool = False
    modality: Optional[str] = None
    aux: list[str] = field(default_factory=list)
    passive: bool = False
    date: Optional[str] = None
    clause: tuple[int, int] = (0, 0)  # token range of the grounded clause
    realis: bool = False  # told as actually happening (``realis``)


class DocFrames:
    """Frames and mentions of one parsed text; the rules of ``docs/offline.md`` live here."""

    def __init__(
        self, doc: Any, resolve_pronouns: bool, earlier: Sequence[Person] = ()
    ) -> None:
        """``earlier``: the persons the previous chunk of the text ended with
        (``last_people``), for the pronouns that open this one."""
        titled_names(doc)
        self.doc = doc
        self.resolve_pronouns = resolve_pronouns
        #: token index -> (the entity or noun chunk it is in, its entity label or "")
        self._span_of_token: dict[int, tuple[Any, str]] = {}
        for span in doc.ents:
            for tok in span:
                self._span_of_token[tok.i] = (span, span.label_)
        for chunk in doc.noun_chunks:
            for tok in chunk:
                self._span_of_token.setdefault(tok.i, (chunk, ""))
        found = quotes(doc)
        self._quoted = {i for quote in found for i in range(quote.start, quote.end)}
        #: every person in text order, and what each he/she stands for
        #: the persons the chunk before ended with
        self.earlier = list(earlier) if resolve_pronouns else []
        self._people = Antecedents(doc, self._person_key, _gender_of, self.earlier)
        #: head token -> the person noun phrase there ("his sister", "the captain")
        self._nominals = {n.head: self._nominal_ref(n) for n in nominals(doc, self._people)}
        #: token index -> whom a quoted I/me/my or you/your stands for (its speaker or
        #: listener, ``extract/speakers``), or a they/them/their (a group of people)
        self._readings: dict[int, Who] = {}
        if resolve_pronouns:
            self._readings.update(spoken_pronouns(doc, attribute(doc, found, self._who)))
            phrases = {head: (ref.key, ref.name) for head, ref in self._nominals.items()}
            self._readings.update(group_pronouns(doc, phrases))
        #: token index -> trimmed token range of its sentence (built when first asked)
        self._sentence_range: Optional[dict[int, tuple[int, int]]] = None
        self.frames = [self._frame(tok) for tok in doc if self._is_predicate(tok)]
        self.named = [self._named_ref(e) for e in doc.ents if e.label_ in _NAMED]

    @staticmethod
    def _is_predicate(tok: Any) -> bool:
        if tok.pos_ == "VERB":
            return tok.dep_ not in ("aux", "auxpass", "amod", "compound")
        # copulas ("Holmes was a detective") head their clause as AUX
        return tok.pos_ == "AUX" and tok.dep_ not in ("aux", "auxpass")

    # -- arguments --------------------------------------------------------------------------

    def _ref(self, tok: Any, frame: Optional[Frame] = None) -> Optional[Ref]:
        """The mention an argument token stands for, or None (bare pronoun, no noun)."""
        if tok.pos_ == "PRON":
            return self._resolve(tok, frame) if self.resolve_pronouns else None
        span, label = self._span_of_token.get(tok.i, (None, ""))
        if span is None:
            if tok.pos_ not in ("NOUN", "PROPN"):
                return None
            # a bare noun outside any noun chunk ("last night" as an adverbial): take its phrase
            span = self.doc[tok.left_edge.i : tok.i + 1]
        if label in _NUMERIC_ENTS:
            return None
        core = _strip_leading(span)
        if core.root.pos_ == "PRON" or not normalize_text(core.text):
            return None
        if core.root.i in self._nominals:
            return self._nominals[core.root.i]
        key = normalize_text(core.text)
        return Ref(key, _name(core.text), label, core.start_char, core.end_char, core.root.i)

    def _nominal_ref(self, nominal: Nominal) -> Ref:
        """A person noun phrase as an occurrence of the person it names, else as its own."""
        phrase = self.doc[nominal.start : nominal.end]  # with its article, as readers mark it
        start, end = phrase.start_char, phrase.end_char
        if nominal.person is not None:
            person = nominal.person
            return Ref(person.key, person.name, "PERSON", start, end, nominal.head)
        core = _strip_leading(phrase)
        return Ref(normalize_text(core.text), _name(core.text), "PERSON", start, end,
                   nominal.head, nominal=True)

    def _who(self, tok: Any) -> Optional[Who]:
        """The person a token heads: a name, a resolved he/she, a person noun phrase, or the
        narrator's I."""
        if tok.lower_ in NARRATOR_WORDS and tok.i not in self._quoted:
            return NARRATOR_KEY, NARRATOR_NAME
        person = self._people.at(tok.i)
        if person is not None:
            return person.key, person.name
        nominal = self._nominals.get(tok.i)
        return None if nominal is None else (nominal.key, nominal.name)

    def last_people(self) -> list[Person]:
        """The persons this text ends with, for the next chunk's opening pronouns."""
        return self._people.last_people()

    def nominal_refs(self) -> list[Ref]:
        """Every person noun phrase, argument or not, in text order (``extract/nominals``)."""
        return [self._nominals[head] for head in sorted(self._nominals)]

    def _resolve(self, tok: Any, frame: Optional[Frame]) -> Optional[Ref]:
        """He/him/she/her(self) -> the person it stands for (``pronouns.Antecedents``); a
        quoted I/you -> its speaker/listener; they/them -> the group just named."""
        spoken = self._readings.get(tok.i)
        if spoken is not None:
            return Ref(spoken[0], spoken[1], "PERSON", tok.idx, tok.idx + len(tok.text), tok.i)
        gender = pronoun_gender(tok)
        if gender is None:
            return None
        # A plain object pronoun never corefers with its own clause's subject (binding); a
        # reflexive one does.
        excluded: set[str] = set()
        wanted: set[str] = set()
        if frame is not None:
            clause_args = {r.key for role, r in frame.args if role in ("A0", "A1")}
            (wanted if tok.lower_ in REFLEXIVE else excluded).update(clause_args)
        people = self._people
        person = None
        if wanted:
            person = next((p for p in reversed(people.people) if p.key in wanted
                           and p.start < tok.i and people.gender(p) in (None, gender)), None)
        if person is None:
            person = people.resolved(tok)
            if person is None or person.key in excluded:
                person = people.pick(tok, gender, excluded)
        if person is None:
            return None
        return Ref(person.key, person.name, "PERSON", tok.idx, tok.idx + len(tok.text), tok.i)

    def pronoun_refs(self) -> list[Ref]:
        """Every resolved he/his/she/her…, every I/me/my outside dialogue (the narrator),
        every quoted I/you whose speaker/listener is known and every they/them of a group just
        named, as an occurrence of that person or group."""
        if not self.resolve_pronouns:
            return []
        refs = [
            Ref(p.key, p.name, "PERSON", self.doc[i].idx, self.doc[i].idx + len(self.doc[i]), i)
            for i, p in self._people.occurrences()
        ]
        for i, (key, name) in sorted(self._readings.items()):
            tok = self.doc[i]
            refs.append(Ref(key, name, "PERSON", tok.idx, tok.idx + len(tok.text), i))
        for i in narrator_tokens(self.doc, self._quoted):
            tok = self.doc[i]
            refs.append(Ref(NARRATOR_KEY, NARRATOR_NAME, "PERSON", tok.idx,
                            tok.idx + len(tok.text), i))
        return refs

    def _person_key(self, span: Any) -> Optional[tuple[str, str]]:
        ref = self._named_ref(span)
        return None if ref is None else (ref.key, ref.name)

    def _named_ref(self, span: Any) -> Optional[Ref]:
        core = _strip_leading(span)
        key = normalize_text(core.text)
        if not key:
            return None
        return Ref(key, _name(core.text), span.label_, core.start_char, core.end_char, core.root.i)

    @staticmethod
    def _with_conjuncts(tok: Any) -> list[Any]:
        out, todo = [], [tok]
        while todo:
            cur = todo.pop()
            out.append(cur)
            todo.extend(c for c in cur.children if c.dep_ == "conj")
        return sorted(out, key=lambda t: t.i)

    def _prep_role(self, prep: Any, obj: Any) -> str:
        ent = obj.ent_type_
        if ent in _TEMPORAL_ENTS or prep.lower_ in _TEMPORAL_PREPS or obj.lemma_ in _TEMPORAL_NOUNS:
            return "AM-TMP"
        if ent in _PLACE_ENTS:
            return "AM-LOC"
        if prep.lower_ in _LOCATIVE_PREPS and obj.pos_ != "PRON" and ent not in _AGENT_ENTS:
            return "AM-LOC"
        return "A2"

    def _syntactic_args(self, verb: Any, copula: bool) -> list[tuple[str, Any]]:
        """(role, token) pairs from the verb's own dependents."""
        pairs: list[tuple[str, Any]] = []
        for child in verb.children:
            dep = child.dep_
            if dep == "nsubj":
                pairs.append(("A1" if copula else "A0", child))
            elif dep in ("dobj", "nsubjpass"):
                pairs.append(("A1", child))
            elif dep in ("dative", "attr", "oprd"):
                pairs.append(("A2", child))
            elif dep == "agent":
                pairs += [("A0", o) for o in child.children if o.dep_ == "pobj"]
            elif dep == "prep":
                objects = [o for o in child.children if o.dep_ == "pobj"]
                pairs += [(self._prep_role(child, o), o) for o in objects]
            elif dep in ("npadvmod", "advmod") and (
                child.ent_type_ in _TEMPORAL_ENTS or child.lemma_ in _TEMPORAL_NOUNS
            ):
                pairs.append(("AM-TMP", child))
        return pairs

    def _inherited_args(self, verb: Any, own: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Arguments a verb shares with its head: coordination, control and relative clauses."""
        has = {role for role, _ in own}
        has_subject = any(c.dep_ in _SUBJECT_DEPS for c in verb.children)
        head, dep = verb.head, verb.dep_
        pairs: list[tuple[str, Any]] = []
        if dep == "relcl":
            rel = next(
                (c for c in verb.children if c.tag_ in _RELATIVE_TAGS or c.lower_ == "that"), None
            )
            if rel is None:  # "the book I read": the head noun fills the object gap
                pairs.append(("A1" if has_subject else "A0", head))
            else:
                role = next((r for r, t in own if t.i == rel.i), None)
                pairs.append((role or _RELATIVE_ADVERB_ROLES.get(rel.lower_, "A1"), head))
        elif dep == "acl" and verb.tag_ in ("VBN", "VBG"):
            # "the letter written by him" (A1), "the man sitting there" (A0)
            pairs.append(("A1" if verb.tag_ == "VBN" else "A0", head))
        elif not has_subject and dep in ("conj", "xcomp", "advcl") and head.i != verb.i:
            subj = next((c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            if subj is None and head.dep_ in ("conj", "xcomp") and head.head.i != head.i:
                subj = next((c for c in head.head.children if c.dep_ == "nsubj"), None)
            if subj is not None:
                passive = any(c.dep_ == "auxpass" for c in verb.children)
                pairs.append(("A1" if passive else "A0", subj))
        if "A1" not in has:
            # "bought and ate apples": a verb coordinated before an object shares it
            for conj in (c for c in verb.children if c.dep_ == "conj" and c.pos_ == "VERB"):
                pairs += [("A1", o) for o in conj.children if o.dep_ == "dobj" and o.i > conj.i]
                break
        return pairs

    # -- frames -----------------------------------------------------------------------------

    def _frame(self, verb: Any) -> Frame:
        copula = verb.pos_ == "AUX"
        frame = Frame(verb=verb, passive=any(c.dep_ == "auxpass" for c in verb.children))
        for child in verb.children:
            if child.dep_ == "neg":
                frame.negated = True
            elif child.dep_ in ("aux", "auxpass"):
                frame.aux.append(child.lemma_.lower())
                if child.tag_ == "MD" and frame.modality is None:
                    frame.modality = child.lower_
        own = self._syntactic_args(verb, copula)
        pairs = own + self._inherited_args(verb, own)
        # nouns first so that pronouns see the clause's subject when binding
        pairs.sort(key=lambda p: p[1].pos_ == "PRON")
        seen: set[tuple[str, str]] = set()
        for role, tok in pairs:
            for arg in self._with_conjuncts(tok):
                ref = self._ref(arg, frame)
                if ref is None or (role, ref.key) in seen:
                    continue
                seen.add((role, ref.key))
                frame.args.append((role, ref))
                if role == "AM-TMP" and frame.date is None:
                    frame.date = ref.name
        frame.clause = self._clause(verb)
        frame.realis = is_realis(verb, frame.negated, self._quoted)
        return frame

    def _clause(self, verb: Any) -> tuple[int, int]:
        """Token range of the verb's own clause: its subtree minus other clauses at the edges.

        Read from both edges inward, a cut clause skipped whole: listing the subtree made a
        sentence that chains clauses ("he ran and he ran and ...") quadratic in its length.
        """
        lefts = [c for c in verb.lefts if not _own_clause(c)]
        rights = [c for c in verb.rights if not _own_clause(c)]
        return _trimmed(
            _subtree_walk(verb, lefts, rights, backward=False),
            _subtree_walk(verb, lefts, rights, backward=True),
        )

    def is_whole_sentence(self, frame: Frame) -> bool:
        """Whether the clause is its sentence up to edge punctuation and conjunctions."""
        if self._sentence_range is None:  # once per parse, not once per verb
            doc = self.doc
            self._sentence_range = {}
            for sent in doc.sents:
                bounds = _trimmed(
                    (doc[i] for i in range(sent.start, sent.end)),
                    (doc[i] for i in range(sent.end - 1, sent.start - 1, -1)),
                )
                self._sentence_range.update(dict.fromkeys(range(sent.start, sent.end), bounds))
        return self._sentence_range[frame.verb.i] == frame.clause

    def title(self, frame: Frame) -> str:
        """Lemma-based short name: 'Harry open door'."""
        # a copula's subject is its A1 and its complement A2: "Holmes be detective"
        first_role, second_role = ("A1", "A2") if frame.verb.pos_ == "AUX" else ("A0", "A1")
        first = next((r.name for role, r in frame.args if role == first_role), None)
        second = next((r for role, r in frame.args if role == second_role), None)
        particle = " ".join(c.lower_ for c in frame.verb.children if c.dep_ == "prt")
        words = [first] if first else []
        words += ["not"] if frame.negated else []
        words += [frame.verb.lemma_.lower()] + ([particle] if particle else [])
        if second is not None:
            head = self.doc[second.anchor]
            words.append(second.name if second.label or head.pos_ == "PRON" else head.lemma_)
        return " ".join(words)


def _own_clause(child: Any) -> bool:
    """A child heading a clause of its own, cut from its head's clause (a relative clause stays)."""
    return child.dep_ in _OWN_CLAUSE_DEPS and child.dep_ != "relcl"


def _subtree_walk(root: Any, lefts: list[Any], rights: list[Any], backward: bool) -> Iterator[Any]:
    """``root.subtree`` with only the children ``lefts`` and ``rights`` of ``root``, in spaCy's
    order (left children's subtrees, the token, right children's subtrees) or its reverse;
    lazy, so a caller reading the edges pays for the edges only, and without recursion."""
    stack: list[tuple[Any, bool]] = []

    def push(tok: Any, left: list[Any], right: list[Any]) -> None:
        # the stack pops in output order: push the last output first
        if backward:
            stack.extend((t, False) for t in left)
            stack.append((tok, True))
            stack.extend((t, False) for t in right)
        else:
            stack.extend((t, False) for t in reversed(right))
            stack.append((tok, True))
            stack.extend((t, False) for t in reversed(left))

    push(root, lefts, rights)
    while stack:
        tok, ready = stack.pop()
        if ready:
            yield tok
        else:
            push(tok, list(tok.lefts), list(tok.rights))


def _trimmed(forward: Iterator[Any], backward: Iterator[Any]) -> tuple[int, int]:
    """``(first.i, last.i + 1)`` of a token sequence given from both ends, after dropping
    trimmable tokens at both edges while more than one is left (what popping them off a list
    does, reading only the edges)."""
    first = next((t for t in forward if not _trimmable(t)), None)
    if first is None:  # all trimmable: popping from the front leaves the last token
        last = next(backward)
        return last.i, last.i + 1
    last = next(t for t in backward if not _trimmable(t))
    return first.i, last.i + 1
