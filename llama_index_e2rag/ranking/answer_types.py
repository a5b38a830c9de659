"""What kind of answer a question asks for, and which sentences offer one (no LLM).

The extractive answer (``extractive.py``) ranks evidence sentences; a sentence that merely repeats
the question's words ("the shoes that Peter had lost") reads like an answer to a cosine score but
is not one. A *where* question wants a place, *who* a person, *when* a time, *why* a cause: this
module reads the question's wh-word and looks for those in a spaCy parse of each sentence, using
the pipeline the grounded extractor already loaded. A cue counts only when it is *new*: the person
in "Who helped Peter?" is not Peter, the place in "Where did he go after the net?" is not the net.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Iterable, Iterator

from llama_index_e2rag.extract.spacy_model import PARSE_LOCK


class AnswerType(str, Enum):
    """The kind of answer a question asks for."""

    PERSON = "who"
    PLACE = "where"
    TIME = "when"
    CAUSE = "why"
    OTHER = "other"


#: Question openings, tried in order at the first wh-word of the question.
_QUESTION_PATTERNS: tuple[tuple[re.Pattern[str], AnswerType], ...] = (
    (re.compile(r"\b(?:who|whom|whose)\b"), AnswerType.PERSON),
    (re.compile(r"\bwhere\b"), AnswerType.PLACE),
    (re.compile(r"\b(?:when|what time|what day|what year|how soon)\b"), AnswerType.TIME),
    (
        re.compile(r"\b(?:why|how come|for what reason|what (?:made|caused|was the reason))\b"),
        AnswerType.CAUSE,
    ),
)
_WH_WORD = re.compile(r"\b(?:who|whom|whose|where|when|why|what|which|how)\b")

_PERSON_ENTS = frozenset({"PERSON", "NORP"})
_PLACE_ENTS = frozenset({"GPE", "LOC", "FAC"})
_TIME_ENTS = frozenset({"DATE", "TIME"})
#: Nouns that name people in narratives, so "the old woman said" offers a *who* answer although
#: spaCy's small model knows no animacy.
PERSON_NOUNS = frozenset(
    """man woman men women boy girl child children lad lass maiden youth husband wife son
    daughter father mother brother sister king queen prince princess lord lady knight soldier
    servant master mistress farmer shepherd peasant fisherman hunter giant witch wizard fairy
    troll dwarf monk priest minister merchant beggar stranger people folk friend neighbour
    neighbor uncle aunt grandmother grandfather""".split()
)
_LOCATIVE_PREPS = frozenset(
    """at in into inside near on onto under underneath behind beside besides above below across
    through along around among amongst between beyond over upon within outside beneath by from
    to toward towards""".split()
)
_PLACE_ADVERBS = frozenset("home abroad upstairs downstairs indoors outdoors ashore".split())
TEMPORAL_NOUNS = frozenset(
    """morning evening night day week fortnight month year hour minute moment time dawn dusk
    noon midnight afternoon yesterday today tomorrow tonight christmas summer winter spring
    autumn season sunrise sunset""".split()
)
_TEMPORAL_PREPS = frozenset("before after during until till since at on in by".split())
_TEMPORAL_MARKERS = frozenset("when whenever after before while until till once as".split())
_TEMPORAL_ADVERBS = frozenset(
    "afterwards later soon presently yesterday tomorrow tonight meanwhile".split()
)
_CAUSE_WORDS = frozenset("because therefore thus hence reason".split())
_CAUSE_MARKERS = frozenset({"since", "for"})


#: The pipeline components that only add named entities, skipped when no entity is read.
ENTITY_FREE = ("ner",)


def answer_type(question: str) -> AnswerType:
    """The answer type of ``question``, read at its first wh-word ("what" and "how": OTHER)."""
    text = question.lower()
    first = _WH_WORD.search(text)
    if first is None:
        return AnswerType.OTHER
    tail = text[first.start() :]
    for pattern, kind in _QUESTION_PATTERNS:
        match = pattern.match(tail)
        if match is not None:
            return kind
    return AnswerType.OTHER


def content_lemmas(doc: Any) -> set[str]:
    """Lower-case lemmas of a parse's content words (no stop words, punctuation or numbers)."""
    return {
        tok.lemma_.lower()
        for tok in doc
        if tok.is_alpha and not tok.is_stop and tok.pos_ not in ("AUX", "DET", "PRON")
    }


def parse(nlp: Any, texts: Iterable[str], entities: bool = True) -> list[Any]:
    """Parse ``texts`` under the grounded extractor's lock (spaCy is not thread-safe).

    ``entities=False`` skips the entity recogniser (``ENTITY_FREE``), which is more than half of
    a parse with the small English model: what the other components give is the same, since it
    is the last of them and writes only entities."""
    skip = () if entities else [name for name in ENTITY_FREE if name in nlp.pipe_names]
    with PARSE_LOCK:
        return list(nlp.pipe(texts, disable=skip))


def needs_entities(kind: AnswerType) -> bool:
    """Whether ``offers`` reads named entities for ``kind`` (a cause, like the question's
    content words, is read from lemmas, tags and dependencies alone)."""
    return kind in (AnswerType.PERSON, AnswerType.PLACE, AnswerType.TIME)


def offers(doc: Any, kind: AnswerType, question_lemmas: set[str]) -> bool:
    """True when the parsed sentence ``doc`` names a ``kind`` not already in the question."""
    if kind is AnswerType.PERSON:
        return any(_new(tok, question_lemmas) for tok in _persons(doc))
    if kind is AnswerType.PLACE:
        return any(_new(tok, question_lemmas) for tok in _places(doc))
    if kind is AnswerType.TIME:
        return any(_new(tok, question_lemmas) for tok in _times(doc))
    if kind is AnswerType.CAUSE:
        return _has_cause(doc)
    return False


def _new(tok: Any, question_lemmas: set[str]) -> bool:
    return tok.lemma_.lower() not in question_lemmas


def _persons(doc: Any) -> Iterator[Any]:
    """Tokens naming a person: PERSON entities, people nouns and nouns a "who" clause describes
    ("some friendly sparrows, who flew to him")."""
    for tok in doc:
        if tok.pos_ not in ("NOUN", "PROPN"):
            continue
        if (
            tok.ent_type_ in _PERSON_ENTS
            or tok.lemma_.lower() in PERSON_NOUNS
            or any(
                child.dep_ == "relcl" and _starts_with_who(child)
                for child in tok.children
            )
        ):
            yield tok


def _starts_with_who(clause: Any) -> bool:
    first = next(iter(clause.subtree))
    return first.lower_ in ("who", "whom", "whose")


def _places(doc: Any) -> Iterator[Any]:
    """Tokens naming a place: GPE/LOC/FAC entities, "home", and objects of a locative
    preposition that are concrete (with a determiner or possessive, or a proper name) and neither
    a time nor a person ("gave it to the king", "to John"; spaCy's small model also calls "the
    gooseberry bush" a PERSON, so a determined noun is a place whatever its entity label)."""
    for tok in doc:
        if tok.ent_type_ in _PLACE_ENTS:
            yield tok
        elif tok.lower_ in _PLACE_ADVERBS and tok.dep_ in ("advmod", "npadvmod", "pobj"):
            yield tok
        elif (
            tok.dep_ == "pobj"
            and tok.pos_ in ("NOUN", "PROPN")
            and tok.head.lower_ in _LOCATIVE_PREPS
            and tok.head.dep_ != "agent"
            and not _is_time(tok)
            and tok.lemma_.lower() not in PERSON_NOUNS
            and (
                any(c.dep_ in ("det", "poss") for c in tok.children)
                or (tok.pos_ == "PROPN" and tok.ent_type_ not in _PERSON_ENTS)
            )
        ):
            yield tok


def _is_time(tok: Any) -> bool:
    return tok.ent_type_ in _TIME_ENTS or tok.lemma_.lower() in TEMPORAL_NOUNS


def _times(doc: Any) -> Iterator[Any]:
    """Tokens naming a time: DATE/TIME entities, temporal nouns as adverbs or objects of a
    temporal preposition, temporal adverbs, and markers of a temporal clause ("after he ...")."""
    for tok in doc:
        lower = tok.lower_
        if tok.ent_type_ in _TIME_ENTS or (
            _is_time(tok)
            and (tok.dep_ in ("npadvmod", "tmod") or (
                tok.dep_ == "pobj" and tok.head.lower_ in _TEMPORAL_PREPS
            ))
        ):
            yield tok
        elif lower in _TEMPORAL_ADVERBS and tok.dep_ == "advmod":
            yield tok
        elif lower in _TEMPORAL_MARKERS and tok.dep_ in ("mark", "advmod") and (
            tok.head.dep_ == "advcl"
        ):
            yield tok
        elif lower in ("after", "before", "until", "till") and tok.dep_ == "prep" and any(
            c.dep_ == "pcomp" for c in tok.children
        ):
            yield tok


def _has_cause(doc: Any) -> bool:
    """A cause or purpose: "because", "therefore", a "since"/"for" clause, "so that",
    "in order to", or an infinitive of purpose ("went to the well to fetch water")."""
    tokens = list(doc)
    for i, tok in enumerate(tokens):
        lower = tok.lower_
        following = tokens[i + 1].lower_ if i + 1 < len(tokens) else ""
        if lower in _CAUSE_WORDS:
            return True
        if lower in _CAUSE_MARKERS and tok.dep_ == "mark":
            return True
        if (lower, following) in (("so", "that"), ("in", "order"), ("due", "to")):
            return True
        if lower == "so" and tok.dep_ == "cc":
            return True
        if lower == "to" and tok.dep_ == "aux" and tok.head.dep_ == "advcl":
            return True
    return False
