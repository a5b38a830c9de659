"""A predicate's readable statement, read off the spaCy parse: subject, predicate and arguments.

An event's grounded text is a contiguous span of the source, so a verb that shares its subject
with a conjoined verb reads as a fragment ("shed big tears"), and a relative clause as "who flew
to him". ChronoRAG's LLM-free facts are these events shown one after another, so fragments glue
into nonsense ("Peter gave himself up for lost shed big tears"). A statement is the predicate's
own tokens in text order (negation, auxiliaries, particles, objects, prepositional arguments and
clausal complements kept; conjoined verbs, adverbial, paratactic and relative clauses cut at any
depth) with the subject it shares filled in:

- a conjoined verb without a subject takes its first conjunct's ("Peter gave himself up for lost
  and shed big tears" -> "Peter shed big tears"), with that conjunct's auxiliaries and negation
  when the verb cannot stand without them ("he had not eaten or slept" -> "he had not slept");
- a relative clause puts the noun it describes in its relative word's place ("sparrows, who
  flew to him" -> "sparrows flew to him"), or after the verb for an object gap ("the shoes that
  he lost" -> "he lost the shoes").

Pronouns stay as written: the statement is extractive, every word is the source's.
"""

from __future__ import annotations

from typing import Any, Optional

#: A statement longer than this many tokens is no readable fact (and walking nested clausal
#: complements token by token must stay linear in a sentence that chains them without end).
LONGEST_STATEMENT = 60

_PREDICATE_POS = frozenset({"VERB", "AUX"})
#: Dependents heading a clause of their own, cut from a statement wherever they hang.
_OWN_CLAUSE_DEPS = frozenset({"advcl", "parataxis", "relcl"})
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
_AUX_DEPS = frozenset({"aux", "auxpass", "neg"})
#: Verb forms that need an auxiliary to make a clause ("had eaten and *gone*").
_NON_FINITE_TAGS = frozenset({"VB", "VBN", "VBG"})
#: Relative words; the first two leave a gap the described noun fills ("who", "which", "that").
_RELATIVE_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_GAP_RELATIVE_TAGS = frozenset({"WDT", "WP"})
_PLURAL_FORMS = frozenset({"are", "were", "have"})
_EDGE_DEPS = frozenset({"cc", "punct", "mark", "preconj"})


def statement(verb: Any) -> Optional[str]:
    """The readable statement of ``verb``'s clause, or None when it would be longer than
    ``LONGEST_STATEMENT`` tokens (the caller keeps the grounded clause then)."""
    own = _own_tokens(verb)
    if own is None:
        return None
    tokens: list[Any] = list(own)
    relative_clause = next((a for a in [verb, *verb.ancestors] if a.dep_ == "relcl"), None)
    if relative_clause is not None and (
        verb.i == relative_clause.i or any(t.tag_ in _GAP_RELATIVE_TAGS for t in tokens)
    ):  # the clause itself, or a complement holding its relative word ("which ... to pop")
        tokens = _with_described_noun(verb, relative_clause, tokens)
    elif _clausal_conjunct(verb) and not _subject(verb):
        tokens = _with_shared_subject(verb, tokens)
    if tokens is None or len(tokens) > LONGEST_STATEMENT:
        return None
    return _text(_trim(tokens))


def _text(tokens: list[Any]) -> str:
    """The tokens as the source spells them, one space where words were cut out, on one line;
    a sentence's first word moved inside the statement loses its capital ("painted the boat")."""
    parts: list[str] = []
    for k, (tok, after) in enumerate(zip(tokens, [*tokens[1:], None])):
        moved = k > 0 and tok.is_sent_start and tok.pos_ != "PROPN" and tok.text != "I"
        parts.append(tok.lower_ if moved else tok.text)
        if after is not None:
            parts.append(tok.whitespace_ if after.i == tok.i + 1 else " ")
    return " ".join("".join(parts).split())


def _own_tokens(root: Any) -> Optional[list[Any]]:
    """``root``'s subtree without the clauses it embeds, in text order; None past the limit.

    A conjoined verb is cut with the coordinating conjunctions of its head ("and").
    """
    out: list[Any] = []
    todo = [root]
    while todo:
        tok = todo.pop()
        out.append(tok)
        if len(out) > LONGEST_STATEMENT:
            return None
        children = list(tok.children)
        cut = [c for c in children if c.dep_ in _OWN_CLAUSE_DEPS or _clausal_conjunct(c)]
        for child in children:
            if child in cut or (cut and child.dep_ in ("cc", "preconj")):
                continue
            todo.append(child)
    return sorted(out, key=lambda t: t.i)


def _clausal_conjunct(tok: Any) -> bool:
    """A conjunct that is a clause ("ran and *hid*"), not a noun ("apples and *pears*").

    A verb hanging off a verb by the parser's unlabelled ``dep`` is one too: that is how it
    leaves the middle of a list ("opened the letter, *read* it twice and burned it").
    """
    if tok.dep_ == "dep":
        return tok.pos_ in _PREDICATE_POS and tok.head.pos_ in _PREDICATE_POS
    return tok.dep_ == "conj" and (tok.pos_ in _PREDICATE_POS or tok.head.pos_ in _PREDICATE_POS)


def _subject(verb: Any) -> Optional[Any]:
    return next((c for c in verb.children if c.dep_ in _SUBJECT_DEPS), None)


def _with_shared_subject(verb: Any, tokens: list[Any]) -> Optional[list[Any]]:
    """A subjectless conjunct with the subject of its first conjunct (and, for a non-finite
    verb with no auxiliary, that conjunct's auxiliaries and negation)."""
    first = verb.head
    while _clausal_conjunct(first) and not _subject(first) and first.head.i != first.i:
        first = first.head
    subject = _subject(first)
    if subject is None or any(t.is_quote for t in verb.doc[subject.i : verb.i]):
        return tokens  # no subject, or one outside the quotation the verb is in
    phrase = _subject_phrase(first, subject)
    if phrase is None:
        return None
    borrowed = list(phrase)
    if verb.tag_ in _NON_FINITE_TAGS and not any(c.dep_ in _AUX_DEPS for c in verb.children):
        borrowed += [c for c in first.children if c.dep_ in _AUX_DEPS and c.i < first.i]
    taken = {t.i for t in tokens}
    return sorted([t for t in borrowed if t.i not in taken] + tokens, key=lambda t: t.i)


def _subject_phrase(clause: Any, subject: Any) -> Optional[list[Any]]:
    """The subject's words; a relative word stands for the noun its clause describes."""
    if clause.dep_ == "relcl" and subject.tag_ in _GAP_RELATIVE_TAGS:
        return _described_noun(clause)
    return _own_tokens(subject)


def _with_described_noun(verb: Any, clause: Any, tokens: list[Any]) -> Optional[list[Any]]:
    """``verb``'s tokens with the noun the relative ``clause`` describes in the gap its
    relative word leaves: the subject's place, or after the verb whose object it is. "whose",
    "where", a preposition's object ("in which she lived") and other gaps keep the clause as
    written."""
    noun = _described_noun(clause)
    if noun is None:
        return None
    relative = next((t for t in tokens if t.tag_ in _RELATIVE_TAGS), None)
    subjects = [c.i for c in verb.children if c.dep_ in _SUBJECT_DEPS]
    if relative is None:  # "the shoes he lost": the verb's object gap
        gap_verb = verb
    elif relative.tag_ not in _GAP_RELATIVE_TAGS:
        return tokens
    elif relative.head.i == verb.i and subjects == [relative.i]:
        at = tokens.index(relative)
        return tokens[:at] + noun + tokens[at + 1 :]
    elif relative.dep_ == "dobj" or (relative.dep_ in _SUBJECT_DEPS and len(subjects) > 1):
        # a relative word parsed as a second subject ("which the fisherman painted") is the
        # object; the object may be a complement's ("which he intended to pop")
        gap_verb = relative.head
    else:
        return tokens
    gap = relative.i if relative is not None else -1
    if any(c.dep_ == "dobj" and c.i != gap for c in gap_verb.children):
        return tokens
    rest = [t for t in tokens if t.i != gap]
    stranded = [c for c in gap_verb.children if c.dep_ == "prep" and not list(c.children)]
    last = max([gap_verb, *(c for c in gap_verb.children if c.dep_ in ("prt", "dative"))],
               key=lambda t: t.i)
    at = rest.index(stranded[-1] if stranded else last) + 1
    return rest[:at] + noun + rest[at:]


def _described_noun(verb: Any) -> Optional[list[Any]]:
    """The noun a relative clause describes; the whole coordination when a plural verb says so
    ("Flopsy, Mopsy, and Cottontail, who were")."""
    noun = verb.head
    helpers = [verb, *(c for c in verb.children if c.dep_ in ("aux", "auxpass"))]
    if any(t.lower_ in _PLURAL_FORMS or t.tag_ == "VBP" for t in helpers):
        while noun.dep_ == "conj" and noun.head.i != noun.i:
            noun = noun.head
    return _own_tokens(noun)


def _trim(tokens: list[Any]) -> list[Any]:
    """Drop punctuation touching a cut (the commas of a removed clause), then conjunctions,
    marks and punctuation at both ends."""
    kept = []
    for k, tok in enumerate(tokens):
        if tok.is_punct:
            before = tokens[k - 1].i == tok.i - 1 if k > 0 else False
            after = tokens[k + 1].i == tok.i + 1 if k + 1 < len(tokens) else False
            if not (before and after):
                continue
        kept.append(tok)
    edge = [t.dep_ in _EDGE_DEPS or t.is_punct or t.is_space for t in kept]
    start = next((k for k, e in enumerate(edge) if not e), len(kept))
    end = len(kept) - next((k for k, e in enumerate(reversed(edge)) if not e), len(kept))
    return kept[start:end]

