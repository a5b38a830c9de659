"""LLM-free graph extraction in the manner of GroundedKG-RAG: predicate frames from a spaCy parse.

Each verb becomes an ``event`` (an action node) whose text is its own clause; its arguments become
``mention`` nodes linked by ``participates`` edges carrying PropBank-style roles (A0 agent, A1
patient/theme, A2 other objects, AM-TMP time, AM-LOC place). Every node and edge is grounded: events
and mentions point at the ``sentence`` nodes they come from, and every span is absolute in the
source document. The schema is the one the LLM extractor fills, so every retriever reads both.

A dependency parse is not semantic role labelling: roles come from syntactic relations (subject,
object, passive agent, preposition), with the rules spelled out in ``docs/offline.md``.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Iterator, Optional, Sequence

from llama_index.core.schema import BaseNode, TransformComponent
from pydantic import Field

from llama_index_e2rag.background import in_thread
from llama_index_e2rag.extract.base import (
    DOC_ORDER_KEY,
    attach_graph,
    chunk_doc_id,
    chunk_offset,
    record_failure,
)
from llama_index_e2rag.extract.linking import chunk_node_id
from llama_index_e2rag.extract.spacy_model import PARSE_LOCK, SPACY_MODEL, load_spacy
from llama_index_e2rag.extract.statements import statement
from llama_index_e2rag.schema import (
    EdgeKind,
    GraphEdge,
    GraphNode,
    NodeKind,
    Position,
    Span,
    normalize_text,
)

#: Chunks in one call from which parsing uses worker processes (below, starting them costs more).
PARALLEL_PARSE_CHUNKS = 64
#: Nodes of one sentence up to which every pair gets a co_event / co_mention edge; in a longer
#: one (text without sentence ends) each node is paired with its next ``CO_NEIGHBOURS`` only.
CO_PAIRS_ALL_UP_TO = 40
CO_NEIGHBOURS = 20

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
_MASCULINE = frozenset("he him himself".split())
_FEMININE = frozenset("she her herself".split())
_REFLEXIVE = frozenset("himself herself".split())
#: A few common given names, so "Mary ... he" does not resolve to Mary; others fit either gender.
_MALE_NAMES = frozenset(
    """john james william george charles henry thomas arthur robert edward richard harry peter tom
    jack joseph samuel frederick albert alfred francis hugh walter ralph david michael paul mark
    sherlock jim ron hercule""".split()
)
_FEMALE_NAMES = frozenset(
    """mary elizabeth anne anna jane alice emma margaret catherine kate sarah lucy irene helen
    helena violet grace rose julia laura susan ellen edith hermione ginny dorothy wendy emily
    charlotte nancy""".split()
)
_MALE_TITLES = frozenset(
    "mr mister sir lord king prince master monsieur father uncle brother".split()
)
_FEMALE_TITLES = frozenset(
    "mrs ms miss madam madame mme mlle lady queen princess mother aunt sister dame".split()
)
_RELATIVE_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_RELATIVE_ADVERB_ROLES = {"where": "AM-LOC", "when": "AM-TMP"}
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
#: Children whose subtrees are clauses of their own, cut from an event's grounded text.
_OWN_CLAUSE_DEPS = frozenset({"conj", "advcl", "parataxis", "relcl"})
_EDGE_TRIM_DEPS = frozenset({"cc", "punct", "mark", "preconj"})


class _Ref:
    """An argument after resolution: a mention key, its surface name and where it was found."""

    __slots__ = ("key", "name", "label", "start", "end", "anchor")

    def __init__(self, key: str, name: str, label: str, start: int, end: int, anchor: int) -> None:
        self.key, self.name, self.label = key, name, label
        self.start, self.end, self.anchor = start, end, anchor


def _gender_of(span: Any) -> Optional[str]:
    """'m' / 'f' from a title inside or just before a PERSON span, else None (either)."""
    first = span[0].lower_
    words = {t.lower_.rstrip(".") for t in span}
    if span.start > 0:
        words.add(span.doc[span.start - 1].lower_.rstrip("."))
    if words & _MALE_TITLES or first in _MALE_NAMES:
        return "m"
    if words & _FEMALE_TITLES or first in _FEMALE_NAMES:
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


@dataclass
class _Frame:
    """One predicate with its arguments, before it becomes an event node."""

    verb: Any
    args: list[tuple[str, _Ref]] = field(default_factory=list)
    negated: bool = False
    modality: Optional[str] = None
    aux: list[str] = field(default_factory=list)
    passive: bool = False
    date: Optional[str] = None
    clause: tuple[int, int] = (0, 0)  # token range of the grounded clause


class _DocFrames:
    """Frames and mentions of one parsed text; the rules of ``docs/offline.md`` live here."""

    def __init__(self, doc: Any, resolve_pronouns: bool) -> None:
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
        #: (token index, mention key, name, gender) of every PERSON, in text order
        self._persons: list[tuple[int, str, str, Optional[str]]] = []
        for ent in doc.ents:
            ref = self._named_ref(ent) if ent.label_ == "PERSON" else None
            if ref is not None:
                self._persons.append((ent.start, ref.key, ref.name, _gender_of(ent)))
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

    def _ref(self, tok: Any, frame: Optional[_Frame] = None) -> Optional[_Ref]:
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
        key = normalize_text(core.text)
        return _Ref(key, _name(core.text), label, core.start_char, core.end_char, core.root.i)

    def _resolve(self, tok: Any, frame: Optional[_Frame]) -> Optional[_Ref]:
        """He/him/she/her(self) -> the most recent earlier PERSON of compatible gender."""
        word = tok.lower_
        if word not in _MASCULINE and word not in _FEMININE:
            return None
        gender = "m" if word in _MASCULINE else "f"
        # A plain object pronoun never corefers with its own clause's subject (binding).
        excluded: set[str] = set()
        wanted: set[str] = set()
        if frame is not None:
            clause_args = {r.key for role, r in frame.args if role in ("A0", "A1")}
            (wanted if word in _REFLEXIVE else excluded).update(clause_args)
        if wanted:
            for start, key, name, g in reversed(self._persons):
                if key in wanted and start < tok.i and g in (None, gender):
                    return _Ref(key, name, "PERSON", tok.idx, tok.idx + len(tok.text), tok.i)
        for start, key, name, g in reversed(self._persons):
            if start < tok.i and key not in excluded and g in (None, gender):
                return _Ref(key, name, "PERSON", tok.idx, tok.idx + len(tok.text), tok.i)
        return None

    def _named_ref(self, span: Any) -> Optional[_Ref]:
        core = _strip_leading(span)
        key = normalize_text(core.text)
        if not key:
            return None
        return _Ref(key, _name(core.text), span.label_, core.start_char, core.end_char, core.root.i)

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

    def _frame(self, verb: Any) -> _Frame:
        copula = verb.pos_ == "AUX"
        frame = _Frame(verb=verb, passive=any(c.dep_ == "auxpass" for c in verb.children))
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

    def is_whole_sentence(self, frame: _Frame) -> bool:
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

    def title(self, frame: _Frame) -> str:
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


class _FragmentBuilder:
    """Turns one parsed chunk into graph nodes and edges at absolute document positions.

    Mentions are one node per normalised name per chunk (E²RAG keeps mentions per chunk; the
    same name in another chunk is another node), linked by all the role edges it takes there.
    """

    def __init__(
        self, doc_id: str, chunk_id: str, doc_order: int, offset: int, keep_bare_events: bool
    ) -> None:
        self.doc_id, self.chunk_id = doc_id, chunk_id
        self.doc_order, self.offset = doc_order, offset
        self.keep_bare_events = keep_bare_events
        self.nodes: list[GraphNode] = []
        self.edges: list[GraphEdge] = []
        self._sentence_of: dict[int, GraphNode] = {}  # token index -> sentence node
        self._sentences: dict[str, GraphNode] = {}
        self._mentions: dict[str, GraphNode] = {}  # normalised name -> mention node
        self._grounding: dict[str, list[str]] = {}  # mention id -> sentence ids

    def build(self, frames: _DocFrames, with_sentences: bool = True) -> None:
        if with_sentences:
            self._add_sentences(frames.doc)
        events = [
            self._add_event(frames, frame)
            for frame in frames.frames
            if frame.args or self.keep_bare_events
        ]
        for ref in frames.named:
            if ref is not None:
                self._mention(ref)
        for mention in self._mentions.values():
            self._settle(mention)
            for sentence_id in self._grounding[mention.id]:
                self._edge(mention.id, sentence_id, EdgeKind.GROUNDED_IN)
        self.nodes += list(self._mentions.values()) + events
        for a, b in pairwise(events):
            self._edge(a.id, b.id, EdgeKind.NEXT)
        self._co_edges(events)

    def _edge(self, source: str, target: str, kind: EdgeKind, role: Optional[str] = None) -> None:
        self.edges.append(
            GraphEdge(source=source, target=target, kind=kind, doc_id=self.doc_id, role=role)
        )

    def _node(
        self,
        kind: NodeKind,
        text: str,
        pos: Position,
        span: Span,
        *,
        name: Optional[str] = None,
        attrs: Optional[dict[str, Any]] = None,
    ) -> GraphNode:
        """A node of this chunk whose id is derived from its own position and text."""
        return GraphNode(
            id=chunk_node_id(self.doc_id, self.chunk_id, kind, pos, text),
            kind=kind,
            text=text,
            doc_id=self.doc_id,
            pos=pos,
            span=span,
            chunk_id=self.chunk_id,
            name=name,
            attrs=attrs or {},
        )

    def _add_sentences(self, doc: Any) -> None:
        for sent in doc.sents:
            text = sent.text.strip()
            if not text:
                continue
            start = self.offset + sent.start_char + (len(sent.text) - len(sent.text.lstrip()))
            pos = (self.doc_order, start, 0)
            node = self._node(NodeKind.SENTENCE, text, pos, (start, start + len(text)))
            self.nodes.append(node)
            self._sentences[node.id] = node
            for tok in sent:
                self._sentence_of[tok.i] = node

    def _mention(self, ref: _Ref) -> GraphNode:
        """The chunk's mention node for a name, recording this occurrence and its sentence."""
        span = [self.offset + ref.start, self.offset + ref.end]
        sentence = self._sentence_of.get(ref.anchor)
        node = self._mentions.get(ref.key)
        if node is None:
            # the id hangs on the chunk, not the occurrence: one mention per name per chunk
            chunk_pos = (self.doc_order, self.offset, 0)
            node = GraphNode(
                id=chunk_node_id(self.doc_id, self.chunk_id, NodeKind.MENTION, chunk_pos, ref.key),
                kind=NodeKind.MENTION,
                text=ref.name,
                doc_id=self.doc_id,
                pos=(self.doc_order, span[0], 2),
                span=(span[0], span[1]),
                chunk_id=self.chunk_id,
                name=ref.name,
                attrs={"entity_type": ref.label or "concept", "spans": []},
            )
            self._mentions[ref.key] = node
            self._grounding[node.id] = []
        if span not in node.attrs["spans"]:
            node.attrs["spans"].append(span)
        if sentence is not None and sentence.id not in self._grounding[node.id]:
            self._grounding[node.id].append(sentence.id)
        return node

    def _settle(self, mention: GraphNode) -> None:
        """Anchor a mention at its earliest occurrence, which is always its name (a pronoun is
        only resolved to a person named earlier in the chunk)."""
        spans = sorted(mention.attrs["spans"])
        mention.attrs["spans"] = spans
        mention.span = (spans[0][0], spans[0][1])
        mention.pos = (self.doc_order, spans[0][0], 2)
        sentences = self._grounding[mention.id]
        sentences.sort(key=lambda sid: self._sentences[sid].pos)
        if sentences:
            mention.attrs["sentence_id"] = sentences[0]
            mention.attrs["sentence_text"] = self._sentences[sentences[0]].text

    def _add_event(self, frames: _DocFrames, frame: _Frame) -> GraphNode:
        sentence = self._sentence_of.get(frame.verb.i)
        if sentence is not None and frames.is_whole_sentence(frame):
            # the sentence's exact text: the index embeds identical texts only once
            text, span = sentence.text, sentence.span
        else:
            clause = frames.doc[frame.clause[0] : frame.clause[1]]
            start = self.offset + clause.start_char
            text, span = clause.text, (start, start + len(clause.text))
        pos = (self.doc_order, self.offset + frame.verb.idx, 1)
        args = [(role, self._mention(ref)) for role, ref in frame.args]
        attrs: dict[str, Any] = {
            "verb": frame.verb.text,
            "lemma": frame.verb.lemma_.lower(),
            "negated": frame.negated,
            "modality": frame.modality,
            "aux": frame.aux,
            "voice": "passive" if frame.passive else "active",
            "date": frame.date,
            "participants": list(dict.fromkeys(m.name for _, m in args)),
        }
        if sentence is not None:
            attrs["sentence_id"] = sentence.id
            attrs["sentence_text"] = sentence.text
        # ChronoRAG's readable fact (extract/statements.py), kept only where it differs
        said = statement(frame.verb)
        if said and said != " ".join(frames.doc[frame.clause[0] : frame.clause[1]].text.split()):
            attrs["statement"] = said
        event = self._node(NodeKind.EVENT, text, pos, span, name=frames.title(frame), attrs=attrs)
        for role, mention in args:
            self._edge(mention.id, event.id, EdgeKind.PARTICIPATES, role)
        if sentence is not None:
            self._edge(event.id, sentence.id, EdgeKind.GROUNDED_IN)
        return event

    def _co_edges(self, events: list[GraphNode]) -> None:
        """co_event / co_mention between nodes sharing a sentence (chunk-wide pairs grow as n²).

        A sentence with more than ``CO_PAIRS_ALL_UP_TO`` events (or mentions) links each only to
        its next ``CO_NEIGHBOURS``: text without sentence ends (48 KB of "Peter ran and ") made
        740,000 edges from 3,700 events.
        """
        groups: dict[tuple[EdgeKind, str], list[str]] = {}
        for event in events:
            key = (EdgeKind.CO_EVENT, event.attrs.get("sentence_id", ""))
            groups.setdefault(key, []).append(event.id)
        for mention in self._mentions.values():
            for sentence_id in self._grounding[mention.id]:
                groups.setdefault((EdgeKind.CO_MENTION, sentence_id), []).append(mention.id)
        pairs: set[tuple[EdgeKind, str, str]] = set()
        for (kind, _), ids in groups.items():
            reach = len(ids) if len(ids) <= CO_PAIRS_ALL_UP_TO else CO_NEIGHBOURS
            for i, a in enumerate(ids):
                for b in ids[i + 1 : i + 1 + reach]:
                    if (kind, b, a) not in pairs:
                        pairs.add((kind, a, b))
        for kind, a, b in sorted(pairs):
            self._edge(a, b, kind)


class GroundedExtractor(TransformComponent):
    """Sentences, predicate-frame events and argument mentions for each chunk, from spaCy.

    No LLM: every node is a span of the source and every edge is read off the dependency parse.
    Chunks are parsed with ``nlp.pipe`` in batches; a chunk that fails is recorded and stays
    indexed as text.
    """

    model: str = Field(default=SPACY_MODEL, description="spaCy pipeline to load.")
    batch_size: int = Field(default=16, gt=0, description="Chunks per spaCy batch.")
    n_process: Optional[int] = Field(
        default=None,
        gt=0,
        description="spaCy worker processes; default: the available cores once a call has "
        f"{PARALLEL_PARSE_CHUNKS} chunks (fewer are not worth starting workers for) where "
        "processes fork (Linux), else 1.",
    )
    resolve_pronouns: bool = Field(
        default=True, description="Resolve he/she/him/her to the latest compatible PERSON."
    )
    keep_bare_events: bool = Field(
        default=False,
        description="Keep predicates none of whose arguments became a mention ('It was late').",
    )

    @classmethod
    def class_name(cls) -> str:
        return "GroundedExtractor"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        from tqdm.auto import tqdm

        from llama_index_e2rag.extract.parse_pool import parse_texts

        nlp = load_spacy(self.model)
        texts = [node.get_content() for node in nodes]
        with PARSE_LOCK:  # docs stream through one at a time: a book's parses never coexist
            parsed = parse_texts(nlp, self.model, texts, self.batch_size, self._workers(texts))
            bar = tqdm(
                total=len(texts),
                desc="Parsing (spaCy)",
                unit="chunk",
                disable=not kwargs.get("show_progress", False),
            )
            with bar, closing(parsed):  # ends the worker processes however the loop ends
                for node, doc in zip(nodes, parsed, strict=True):
                    self._extract(node, doc)
                    bar.update()
        return nodes

    def _workers(self, texts: Sequence[str]) -> int:
        """Parsing is most of an offline build after embedding, and nothing else runs while it
        does, so every core parses (100k words: 56 s instead of 70 s on 2 cores)."""
        if self.n_process is not None:
            return self.n_process
        import multiprocessing

        # where workers are spawned, the caller's script would need a __main__ guard: only ask
        # for workers explicitly there
        if len(texts) < PARALLEL_PARSE_CHUNKS or multiprocessing.get_start_method() != "fork":
            return 1
        from llama_index_e2rag.embeddings import available_cores

        return available_cores()

    def _extract(self, node: BaseNode, doc: Any) -> None:
        """Attach one parsed chunk's graph fragment (or the reason it failed) to the chunk."""
        try:
            builder = _FragmentBuilder(
                doc_id=chunk_doc_id(node),
                chunk_id=node.node_id,
                doc_order=int(node.metadata.get(DOC_ORDER_KEY, 0)),
                offset=chunk_offset(node),
                keep_bare_events=self.keep_bare_events,
            )
            builder.build(_DocFrames(doc, self.resolve_pronouns))
        except Exception as exc:  # one odd chunk must not sink the build
            record_failure(node, f"grounded extraction failed: {type(exc).__name__}: {exc}")
            return
        attach_graph(node, builder.nodes, builder.edges)

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Parse on a thread of the build's own (``background``): the event loop stays
        responsive, a Ctrl-C stops the parse and its workers, and workers forked from it exit
        cleanly (from an executor's thread each failed on exit: spaCy's W127)."""
        return await in_thread(lambda: self.__call__(nodes, **kwargs))

    def query_nodes(self, text: str) -> list[GraphNode]:
        """The query as mention and event nodes (doc_id "query"), parsed like the documents."""
        nlp = load_spacy(self.model)
        with PARSE_LOCK:
            doc = nlp(text)
        builder = _FragmentBuilder("query", "query", 0, 0, keep_bare_events=True)
        builder.build(_DocFrames(doc, self.resolve_pronouns), with_sentences=False)
        return builder.nodes

    def parse_query(self, text: str) -> tuple[list[str], list[str]]:
        """Entity phrases and event phrases of a question, for LLM-free cue extraction.

        Events are the question's clauses; a question without a verb is one event phrase.
        """
        nodes = self.query_nodes(text)
        entities = [n.name or n.text for n in nodes if n.kind == NodeKind.MENTION]
        events = [n.text for n in nodes if n.kind == NodeKind.EVENT]
        return list(dict.fromkeys(entities)), list(dict.fromkeys(events)) or [text.strip()]


def parse_query(text: str) -> tuple[list[str], list[str]]:
    """``GroundedExtractor().parse_query`` with the default pipeline."""
    return GroundedExtractor().parse_query(text)


def query_nodes(text: str) -> list[GraphNode]:
    """``GroundedExtractor().query_nodes`` with the default pipeline."""
    return GroundedExtractor().query_nodes(text)
