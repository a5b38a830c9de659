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
        exact_keys(entity),
        frozenset(v for n in names for v in name_variants(n, kind)),
    )


def exact_keys(entity: GraphNode) -> frozenset[str]:
    """``name_forms(entity).exact`` without the short forms (cross-document linking matches
    exact names only, over every stored entity)."""
    return frozenset(key for key in map(normalize_text, entity_names(entity)) if key)


class NameIndex:
    """Which of many entities a name names, looked up instead of asking each entity in turn.

    ``rows(name)`` equals ``{i: forms[i].match(name)}`` over the rows that match: a name is
    read with each entity type present (its short forms depend on the type), then its key and
    short forms are looked up, so a query costs the same in a short story and a long novel.
    """

    def __init__(self, forms: list[NameForms]) -> None:
        self._exact: dict[str, list[int]] = {}
        self._short: dict[tuple[Optional[str], str], list[int]] = {}
        for row, form in enumerate(forms):
            for key in form.exact:
                self._exact.setdefault(key, []).append(row)
            for variant in form.short:
                self._short.setdefault((form.entity_type, variant), []).append(row)
        self._types = sorted({form.entity_type for form in forms}, key=lambda t: t or "")

    def rows(self, name: str) -> dict[int, NameMatch]:
        """The rows ``name`` names and how (an exact name wins over a short form)."""
        found: dict[int, NameMatch] = {}
        for entity_type in self._types:
            _, variants = _lookup_forms(name, entity_type)
            for variant in variants:
                for row in self._short.get((entity_type, variant), ()):
                    found[row] = "variant"
        for row in self._exact.get(normalize_text(name), ()):
            found[row] = "exact"
        return found
