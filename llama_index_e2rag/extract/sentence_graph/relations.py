"""SentGraph's relation vocabulary: the paper's reduced RST sets and the connectives that signal
them, shared by the LLM-free rules and the LLM path so both write the same edges.

The connective table is our approximation (the paper labels relations with an LLM only); it is
documented in ``docs/design/sentence_graph_plan.md`` ("LLM-free approximation").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from llama_index_e2rag.schema import EdgeKind, GraphEdge, normalize_text

#: Nucleus–nucleus relations, between core sentences of equal weight (paper §3.1).
NN_TYPES = ("conjunction", "contrast", "disjunction", "restatement", "sequence")
#: Nucleus–satellite relations, from a core sentence to a sentence supporting it.
NS_TYPES = (
    "cause",
    "result",
    "opposition",
    "elaboration",
    "circumstance",
    "evaluation",
    "solutionhood",
)

RelationClass = Literal["N-N", "N-S"]
RelationSource = Literal["llm", "parser", "default"]

#: Spellings an LLM (or a user) may use for a type, mapped to the paper's lower-case names.
_ALIASES = {"multinuclear restatement": "restatement", "solution": "solutionhood"}


@dataclass(frozen=True)
class Cue:
    """What a sentence-opening connective says about the sentence it opens (sentence B).

    ``nn`` types the relation when B and the sentence before it are both core (None: the
    connective never joins equals), ``ns`` when B is a satellite; ``demotes`` makes B
    supplementary whatever its score, because the connective subordinates it.
    """

    nn: Optional[str]
    ns: str
    demotes: bool


_CONJUNCTION = Cue("conjunction", "elaboration", False)
_CONTRAST = Cue("contrast", "opposition", False)
_DISJUNCTION = Cue("disjunction", "opposition", False)
_RESTATEMENT = Cue("restatement", "evaluation", False)
_SEQUENCE = Cue("sequence", "circumstance", False)
CAUSE = Cue(None, "cause", True)
_RESULT = Cue(None, "result", True)
_CONCESSION = Cue(None, "opposition", True)
_EXAMPLE = Cue(None, "elaboration", True)
_EVALUATION = Cue(None, "evaluation", True)
_SOLUTION = Cue(None, "solutionhood", True)
#: An opening clause or phrase that sets time or place ("In 1990, ...", "Since 1990, ...").
CIRCUMSTANCE = Cue(None, "circumstance", True)
#: "after / before / when / while" opening a clause: the events follow each other.
TEMPORAL_CLAUSE = _SEQUENCE


def _table(cue: Cue, phrases: str) -> dict[str, Cue]:
    return {phrase.strip(): cue for phrase in phrases.split(",")}


#: Unambiguous sentence-opening connectives (lower case, matched as whole words).
CONNECTIVES: dict[str, Cue] = {
    **_table(_CONJUNCTION, "and, also, in addition, moreover, furthermore, besides"),
    **_table(_CONTRAST, "but, however, yet, whereas, in contrast, on the other hand"),
    **_table(_DISJUNCTION, "or, alternatively, otherwise, instead"),
    **_table(_RESTATEMENT, "in other words, that is, i.e., namely, in short"),
    **_table(
        _SEQUENCE,
        "then, next, afterwards, after that, later, subsequently, finally, meanwhile",
    ),
    **_table(CAUSE, "because, due to this, for this reason"),
    **_table(_RESULT, "so, therefore, thus, hence, consequently, as a result"),
    **_table(
        _CONCESSION,
        "although, though, even though, despite, nevertheless, nonetheless, still",
    ),
    **_table(_EXAMPLE, "for example, for instance, in particular, specifically, such as"),
    **_table(
        _EVALUATION,
        "fortunately, unfortunately, clearly, notably, it is considered, it is widely considered",
    ),
    **_table(_SOLUTION, "to solve this, to address this, the solution, in response"),
}
#: Connectives that are also ordinary words at a sentence start, so they count only before a
#: comma ("That is, ..." but not "That is the house.").
COMMA_ONLY = frozenset({"that is", "still", "such as"})


def normalise_type(name: str) -> Optional[str]:
    """The paper's name of a relation type in lower case, or None for an unknown type."""
    key = normalize_text(name)
    key = _ALIASES.get(key, key)
    return key if key in NN_TYPES or key in NS_TYPES else None


def rst_edge(
    a: str,
    b: str,
    cls: RelationClass,
    type_: str,
    doc_id: str,
    source: RelationSource,
    cue: Optional[str] = None,
) -> GraphEdge:
    """An ``rst`` edge: N-N from the earlier sentence to the later, N-S nucleus → satellite.

    The ``description`` is what the retrieval context prints next to the edge, so the reader
    sees why two sentences are joined.
    """
    allowed = NN_TYPES if cls == "N-N" else NS_TYPES
    if type_ not in allowed:
        raise ValueError(f"{type_!r} is not an {cls} relation type (one of {', '.join(allowed)})")
    return GraphEdge(
        source=a,
        target=b,
        kind=EdgeKind.RST,
        doc_id=doc_id,
        role=type_,
        attrs={
            "class": cls,
            "source": source,
            "cue": cue,
            "description": f"cue '{cue}'" if cue else f"{source} {type_}",
        },
    )
