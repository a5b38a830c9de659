"""The systems LitBank scores: the project's offline default and the baselines.

Each system is a function ``(text, doc) -> Prediction`` (``doc``: the spaCy parse of ``text``
that the baselines read; the project parses for itself). ``project`` is the one place that
knows how the offline default is built and read, so improved extraction can be measured by
swapping that function.

Types: spaCy's labels and the project's ``entity_type`` (the same labels offline) map to LitBank
types by ``LITBANK_TYPE``: PERSON→PER, GPE, LOC, FAC and ORG to themselves. NORP (nationalities,
mostly adjectives: "English manners") and every other label (DATE, PRODUCT, the project's
``concept`` for an argument that is no named entity…) is no LitBank type; nothing maps to VEH.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Optional

from llama_index_e2rag.schema import normalize_text

LITBANK_TYPE = {"PERSON": "PER", "GPE": "GPE", "LOC": "LOC", "FAC": "FAC", "ORG": "ORG"}
#: he/she pronouns the name baseline resolves (plural, first and second person it leaves out)
_PRONOUN_GENDER = {**dict.fromkeys(("he", "him", "his", "himself"), "m"),
                   **dict.fromkeys(("she", "her", "hers", "herself"), "f")}
_MALE_TITLES = frozenset("mr mister sir lord king prince master father uncle brother".split())
_FEMALE_TITLES = frozenset(
    "mrs ms miss madam madame lady queen princess mother aunt sister".split())

Span = tuple[int, int]


@dataclass(frozen=True)
class PredictedMention:
    """A predicted mention: ``[start, end)`` characters of the text, its LitBank type (None:
    none of LitBank's) and its chain (None: an entity of its own)."""

    start: int
    end: int
    type: Optional[str]
    chain: Optional[str]


@dataclass
class Prediction:
    """What a system says about one text; ``None`` where it says nothing (not scored).

    ``events``: character spans of event triggers. ``resolve``: a name -> the character spans
    of every mention of the entity the system resolves it to (None: no single entity).
    """

    mentions: Optional[list[PredictedMention]] = None
    events: Optional[list[Span]] = None
    resolve: Optional[Callable[[str], Optional[list[Span]]]] = None


System = Callable[[str, Any], Prediction]


# -- the project ------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _embed_model() -> Any:
    from benchmarks.systems import make_embed_model

    return make_embed_model()


def project(text: str, doc: Any = None) -> Prediction:
    """The offline default (grounded extraction, MiniLM, no LLM) with E²GraphRAG's entity
    layer, which ``e2rag timeline`` reads: every occurrence of every mention node, its type,
    its fused entity as chain; the realis events' verbs as triggers; names resolved as the timeline
    resolves them."""
    from llama_index.core import Document

    from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.schema import EdgeKind, NodeKind

    index = E2RAGIndex.from_documents([Document(text=text, id_="work")], llm=None,
                                      embed_model=_embed_model(),
                                      doc_builders=[EventGraphBuilder()])
    graph = index.graph_store
    mentions: dict[tuple[int, int, Optional[str]], PredictedMention] = {}
    for node in graph.nodes(NodeKind.MENTION, "work"):
        entities = graph.edges_of(node.id, [EdgeKind.INSTANCE_OF], "out")
        chain = entities[0].target if entities else node.id
        kind = LITBANK_TYPE.get(str(node.attrs.get("entity_type")))
        for start, end in _spans(node):
            mentions.setdefault((start, end, kind), PredictedMention(start, end, kind, chain))
    events = []
    for node in graph.nodes(NodeKind.EVENT, "work"):
        if node.attrs.get("realis") is False:
            continue  # an event node the parse keeps for retrieval, not told as happening
        start = node.pos[1]
        events.append((start, start + len(str(node.attrs.get("verb", "")))))
    return Prediction(sorted(mentions.values(), key=lambda m: (m.start, m.end)), events,
                      _timeline_resolver(graph))


def _spans(node: Any) -> list[Span]:
    spans = node.attrs.get("spans") or ([node.span] if node.span else [])
    return [(int(start), int(end)) for start, end in spans]


def _timeline_resolver(graph: Any) -> Callable[[str], Optional[list[Span]]]:
    """``e2rag timeline NAME``'s lookup (``context.timeline.entity_timeline``): the spans of
    the resolved entity's mentions (all of them: the timeline shows a sentence once), or None
    when the name is unknown or ambiguous."""
    from llama_index_e2rag.context.timeline import entity_timeline
    from llama_index_e2rag.errors import EntityLookupError
    from llama_index_e2rag.schema import EdgeKind, NodeKind

    def resolve(name: str) -> Optional[list[Span]]:
        try:
            timeline = entity_timeline(graph, name)
        except EntityLookupError:
            return None
        spans: list[Span] = []
        for entity_id in timeline.entity.node_ids:  # every mention, shown as an entry or not
            for edge in graph.edges_of(entity_id, [EdgeKind.INSTANCE_OF], "in"):
                node = graph.get_node(edge.source)
                if node is not None and node.kind == NodeKind.MENTION:
                    spans += _spans(node)
        return list(dict.fromkeys(spans))

    return resolve


# -- baselines ----------------------------------------------------------------------------------


def spacy_ner(text: str, doc: Any) -> Prediction:
    """spaCy's named-entity spans as mentions, each an entity of its own."""
    return Prediction(mentions=[PredictedMention(e.start_char, e.end_char, t, None)
                                for e, t in _typed_entities(doc)])


def every_verb(text: str, doc: Any) -> Prediction:
    """Every token spaCy tags VERB (auxiliaries and copulas are AUX) is an event trigger."""
    return Prediction(events=[(t.idx, t.idx + len(t.text)) for t in doc if t.pos_ == "VERB"])


def exact_names(text: str, doc: Any) -> Prediction:
    """spaCy's entity spans, one chain per exact name and type (case, punctuation and a
    leading "the" ignored)."""
    return Prediction(mentions=[PredictedMention(e.start_char, e.end_char, t, _name_chain(e, t))
                                for e, t in _typed_entities(doc)])


def names_and_pronouns(text: str, doc: Any) -> Prediction:
    """``exact_names`` plus he/she pronouns (PER), each joined to the nearest preceding PERSON
    name of compatible gender (a title's gender; a name without one fits either)."""
    names = [(e, t) for e, t in _typed_entities(doc)]
    mentions = [PredictedMention(e.start_char, e.end_char, t, _name_chain(e, t)) for e, t in names]
    persons = [(e, _gender(e)) for e, t in names if t == "PER"]
    for token in doc:
        gender = _PRONOUN_GENDER.get(token.lower_)
        if gender is None:
            continue
        antecedent = next((e for e, g in reversed(persons)
                           if e.end_char <= token.idx and g in (None, gender)), None)
        chain = _name_chain(antecedent, "PER") if antecedent is not None else None
        mentions.append(PredictedMention(token.idx, token.idx + len(token.text), "PER", chain))
    return Prediction(mentions=sorted(mentions, key=lambda m: (m.start, m.end)))


def _typed_entities(doc: Any) -> list[tuple[Any, str]]:
    return [(e, LITBANK_TYPE[e.label_]) for e in doc.ents if e.label_ in LITBANK_TYPE]


def _name_chain(entity: Any, kind: str) -> str:
    words = normalize_text(entity.text).split()
    if words[:1] == ["the"]:
        words = words[1:]
    return f"{kind}:{' '.join(words)}"


def _gender(entity: Any) -> Optional[str]:
    """'m' / 'f' from a title inside or just before the name, else None (either)."""
    words = {t.lower_.rstrip(".") for t in entity}
    if entity.start > 0:
        words.add(entity.doc[entity.start - 1].lower_.rstrip("."))
    if words & _MALE_TITLES:
        return "m"
    if words & _FEMALE_TITLES:
        return "f"
    return None


#: name -> system, in report order
SYSTEMS: dict[str, System] = {
    "project": project,
    "spacy-ner": spacy_ner,
    "exact-name": exact_names,
    "name+pronoun": names_and_pronouns,
    "every-verb": every_verb,
}
