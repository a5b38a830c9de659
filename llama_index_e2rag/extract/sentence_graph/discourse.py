"""SentGraph's relations without an LLM: sentence-opening connectives, a core/supplementary split,
attachment of supplementary sentences to a nucleus, and typed ``rst`` edges.

The paper asks an LLM for all of this (prompts A.1 and A.2). These rules are the offline
approximation the plan documents: a connective at the start of sentence B types B's relation to
the text before it; "because", "so", "for example" and the like subordinate B (it becomes a
satellite); the remaining sentences compete for the core on entities, position and lexical
centrality. spaCy is needed only to read an ambiguous opener ("Since 1990," against "Since he was
ill,"), through a ``parse`` callable the caller loads lazily.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Optional, Sequence

from llama_index_e2rag.extract.sentence_graph.relations import (
    CAUSE,
    CIRCUMSTANCE,
    COMMA_ONLY,
    CONNECTIVES,
    TEMPORAL_CLAUSE,
    Cue,
    RelationSource,
    rst_edge,
)
from llama_index_e2rag.schema import GraphEdge, GraphNode
from llama_index_e2rag.text import content_words

#: ``text -> spaCy Doc``; only called for sentences whose opener needs a parse.
Parse = Callable[[str], Any]
#: A sentence's opening connective as written (lower case) and what it signals.
OpeningCue = tuple[str, Cue]

_LEXICON = sorted(CONNECTIVES, key=len, reverse=True)  # longest first: "after that" before "after"
_LEADING = " \t\"'“‘([«"
_FIRST_WORD = re.compile(r"[a-z]+")
#: Openers that start either a subordinate clause or a prepositional phrase.
_CLAUSE_OR_PHRASE = {
    "since": CAUSE,
    "as": CAUSE,
    "after": TEMPORAL_CLAUSE,
    "before": TEMPORAL_CLAUSE,
}
_ALWAYS_CLAUSE = frozenset({"when", "while"})
#: Prepositions whose opening phrase sets the scene when it names a date, time or place.
_SCENE_PREPOSITIONS = frozenset({"in", "on", "at", "during"})
_SCENE_ENTS = frozenset({"DATE", "TIME", "GPE", "LOC", "FAC"})
_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)
_NUMBER = re.compile(r"\d")
#: Attachment prefers the closer of two equally similar cores by this much per sentence.
DISTANCE_PENALTY = 0.1


def opening_cue(text: str, parse: Optional[Parse] = None) -> Optional[OpeningCue]:
    """The connective opening ``text`` and its cue, or None.

    Unambiguous connectives come from the lexicon (a comma after them is optional, except for
    the ``COMMA_ONLY`` ones). "since/as/after/before" open a clause (cause or sequence) or a
    phrase (circumstance), and "in/on/at/during" a scene-setting phrase only when it names a
    date, time or place; ``parse`` tells these apart. Without it a digit after the opener
    ("Since 1990", "In 1990") marks a phrase and anything else a clause.
    """
    head = text.lstrip(_LEADING)
    lowered = head.lower()
    for phrase in _LEXICON:
        if lowered.startswith(phrase) and not lowered[len(phrase) : len(phrase) + 1].isalnum():
            rest = lowered[len(phrase) :].lstrip()
            if phrase in COMMA_ONLY and not rest.startswith(","):
                continue
            return phrase, CONNECTIVES[phrase]
    match = _FIRST_WORD.match(lowered)
    word = match.group() if match else ""
    if word in _ALWAYS_CLAUSE:
        return word, TEMPORAL_CLAUSE
    if word in _CLAUSE_OR_PHRASE:
        clause = _opens_clause(head, parse) if parse else not _opening_phrase_has_number(lowered)
        return word, _CLAUSE_OR_PHRASE[word] if clause else CIRCUMSTANCE
    if word in _SCENE_PREPOSITIONS and _sets_scene(head, lowered, parse):
        return word, CIRCUMSTANCE
    return None


def _opens_clause(head: str, parse: Parse) -> bool:
    """Whether the first word is the marker of an adverbial clause, not a preposition."""
    doc = parse(head)
    return len(doc) > 0 and doc[0].dep_ == "mark"


def _opening_phrase(lowered: str) -> str:
    return lowered.split(",", 1)[0]


def _opening_phrase_has_number(lowered: str) -> bool:
    words = _opening_phrase(lowered).split()[1:3]
    return any(_NUMBER.search(word) for word in words)


def _sets_scene(head: str, lowered: str, parse: Optional[Parse]) -> bool:
    """Whether an opening "in/on/at/during" phrase names a date, time or place."""
    if parse is None:
        phrase = _opening_phrase(lowered)
        return bool(_NUMBER.search(phrase)) or any(w in _MONTHS for w in phrase.split())
    doc = parse(head)
    if len(doc) == 0 or doc[0].dep_ != "prep":
        return False
    phrase = range(doc[0].left_edge.i, doc[0].right_edge.i + 1)
    return any(ent.label_ in _SCENE_ENTS and ent.start in phrase for ent in doc.ents)


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def core_scores(texts: Sequence[str], entities: Sequence[set[str]]) -> list[float]:
    """``1·[named entity, number or date] + 0.5·[first sentence] + centrality`` per sentence.

    Centrality is the summed content-word overlap with the other sentences of the segment,
    scaled to [0, 1]: the sentences the rest of the segment keeps talking about.
    """
    words = [content_words(text) for text in texts]
    overlap = [
        sum(_jaccard(words[i], words[j]) for j in range(len(texts)) if j != i)
        for i in range(len(texts))
    ]
    top = max(overlap, default=0.0)
    return [
        (1.0 if entities[i] or _NUMBER.search(texts[i]) else 0.0)
        + (0.5 if i == 0 else 0.0)
        + (overlap[i] / top if top > 0 else 0.0)
        for i in range(len(texts))
    ]


def split_core(
    scores: Sequence[float], cues: Sequence[Optional[OpeningCue]], ratio: float
) -> list[bool]:
    """Which sentences are core.

    A demoting connective makes a sentence supplementary; a multinuclear one ("but", "then")
    after the first sentence makes it core, since it joins the text before it as an equal. Of
    the others the best ``ceil(ratio · n)`` by score are core (ties: the earlier). A segment
    always keeps one core, its best sentence, so every satellite has a nucleus.
    """
    n = len(scores)
    is_core = [False] * n
    rest = []
    for i, cue in enumerate(cues):
        if cue is not None and cue[1].demotes:
            continue
        if cue is not None and i > 0:
            is_core[i] = True
        else:
            rest.append(i)
    for i in sorted(rest, key=lambda i: (-scores[i], i))[: math.ceil(ratio * len(rest))]:
        is_core[i] = True
    if n and not any(is_core):
        is_core[min(range(n), key=lambda i: (-scores[i], i))] = True
    return is_core


def attach(
    texts: Sequence[str], is_core: Sequence[bool], cues: Sequence[Optional[OpeningCue]]
) -> dict[int, int]:
    """``{supplementary sentence: its nucleus}``, both as indices into ``texts``.

    The paper's "semantic similarity and contextual distance", done lexically: the core j with
    the best ``jaccard(content words) − 0.1·|i − j|``, ties to the preceding core. A sentence
    opened by a connective looks only at the cores before it when there are any, since the
    connective refers back.
    """
    words = [content_words(text) for text in texts]
    cores = [j for j, core in enumerate(is_core) if core]
    nucleus = {}
    for i, core in enumerate(is_core):
        if core or not cores:
            continue
        earlier = [j for j in cores if j < i]
        candidates = earlier if cues[i] is not None and earlier else cores
        nucleus[i] = max(
            candidates,
            key=lambda j: (
                _jaccard(words[i], words[j]) - DISTANCE_PENALTY * abs(i - j),
                j < i,
                -abs(i - j),
            ),
        )
    return nucleus


def parser_relations(
    sentences: Sequence[GraphNode],
    is_core: Sequence[bool],
    nucleus: dict[int, int],
    cues: Sequence[Optional[OpeningCue]],
) -> list[GraphEdge]:
    """The ``rst`` edges of one segment.

    A core sentence is joined to the previous core: by its connective's N-N type, else by a
    default ``conjunction`` when the two are adjacent or share an entity (so the core layer
    stays connected without inventing links across unrelated text). A satellite hangs from its
    nucleus by its connective's N-S type, else by a default ``elaboration``.
    """
    edges = []
    previous: Optional[int] = None
    for i, node in enumerate(sentences):
        cue = cues[i]
        phrase = cue[0] if cue is not None else None
        if is_core[i]:
            if previous is not None:
                prev = sentences[previous]
                if cue is not None and cue[1].nn is not None:
                    edges.append(_nn(prev, node, cue[1].nn, "parser", phrase))
                elif previous == i - 1 or _share_entity(prev, node):
                    edges.append(_nn(prev, node, "conjunction", "default"))
            previous = i
        elif i in nucleus:
            head = sentences[nucleus[i]].id
            type_, source = (cue[1].ns, "parser") if cue is not None else ("elaboration", "default")
            edges.append(rst_edge(head, node.id, "N-S", type_, node.doc_id, source, phrase))
    return edges


def _nn(
    a: GraphNode, b: GraphNode, type_: str, source: RelationSource, cue: Optional[str] = None
) -> GraphEdge:
    return rst_edge(a.id, b.id, "N-N", type_, b.doc_id, source, cue)


def _share_entity(a: GraphNode, b: GraphNode) -> bool:
    return bool(set(a.attrs["entities"]) & set(b.attrs["entities"]))
