"""The one narrative graph's schema: node and edge kinds, records, ids and positions.

Framework-agnostic on purpose (plain pydantic): ``graph``, ``extract`` and ``context`` build on it
and ``lightrag_ext`` reuses it without LlamaIndex's index machinery.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from enum import Enum
from typing import Any, Iterable, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

#: Narrative position: (document order, character offset in that document, ordinal among
#: nodes that share the offset). Tuples sort in story order across documents.
Position = Tuple[int, int, int]
Span = Tuple[int, int]

#: Where a chunk graph node keeps its llama-index ``TextNode`` (as ``TextNode.to_dict()``), so
#: results cite the chunk without a docstore read. Here, at the bottom, because the stores write
#: it and the context layer reads it.
CHUNK_NODE_ATTR = "node"
#: Where a person mention lists the names it is told apart from (two arguments of one verb):
#: the grounded parse writes it, the characters read it.
APART_ATTR = "apart"


class NodeKind(str, Enum):
    """What a graph node stands for (see DESIGN.md, "Schema")."""

    CHUNK = "chunk"
    SENTENCE = "sentence"
    MENTION = "mention"
    EVENT = "event"
    ENTITY = "entity"
    FACT = "fact"
    TOPIC = "topic"
    PASSAGE = "passage"
    GRAPH_EVENT = "graph_event"  # E²GraphRAG: an event grown over an entity's ego network


#: Node kinds that get a vector when built (ingestion embeds them, repair re-embeds them, a
#: per-kind ``vector_stores=`` needs a store for each).
EMBEDDED_KINDS = (
    NodeKind.CHUNK,
    NodeKind.SENTENCE,
    NodeKind.MENTION,
    NodeKind.EVENT,
    NodeKind.FACT,
    NodeKind.ENTITY,
    NodeKind.PASSAGE,
    NodeKind.GRAPH_EVENT,
)


def embeddable(node: "GraphNode") -> bool:
    """Whether ``node`` has a vector: an embedded kind, with text, not opted out (``embed``)."""
    return (
        node.kind in EMBEDDED_KINDS
        and node.attrs.get("embed") is not False
        and bool(node.text.strip())
    )


class EdgeKind(str, Enum):
    """How two graph nodes relate."""

    PARTICIPATES = "participates"  # mention -> event, optional role (A0, A1, AM-TMP, ...)
    CO_MENTION = "co_mention"  # mention -- mention, same chunk
    CO_EVENT = "co_event"  # event -- event, same chunk
    NEXT = "next"  # node -> following node of the same kind (story order)
    RELATION = "relation"  # described mention -> mention
    INSTANCE_OF = "instance_of"  # mention -> entity
    RST = "rst"  # sentence -> sentence, typed
    BRIDGE = "bridge"  # topic -- topic
    GROUNDED_IN = "grounded_in"  # any node -> sentence / chunk it is grounded in
    CHILD = "child"  # fact -> layer-0 chunk it was generated from (ChronoRAG)


_WS = re.compile(r"\s+")
_NON_WORD = re.compile(r"[^\w\s]")


def normalize_text(text: str) -> str:
    """Case-, accent- and punctuation-insensitive form used for ids and name matching.

    The combining marks are found among the text's distinct characters and dropped in one
    ``translate`` (a per-character pass in Python cost seconds over a long book)."""
    text = unicodedata.normalize("NFKD", text)
    if not text.isascii():
        marks = {ord(ch): None for ch in set(text) if unicodedata.combining(ch)}
        if marks:
            text = text.translate(marks)
    text = _NON_WORD.sub(" ", text.lower())
    return _WS.sub(" ", text).strip()


def make_id(doc_id: str, kind: NodeKind | str, pos: Iterable[int], text: str) -> str:
    """Deterministic node id: same document, kind, position and text give the same id."""
    kind_value = kind.value if isinstance(kind, NodeKind) else str(kind)
    key = "\x1f".join(
        [doc_id, kind_value, ",".join(str(int(p)) for p in pos), normalize_text(text)]
    )
    return f"{kind_value}-{hashlib.sha1(key.encode('utf-8')).hexdigest()[:20]}"


class GraphNode(BaseModel):
    """A node of the narrative graph; ``text`` is what gets embedded."""

    model_config = ConfigDict(frozen=False, extra="forbid")

    id: str
    kind: NodeKind
    text: str
    doc_id: str
    pos: Position
    span: Optional[Span] = None
    chunk_id: Optional[str] = None
    name: Optional[str] = None
    attrs: dict[str, Any] = Field(default_factory=dict)


class GraphEdge(BaseModel):
    """A directed, typed edge; ``(source, target, key)`` identifies it."""

    model_config = ConfigDict(frozen=False, extra="forbid")

    source: str
    target: str
    kind: EdgeKind
    doc_id: str
    role: Optional[str] = None
    attrs: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """Multi-edge key: one edge per kind (and role) between two nodes."""
        return f"{self.kind.value}:{self.role}" if self.role else self.kind.value


def name_type(node: GraphNode) -> Optional[str]:
    """The type a mention's name is read with: a person named by a noun phrase ("his sister",
    ``attrs["nominal"]``) has no name to match questions, events or other names on."""
    return "concept" if node.attrs.get("nominal") else node.attrs.get("entity_type")


def sort_by_position(nodes: Iterable[GraphNode]) -> list[GraphNode]:
    """Nodes in story order (ties broken by id so the order is total and stable)."""
    return sorted(nodes, key=lambda n: (n.pos, n.id))
