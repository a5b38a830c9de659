"""``EventGraphBuilder``: E²GraphRAG's entity and event layers as a document builder (paper 001,
§3.1; plan ``docs/design/event_graph_plan.md``).

Per document: the mentions the chunk extraction left in the staging graph are grouped by name
(LightRAG's V0 entities), the groups' texts embedded with the index's model and fused
(``fusion``: compatible names above θ_merge); every mention gets an ``instance_of`` edge to its
entity, and the mentions' ``co_mention`` and ``participates`` edges are lifted to weighted
entity links and entity -> event edges. With an LLM the event pass
(``events_llm``) then grows ``graph_event`` nodes over each entity's ego network. Across
documents, ``alink`` joins entities sharing an alias with ``instance_of`` links, so a deleted
document takes its entities and links with it and the remaining fusion needs no re-extraction.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Literal, Optional, Sequence

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_e2rag.extract.builders import OptionalLLM
from llama_index_e2rag.embeddings import aembed_rows
from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.base import chunk_doc_id
from llama_index_e2rag.extract.event_graph.events_llm import EgoInput, extract_events
from llama_index_e2rag.extract.event_graph.entities import fused_entities
from llama_index_e2rag.extract.event_graph.fusion import (
    entity_layer,
    mention_groups,
    same_entity_links,
)
from llama_index_e2rag.extract.event_graph.prompts import UPDATE_PROMPT
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import BaseNode

    from llama_index_e2rag.extract.builders import BuildFailure
    from llama_index_e2rag.llm.runner import LLMRunner

EventSetting = Literal["auto", "llm", "frames"]
_EVENTS = ("auto", "llm", "frames")
#: The paper gives no θ_merge. Fusion candidates are already name-compatible (plan §2.1), so the
#: cosine only has to confirm them: same-person texts score 0.58-0.79 with MiniLM ("Miss
#: Granger" / "Hermione Granger", with and without descriptions). Not fitted on any data.
DEFAULT_THETA_MERGE = 0.5


class EventGraphBuilder(OptionalLLM, PromptMixin):
    """Document builder writing E²GraphRAG's fused ``entity`` nodes and, with an LLM, its
    ``graph_event`` layer.

    ``E2RAGIndex.from_documents(docs, doc_builders=[EventGraphBuilder()])``: the index hands the
    builder its LLM runner and embedding model. ``theta_merge``: cosine above which two name-
    compatible entities fuse (``require_name_overlap=False``: any two names not in conflict, the
    paper's rule). ``events``: ``"llm"`` runs the paper's iterative event extraction and update
    (needs an LLM), ``"frames"`` keeps the extraction's events lifted to the entities only,
    ``"auto"`` is the LLM when one is given or configured. ``wave_size``,
    ``max_chunks_per_entity``, ``min_mentions``, ``max_description_words`` and
    ``max_listed_events`` shape the event pass (``events_llm.extract_events``). The settings are
    stored with the index and restored on load; ``update_prompt`` is not, so pass the builder
    again when loading if you changed it.
    """

    config_name: ClassVar[str] = "event_graph"

    def __init__(
        self,
        llm_runner: Optional["LLMRunner"] = None,
        *,
        embed_model: Optional["BaseEmbedding"] = None,
        theta_merge: float = DEFAULT_THETA_MERGE,
        require_name_overlap: bool = True,
        events: EventSetting = "auto",
        wave_size: int = 8,
        max_chunks_per_entity: Optional[int] = None,
        min_mentions: int = 1,
        max_description_words: int = 200,
        max_listed_events: int = 20,
        update_prompt: Optional[BasePromptTemplate] = None,
    ) -> None:
        if events not in _EVENTS:
            raise ValueError(f"events must be one of {_EVENTS}, got {events!r}")
        if not -1.0 <= theta_merge <= 1.0:
            raise ValueError(f"theta_merge is a cosine, in [-1, 1]; got {theta_merge}")
        for name, value in (("wave_size", wave_size), ("min_mentions", min_mentions),
                            ("max_description_words", max_description_words),
                            ("max_listed_events", max_listed_events)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if max_chunks_per_entity is not None and max_chunks_per_entity < 1:
            raise ValueError(
                f"max_chunks_per_entity must be at least 1 or None, got {max_chunks_per_entity}"
            )
        self._keep_runner(llm_runner)
        self.embed_model = embed_model
        self.theta_merge = theta_merge
        self.require_name_overlap = require_name_overlap
        self.events = events
        self.wave_size = wave_size
        self.max_chunks_per_entity = max_chunks_per_entity
        self.min_mentions = min_mentions
        self.max_description_words = max_description_words
        self.max_listed_events = max_listed_events
        self.update_prompt = update_prompt or UPDATE_PROMPT
        self._explicit_embedding = embed_model is not None

    def to_config(self) -> dict[str, Any]:
        """The JSON settings the index stores to rebuild this builder on load."""
        return {
            "theta_merge": self.theta_merge,
            "require_name_overlap": self.require_name_overlap,
            "events": self.events,
            "wave_size": self.wave_size,
            "max_chunks_per_entity": self.max_chunks_per_entity,
            "min_mentions": self.min_mentions,
            "max_description_words": self.max_description_words,
            "max_listed_events": self.max_listed_events,
        }

    @classmethod
    def from_config(cls, params: dict[str, Any]) -> "EventGraphBuilder":
        return cls(**params)

    def use_embed_model(self, model: "BaseEmbedding") -> None:
        """Adopt the index's embedding model (fusion compares texts in the index's space)."""
        if not self._explicit_embedding:
            self.embed_model = model

    # -- prompts --------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"update_prompt": self.update_prompt}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "update_prompt" in prompts_dict:
            self.update_prompt = prompts_dict["update_prompt"]

    # -- DocumentBuilder ------------------------------------------------------------------------
    async def abuild(
        self,
        document: "BaseNode",
        doc_order: int,
        chunks: Sequence["BaseNode"],
        graph: GraphStore,
    ) -> tuple[list[GraphNode], Iterable[GraphEdge], list["BuildFailure"]]:
        """The document's entities and their edges, then (with an LLM) its ``graph_event``s."""
        doc_id = chunk_doc_id(chunks[0]) if chunks else document.doc_id
        runner = self._runner_for(self.events, "events", "frames")
        # a page of rows at a time: one read of every mention held the rows beside the nodes
        # (a million-word document's 155k mentions: 529 MiB at once, 464 MiB by pages)
        groups = mention_groups(
            mention for page in graph.scan_nodes(NodeKind.MENTION, doc_id) for mention in page
        )
        if not groups:
            return [], [], []
        if self.embed_model is None:
            raise MissingModelError(
                "EventGraphBuilder needs an embedding model to fuse entities: use it through "
                "E2RAGIndex (doc_builders=[...]) or pass embed_model="
            )
        texts = [group.text for group in groups]
        vectors = await aembed_rows(self.embed_model, texts)
        entities, edges = entity_layer(
            doc_id,
            groups,
            (event for page in graph.scan_nodes(NodeKind.EVENT, doc_id) for event in page),
            (
                edge
                for kind in (EdgeKind.PARTICIPATES, EdgeKind.CO_MENTION)
                for page in graph.scan_edges(kind, doc_id)
                for edge in page
            ),
            vectors,
            self.theta_merge,
            self.require_name_overlap,
        )
        if runner is None or not entities:
            return entities, edges, []
        chunk_ids = {c.node_id for c in chunks}
        ego = EgoInput(
            doc_id=doc_id,
            entities=entities,
            chunk_weights=_chunk_weights(graph, edges),
            chunks={c.id: c for c in graph.nodes(NodeKind.CHUNK, doc_id) if c.id in chunk_ids},
        )
        found = await extract_events(
            runner,
            self.update_prompt,
            ego,
            wave_size=self.wave_size,
            max_chunks_per_entity=self.max_chunks_per_entity,
            min_mentions=self.min_mentions,
            max_description_words=self.max_description_words,
            max_listed_events=self.max_listed_events,
        )
        return entities + found.nodes, chain(edges, found.edges), found.failures

    async def alink(
        self, staged: Sequence[tuple[str, GraphStore]], committed: GraphStore
    ) -> tuple[dict[str, list[GraphEdge]], list["BuildFailure"]]:
        """Same-entity links from the batch's entities to every other document's, grouped by
        the (later) document owning each; committed versions of batch documents are skipped."""
        batch = {doc_id for doc_id, _ in staged}
        new = [e for doc_id, graph in staged for e in fused_entities(graph) if e.doc_id == doc_id]
        others = [e for e in fused_entities(committed) if e.doc_id not in batch]
        links: dict[str, list[GraphEdge]] = {}
        for link in same_entity_links(new, others):
            links.setdefault(link.doc_id, []).append(link)
        return links, []


def _chunk_weights(graph: GraphStore, edges: Iterable[GraphEdge]) -> dict[str, dict[str, int]]:
    """Entity id -> {chunk id: edge weight}: the entity's mentions in the chunk plus their
    ``participates`` edges (the paper's LightRAG edge weights have no other counterpart here)."""
    weights: dict[str, dict[str, int]] = {}
    for edge in edges:
        if edge.kind != EdgeKind.INSTANCE_OF:
            continue
        mention = graph.get_node(edge.source)
        if mention is None or mention.chunk_id is None:
            continue
        taking_part = len(graph.edges_of(mention.id, [EdgeKind.PARTICIPATES], direction="out"))
        per_chunk = weights.setdefault(edge.target, {})
        per_chunk[mention.chunk_id] = per_chunk.get(mention.chunk_id, 0) + 1 + taking_part
    return weights

