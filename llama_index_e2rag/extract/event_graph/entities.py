"""E²GraphRAG's entities as their readers see them (retriever, ranking, timelines, CLI, story page):
which ``entity`` nodes are the layer's, their names, and the forms a name is looked up by.

The writing side (name groups, fusion, the entity layer's edges) is ``fusion``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, Optional

from llama_index_e2rag.extract.linking import name_variants
from llama_index_e2rag.schema import GraphNode, NodeKind, normalize_text

if TYPE_CHECKING:
    from llama_index_e2rag.graph.base import GraphStore


def is_fused_entity(node: GraphNode) -> bool:
    """An ``entity`` node of this layer (other builders may write ``entity`` nodes too)."""
    return node.kind == NodeKind.ENTITY and node.attrs.get("event_graph") == "entity"


def fused_entities(graph: "GraphStore", doc_id: Optional[str] = None) -> list[GraphNode]:
    """The layer's entities of ``graph`` (of one document when ``doc_id`` is given)."""
    return [n for n in graph.nodes(NodeKind.ENTITY, doc_id) if is_fused_entity(n)]


def entity_names(entity: GraphNode) -> list[str]:
    """An entity's names: its own first, then its members' (``attrs["aliases"]``), once each."""
    names = [entity.name or entity.text] + [str(a) for a in entity.attrs.get("aliases") or []]
    return list(dict.fromkeys(n for n in names if n))


NameMatch = Literal["exact", "variant"]


@dataclass(frozen=True)
class NameForms:
    """The forms a name of an entity is looked up by: its names normalised, and their short
    forms read with the entity's type (``linking.name_variants``: first/last names of people)."""

    entity_type: Optional[str]
    exact: frozenset[str]
    short: frozenset[str]

    def match(self, name: str) -> Optional[NameMatch]:
        """How ``name`` names the entity: a name exactly, a shared short form ("Hermione" ~
        "Hermione Granger"), or not at all."""
        key, variants = _lookup_forms(name, self.entity_type)
        if key in self.exact:
            return "exact"
        return "variant" if variants & self.short else None


@lru_cache(maxsize=4096)
def _lookup_forms(name: str, entity_type: Optional[str]) -> tuple[str, frozenset[str]]:
    """A looked-up name's key and short forms: a query name is matched against every entity,
    so they are computed once, not once per entity."""
    return normalize_text(name), frozenset(name_variants(name, entity_type))


def name_forms(entity: GraphNode) -> NameForms:
    """``NameForms`` of an entity node (the alignment and the timelines share them)."""
    kind = entity.attrs.get("entity_type")
    kind = str(kind) if kind else None
    names = entity_names(entity)
    return NameForms(
        kind,
        frozenset(key for key in map(normalize_text, names) if key),
        frozenset(v for n in names for v in name_variants(n, kind)),
    )
