"""ChronoRAG's two layers (paper 003, §3.1) built per document into the shared narrative graph.

Layer 0 is a second, fixed-length chunking of the document (≈100 tokens) kept apart from the
extraction chunks: the paper insists on equal-length units, while extraction wants sentence-aware
chunks. Layer 1 holds the "atomic facts" that are retrieved as keys: with an LLM, relation
descriptions extracted from a summary of each group of layer-0 chunks (two calls per group); without
one, the grounded event clauses already in the graph. Every fact carries a narrative index and
``child`` edges to the layer-0 chunks it came from, so the retriever can assemble neighbouring facts
and drill down to the source text.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import re
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional, Sequence

from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import BaseNode, MetadataMode
from pydantic import BaseModel, Field

from llama_index_e2rag.extract.builders import BuildFailure, OptionalLLM
from llama_index_e2rag.extract.base import chunk_doc_id, span_nodes
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, Span, make_id

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner

logger = logging.getLogger(__name__)

#: Counts the tokens of a text; used to cut layer 0 and to enforce retrieval budgets.
TokenCounter = Callable[[str], float]

#: Id namespaces of the two layers, distinct from the extraction chunks' ids.
LAYER0_ID_KIND = "chrono_chunk"
LAYER1_ID_KIND = "chrono_fact"

FactSource = Literal["auto", "llm", "events"]

_WORD_SPAN = re.compile(r"\S+")
_SENTENCE_ENDS = (".", "!", "?", "…")
_CLOSING_QUOTES = "\"'”’)»"
#: Slack for float token counts (1.3 × 10 words is 13.000000000000002).
TOKEN_EPSILON = 1e-6


def approx_token_count(text: str) -> float:
    """Offline token estimate: whitespace words × 1.3 (within ~10% of cl100k on English prose).

    The default because it is fast and deterministic; for exact cl100k counts pass
    ``token_counter=llama_index_e2rag.llm.usage.count_tokens`` (llama-index ships that vocabulary).
    """
    return round(1.3 * len(text.split()), 6)


def fixed_length_spans(
    text: str, chunk_tokens: float, token_counter: TokenCounter = approx_token_count
) -> list[Span]:
    """Cut ``text`` into consecutive word-aligned spans of at most ``chunk_tokens`` tokens.

    Words are packed greedily by their own counts, then each span is checked as a whole (a
    subword tokenizer may count a span differently from its words) and shortened until it fits.
    A single word longer than the limit still forms a span, so no text is ever dropped.
    """
    if chunk_tokens <= 0:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    words = [(m.start(), m.end()) for m in _WORD_SPAN.finditer(text)]
    costs = [token_counter(text[start:end]) for start, end in words]
    spans: list[Span] = []
    i = 0
    while i < len(words):
        j, used = i + 1, costs[i]
        while j < len(words) and used + costs[j] <= chunk_tokens + TOKEN_EPSILON:
            used += costs[j]
            j += 1
        while j - i > 1 and (
            token_counter(text[words[i][0] : words[j - 1][1]]) > chunk_tokens + TOKEN_EPSILON
        ):
            j -= 1
        spans.append((words[i][0], words[j - 1][1]))
        i = j
    return spans


CHRONO_SUMMARY_PROMPT = PromptTemplate(
    "---Task: chrono_summary---\n"
    "You are reading a long story in order. Summarise the consecutive passage below.\n"
    "- Keep the events in the order in which they happen in the passage.\n"
    "- Name characters, places and objects explicitly; never leave a pronoun without its name.\n"
    "- Keep who did what to whom, where and when; drop style, description and repetition.\n"
    "- Write plain sentences, no lists, no headings, no comments about the task.\n"
    "\n"
    "Passage:\n"
    "{text}\n"
    "\n"
    "Summary:\n"
)

CHRONO_RELATIONS_PROMPT = PromptTemplate(
    "---Task: chrono_relations---\n"
    "Below is the summary of one part of a story. First list the entities it names (characters, "
    "places, objects, groups). Then, for each pair of entities that interact or are related in "
    "this part, write one self-contained sentence describing that relation or interaction as told "
    "here, using full names (for example: \"George Darrow is in London for a dinner party where "
    "he reunites with Anna\"). List the relations in the order the summary tells them.\n"
    "\n"
    "Return only JSON of this form:\n"
    '{"entities": ["<name>", ...], "relations": [{"source": "<name>", "target": "<name>", '
    '"description": "<one sentence>"}, ...]}\n'
    "\n"
    "Summary:\n"
    "{text}\n"
)


class ChronoRelation(BaseModel):
    """One relation description between two entities of a summary (a layer-1 fact)."""

    source: str = Field(default="", description="First entity of the relation.")
    target: str = Field(default="", description="Second entity of the relation.")
    description: str = Field(description="One self-contained sentence describing the relation.")


class ChronoRelations(BaseModel):
    """Entities and relation descriptions extracted from one group summary."""

    entities: list[str] = Field(default_factory=list)
    relations: list[ChronoRelation] = Field(default_factory=list)


class ChronoLayerBuilder(OptionalLLM, PromptMixin):
    """Document builder adding ChronoRAG's layer 0 (chunks) and layer 1 (facts) to the graph.

    Pass it to the index: ``E2RAGIndex.from_documents(docs, doc_builders=[ChronoLayerBuilder()])``.

    ``facts`` picks where layer 1 comes from: ``"llm"`` (the paper: summarise each group of
    ``group_size`` chunks, then extract relation descriptions; needs an LLM), ``"events"`` (no
    LLM: the event clauses the chunk extractors put in the graph), or ``"auto"`` (the LLM when one
    is given or configured, else events).

    A group whose LLM calls fail keeps its layer-0 chunks but adds no facts; ``abuild`` returns
    it as a failure, so it shows in ``index.extraction_report()``. The builder's numeric settings
    are stored with the index (``to_config``) and restored on load; a custom ``token_counter`` or
    prompts are not, so pass the builder again when loading if you changed those.
    """

    config_name: ClassVar[str] = "chrono"

    def __init__(
        self,
        llm_runner: Optional["LLMRunner"] = None,
        *,
        chunk_tokens: float = 100,
        group_size: int = 10,
        facts: FactSource = "auto",
        token_counter: Optional[TokenCounter] = None,
        summary_prompt: Optional[BasePromptTemplate] = None,
        relations_prompt: Optional[BasePromptTemplate] = None,
    ) -> None:
        if chunk_tokens <= 0:
            raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        if facts not in ("auto", "llm", "events"):
            raise ValueError(f"facts must be 'auto', 'llm' or 'events', got {facts!r}")
        self._keep_runner(llm_runner)
        self.chunk_tokens = chunk_tokens
        self.group_size = group_size
        self.facts = facts
        self.token_counter: TokenCounter = token_counter or approx_token_count
        self.summary_prompt = summary_prompt or CHRONO_SUMMARY_PROMPT
        self.relations_prompt = relations_prompt or CHRONO_RELATIONS_PROMPT

    def to_config(self) -> dict[str, Any]:
        """The JSON settings the index stores to rebuild this builder on load."""
        return {
            "chunk_tokens": self.chunk_tokens,
            "group_size": self.group_size,
            "facts": self.facts,
        }

    @classmethod
    def from_config(cls, params: dict[str, Any]) -> "ChronoLayerBuilder":
        return cls(**params)

    # -- prompts --------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"summary_prompt": self.summary_prompt, "relations_prompt": self.relations_prompt}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "summary_prompt" in prompts_dict:
            self.summary_prompt = prompts_dict["summary_prompt"]
        if "relations_prompt" in prompts_dict:
            self.relations_prompt = prompts_dict["relations_prompt"]

    # -- DocumentBuilder ------------------------------------------------------------------------
    async def abuild(
        self,
        document: BaseNode,
        doc_order: int,
        chunks: Sequence[BaseNode],
        graph: GraphStore,
    ) -> tuple[list[GraphNode], list[GraphEdge], list[BuildFailure]]:
        """Build both layers of one document; ``graph`` already holds its extracted nodes.

        Returns the nodes, the edges and the failed groups (``{"chunk_id", "reason"}``, the
        chunk being the group's first layer-0 chunk).
        """
        text = document.get_content(metadata_mode=MetadataMode.NONE)
        doc_id = chunk_doc_id(chunks[0]) if chunks else document.doc_id
        layer0 = self._layer0(text, doc_id, doc_order, chunks)
        if not layer0:
            return [], [], []
        runner = self._runner_for(self.facts, "facts", "events")
        failures: list[BuildFailure] = []
        if runner is not None:
            facts, edges = await self._llm_facts(runner, text, layer0, doc_id, doc_order, failures)
        else:
            facts, edges = self._event_facts(graph, layer0, doc_id, doc_order)
        return layer0 + facts, edges, failures

    # -- layer 0 --------------------------------------------------------------------------------
    def _layer0(
        self, text: str, doc_id: str, doc_order: int, chunks: Sequence[BaseNode]
    ) -> list[GraphNode]:
        """Fixed-length chunks in story order, each mapped to the extraction chunk it starts in."""
        return span_nodes(
            text,
            fixed_length_spans(text, self.chunk_tokens, self.token_counter),
            doc_id=doc_id,
            order=doc_order,
            chunks=chunks,
            kind=NodeKind.CHUNK,
            id_kind=LAYER0_ID_KIND,
            attrs=lambda i: {
                "layer": 0, "chrono_index": i, "group": i // self.group_size, "embed": False,
            },
        )

    # -- layer 1 with an LLM --------------------------------------------------------------------
    async def _llm_facts(
        self,
        runner: "LLMRunner",
        text: str,
        layer0: list[GraphNode],
        doc_id: str,
        doc_order: int,
        failures: list[BuildFailure],
    ) -> tuple[list[GraphNode], list[GraphEdge]]:
        """Summarise each group, extract its relation descriptions; index them in story order.

        A failed group is appended to ``failures`` and contributes no facts.
        """
        groups = [
            layer0[i : i + self.group_size] for i in range(0, len(layer0), self.group_size)
        ]
        bounds = [(_span(group[0])[0], _span(group[-1])[1]) for group in groups]
        answers = await asyncio.gather(
            *(self._group_relations(runner, text[start:end]) for start, end in bounds),
            return_exceptions=True,
        )
        facts: list[GraphNode] = []
        edges: list[GraphEdge] = []
        for g, (group, (start, end), answer) in enumerate(zip(groups, bounds, answers)):
            if isinstance(answer, BaseException):
                if not isinstance(answer, Exception):
                    raise answer
                failures.append(self._record_failure(group, f"{type(answer).__name__}: {answer}"))
                continue
            for k, relation in enumerate(answer):
                fact = _fact(
                    relation.description,
                    doc_id=doc_id,
                    doc_order=doc_order,
                    narrative=(g, k),
                    chrono_index=len(facts),
                    span=(start, end),
                    chunk_id=group[0].chunk_id,
                    name=f"{relation.source} / {relation.target}".strip(" /") or None,
                    source="llm",
                    entities=[e for e in (relation.source, relation.target) if e],
                )
                facts.append(fact)
                edges.extend(_child_edge(fact, chunk) for chunk in group)
        return facts, edges

    async def _group_relations(self, runner: "LLMRunner", passage: str) -> list[ChronoRelation]:
        """Two LLM calls per group, as in the paper: summary, then entities and relations."""
        summary = await runner.acomplete(self.summary_prompt, kind="chrono_summary", text=passage)
        extracted = await runner.astructured(
            self.relations_prompt, ChronoRelations, kind="chrono_relations", text=summary.strip()
        )
        seen: set[str] = set()
        relations = []
        for relation in extracted.relations:
            description = " ".join(relation.description.split())
            if description and description.lower() not in seen:
                seen.add(description.lower())
                relations.append(relation.model_copy(update={"description": description}))
        return relations

    @staticmethod
    def _record_failure(group: list[GraphNode], reason: str) -> BuildFailure:
        """A failed group keeps its layer-0 chunks (marked, logged) and contributes no facts."""
        logger.warning("chrono layer 1: group at %s produced no facts (%s)", group[0].pos, reason)
        for chunk in group:
            chunk.attrs["chrono_error"] = reason
        first, last = _span(group[0])[0], _span(group[-1])[1]
        return {
            "chunk_id": group[0].id,
            "reason": f"chrono layer 1: group {group[0].attrs['group']} "
            f"(characters {first}-{last}) produced no facts: {reason}",
        }

    # -- layer 1 without an LLM -----------------------------------------------------------------
    def _event_facts(
        self, graph: GraphStore, layer0: list[GraphNode], doc_id: str, doc_order: int
    ) -> tuple[list[GraphNode], list[GraphEdge]]:
        """The document's events as facts in story order; children = layer-0 chunks they overlap.

        A fact says its event's statement (its clause with the subject it shares, see
        ``extract/statements.py``) as a sentence (``readable``); it keeps its event's vector.
        The narrative index comes from the layer-0 chunk holding the event's position, so it
        grows with the story even when an event's span is its whole extraction chunk (LLM events).
        """
        events = [e for e in graph.nodes(NodeKind.EVENT, doc_id) if e.text.strip()]
        if not events:
            logger.warning(
                "chrono layer 1 for %s: no event nodes in the graph (run a chunk extractor such as "
                "GroundedExtractor, or give the builder an LLM); the document has no facts",
                doc_id,
            )
        starts = [_span(chunk)[0] for chunk in layer0]
        facts: list[GraphNode] = []
        edges: list[GraphEdge] = []
        per_group: dict[int, int] = {}
        for event in events:  # graph.nodes returns story order
            start, end = _event_span(graph, event)
            home = layer0[max(bisect.bisect_right(starts, event.pos[1]) - 1, 0)]
            g = int(home.attrs["group"])
            k = per_group.get(g, 0)
            per_group[g] = k + 1
            fact = _fact(
                readable(event.attrs.get("statement") or event.text),
                doc_id=doc_id,
                doc_order=doc_order,
                narrative=(g, k),
                chrono_index=len(facts),
                span=(start, end),
                offset=event.pos[1],
                chunk_id=event.chunk_id,
                name=event.name,
                source="events",
                event_id=event.id,
            )
            facts.append(fact)
            children = {c.id: c for c in [home, *_overlapping(layer0, starts, start, end)]}
            edges.extend(_child_edge(fact, chunk) for chunk in children.values())
        return facts, edges


def readable(text: str) -> str:
    """A clause as a sentence of its own: one line, a capital first letter, an end mark.

    Facts are shown one after another in a value; without these they run into each other.
    """
    line = " ".join(text.split())
    first = next((i for i, ch in enumerate(line) if ch.isalnum()), None)
    if first is None:
        return line
    line = line[:first] + line[first].upper() + line[first + 1 :]
    if line.rstrip(_CLOSING_QUOTES).endswith(_SENTENCE_ENDS):
        return line
    return line.rstrip(" ,;:-–—") + "."


def _span(node: GraphNode) -> Span:
    """A node's char span, or the empty span at its position."""
    return node.span if node.span is not None else (node.pos[1], node.pos[1])


def _fact(
    text: str,
    *,
    doc_id: str,
    doc_order: int,
    narrative: tuple[int, int],
    chrono_index: int,
    span: Span,
    chunk_id: Optional[str],
    name: Optional[str],
    offset: Optional[int] = None,
    **extra_attrs: Any,
) -> GraphNode:
    """A layer-1 fact: its narrative index ``(group, k)`` names it, its chrono index orders it.

    The position is ``offset`` in the document (default: the start of ``span``).
    """
    group, k = narrative
    return GraphNode(
        id=make_id(doc_id, LAYER1_ID_KIND, (group, k), text),
        kind=NodeKind.FACT,
        text=text,
        doc_id=doc_id,
        pos=(doc_order, span[0] if offset is None else offset, chrono_index),
        span=span,
        chunk_id=chunk_id,
        name=name,
        attrs={
            "layer": 1,
            "narrative_index": [group, k],
            "chrono_index": chrono_index,
            "group": group,
            **extra_attrs,
        },
    )


def _child_edge(fact: GraphNode, chunk: GraphNode) -> GraphEdge:
    return GraphEdge(source=fact.id, target=chunk.id, kind=EdgeKind.CHILD, doc_id=fact.doc_id)


def _event_span(graph: GraphStore, event: GraphNode) -> Span:
    """An event's char span: its own, else its extraction chunk's, else its position."""
    if event.span is not None:
        return event.span
    chunk = graph.get_node(event.chunk_id) if event.chunk_id else None
    if chunk is not None and chunk.span is not None:
        return chunk.span
    return (event.pos[1], event.pos[1] + 1)


def _overlapping(
    layer0: list[GraphNode], starts: list[int], start: int, end: int
) -> list[GraphNode]:
    """Layer-0 chunks whose span overlaps [start, end); at least the chunk holding ``start``."""
    first = max(bisect.bisect_right(starts, start) - 1, 0)
    last = max(bisect.bisect_left(starts, max(end, start + 1)), first + 1)
    return layer0[first:last]
