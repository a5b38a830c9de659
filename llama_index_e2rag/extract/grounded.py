"""LLM-free graph extraction in the manner of GroundedKG-RAG: predicate frames from a spaCy parse.

Each verb becomes an ``event`` (an action node) whose text is its own clause; its arguments become
``mention`` nodes linked by ``participates`` edges carrying PropBank-style roles (A0 agent, A1
patient/theme, A2 other objects, AM-TMP time, AM-LOC place). Every node and edge is grounded: events
and mentions point at the ``sentence`` nodes they come from, and every span is absolute in the
source document. The schema is the one the LLM extractor fills, so every retriever reads both.

A dependency parse is not semantic role labelling: roles come from syntactic relations (subject,
object, passive agent, preposition), read by ``frames``; the rules are spelled out in
``docs/offline.md``.
"""

from __future__ import annotations

from contextlib import closing
from itertools import pairwise
from typing import Any, ClassVar, Optional, Sequence

from llama_index.core.schema import BaseNode, TransformComponent
from pydantic import Field

from llama_index_e2rag.background import available_cores, in_thread
from llama_index_e2rag.extract.base import (
    DOC_ORDER_KEY,
    attach_graph,
    chunk_doc_id,
    chunk_offset,
    record_failure,
)
from llama_index_e2rag.extract.frames import DocFrames, Frame, Ref
from llama_index_e2rag.extract.pronouns import NARRATOR_KEY, Person
from llama_index_e2rag.extract.linking import chunk_node_id
from llama_index_e2rag.extract.parse_pool import parse_texts
from llama_index_e2rag.extract.spacy_model import PARSE_LOCK, SPACY_MODEL, load_spacy
from llama_index_e2rag.extract.statements import statement
from llama_index_e2rag.schema import (
    APART_ATTR,
    EdgeKind,
    GraphEdge,
    GraphNode,
    NodeKind,
    Position,
    Span,
)

#: Chunks in one call from which parsing uses worker processes (below, starting them costs more).
PARALLEL_PARSE_CHUNKS = 64
#: Verbs whose arguments may be one person under two names (a copula, a naming).
_NAMING_VERBS = frozenset({"be", "become", "remain", "seem", "call", "name", "christen"})
#: Nodes of one sentence up to which every pair gets a co_event / co_mention edge; in a longer
#: one (text without sentence ends) each node is paired with its next ``CO_NEIGHBOURS`` only.
CO_PAIRS_ALL_UP_TO = 40
CO_NEIGHBOURS = 20

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

    def build(self, frames: DocFrames, with_sentences: bool = True) -> None:
        if with_sentences:
            self._add_sentences(frames.doc)
        events = [
            self._add_event(frames, frame)
            for frame in frames.frames
            if frame.args or frame.realis or self.keep_bare_events  # what happens is an event
        ]
        for ref in frames.named:
            if ref is not None:
                self._mention(ref)
        for ref in frames.nominal_refs():
            if ref.nominal or ref.key in self._mentions:
                self._mention(ref)  # a person named by what they are, or by a name here
        carried = {person.key for person in frames.earlier}
        for ref in frames.pronoun_refs():
            if ref.key in self._mentions or ref.key in carried or ref.key == NARRATOR_KEY:
                self._mention(ref)  # named here or at the end of the chunk before, or narrating
        self._apart(frames)
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

    def _mention(self, ref: Ref) -> GraphNode:
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
            if ref.nominal:
                node.attrs["nominal"] = True
            self._mentions[ref.key] = node
            self._grounding[node.id] = []
        if span not in node.attrs["spans"]:
            node.attrs["spans"].append(span)
        if sentence is not None and sentence.id not in self._grounding[node.id]:
            self._grounding[node.id].append(sentence.id)
        return node

    def _apart(self, frames: DocFrames) -> None:
        """Record on each named mention the other names it shares a predicate with
        ("Mrs. Hale asked Margaret Hale", "Mrs. Hale and Margaret quarrelled"): two arguments
        of one verb are two people (binding), so the characters never join those names
        (extract/characters.py). Pronoun arguments are left out: a misread one would part the
        person from herself."""
        for frame in frames.frames:
            if frame.verb.lemma_.lower() in _NAMING_VERBS:
                continue  # "Mary was Mrs. Cavendish", "they called her Meg": one person
            named = {
                ref.key: ref.name for _, ref in frame.args
                if ref.label and not ref.nominal  # names (the parser types some as ORG, GPE)
                and frames.doc[ref.anchor].pos_ != "PRON"
            }
            for key in named if len(named) > 1 else ():
                node = self._mentions.get(key)
                if node is not None:
                    apart = node.attrs.setdefault(APART_ATTR, [])
                    apart += [n for k, n in named.items() if k != key and n not in apart]

    def _settle(self, mention: GraphNode) -> None:
        """Anchor a mention at its earliest occurrence: its name, or a pronoun where the person
        was last named in the chunk before."""
        spans = sorted(mention.attrs["spans"])
        mention.attrs["spans"] = spans
        mention.span = (spans[0][0], spans[0][1])
        mention.pos = (self.doc_order, spans[0][0], 2)
        sentences = self._grounding[mention.id]
        sentences.sort(key=lambda sid: self._sentences[sid].pos)
        if sentences:
            mention.attrs["sentence_id"] = sentences[0]
            mention.attrs["sentence_text"] = self._sentences[sentences[0]].text

    def _add_event(self, frames: DocFrames, frame: Frame) -> GraphNode:
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
            "realis": frame.realis,
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

    #: Works chunk by chunk in order, handing what a chunk ends with to the next through the
    #: caller's ``carry``: a long document may be extracted a group of chunks per call.
    chunk_local: ClassVar[bool] = True

    @classmethod
    def class_name(cls) -> str:
        return "GroundedExtractor"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        from tqdm.auto import tqdm


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
            # each document's persons, as its last chunk ended: the next chunk's pronouns
            # may stand for them (kept in the caller's ``carry`` when it extracts a document
            # a group of chunks per call)
            carry = kwargs.get("carry")
            ended: dict[str, list[Person]] = (
                {} if carry is None else carry.setdefault(("persons", id(self)), {})
            )
            with bar, closing(parsed):  # ends the worker processes however the loop ends
                for node, doc in zip(nodes, parsed, strict=True):
                    doc_id = chunk_doc_id(node)
                    ended[doc_id] = self._extract(node, doc, ended.get(doc_id, []))
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

        return available_cores()

    def _extract(self, node: BaseNode, doc: Any, earlier: list[Person]) -> list[Person]:
        """Attach one parsed chunk's graph fragment (or the reason it failed) to the chunk;
        the persons it ends with (``earlier``: those the chunk before ended with)."""
        try:
            frames = DocFrames(doc, self.resolve_pronouns, earlier)
            builder = _FragmentBuilder(
                doc_id=chunk_doc_id(node),
                chunk_id=node.node_id,
                doc_order=int(node.metadata.get(DOC_ORDER_KEY, 0)),
                offset=chunk_offset(node),
                keep_bare_events=self.keep_bare_events,
            )
            builder.build(frames)
        except Exception as exc:  # one odd chunk must not sink the build
            record_failure(node, f"grounded extraction failed: {type(exc).__name__}: {exc}")
            return []
        attach_graph(node, builder.nodes, builder.edges)
        return frames.last_people()

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
        builder.build(DocFrames(doc, self.resolve_pronouns), with_sentences=False)
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
